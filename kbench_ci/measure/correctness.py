"""Tolerances by dtype and the comparison of a kernel's outputs with the reference's.

Rule: an element passes when ``|actual - expected| <= atol + rtol * |expected|``, or both are the
same infinity, or both are NaN (``torch.testing.assert_close(equal_nan=True)``: a reference NaN
where its inputs make it so, ``log`` of a negative, is matched by the same NaN). A NaN against a
number fails, whichever side has it; a complex element passes as NaN only when the same parts
are NaN and the other part is close. Shape and dtype must match the reference's.
:func:`close_elements` applies it, for every check (the correctness trials, the re-check after
timing and each timed call's check), so no check can pass what another fails. Integers and bools
are compared as integers, never through float64: float64 holds 53 bits, and two int64 values near
2^61 that differ by one round to the same double.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

import torch

from kbench_ci.measure.inputs import still_poisoned
from kbench_ci.results.model import OutputCheck, Tolerance

if TYPE_CHECKING:
    from kbench_ci.measure.usercode import Problem
    from kbench_ci.wire.protocol import SideSpec

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


def tolerance_function(side: SideSpec, problem: Problem) -> Callable[[torch.dtype], Tolerance]:
    """The tolerance each output dtype is checked with: ``side``'s command-line tolerance and
    precision, else ``problem``'s (ref.py's), else the table's. In a compare the checks take the
    base's side (trusted); a head's own changed reference is judged apart."""

    def tolerance_for(dtype: torch.dtype) -> Tolerance:
        return resolve_tolerance(
            dtype, cli_atol=side.atol, cli_rtol=side.rtol, ref_atol=problem.atol, ref_rtol=problem.rtol,
            precision=side.precision,
        )

    return tolerance_for


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
    aligned = _aligned(actual, expected)
    if isinstance(aligned, str):
        return failed(aligned, numel)
    if numel == 0:
        return OutputCheck(name, True, None, 0.0, 0.0, 0, 0, tolerance.atol, tolerance.rtol, tolerance.source)

    actual, expected = aligned
    ok = close_elements(actual, expected, tolerance)
    mismatched = int((~ok).sum().item())
    diff, magnitude = _abs_errors(actual, expected)
    max_abs = float(diff.max().item())
    rel = diff / magnitude.clamp_min(torch.finfo(torch.float64).tiny)
    max_rel = float(rel.max().item())
    first = None
    if mismatched and still_poisoned(actual):
        # Every element still holds what the harness filled the output with before the call: the
        # kernel never wrote it. Most often it returned its result instead ("16384 of 16384
        # elements outside atol, max abs error inf" said nothing of that).
        filler = "NaN" if actual.is_floating_point() or actual.is_complex() else "0xA5 bytes"
        return failed(
            f"never written (still all {filler}, as filled before the call): the kernel must write into "
            f"'{name}'; a value it returns is ignored",
            numel,
        )
    if mismatched:
        index = int((~ok).reshape(-1).nonzero()[0].item())
        first = (index, _value_at(actual, index), _value_at(expected, index))
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


def outputs_match(
    actual: Mapping[str, object],
    expected: Mapping[str, torch.Tensor],
    tolerance_for: Callable[[torch.dtype], Tolerance],
) -> bool:
    """Whether every output passes :func:`compare_outputs`'s rule, with one synchronisation and
    none of its figures: the judge checks every timed call, and on a GPU the full comparison's
    three reads per output (count, worst absolute and relative error) were a tenth of a judged
    compare's wall time. Where this says False, :func:`compare_outputs` says why."""
    return first_mismatch([(actual, expected)], tolerance_for) is None


