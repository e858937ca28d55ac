"""The trusted reference's outputs for a set of inputs, and the few helpers that go with calling
user code: errors described at the user's own line, a lost CUDA context told apart, snapshots.

No kernel implementation is imported here: the judge (kbench_ci.judge), which never loads the
code that calls kernels, computes its expected outputs with the same function, and so the same
checks of what ref.py's reference() returns, as the in-process worker (measure/variant.py).
"""

from __future__ import annotations

import sysconfig
import traceback
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import torch

from kbench_ci.errors import KbenchError, UserFileError
from kbench_ci.measure.inputs import InputSet, poison_outputs_, still_poisoned
from kbench_ci.measure.usercode import Problem, accepted_kwargs, collect_outputs
from kbench_ci.wire.protocol import ReferenceCall, WorkerEvent

Emit = Callable[[WorkerEvent], None]


class CudaContextLost(Exception):
    """A kernel left the CUDA context unusable (illegal address, trap); this process must end."""


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)

def snapshot(outputs: Mapping[str, Any]) -> dict[str, Any]:
    """Private copies of the tensors among ``outputs`` (later calls may overwrite the originals)."""
    return {name: value.detach().clone() if isinstance(value, torch.Tensor) else value for name, value in outputs.items()}


def reference_outputs(
    problem: Problem, inputs: InputSet, device: torch.device, *, label: str = "", emit: Emit | None = None
) -> dict[str, torch.Tensor]:
    """The eager reference's outputs on a private copy of the inputs.

    The outputs are poisoned first, as before a solution's call: an output the reference
    neither returns nor writes is the reference's fault (exit 2), not the solution's. So is
    anything else wrong with what it does: raising (on any call, the first or the re-check
    after timing), returning something that is not a tensor, or a tensor of another shape or
    dtype than its output buffer (the kernel writes that buffer, so it could never match): each
    is a :class:`UserFileError` naming ref.py. With ``emit``, the call is announced
    (:class:`ReferenceCall`), so a reference that hangs or crashes the worker is blamed on
    ref.py by the parent, not on the variant ``label`` being checked. An in-place output keeps its
    contents: the reference computes from them."""
    what = f"{problem.path.name} reference()"
    kwargs = inputs.fresh_copy()
    poison_outputs_(kwargs, inputs.poisoned_names)
    if emit is not None:
        emit(ReferenceCall(label, running=True))
    try:
        result = problem.reference(**accepted_kwargs(problem.reference, kwargs))
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
        emit(ReferenceCall(label, running=False))
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
            problem.setup is not None or (value.dtype not in input_dtypes and buffer.dtype in input_dtypes)
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
    # one line: a class or file name can hold a newline of its own, and this text reaches logs
    return " ".join(f"{type(shown).__name__}: {first}{where}".split())


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
