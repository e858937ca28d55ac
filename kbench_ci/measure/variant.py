"""A variant of a case inside the worker (a side's solution or a baseline), and what every phase
does with it: fail it, put torch's settings back after its code, compute its reference's
outputs, call it on poisoned outputs, and tell a lost CUDA context from an ordinary error."""

from __future__ import annotations

import sysconfig
import traceback
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import torch

from kbench_ci.errors import KbenchError, UsageError, UserFileError
from kbench_ci.measure.impls import Kernel, Solution
from kbench_ci.measure.impls.python_solution import SetupFailed
from kbench_ci.measure.inputs import InputSet, poison_outputs_, still_poisoned
from kbench_ci.measure.protocol import Blame, LoadError, ReferenceCall, SideSpec, WorkerEvent
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

def expected_outputs(
    variant: Variant, inputs: InputSet, device: torch.device, *, emit: Emit | None = None
) -> dict[str, torch.Tensor]:
    """The eager reference's outputs on a private copy of the inputs.

    The outputs are poisoned first, as before a solution's call: an output the reference
    neither returns nor writes is the reference's fault (exit 2), not the solution's. So is
    anything else wrong with what it does: raising (on any call, the first or the re-check
    after timing), returning something that is not a tensor, or a tensor of another shape or
    dtype than its output buffer (the kernel writes that buffer, so it could never match): each
    is a :class:`UserFileError` naming ref.py. With ``emit``, the call is announced
    (:class:`ReferenceCall`), so a reference that hangs or crashes the worker is blamed on
    ref.py by the parent, not on the variant being checked. An in-place output keeps its contents:
    the reference computes from them."""
    what = f"{variant.problem.path.name} reference()"
    kwargs = inputs.fresh_copy()
    poison_outputs_(kwargs, inputs.poisoned_names)
    if emit is not None:
        emit(ReferenceCall(variant.label, running=True))
    try:
        result = variant.problem.reference(**accepted_kwargs(variant.problem.reference, kwargs))
        sync(device)
    except KbenchError:
        raise
    except Exception as exc:
        raise_if_context_lost(exc, device)
        raise UserFileError(
            f"{what} raised {describe_error(exc)} (seed {inputs.seed})",
            hint="fix reference(): every variant is checked against it",
        ) from exc
    if emit is not None:
        emit(ReferenceCall(variant.label, running=False))
    outputs = collect_outputs(result, kwargs, inputs.output_names, what=what)
    for name, value in outputs.items():
        buffer = kwargs.get(name)
        if not isinstance(value, torch.Tensor):
            raise UserFileError(
                f"{what} returned a {type(value).__name__} for '{name}', not a tensor",
                hint=f"return the tensor {name} (or a tuple or dict of output tensors), or write it in place",
            )
        if not isinstance(buffer, torch.Tensor):
            continue
        if value.shape != buffer.shape:
            raise UserFileError(
                f"{what} returned '{name}' of shape {tuple(value.shape)}, but the output buffer '{name}' has shape "
                f"{tuple(buffer.shape)}",
                hint=f"return {name} with the shape of the output it stands for",
            )
        # Whose fault a dtype that differs is: the reference's where ref.py's setup() made the
        # buffer, or where it returns a dtype no input has while the buffer's is the inputs'
        # (a float32 problem answered in float64); otherwise the solution's own setup()
        # declared an odd buffer, which is the kernel's (exit 1, "dtype mismatch" at the check).
        input_dtypes = {v.dtype for k, v in kwargs.items() if isinstance(v, torch.Tensor) and k not in inputs.output_names}
        if value.dtype != buffer.dtype and (
            variant.problem.setup is not None or (value.dtype not in input_dtypes and buffer.dtype in input_dtypes)
        ):
            raise UserFileError(
                f"{what} returned '{name}' as {_dtype_name(value.dtype)}, but the output buffer '{name}' is "
                f"{_dtype_name(buffer.dtype)}: no kernel writing that buffer could match it",
                hint=f"return {name} in the buffer's dtype, e.g. .to({name}.dtype)",
            )
        if value is buffer and still_poisoned(value):
            raise UserFileError(
                f"{what} produced no output for '{name}': it returned nothing for it and did not write it",
                hint=f"return {name} (or a tuple or dict of all outputs), or write it in place with {name}.copy_(...)",
            )
    return snapshot(outputs)


