"""A variant of a case inside the worker (a side's solution or a baseline), and what every phase
does with it: fail it, put torch's settings back after its code, compute its reference's
outputs, call it on poisoned outputs, and tell a lost CUDA context from an ordinary error."""

from __future__ import annotations

import traceback
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import torch

from kbench_ci.errors import UserFileError
from kbench_ci.measure.impls import Kernel, Solution
from kbench_ci.measure.inputs import InputSet, poison_outputs_, still_poisoned
from kbench_ci.measure.protocol import SideSpec, WorkerEvent
from kbench_ci.measure.torch_state import TorchGlobals
from kbench_ci.measure.usercode import Problem, accepted_kwargs, collect_outputs
from kbench_ci.results.model import Tolerance, VariantResult

Emit = Callable[[WorkerEvent], None]


class CudaContextLost(Exception):
    """A kernel left the CUDA context unusable (illegal address, trap); this process must end."""


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

def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)

def expected_outputs(variant: Variant, inputs: InputSet, device: torch.device) -> dict[str, torch.Tensor]:
    """The eager reference's outputs on a private copy of the inputs.

    The outputs are poisoned first, as before a solution's call: an output the reference
    neither returns nor writes is the reference's fault (exit 2), not the solution's. An
    in-place output keeps its contents: the reference computes from them."""
    kwargs = inputs.fresh_copy()
    poison_outputs_(kwargs, inputs.poisoned_names)
    result = variant.problem.reference(**accepted_kwargs(variant.problem.reference, kwargs))
    what = f"{variant.problem.path.name} reference()"
    outputs = collect_outputs(result, kwargs, inputs.output_names, what=what)
    sync(device)
    for name, value in outputs.items():
        buffer = kwargs.get(name)
        if isinstance(value, torch.Tensor) and isinstance(buffer, torch.Tensor) and value.shape != buffer.shape:
            raise UserFileError(
                f"{what} returned '{name}' of shape {tuple(value.shape)}, but the output buffer '{name}' has shape "
                f"{tuple(buffer.shape)}",
                hint=f"return {name} with the shape of the output it stands for",
            )
        if isinstance(value, torch.Tensor) and value is kwargs.get(name) and still_poisoned(value):
            raise UserFileError(
                f"{what} produced no output for '{name}': it returned nothing for it and did not write it",
                hint=f"return {name} (or a tuple or dict of all outputs), or write it in place with {name}.copy_(...)",
            )
    return snapshot(outputs)


def snapshot(outputs: Mapping[str, Any]) -> dict[str, Any]:
    """Private copies of the tensors among ``outputs`` (later calls may overwrite the originals)."""
    return {name: value.detach().clone() if isinstance(value, torch.Tensor) else value for name, value in outputs.items()}


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

def describe_error(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    first = text[0] if text else ""
    # Point at the user's frame, not ours: the innermost frame outside kbench_ci.
    where = ""
    for frame in reversed(traceback.extract_tb(exc.__traceback__)):
        if "kbench_ci" not in frame.filename:
            where = f" at {Path(frame.filename).name}:{frame.lineno}"
            break
    return f"{type(exc).__name__}: {first}{where}"


def raise_if_context_lost(exc: BaseException, device: torch.device) -> None:
    """After an illegal address or a trap every later CUDA call fails; stop this worker so the
    parent can blame this variant and rerun the others in a fresh process."""
    if device.type != "cuda":
        return
    text = str(exc)
    sticky = ("illegal memory access", "illegal address", "unspecified launch failure", "device-side assert",
              "misaligned address", "illegal instruction", "CUDA error")
    if any(marker in text for marker in sticky):
        try:
            torch.cuda.synchronize(device)
            torch.zeros(1, device=device).add_(1).item()
        except Exception:
            raise CudaContextLost(describe_error(exc)) from exc
