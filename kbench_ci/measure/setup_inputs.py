"""A user's ``setup(**dims)`` called as every check and timing wants it: torch's default device
set, the seed drawn, the returned dict validated. Its own module so that the judge, which loads
only trusted code, can call a trusted setup() without importing the code that loads kernels."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch

from kbench_ci.errors import UserFileError
from kbench_ci.measure.inputs import InputSet, seed_everything
from kbench_ci.measure.usercode import call_by_name, takes_seed


def inputs_from_setup(
    setup: Any, dims: Mapping[str, Any], *, seed: int, device: torch.device, where: str
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
        returned = call_by_name(setup, dims, what=where, extra=extra)
    if not isinstance(returned, Mapping) or "inputs" not in returned or "outputs" not in returned:
        raise UserFileError(
            f"{where} must return {{'inputs': {{...}}, 'outputs': [names]}}, got {type(returned).__name__}"
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
    for name, value in inputs.items():
        if isinstance(value, torch.Tensor) and value.device.type != device.type:
            raise UserFileError(
                f"{where}: input '{name}' is on {value.device}, expected {device.type}",
                hint="create tensors without device=...; kbench-ci sets the default device",
            )
    merged = {**{k: v for k, v in dims.items()}, **dict(inputs)}
    # Dimensions are passed along so run_kernel/reference can take them by name too.
    return InputSet(kwargs=merged, output_names=outputs, seed=seed)