def first_mismatch(
    calls: Sequence[tuple[Mapping[str, object], Mapping[str, torch.Tensor]]],
    tolerance_for: Callable[[torch.dtype], Tolerance],
) -> int | None:
    """The index of the first of ``calls`` (each its outputs and the expected ones) whose
    outputs fail :func:`outputs_match`'s rule, or None: the same rule with one synchronisation
    for them all (a batch of the judge's timed calls, checked one call at a time, synchronised
    once a call: five thousand checks took 5.2 s of a 24 s judged compare on an H100)."""
    pending: list[tuple[int, torch.Tensor]] = []
    for index, (actual, expected) in enumerate(calls):
        for name, reference_value in expected.items():
            aligned = _aligned(actual.get(name), reference_value)
            if isinstance(aligned, str):
                # known on the host: no call after it matters, the ones before still do
                earlier = _first_false(pending) if pending else None
                return index if earlier is None else earlier
            value, reference = aligned
            if reference.numel():
                pending.append((index, close_elements(value, reference, tolerance_for(reference.dtype)).all()))
    return _first_false(pending) if pending else None


def _first_false(pending: Sequence[tuple[int, torch.Tensor]]) -> int | None:
    device = pending[0][1].device
    passed = torch.stack([verdict.to(device) for _, verdict in pending]).tolist()
    return next((index for (index, _), ok in zip(pending, passed, strict=True) if not ok), None)


def changed_reference_ruling(status: str, message: str | None, *, accepted: bool) -> tuple[bool, str]:
    """A compare's head that changed ref.py, checked on the base's inputs against the base's
    reference (``status`` and ``message`` of that check): whether it fails (``incorrect``,
    with the words) or keeps its status (with the words as a note). One rule for the in-process
    worker and the judge: a head that passes only its own new reference has moved the goalposts,
    unless the case is accepted."""
    if status == "ok":
        return False, "its ref.py changed in this pull request: it also passes the base's reference() on the base's inputs"
    if status == "incorrect" and accepted:
        return False, f"its ref.py changed and it fails the base's reference() (accepted): {message}"
    if status == "incorrect":
        return True, (f"passes only its own changed ref.py: checked on the base's inputs against the base's reference() it "
                      f"fails ({message}); keep the reference, or accept the change (--accept / the accept label)")
    return False, (f"its ref.py changed and the base's reference() cannot check it ({message}): "
                   "checked against its own reference only")


def _aligned(actual: object, expected: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor] | str:
    """``actual`` and ``expected`` as two tensors to compare element by element (detached, on
    ``actual``'s device), or why they cannot be: no tensor, another dtype, another shape."""
    if not isinstance(actual, torch.Tensor):
        return f"the kernel produced no tensor (got {type(actual).__name__})"
    if actual.dtype != expected.dtype:
        return f"dtype mismatch: kernel gives {_dtype_name(actual.dtype)}, reference gives {_dtype_name(expected.dtype)}"
    if actual.shape != expected.shape:
        # A .cu output is a flat buffer; a reference naturally returns it shaped. Same element
        # count and a 1-D buffer on one side is the same data, not a mismatch.
        if actual.numel() != expected.numel() or (actual.dim() != 1 and expected.dim() != 1):
            return f"shape mismatch: kernel gives {tuple(actual.shape)}, reference gives {tuple(expected.shape)}"
        actual, expected = actual.reshape(-1), expected.reshape(-1)
    return actual.detach(), expected.detach().to(actual.device)


def close_elements(actual: torch.Tensor, expected: torch.Tensor, tolerance: Tolerance) -> torch.Tensor:
    """Which elements of ``actual`` pass against ``expected`` (same shape and device), as a bool
    tensor, without a synchronisation. The one rule of every check (module doc)."""
    if _is_exact(expected.dtype):
        if tolerance.atol == 0 and tolerance.rtol == 0:
            signed = _SAME_SIZE_SIGNED.get(expected.dtype)
            if signed is not None:  # equal bits are equal values; torch has few uint16-64 kernels
                return torch.eq(actual.view(signed), expected.view(signed))
            return torch.eq(actual, expected)
        difference, overflowed = _integer_difference(actual, expected)
        # |difference| <= 2^63 - 1 here; beyond 2^53 its double rounds, but only for tolerances
        # the user set that large on purpose (integers are exact by default).
        bound = tolerance.atol + tolerance.rtol * _integer_magnitude(expected)
        return ~overflowed & (_magnitude_of(difference) <= bound)
    wide = torch.complex128 if expected.is_complex() else torch.float64
    a, e, both_nan = _nan_matched(actual.to(wide), expected.to(wide))
    same = a == e  # covers equal infinities, whose difference would be NaN
    return both_nan | same | ((a - e).abs() <= tolerance.atol + tolerance.rtol * e.abs())  # other NaN fails all