def _dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


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
    """``Type: first line at file.py:LINE``, at the user's own code: the innermost frame of the
    whole chain of causes that is in no installed package, no standard library and not
    kbench-ci. A wrapper that only re-raises the user's error (Triton's interpreter raises
    ``InterpreterError(repr(e)) from e``) is described by the error it wraps."""
    shown = exc
    while type(shown).__name__ in _WRAPPERS and shown.__cause__ is not None:
        shown = shown.__cause__
    text = str(shown).strip().splitlines()
    first = text[0] if text else ""
    frames = [frame for link in _chain(exc) for frame in traceback.extract_tb(link.__traceback__)]
    mine = [frame for frame in frames if "kbench_ci" not in frame.filename]
    users = [frame for frame in mine if not _installed(frame.filename)]
    # The user's frame; without one (a wrapper's internals only), the innermost outside ours
    frame = users[-1] if users else (mine[-1] if mine else None)
    where = f" at {Path(frame.filename).name}:{frame.lineno}" if frame is not None else ""
    return f"{type(shown).__name__}: {first}{where}"


#: exception types that wrap the user's own error (its ``__cause__``) and add nothing to it
_WRAPPERS = frozenset({"InterpreterError"})


def _chain(exc: BaseException) -> list[BaseException]:
    """``exc`` and its causes (``raise ... from``) and contexts, outermost first, each once."""
    chain: list[BaseException] = []
    link: BaseException | None = exc
    while link is not None and link not in chain:
        chain.append(link)
        link = link.__cause__ or link.__context__
    return chain


def _installed_roots() -> tuple[str, ...]:
    paths = sysconfig.get_paths()
    return tuple(
        {str(Path(paths[key]).resolve()) for key in ("stdlib", "platstdlib", "purelib", "platlib") if key in paths}
    )


def _installed(filename: str) -> bool:
    """Is ``filename`` part of Python or an installed package (not the user's file)?"""
    if filename.startswith("<"):  # <string>, <frozen ...>: no file of the user's
        return True
    resolved = str(Path(filename).resolve())
    return any(resolved.startswith(root + "/") for root in _INSTALLED_ROOTS) or "/site-packages/" in resolved


_INSTALLED_ROOTS = _installed_roots()


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


#: a dimension at least this large cannot be an int32 size: the first suspect when sizes overflow
_LARGE_DIMENSION = 2**31


def setup_failure(variant: Variant, exc: SetupFailed, dims: Mapping[str, Any], emit: Emit) -> None:
    """Whose fault a ``setup()`` that raised is, said with ``setup()`` named.

    Sizes that overflow 64 bits (``Storage size calculation overflowed`` for ``--N=2**63-1``)
    are the settings' (exit 2), naming the dimension to shrink; a ref.py's setup() is the
    reference's (exit 2); a solution's own setup() fails that solution (exit 1)."""
    cause = exc.cause
    where = f"{exc.where} raised {describe_error(cause)} (seed {exc.seed})"
    if isinstance(cause, OverflowError) or "overflow" in str(cause).lower():
        sizes = {name: value for name, value in dims.items() if isinstance(value, int) and not isinstance(value, bool)}
        large = {name: value for name, value in sizes.items() if abs(value) >= _LARGE_DIMENSION} or sizes
        if large:
            shown = ", ".join(f"{name}={value}" for name, value in large.items())
            names = " / ".join(large)
            said = (str(cause).strip().splitlines() or [""])[0]
            usage_failure(variant, UsageError(
                f"{shown} is too large: {exc.where} cannot make inputs whose sizes overflow 64 bits "
                f"({type(cause).__name__}: {said})",
                hint=f"use a smaller {names}: --{next(iter(large))}=VALUE on the command line, or the kernel's shapes "
                "in kbench.toml",
            ), emit)
            return
    if exc.in_ref:
        usage_failure(variant, UserFileError(where, hint=f"fix setup() in {variant.problem.path.name}"), emit)
        return
    fail(variant, "error", where)
