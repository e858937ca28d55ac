"""CUDA C++ and CUTLASS solutions: a shared library exposing ``extern "C" void solve(...)``.

Arguments are bound by name from the signature in the .cu source: pointer parameters become
device tensors of the matching dtype (const = input, otherwise output), scalar parameters take
the dimension of the same name.
"""

from __future__ import annotations

import ctypes
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch

from kbench_ci.cuda.build import shared_library_path
from kbench_ci.cuda.signature import (
    PointerParam,
    read_solve_signature,
)
from kbench_ci.errors import EnvironmentProblem, UserFileError
from kbench_ci.measure.compiled import cuda_kernels
from kbench_ci.measure.impls import Kernel, Solution, collect_in_place
from kbench_ci.measure.signature_inputs import pointer_sizes, signature_inputs
from kbench_ci.measure.usercode import Problem


def load_cuda_solution(
    source: Path,
    *,
    kind: str,
    label: str,
    problem: Problem,
    dims: Mapping[str, Any],
    device: torch.device,
    ptr_sizes: Mapping[str, str],
    ptr_size: str | None,
) -> Solution:
    if device.type != "cuda":
        raise EnvironmentProblem(
            f"{source.name} is a CUDA C++ solution and needs a CUDA GPU; none is available",
            hint="run it on a GPU machine (--device cpu works for Triton and PyTorch only)",
        )
    signature = read_solve_signature(source)
    library = shared_library_path(source)
    try:
        handle = ctypes.CDLL(str(library))
    except OSError as exc:
        raise UserFileError(
            f"cannot load {library.name}: {exc}", hint=f"rebuild it: kbench-ci build {source}"
        ) from exc
    try:
        solve = handle.solve
    except AttributeError as exc:
        raise UserFileError(
            f"{library.name} exports no 'solve' symbol",
            hint='declare it extern "C" void solve(...) and rebuild',
        ) from exc
    solve.restype = None
    solve.argtypes = [ctypes.c_void_p if isinstance(p, PointerParam) else p.ctype for p in signature.params]

    make_inputs, notes = signature_inputs(signature, problem, dims, device, ptr_sizes, ptr_size)

    def call(kwargs: dict[str, Any]) -> None:
        arguments = []
        for param in signature.params:
            value = kwargs[param.name]
            if isinstance(param, PointerParam):
                arguments.append(ctypes.c_void_p(value.data_ptr()))
            else:
                arguments.append(param.ctype(value))
        solve(*arguments)

    kernel = Kernel(
        label=label,
        kind=kind,
        call=call,
        collect=collect_in_place,
    )
    return Solution(kernel=kernel, make_inputs=make_inputs, notes=notes, compiled=lambda: cuda_kernels(source))


__all__ = ["load_cuda_solution", "pointer_sizes"]
