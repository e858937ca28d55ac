"""A variant of a case inside the worker (a side's solution or a baseline), and what every phase
does with it: fail it, put torch's settings back after its code, compute its reference's
outputs, call it on poisoned outputs, and tell a lost CUDA context from an ordinary error."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

import torch

from kbench_ci.errors import KbenchError
from kbench_ci.measure.impls import Kernel, Solution
from kbench_ci.measure.impls.python_solution import SetupFailed
from kbench_ci.measure.inputs import InputSet, poison_outputs_
from kbench_ci.measure.reference import (
    CudaContextLost,
    describe_error,
    raise_if_context_lost,
    reference_outputs,
    snapshot,
    sync,
)
from kbench_ci.measure.setup_inputs import setup_blame
from kbench_ci.measure.torch_state import TorchGlobals
from kbench_ci.measure.usercode import Problem
from kbench_ci.results.model import Tolerance, VariantResult
from kbench_ci.wire.protocol import Blame, LoadError, SideSpec, WorkerEvent

Emit = Callable[[WorkerEvent], None]

__all__ = ["CudaContextLost", "describe_error", "raise_if_context_lost", "snapshot", "sync"]  # kept where callers import them


@dataclass(slots=True)
class Variant:
    label: str
    kind: str
    role: str
    side: SideSpec
    problem: Problem
    solution: Solution  # the side's input factory; for a baseline, its side's solution
    kernel: Kernel
    tolerance_for: Callable[[torch.dtype], Tolerance]
    result: VariantResult
    torch_globals: TorchGlobals  # torch's settings before any user code: put back after its calls
    #: compare's head: its own tolerance, where ``tolerance_for`` is the base's (one tolerance
    #: for both versions); used only to say that it would pass at its own, looser one
    own_tolerance_for: Callable[[torch.dtype], Tolerance] | None = None

    def settle(self) -> None:
        """Put torch's global settings back after this variant's code ran (outside any timed
        region), and note what it had changed: no other variant may inherit it."""
        note_changes(self, self.torch_globals.restore())


def note_changes(variant: Variant, changes: tuple[str, ...]) -> None:
    notes = variant.result.notes
    for change in changes:
        note = f"changed torch's {change} (put back after its code, so no other variant inherits it)"
        if note not in notes:
            notes = (*notes, note)
    if notes != variant.result.notes:
        variant.result = replace(variant.result, notes=notes)

def fail(variant: Variant, status: str, message: str) -> None:
    variant.result = replace(variant.result, status=status, message=message)  # type: ignore[arg-type]

def expected_outputs(
    variant: Variant, inputs: InputSet, device: torch.device, *, emit: Emit | None = None
) -> dict[str, torch.Tensor]:
    """:func:`reference_outputs` of ``variant``'s problem, announced as checking ``variant``."""
    return reference_outputs(variant.problem, inputs, device, label=variant.label, emit=emit)


def usage_failure(variant: Variant, exc: KbenchError, emit: Emit) -> None:
    """A broken contract in the user's ref.py, setup() or settings is bad usage, not a slow or
    wrong kernel: the variant is an error, and for a solution the CLI gets the error's exit code."""
    fail(variant, "error", exc.one_line())
    if variant.role == "solution":
        emit_load_error(variant.label, exc, emit, blame="user")


def emit_load_error(label: str, exc: KbenchError, emit: Emit, *, blame: Blame = "kernel") -> None:
    """A user's error, for the CLI to turn into its message and exit code; ``blame`` says whether
    it is the kernel's own code or the user's ref.py, setup() or settings (see LoadError)."""
    emit(LoadError(label, type(exc).__name__, int(exc.exit_code), exc.message, exc.hint, blame))


def call_on_poisoned_outputs(
    variant: Variant, kwargs: dict[str, Any], inputs: InputSet, device: torch.device
) -> dict[str, Any]:
    """Poison the outputs (all but the in-place ones, whose contents ``kwargs`` must hold as
    ``inputs`` does), call once, and snapshot what the call produced on the current stream.

    Only the current stream is waited for before the snapshot: work a kernel left running on
    another stream is not finished yet and shows up as poisoned output.
    """
    poison_outputs_(kwargs, inputs.poisoned_names)
    sync(device)
    returned = variant.kernel.call(kwargs)
    if device.type == "cuda":
        torch.cuda.current_stream(device).synchronize()
    outputs = variant.kernel.collect(returned, kwargs, inputs.output_names)
    copies = snapshot(outputs)
    sync(device)  # the whole device: a side stream's late writes must not reach the next call
    return copies

def setup_failure(variant: Variant, exc: SetupFailed, dims: Mapping[str, Any], emit: Emit) -> None:
    """Whose fault a ``setup()`` that raised is (:func:`setup_blame`), said with ``setup()`` named:
    the user's (exit 2) or the solution's own (it fails)."""
    blamed = setup_blame(exc, dims, variant.problem.path.name)
    if blamed is not None:
        usage_failure(variant, blamed, emit)
        return
    fail(variant, "error", f"{exc.where} raised {describe_error(exc.cause)} (seed {exc.seed})")
