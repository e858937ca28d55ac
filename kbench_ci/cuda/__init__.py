"""CUDA C++ solutions: compile them with nvcc, and read the ``extern "C" solve`` signature to bind."""

# `build` is deliberately not re-exported: the name stays the submodule, which callers import as
# `from kbench_ci.cuda import build` (its build() function is kbench_ci.cuda.build.build).
from kbench_ci.cuda.build import (
    BuildPlan,
    BuildResult,
    CompileError,
    detect_arch,
    find_cutlass_include,
    find_nvcc,
    format_command,
    library_status,
    plan_build,
    shared_library_path,
)
from kbench_ci.cuda.signature import (
    Param,
    PointerParam,
    ScalarParam,
    SolveSignature,
    parse_solve_signature,
    read_solve_signature,
    supported_types,
)
from kbench_ci.cuda.size_expr import evaluate_size_expression, parse_ptr_size_options

__all__ = [
    "BuildPlan",
    "BuildResult",
    "CompileError",
    "Param",
    "PointerParam",
    "ScalarParam",
    "SolveSignature",
    "detect_arch",
    "evaluate_size_expression",
    "find_cutlass_include",
    "find_nvcc",
    "format_command",
    "library_status",
    "parse_ptr_size_options",
    "parse_solve_signature",
    "plan_build",
    "read_solve_signature",
    "shared_library_path",
    "supported_types",
]
