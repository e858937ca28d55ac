"""Tolerances by dtype and the comparison of a kernel's outputs with the reference's.

Rule: an element passes when ``|actual - expected| <= atol + rtol * |expected|`` or both are the
same infinity. NaN never passes, on either side. Shape and dtype must match the reference's.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import torch

from kbench_ci.results.model import OutputCheck, Tolerance

#: Default (atol, rtol) per output dtype, used when neither the CLI nor ref.py sets them.
#: Float32 allows reordered reductions; tf32 is float32 storage computed on tensor cores with a
#: 10-bit mantissa (select it with ``--precision tf32``); 16-bit and 8-bit floats get a few ulps
#: of their mantissa. Integers and bool compare exactly.
DEFAULT_TOLERANCES: dict[str, tuple[float, float]] = {
    "float64": (1e-7, 1e-7),
    "float32": (1e-4, 1e-4),
    "tf32": (5e-3, 5e-3),
    "float16": (1e-2, 1e-2),
    "bfloat16": (2e-2, 2e-2),
    "float8_e4m3fn": (1.25e-1, 1.25e-1),
    "float8_e5m2": (2.5e-1, 2.5e-1),
    "integer": (0.0, 0.0),
}


def dtype_key(dtype: torch.dtype, *, precision: str | None = None) -> str:
    if not (dtype.is_floating_point or dtype.is_complex):
        return "integer"
    name = _dtype_name(dtype)
    if precision == "tf32" and dtype == torch.float32:
        return "tf32"
    if name.startswith("float8_e4m3"):
        return "float8_e4m3fn"
    if name.startswith("float8_e5m2"):
        return "float8_e5m2"
    if name in DEFAULT_TOLERANCES:
        return name
    return "float32"


def resolve_tolerance(
    dtype: torch.dtype,
    *,
    cli_atol: float | None,
    cli_rtol: float | None,
    ref_atol: float | None,
    ref_rtol: float | None,
    precision: str | None = None,
) -> Tolerance:
    """CLI beats ref.py beats the per-dtype table; atol and rtol are resolved independently."""
    key = dtype_key(dtype, precision=precision)
    table_atol, table_rtol = DEFAULT_TOLERANCES[key]
    if key == "integer":
        # Exact comparison for integers unless someone explicitly asks otherwise on the CLI.
        return Tolerance(cli_atol or 0.0, cli_rtol or 0.0, "cli" if cli_atol or cli_rtol else "exact (integer)")
    atol = _first_given(cli_atol, ref_atol, table_atol)
    rtol = _first_given(cli_rtol, ref_rtol, table_rtol)
    if cli_atol is not None or cli_rtol is not None:
        source = "cli"
    elif ref_atol is not None or ref_rtol is not None:
        source = "ref.py"
    else:
        source = f"default ({key})"
    return Tolerance(atol, rtol, source)


def _first_given(*values: float | None) -> float:
    return next(value for value in values if value is not None)


def compare_output(
    name: str, actual: object, expected: torch.Tensor, tolerance: Tolerance
) -> OutputCheck:
    def failed(problem: str, numel: int) -> OutputCheck:
        return OutputCheck(
            name, False, problem, float("inf"), float("inf"), numel, numel,
            tolerance.atol, tolerance.rtol, tolerance.source,
        )

    numel = expected.numel()
    if not isinstance(actual, torch.Tensor):
        return failed(f"the kernel produced no tensor (got {type(actual).__name__})", numel)
    if actual.dtype != expected.dtype:
        return failed(
            f"dtype mismatch: kernel gives {_dtype_name(actual.dtype)}, reference gives {_dtype_name(expected.dtype)}",
            numel,
        )
    if actual.shape != expected.shape:
        # A .cu output is a flat buffer; a reference naturally returns it shaped. Same element
        # count and a 1-D buffer on one side is the same data, not a mismatch.
        if actual.numel() == numel and (actual.dim() == 1 or expected.dim() == 1):
            actual = actual.reshape(-1)
            expected = expected.reshape(-1)
        else:
            return failed(
                f"shape mismatch: kernel gives {tuple(actual.shape)}, reference gives {tuple(expected.shape)}",
                numel,
            )
    if numel == 0:
        return OutputCheck(name, True, None, 0.0, 0.0, 0, 0, tolerance.atol, tolerance.rtol, tolerance.source)

    a = _as_float64(actual)
    e = _as_float64(expected).to(a.device)
    same = a == e  # covers equal infinities, whose difference would be NaN
    diff = (a - e).abs()
    bound = tolerance.atol + tolerance.rtol * e.abs()
    ok = same | (diff <= bound)  # NaN on either side fails both tests
    mismatched = int((~ok).sum().item())
    finite_diff = torch.where(same, torch.zeros_like(diff), diff)
    finite_diff = torch.nan_to_num(finite_diff, nan=float("inf"))
    max_abs = float(finite_diff.max().item())
    rel = finite_diff / e.abs().clamp_min(torch.finfo(torch.float64).tiny)
    max_rel = float(rel.max().item())
    first = None
    if mismatched:
        index = int((~ok).reshape(-1).nonzero()[0].item())
        first = (index, float(a.reshape(-1)[index].item()), float(e.reshape(-1)[index].item()))
    return OutputCheck(
        name, mismatched == 0, None, max_abs, max_rel, mismatched, numel,
        tolerance.atol, tolerance.rtol, tolerance.source, first,
    )


def compare_outputs(
    actual: Mapping[str, object],
    expected: Mapping[str, torch.Tensor],
    tolerance_for: Callable[[torch.dtype], Tolerance],
) -> tuple[OutputCheck, ...]:
    checks = []
    for name, reference_value in expected.items():
        checks.append(compare_output(name, actual.get(name), reference_value, tolerance_for(reference_value.dtype)))
    return tuple(checks)


def _as_float64(tensor: torch.Tensor) -> torch.Tensor:
    return tensor.detach().to(torch.float64)


def _dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")
