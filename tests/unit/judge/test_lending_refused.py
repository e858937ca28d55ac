"""A side that cannot map the buffers the judge lends it (a container that refuses CUDA IPC, a
CPU arena that came without its descriptor) says so at the placement's next call; the judge makes a trusted side's word
the machine's problem (exit 3), never a base failure that would read as a head that `fixed` it,
and fails an untrusted side that says it."""

from __future__ import annotations

import pytest
import torch

from kbench_ci.errors import EnvironmentProblem, ExitCode
from kbench_ci.judge import case as judge_case
from kbench_ci.judge.state import Side
from kbench_ci.results.model import VariantResult
from kbench_ci.side import serve
from kbench_ci.wire.sideproto import ARENA_FD, LEND_FAILED, Called, CallRequest, LendRequest, LentTensor


def test_a_side_that_cannot_map_a_placement_says_so_at_its_next_call() -> None:
    case = serve._Case(kernel=None, device=torch.device("cpu"), timer=None, num_warmup=0)  # type: ignore[arg-type]
    request = LendRequest(slot=2, arena_kind=ARENA_FD, arena="", arena_bytes=512,
                          tensors=(LentTensor("x", "float32", (8,), (1,), 0, 0),), scalars={}, output_names=("x",))
    serve._lend(case, request, -1)  # no descriptor came with it; no exception: the worker serves on
    reply = serve._call(case, CallRequest(slot=2, count=0))
    assert reply.error is not None and reply.error.startswith(f"{LEND_FAILED} 2: ")
    never = serve._call(case, CallRequest(slot=5, count=0))
    assert never.error == f"{LEND_FAILED} 5: nothing was lent there"


class _Worker:
    def __init__(self, error: str | None) -> None:
        self.error = error

    def ask(self, request: object, kind: object, *, timeout_s: float) -> Called:
        return Called(error=self.error)


class _Arena:
    slot = 0


def _side(label: str, role: str, error: str | None) -> Side:
    result = VariantResult(label=label, kind="pytorch", role=role, status="ok")  # type: ignore[arg-type]
    side = Side(label, role, _Worker(error), result)  # type: ignore[arg-type]
    side.arenas = [_Arena()]  # type: ignore[list-item]
    return side


@pytest.mark.parametrize(("label", "role"), [("base", "solution"), ("pytorch-eager", "baseline")])
def test_a_trusted_side_that_cannot_map_is_the_machines_problem(label: str, role: str) -> None:
    side = _side(label, role, f"{LEND_FAILED} 0: RuntimeError: CUDA error: invalid device context")
    with pytest.raises(EnvironmentProblem) as info:
        judge_case._mapped(side, torch.device("cuda"))
    assert info.value.exit_code == ExitCode.ENVIRONMENT
    assert "refuses what --isolation judge lends its sides' buffers through (CUDA IPC)" in info.value.message
    assert "--isolation process" in (info.value.hint or "")


@pytest.mark.parametrize("label", ["head", judge_case.HEAD_REFERENCE])
def test_a_side_of_the_pull_request_that_says_it_cannot_map_fails_alone(label: str) -> None:
    side = _side(label, "baseline" if label == judge_case.HEAD_REFERENCE else "solution", f"{LEND_FAILED} 0: no")
    judge_case._mapped(side, torch.device("cuda"))
    assert side.result.status == "error" and side.result.message is not None and LEND_FAILED in side.result.message


def test_a_side_that_mapped_its_placements_is_left_as_it_was() -> None:
    side = _side("base", "solution", None)
    judge_case._mapped(side, torch.device("cpu"))
    assert side.ok
