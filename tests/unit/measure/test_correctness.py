"""Tolerance precedence, the comparison rule, poisoning and input snapshots."""

from types import SimpleNamespace

import pytest
import torch

from kbench_ci.measure.correctness import DEFAULT_TOLERANCES, compare_output, resolve_tolerance, tolerance_function
from kbench_ci.measure.inputs import changed_inputs, poison_
from kbench_ci.results.model import Tolerance

LOOSE = Tolerance(1e-3, 1e-3, "test")


@pytest.mark.parametrize(
    ("dtype", "key"),
    [(torch.float64, "float64"), (torch.float32, "float32"), (torch.float16, "float16"),
     (torch.bfloat16, "bfloat16"), (torch.float8_e4m3fn, "float8_e4m3fn"), (torch.float8_e5m2, "float8_e5m2")],
)
def test_default_table_by_dtype(dtype, key) -> None:
    tolerance = resolve_tolerance(dtype, cli_atol=None, cli_rtol=None, ref_atol=None, ref_rtol=None)
    assert (tolerance.atol, tolerance.rtol) == DEFAULT_TOLERANCES[key]
    assert tolerance.source == f"default ({key})"


def test_tf32_precision_only_changes_float32() -> None:
    tf32 = resolve_tolerance(torch.float32, cli_atol=None, cli_rtol=None, ref_atol=None, ref_rtol=None, precision="tf32")
    assert (tf32.atol, tf32.rtol) == DEFAULT_TOLERANCES["tf32"]
    half = resolve_tolerance(torch.float16, cli_atol=None, cli_rtol=None, ref_atol=None, ref_rtol=None, precision="tf32")
    assert (half.atol, half.rtol) == DEFAULT_TOLERANCES["float16"]


def test_cli_beats_ref_beats_table_independently_for_atol_and_rtol() -> None:
    ref_only = resolve_tolerance(torch.float32, cli_atol=None, cli_rtol=None, ref_atol=0.5, ref_rtol=None)
    assert (ref_only.atol, ref_only.rtol, ref_only.source) == (0.5, DEFAULT_TOLERANCES["float32"][1], "ref.py")
    both = resolve_tolerance(torch.float32, cli_atol=0.1, cli_rtol=None, ref_atol=0.5, ref_rtol=0.25)
    assert (both.atol, both.rtol, both.source) == (0.1, 0.25, "cli")


def test_integers_compare_exactly() -> None:
    tolerance = resolve_tolerance(torch.int32, cli_atol=None, cli_rtol=None, ref_atol=1.0, ref_rtol=1.0)
    assert (tolerance.atol, tolerance.rtol) == (0.0, 0.0)
    check = compare_output("idx", torch.tensor([1, 2, 4]), torch.tensor([1, 2, 3]), tolerance)
    assert not check.passed and check.mismatched == 1 and check.first_mismatch == (2, 4.0, 3.0)


def test_nan_passes_only_against_nan_and_equal_infinities_do() -> None:
    """NaN where the reference is NaN is equal (assert_close's equal_nan);
    NaN against a number fails, on either side."""
    nan, inf = float("nan"), float("inf")
    expected = torch.tensor([1.0, inf, nan, 2.0, nan])
    actual = torch.tensor([1.0, inf, nan, nan, 3.0])
    check = compare_output("y", actual, expected, LOOSE)
    assert check.mismatched == 2 and check.first_mismatch is not None and check.first_mismatch[0] == 3
    assert check.max_abs_error == inf and check.max_rel_error == inf
    torch.testing.assert_close(actual[:3], expected[:3], equal_nan=True)  # the same rule as torch's


def test_nan_on_both_sides_has_no_error() -> None:
    x = torch.tensor([-1.0, 0.5, -2.0, 4.0])
    check = compare_output("y", torch.log(x), torch.log(x), LOOSE)
    assert check.passed and check.mismatched == 0
    assert (check.max_abs_error, check.max_rel_error) == (0.0, 0.0)


def test_a_complex_nan_passes_only_in_the_same_part_and_with_the_other_part_close() -> None:
    nan = float("nan")
    expected = torch.tensor([complex(nan, 1.0), complex(nan, 1.0), complex(nan, 1.0), complex(1.0, nan), 2.0])
    actual = torch.tensor([complex(nan, 1.0), complex(nan, 5.0), complex(1.0, nan), complex(1.0, nan), 2.0])
    check = compare_output("z", actual, expected, LOOSE)
    assert check.mismatched == 2 and check.first_mismatch is not None and check.first_mismatch[0] == 1


def test_error_figures() -> None:
    check = compare_output("y", torch.tensor([1.0, 2.1, 3.0]), torch.tensor([1.0, 2.0, 3.0]), LOOSE)
    assert not check.passed and check.mismatched == 1
    assert check.max_abs_error == pytest.approx(0.1, rel=1e-5)
    assert check.max_rel_error == pytest.approx(0.05, rel=1e-5)


def test_shape_and_dtype_mismatches_are_named() -> None:
    shape = compare_output("y", torch.zeros(3, 4), torch.zeros(4, 3), LOOSE)
    assert shape.problem == "shape mismatch: kernel gives (3, 4), reference gives (4, 3)"
    dtype = compare_output("y", torch.zeros(3, dtype=torch.float64), torch.zeros(3), LOOSE)
    assert dtype.problem == "dtype mismatch: kernel gives float64, reference gives float32"
    missing = compare_output("y", None, torch.zeros(3), LOOSE)
    assert "produced no tensor" in missing.problem


