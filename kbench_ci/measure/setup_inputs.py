"""A user's ``setup(**dims)`` called as every check and timing wants it: torch's default device
set, the seed drawn, the returned dict validated. Its own module so that the judge, which loads
only trusted code, can call a trusted setup() without importing the code that loads kernels."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch

from kbench_ci.errors import KbenchError, UsageError, UserFileError
from kbench_ci.measure.inputs import InputSet, seed_everything
from kbench_ci.measure.reference import describe_error
from kbench_ci.measure.usercode import call_by_name, takes_seed


class SetupFailed(Exception):  # noqa: N818  (a failure of the user's function, not of kbench-ci)
    """``setup()`` raised while making a case's inputs: ``where`` names it (``add.py setup()``),
    ``cause`` is what it raised, ``in_ref``: it is ref.py's (the reference's side), not the
    solution's. The worker decides whose fault it is (:func:`kbench_ci.measure.child.setup_failure`)."""

    def __init__(self, where: str, cause: Exception, *, seed: int, in_ref: bool) -> None:
        super().__init__(f"{where} raised {type(cause).__name__}: {cause}")
        self.where = where
        self.cause = cause
        self.seed = seed
        self.in_ref = in_ref


#: a dimension at least this large cannot be an int32 size: the first suspect when sizes overflow
_LARGE_DIMENSION = 2**31


def setup_blame(exc: SetupFailed, dims: Mapping[str, Any], ref_name: str) -> KbenchError | None:
    """The user's error for a ``setup()`` that raised, or None where it is the solution's own.

    Sizes that overflow 64 bits (``Storage size calculation overflowed`` for ``--N=2**63-1``)
    are the settings' (exit 2), naming the dimension to shrink; a ref.py's setup() (``ref_name``)
    is the reference's (exit 2); a solution's own setup() fails that solution (None)."""
    cause = exc.cause
    if isinstance(cause, OverflowError) or "overflow" in str(cause).lower():
        sizes = {name: value for name, value in dims.items() if isinstance(value, int) and not isinstance(value, bool)}
        large = {name: value for name, value in sizes.items() if abs(value) >= _LARGE_DIMENSION} or sizes
        if large:
            shown = ", ".join(f"{name}={value}" for name, value in large.items())
            names = " / ".join(large)
            said = (str(cause).strip().splitlines() or [""])[0]
            return UsageError(
                f"{shown} is too large: {exc.where} cannot make inputs whose sizes overflow 64 bits "
                f"({type(cause).__name__}: {said})",
                hint=f"use a smaller {names}: --{next(iter(large))}=VALUE on the command line, or the kernel's shapes "
                "in kbench.toml",
            )
    if exc.in_ref:
        return UserFileError(f"{exc.where} raised {describe_error(cause)} (seed {exc.seed})", hint=f"fix setup() in {ref_name}")
    return None


def inputs_from_setup(
    setup: Any, dims: Mapping[str, Any], *, seed: int, device: torch.device, where: str, in_ref: bool = False
) -> InputSet:
    """Call a user's setup() with torch's default device set, and validate what it returns.

    setup() creates tensors without naming a device; the default device makes them land on the
    GPU chosen with --gpu (or the CPU in CPU mode) without the user's code knowing which.
    """
    seed_everything(seed)
    # A setup() that draws from a generator of its own and takes ``seed`` gets the trial's seed:
    # otherwise every correctness trial and every version of its inputs would be the same.
    extra = {"seed": seed} if takes_seed(setup) and "seed" not in dims else None
    with torch.device(device):
        try:
            returned = call_by_name(setup, dims, what=where, extra=extra)
        except KbenchError:
            raise
        except Exception as exc:
            raise SetupFailed(where, exc, seed=seed, in_ref=in_ref) from exc
    if not isinstance(returned, Mapping) or "inputs" not in returned or "outputs" not in returned:
        raise UserFileError(
            f"{where} must return {{'inputs': {{...}}, 'outputs': [names]}} (and optionally 'inplace': [names]), "
            f"got {type(returned).__name__}"
        )
    inputs = returned["inputs"]
    outputs = returned["outputs"]
    if not isinstance(inputs, Mapping) or not all(isinstance(k, str) for k in inputs):
        raise UserFileError(f"{where}: 'inputs' must be a dict keyed by argument name")
    if isinstance(outputs, str) or not all(isinstance(name, str) for name in outputs):
        raise UserFileError(f"{where}: 'outputs' must be a list of input names, got {outputs!r}")
    outputs = tuple(outputs)
    if not outputs:
        raise UserFileError(f"{where}: 'outputs' is empty; name at least one output tensor")
    for name in outputs:
        if not isinstance(inputs.get(name), torch.Tensor):
            raise UserFileError(f"{where}: output '{name}' is not a tensor in 'inputs'")
    inplace = returned.get("inplace", ())
    if isinstance(inplace, str) or not isinstance(inplace, (list, tuple)) or not all(
        isinstance(name, str) for name in inplace
    ):
        raise UserFileError(f"{where}: 'inplace' must be a list of output names, got {inplace!r}",
                            hint="name the outputs the kernel also reads, e.g. 'inplace': ['x']")
    for name in inplace:
        if name not in outputs:
            raise UserFileError(
                f"{where}: 'inplace' names '{name}', which is not in 'outputs' {list(outputs)}",
                hint=f"an in-place tensor is an output the kernel also reads: add '{name}' to 'outputs' too",
            )
    for name, value in inputs.items():
        if isinstance(value, torch.Tensor) and value.device.type != device.type:
            raise UserFileError(
                f"{where}: input '{name}' is on {value.device}, expected {device.type}",
                hint="create tensors without device=...; kbench-ci sets the default device",
            )
    merged = {**{k: v for k, v in dims.items()}, **dict(inputs)}
    # Dimensions are passed along so run_kernel/reference can take them by name too.
    return InputSet(kwargs=merged, output_names=outputs, seed=seed, inplace_names=tuple(dict.fromkeys(inplace)))
