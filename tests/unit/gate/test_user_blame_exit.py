"""Whose a failed case is, and the exit code of run and compare that follows:
2 when every failing case failed on the user's ref.py, setup() or settings, 1 when a kernel is to
blame (it wins over 2), --no-fail waiving only the 1."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
import typer

from kbench_ci.cli.suite_common import finish
from kbench_ci.gate import worker_call
from kbench_ci.measure.parent import WorkerOutcome
from kbench_ci.results.model import CaseResult, MeasureSettings
from kbench_ci.results.outcome import UserFailure
from kbench_ci.wire.protocol import CaseJob, LoadError, SideSpec, WorkerEvent, decode_event, encode_event

HUNG = LoadError(
    "solution", "UserFileError", 2, "ref.py reference() (checking solution) timed out after 6 s (case timeout)",
    "fix reference(): every variant is checked against it", blame="user",
)


def _job() -> CaseJob:
    side = SideSpec(label="solution", solution="k.py", ref="ref.py", implementation="pytorch")
    settings = MeasureSettings(device="cpu", seed=42, correctness_trials=1, timing_method="host_time", num_warmup=1,
                               trials_per_round=3, discard_first=0, rounds=2, flush_l2=False)
    return CaseJob(case_id="k", dims={}, sides=(side,), baselines=(), settings=settings)


def _worker(events: tuple[LoadError, ...], parents: LoadError | None) -> Callable[..., tuple[CaseResult, WorkerOutcome]]:
    def worker(job: CaseJob, *, timeout_s: float, on_event: Callable[[WorkerEvent], None]) -> tuple[CaseResult, WorkerOutcome]:
        for event in events:
            on_event(event)
        result = CaseResult(case_id=job.case_id, dims={}, seed=42, variants=(), timing_method="host_time")
        return result, WorkerOutcome(load_error=parents)

    return worker


def test_the_parents_own_blame_of_a_hung_reference_reaches_the_case() -> None:
    """No event carries it (the worker hung): run_worker takes it from the worker's outcome."""
    run = worker_call.run_worker(_job(), timeout_s=60, worker=_worker((), HUNG))
    assert run.user_error("solution") == f"{HUNG.message} ({HUNG.hint})"
    assert run.user_error("head") is None


def test_a_solution_that_cannot_load_is_its_kernels_not_the_users() -> None:
    kernels = LoadError("solution", "UserFileError", 2, "k.py: SyntaxError: invalid syntax", None)
    run = worker_call.run_worker(_job(), timeout_s=60, worker=_worker((kernels,), None))
    assert kernels.blame == "kernel"
    assert run.user_error("solution") is None


def test_the_blame_crosses_the_worker_boundary() -> None:
    assert decode_event(encode_event(HUNG)) == HUNG
    assert decode_event(encode_event(HUNG)).blame == "user"  # type: ignore[union-attr]


FAILURES = (UserFailure("add[N=8]", "ref.py reference() raised RuntimeError: no (fix reference())"),
            UserFailure("add[N=16]", "ref.py reference() raised RuntimeError: no (fix reference())"))


@pytest.mark.parametrize(
    ("passed", "kernel_failed", "user_failures", "no_fail", "code"),
    [
        (True, False, (), False, 0),
        (False, True, (), False, 1),
        (False, True, (), True, 0),
        (False, False, FAILURES, False, 2),
        (False, False, FAILURES, True, 2),  # --no-fail waives a kernel's verdict, not a broken file
        (False, True, FAILURES, False, 1),  # both: the kernel's 1 wins
        (False, True, FAILURES, True, 0),
    ],
)
def test_exit_code_of_run_and_compare(
    passed: bool, kernel_failed: bool, user_failures: tuple[UserFailure, ...], no_fail: bool, code: int,
    tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    summary = tmp_path / "summary.json"
    with pytest.raises(typer.Exit) as stopped:
        finish(
            passed=passed, no_fail=no_fail, failure="2 failed — gate FAILED", json_summary=summary,
            summary_for=lambda exit_code: {"exit_code": exit_code}, user_failures=user_failures,
            kernel_failed=kernel_failed,
        )
    assert stopped.value.exit_code == code
    assert json.loads(summary.read_text())["exit_code"] == code
    lines = capsys.readouterr().err.splitlines()
    if code == 2:
        assert lines == [
            "kbench-ci: error: add[N=8]: ref.py reference() raised RuntimeError: no (fix reference()); "
            "1 more case failed for their ref.py, setup() or settings: add[N=16]"
        ]
    elif user_failures:  # the kernel's 1 (or --no-fail's 0) said, and the broken file named too
        assert lines[0].startswith("kbench-ci: 2 failed — gate FAILED")
        assert lines[1].startswith("kbench-ci: note: also, not the kernel's: add[N=8]: ref.py reference() raised")