def _nan_matched(a: torch.Tensor, e: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``a`` and ``e`` (float64 or complex128) and where both are NaN, which is equal (module
    doc). A complex element's parts that are NaN on both sides are zeroed instead, so its other
    part is compared as usual; a part NaN on one side only stays NaN and fails."""
    if not e.is_complex():
        return a, e, a.isnan() & e.isnan()
    ar, er = torch.view_as_real(a), torch.view_as_real(e)
    matched = ar.isnan() & er.isnan()
    a = torch.view_as_complex(torch.where(matched, 0.0, ar).contiguous())
    e = torch.view_as_complex(torch.where(matched, 0.0, er).contiguous())
    return a, e, torch.zeros(a.shape, dtype=torch.bool, device=a.device)


def _value_at(tensor: torch.Tensor, index: int) -> float | int:
    """Element ``index`` (flat) for the report: integers exact, complex numbers by magnitude."""
    value = tensor.reshape(-1)[index].item()
    if isinstance(value, complex):
        return abs(value)
    return int(value) if isinstance(value, (bool, int)) else float(value)


_SAME_SIZE_SIGNED = {
    getattr(torch, unsigned): signed
    for unsigned, signed in (("uint16", torch.int16), ("uint32", torch.int32), ("uint64", torch.int64))
    if hasattr(torch, unsigned)
}


def _is_exact(dtype: torch.dtype) -> bool:
    return not (dtype.is_floating_point or dtype.is_complex)


def _integer_difference(actual: torch.Tensor, expected: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``actual - expected`` exactly, as int64, and where it does not fit int64 (then it is at
    least 2^63 in size: beyond any tolerance)."""
    if actual.dtype == torch.uint64:
        # Flipping the top bit maps unsigned order onto signed order; differences are unchanged.
        top = torch.tensor(-(2**63), dtype=torch.int64, device=actual.device)
        a, e = actual.view(torch.int64) ^ top, expected.view(torch.int64) ^ top
    else:
        a, e = actual.to(torch.int64), expected.to(torch.int64)
    difference = a - e  # wraps on overflow: exactly when the signs of a and e differ and the result's is not a's
    overflowed = ((a < 0) != (e < 0)) & ((difference < 0) != (a < 0))
    return difference, overflowed


def _magnitude_of(difference: torch.Tensor) -> torch.Tensor:
    """``|difference|`` as float64; the abs of int64's -2^63 wraps to itself, the double's does not."""
    return difference.to(torch.float64).abs()


def _integer_magnitude(tensor: torch.Tensor) -> torch.Tensor:
    if tensor.dtype == torch.uint64:
        # Exact to 53 bits, like any double: only a tolerance's bound is computed from it.
        return tensor.view(torch.int64).to(torch.float64) % 2.0**64
    return tensor.to(torch.int64).to(torch.float64).abs()


def _abs_errors(actual: torch.Tensor, expected: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Per element ``|actual - expected|`` (0 where they are equal, equal infinities and NaN on
    both sides included; inf where one side is NaN) and ``|expected|``, as float64 for the
    report's figures. Integers' differences are taken exactly before they become doubles."""
    if _is_exact(expected.dtype):
        difference, overflowed = _integer_difference(actual, expected)
        errors = _magnitude_of(difference).masked_fill(overflowed, 2.0**63)
        return errors, _integer_magnitude(expected)
    wide = torch.complex128 if expected.is_complex() else torch.float64
    a, e, both_nan = _nan_matched(actual.to(wide), expected.to(wide))
    diff = (a - e).abs()
    # NaN on both sides is equal (the rule), so its error is 0; a NaN |expected| counts 0, so a
    # number against the reference's NaN reads as an infinite relative error, not NaN
    errors = torch.nan_to_num(torch.where((a == e) | both_nan, torch.zeros_like(diff), diff), nan=float("inf"))
    return errors, torch.nan_to_num(e.abs(), nan=0.0)


def _dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")
