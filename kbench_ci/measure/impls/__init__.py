"""Implementation kinds behind one small contract, their registry, aliases and ``auto``.

Every kind turns a solution file into a ``Kernel``: something that makes seeded inputs and
launches once on them. Correctness and timing (``casework.py``) see nothing else.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kbench_ci.errors import UsageError
from kbench_ci.results.model import CompiledKernel

if TYPE_CHECKING:
    # a type only: the registry is read by the parent, which never imports torch (inputs does)
    from kbench_ci.measure.inputs import InputSet

IMPLEMENTATIONS = ("cuda-cpp", "cutlass", "triton", "cute-dsl", "pytorch")
ALIASES = {
    "cuda": "cuda-cpp",
    "cuda_cpp": "cuda-cpp",
    "cpp": "cuda-cpp",
    "cu": "cuda-cpp",
    "cute": "cute-dsl",
    "cute_dsl": "cute-dsl",
    "cutedsl": "cute-dsl",
    "torch": "pytorch",
}
#: kinds whose solution is a compiled .cu exposing extern "C" solve(...)
COMPILED_KINDS = frozenset({"cuda-cpp", "cutlass"})


def resolve_implementation(name: str, solution: Path) -> str:
    """``auto``: Triton for ``.py`` files, CUDA C++ for everything else."""
    key = name.strip().lower()
    if key == "auto":
        return "triton" if solution.suffix == ".py" else "cuda-cpp"
    key = ALIASES.get(key, key)
    if key not in IMPLEMENTATIONS:
        raise UsageError(
            f"unknown implementation '{name}'",
            hint=f"use one of: auto, {', '.join(IMPLEMENTATIONS)}",
        )
    if key in COMPILED_KINDS and solution.suffix == ".py":
        raise UsageError(f"--implementation={key} needs a .cu solution, got {solution.name}")
    if key not in COMPILED_KINDS and solution.suffix in (".cu", ".cuh", ".cpp"):
        raise UsageError(f"--implementation={key} needs a .py solution, got {solution.name}")
    return key


def collect_in_place(result: Any, kwargs: Mapping[str, Any], names: tuple[str, ...]) -> dict[str, Any]:
    """A solution that writes its outputs into the tensors it was given: those are the outputs."""
    return {name: kwargs[name] for name in names}


@dataclass(frozen=True, slots=True)
class Kernel:
    """A launchable solution or baseline."""

    label: str
    kind: str
    #: launches once with these kwargs; returns whatever the function returns
    call: Callable[[dict[str, Any]], Any]
    #: maps the call's return value and kwargs onto output tensors
    collect: Callable[[Any, Mapping[str, Any], tuple[str, ...]], dict[str, Any]]
    #: an explicit compile step run once per input set before any timing (CuTe DSL); may be None
    compile: Callable[[dict[str, Any]], Any] | None = None


@dataclass(frozen=True, slots=True)
class Solution:
    kernel: Kernel
    make_inputs: Callable[[int], InputSet]
    #: human-readable notes about choices made (pointer sizes), printed and put in the report
    notes: tuple[str, ...] = ()
    #: what the compiler made of its kernels, read after its calls (measure/compiled.py)
    compiled: Callable[[], tuple[CompiledKernel, ...]] = lambda: ()
