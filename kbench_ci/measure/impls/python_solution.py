"""Python solutions (Triton, CuTe DSL, plain PyTorch): ``setup(**dims)`` and ``run_kernel(**inputs)``."""

from __future__ import annotations

import importlib.util
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch

from kbench_ci.errors import EnvironmentProblem, MissingExtraError, UserFileError
from kbench_ci.measure.compiled import triton_kernels
from kbench_ci.measure.impls import Kernel, Solution, collect_in_place
from kbench_ci.measure.inputs import InputSet, seed_everything
from kbench_ci.measure.usercode import call_by_name, load_module, require_function, takes_seed

#: the package each kind needs, and the extra that installs it
_REQUIRED_PACKAGE = {"triton": ("triton", "triton", None), "cute-dsl": ("cutlass", "nvidia-cutlass-dsl", "cute")}


def load_python_solution(
    path: Path, *, kind: str, label: str, dims: Mapping[str, Any], device: torch.device
) -> Solution:
    if kind == "cute-dsl" and device.type != "cuda":
        # Without a GPU its first launch fails deep in the driver (cudaErrorInsufficientDriver),
        # which would read as a broken kernel: it is the machine, as for a .cu.
        raise EnvironmentProblem(
            f"{path.name} is a CuTe DSL solution and needs a CUDA GPU; none is available here",
            hint="run it on a GPU machine (CPU mode runs Triton and PyTorch solutions only)",
        )
    _require_package(kind)
    module = load_module(path, role="solution")
    setup = require_function(module, "setup", role="solution", path=path)
    run_kernel = require_function(module, "run_kernel", role="solution", path=path)
    compile_hook = getattr(module, "compile_kernel", None)

    def make_inputs(seed: int) -> InputSet:
        return inputs_from_setup(setup, dims, seed=seed, device=device, where=f"{path.name} setup()")

    def call(kwargs: dict[str, Any]) -> Any:
        return run_kernel(**kwargs)

    kernel = Kernel(
        label=label,
        kind=kind,
        call=call,
        collect=collect_in_place,
        compile=(lambda kwargs: compile_hook(**kwargs)) if callable(compile_hook) else None,
    )
    return Solution(kernel=kernel, make_inputs=make_inputs, compiled=lambda: triton_kernels(vars(module)))


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


def _require_package(kind: str) -> None:
    if kind not in _REQUIRED_PACKAGE:
        return
    module_name, package, extra = _REQUIRED_PACKAGE[kind]
    if importlib.util.find_spec(module_name) is None:
        if extra is None:
            raise UserFileError(f"{kind} solutions need the '{package}' package", hint=f"pip install {package}")
        raise MissingExtraError(package, extra, f"--implementation={kind}")