def test_a_flat_cu_buffer_matches_a_shaped_reference() -> None:
    check = compare_output("out", torch.arange(6.0), torch.arange(6.0).view(2, 3), LOOSE)
    assert check.passed


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.float8_e4m3fn, torch.float8_e5m2])
def test_poisoned_floats_are_nan(dtype) -> None:
    tensor = poison_(torch.zeros(8).to(dtype))
    assert torch.isnan(tensor.float()).all()


@pytest.mark.parametrize("dtype", [torch.int8, torch.uint8, torch.int32, torch.int64, torch.bool])
def test_poisoned_integers_hold_the_sentinel_bytes(dtype) -> None:
    tensor = poison_(torch.zeros(8, dtype=dtype))
    assert (tensor.view(torch.uint8) == 0xA5).all()


def test_changed_inputs_sees_bytes_not_values_and_ignores_outputs() -> None:
    pristine = {"x": torch.tensor([1.0, float("nan")]), "y": torch.zeros(2), "n": 2}
    untouched = {"x": pristine["x"].clone(), "y": torch.ones(2), "n": 2}
    assert changed_inputs(pristine, untouched, ("y",)) == ()
    scribbled = {"x": torch.tensor([0.0, float("nan")]), "y": torch.ones(2), "n": 2}
    assert changed_inputs(pristine, scribbled, ("y",)) == ("x",)


def _cases() -> list[tuple[str, dict[str, object], dict[str, torch.Tensor]]]:
    expected = torch.linspace(-3.0, 3.0, 64)
    one_off = expected.clone()
    one_off[17] += 1.0
    with_nan = expected.clone()
    with_nan[3] = float("nan")
    integers = torch.arange(16, dtype=torch.int32)
    return [
        ("equal", {"c": expected.clone()}, {"c": expected}),
        ("within tolerance", {"c": expected + 1e-7}, {"c": expected}),
        ("one element off", {"c": one_off}, {"c": expected}),
        ("a NaN", {"c": with_nan}, {"c": expected}),
        ("NaN where the reference is NaN", {"c": with_nan.clone()}, {"c": with_nan}),
        ("a number where the reference is NaN", {"c": expected.clone()}, {"c": with_nan}),
        ("float64 given for float32", {"c": expected.double()}, {"c": expected}),
        ("no tensor", {"c": 1.0}, {"c": expected}),
        ("missing", {}, {"c": expected}),
        ("flat for shaped", {"c": expected.clone()}, {"c": expected.reshape(8, 8)}),
        ("wrong shape", {"c": expected.reshape(8, 8)}, {"c": expected.reshape(4, 16)}),
        ("integers equal", {"i": integers.clone()}, {"i": integers}),
        ("integers off by one", {"i": integers + 1}, {"i": integers}),
        ("empty", {"c": torch.empty(0)}, {"c": torch.empty(0)}),
        ("two outputs, the second off", {"c": expected.clone(), "d": one_off}, {"c": expected, "d": expected}),
    ]


@pytest.mark.parametrize(("actual", "expected"), [c[1:] for c in _cases()], ids=[c[0] for c in _cases()])
def test_the_judges_quick_check_agrees_with_the_full_comparison(actual: dict[str, object], expected: dict[str, torch.Tensor]) -> None:
    from kbench_ci.measure.correctness import compare_outputs, outputs_match

    def tolerance_for(dtype: torch.dtype) -> Tolerance:
        return resolve_tolerance(dtype, cli_atol=None, cli_rtol=None, ref_atol=None, ref_rtol=None)

    full = all(check.passed for check in compare_outputs(actual, expected, tolerance_for))
    assert outputs_match(actual, expected, tolerance_for) is full


@pytest.mark.parametrize(("actual", "expected"), [c[1:] for c in _cases()], ids=[c[0] for c in _cases()])
def test_a_batchs_check_finds_the_first_call_the_full_comparison_fails(actual: dict[str, object],
                                                                       expected: dict[str, torch.Tensor]) -> None:
    """The judge checks a batch's calls with one synchronisation: the call it names is the
    first the full comparison fails, wherever in the batch it stands."""
    from kbench_ci.measure.correctness import compare_outputs, first_mismatch

    def tolerance_for(dtype: torch.dtype) -> Tolerance:
        return resolve_tolerance(dtype, cli_atol=None, cli_rtol=None, ref_atol=None, ref_rtol=None)

    good = ({name: value.clone() for name, value in expected.items()}, expected)
    passes = all(check.passed for check in compare_outputs(actual, expected, tolerance_for))
    assert first_mismatch([good, good], tolerance_for) is None
    assert first_mismatch([good, (actual, expected), good], tolerance_for) == (None if passes else 1)
    assert first_mismatch([(actual, expected), good, (actual, expected)], tolerance_for) == (None if passes else 0)
    assert first_mismatch([], tolerance_for) is None


def test_the_tolerance_function_takes_the_sides_flags_then_ref_py_then_the_table() -> None:
    """One function for both engines: the side's --atol/--rtol/--precision first, ref.py's next."""
    ref = SimpleNamespace(atol=1e-3, rtol=None)
    flags = SimpleNamespace(atol=None, rtol=5e-2, precision=None)
    tolerance = tolerance_function(flags, ref)(torch.float32)  # type: ignore[arg-type]
    assert (tolerance.atol, tolerance.rtol, tolerance.source) == (1e-3, 5e-2, "cli")
    bare = tolerance_function(SimpleNamespace(atol=None, rtol=None, precision=None), ref)  # type: ignore[arg-type]
    assert bare(torch.float32).source == "ref.py" and bare(torch.float32).atol == 1e-3
    assert bare(torch.int32).source == "exact (integer)"
