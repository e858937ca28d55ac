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
from kbench_ci.measure.inputs import InputSet
from kbench_ci.measure.setup_inputs import SetupFailed, inputs_from_setup
from kbench_ci.measure.usercode import load_module, require_function

__all__ = ["SetupFailed", "inputs_from_setup", "load_python_solution"]

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


def _require_package(kind: str) -> None:
    if kind not in _REQUIRED_PACKAGE:
        return
    module_name, package, extra = _REQUIRED_PACKAGE[kind]
    if importlib.util.find_spec(module_name) is None:
        if extra is None:
            raise UserFileError(f"{kind} solutions need the '{package}' package", hint=f"pip install {package}")
        raise MissingExtraError(package, extra, f"--implementation={kind}")
