"""Checks that let a wrong kernel pass: copies keep setup()'s layout,
integer outputs compare exactly in every check, and outputs updated in place are staged like
inputs, not poisoned. Cases run in this process on the CPU, as a worker runs them."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from kbench_ci.errors import UserFileError
from kbench_ci.measure.child import run_case
from kbench_ci.measure.correctness import close_elements, compare_output
from kbench_ci.measure.impls.python_solution import inputs_from_setup
from kbench_ci.measure.inputs import InputSet, poison_, same_inputs, still_poisoned
from kbench_ci.measure.staging import TimedSet, mismatches
from kbench_ci.results.model import MeasureSettings, Tolerance, VariantResult
from kbench_ci.wire.protocol import CaseJob, SideSpec, VariantDone, WorkerEvent

CPU = torch.device("cpu")
EXACT = Tolerance(0.0, 0.0, "exact (integer)")

AFFINE_REF = '''
def reference(x, y, **_):
    return 2 * x + 1
'''


def _settings() -> MeasureSettings:
    return MeasureSettings(device="cpu", seed=42, correctness_trials=3, timing_method="host_time", num_warmup=1,
                           trials_per_round=3, discard_first=0, rounds=2, flush_l2=False)


def _run(tmp_path: Path, kernel: str, ref: str, n: int, *, sides: int = 1) -> list[VariantResult]:
    """One case of ``kernel`` against ``ref`` (two identical sides: a compare's base and head)."""
    (tmp_path / "ref.py").write_text(ref)
    specs = []
    for label in ("base", "head")[:sides] if sides == 2 else ("solution",):
        folder = tmp_path / label
        folder.mkdir()
        (folder / "kernel.py").write_text(kernel)
        specs.append(SideSpec(label=label, solution=str(folder / "kernel.py"), ref=str(tmp_path / "ref.py"),
                              implementation="pytorch"))
    job = CaseJob(case_id=f"k[N={n}]", dims={"N": n}, sides=tuple(specs), baselines=(), settings=_settings())
    events: list[WorkerEvent] = []
    run_case(job, events.append)
    return [event.result for event in events if isinstance(event, VariantDone)]


# -- 1. non-contiguous outputs keep their layout -------------------------------------------------

STRIDED_SETUP = '''
import torch

def setup(N, **_):
    # every other element of a buffer, one element in: stride (2,), storage offset 1
    return {"inputs": {"x": torch.randn(N), "y": torch.empty(2 * N + 1)[1::2]}, "outputs": ["y"]}
'''

WRITES_THROUGH_STRIDES = STRIDED_SETUP + '''
def run_kernel(x, y, **_):
    torch.mul(x, 2, out=y)
    y.add_(1)
'''

# What a kernel that ignores strides does (a Triton kernel indexing y_ptr + offsets): it writes
# a contiguous block from the output's first element, never the strided elements.
WRITES_CONTIGUOUS_BLOCK = STRIDED_SETUP + '''
def run_kernel(x, y, **_):
    torch.as_strided(y, y.shape, (1,)).copy_(2 * x + 1)
'''


def test_fresh_copies_keep_setups_sizes_strides_and_storage_offset() -> None:
    base = torch.arange(21, dtype=torch.float32)
    inputs = InputSet({"x": base[1::2], "m": torch.randn(4, 6).t(), "n": 3}, ("x",), 0)
    copy = inputs.fresh_copy()
    for name in ("x", "m"):
        original, copied = inputs.kwargs[name], copy[name]
        assert (copied.shape, copied.stride(), copied.storage_offset()) == (
            original.shape, original.stride(), original.storage_offset())
        assert torch.equal(copied, original)
        assert copied.untyped_storage().data_ptr() != original.untyped_storage().data_ptr()  # a copy, not a view
    copy["x"].fill_(-1)
    assert torch.equal(base, torch.arange(21, dtype=torch.float32))
    assert copy["n"] == 3


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.int16, torch.float8_e4m3fn, torch.bool])
def test_strided_integer_outputs_are_poisoned_through_their_strides(dtype: torch.dtype) -> None:
    storage = torch.zeros(17, dtype=dtype)
    output = storage[1::2]
    poison_(output)
    assert still_poisoned(output)
    assert (storage.view(torch.uint8).reshape(17, -1)[0::2] == 0).all()  # the gaps are not the output's
    output[3] = 1
    assert not still_poisoned(output)


def test_a_kernel_that_writes_a_contiguous_block_instead_of_the_strided_output_fails(tmp_path: Path) -> None:
    (result,) = _run(tmp_path, WRITES_CONTIGUOUS_BLOCK, AFFINE_REF, 64)
    assert result.status == "incorrect"
    assert result.correctness is not None and not result.correctness.passed
    assert result.message is not None and "output 'y'" in result.message
    assert result.rounds_ms == ()  # never timed


def test_an_honest_kernel_writing_through_strides_passes(tmp_path: Path) -> None:
    (result,) = _run(tmp_path, WRITES_THROUGH_STRIDES, AFFINE_REF, 64)
    assert result.status == "ok", result.message
    assert result.post_timing_check is True and result.rounds_ms


# -- 2. integer outputs compare exactly ----------------------------------------------------------

NEAR_2_61 = 2**61


def test_int64_values_near_2_61_off_by_one_are_all_reported_wrong() -> None:
    expected = NEAR_2_61 + torch.arange(1024, dtype=torch.int64)
    check = compare_output("y", expected + 1, expected, EXACT)
    assert not check.passed
    assert check.mismatched == 1024 and check.numel == 1024
    assert check.max_abs_error == 1.0
    assert check.first_mismatch == (0, NEAR_2_61 + 1, NEAR_2_61)
    assert int(mismatches(expected + 1, expected, EXACT)) == 1024  # the timed calls' check agrees


def test_an_integer_tolerance_is_applied_to_the_exact_difference() -> None:
    expected = NEAR_2_61 + torch.arange(8, dtype=torch.int64)
    loose = Tolerance(1.0, 0.0, "cli")
    assert close_elements(expected + 1, expected, loose).all()
    assert not close_elements(expected + 2, expected, loose).any()
    # a difference that overflows int64 is beyond any tolerance, not wrapped into range
    extremes = torch.tensor([-(2**63)], dtype=torch.int64)
    assert not close_elements(extremes, torch.tensor([2**63 - 1]), Tolerance(1e30, 0.0, "cli")).any()
    assert compare_output("y", extremes, torch.tensor([2**63 - 1]), loose).max_abs_error >= 2.0**63
    # unsigned 64-bit: exact too
    big = torch.tensor([2**64 - 2], dtype=torch.uint64)
    assert close_elements(big, big, EXACT).all()
    assert not close_elements(torch.tensor([2**64 - 1], dtype=torch.uint64), big, EXACT).any()
    assert close_elements(torch.tensor([2**64 - 1], dtype=torch.uint64), big, loose).all()


def test_bool_outputs_compare_exactly() -> None:
    want = torch.tensor([True, False, True, False])
    check = compare_output("m", torch.tensor([True, True, True, False]), want, EXACT)
    assert (check.mismatched, check.first_mismatch) == (1, (1, 1, 0))


INT_REF = '''
def reference(x, y, **_):
    return x + 1
'''

INT_OFF_BY_ONE = '''
import torch

def setup(N, seed, **_):
    generator = torch.Generator().manual_seed(seed)
    x = 2**61 + torch.randint(0, 2**40, (N,), generator=generator, dtype=torch.int64)
    return {"inputs": {"x": x, "y": torch.empty(N, dtype=torch.int64)}, "outputs": ["y"]}

def run_kernel(x, y, **_):
    torch.add(x, 2, out=y)  # off by one
'''


def test_an_int64_kernel_off_by_one_near_2_61_fails_in_the_correctness_trials(tmp_path: Path) -> None:
    (result,) = _run(tmp_path, INT_OFF_BY_ONE, INT_REF, 16)
    assert result.status == "incorrect"
    assert result.correctness is not None and not result.correctness.passed
    assert result.message is not None and "16 of 16 elements" in result.message and "max abs error 1 " in result.message
    assert result.rounds_ms == ()  # caught before timing, not by it


# -- 3. outputs updated in place -----------------------------------------------------------------

INPLACE_REF = '''
def reference(x, y, **_):
    x.add_(y)  # accumulates into x
'''

INPLACE_SETUP = '''
import torch

def setup(N, **_):
    return {"inputs": {"x": torch.randn(N), "y": torch.randn(N)}, "outputs": ["x"], "inplace": ["x"]}
'''

INPLACE_HONEST = INPLACE_SETUP + '''
def run_kernel(x, y, **_):
    x += y
'''

INPLACE_IGNORES_CONTENTS = INPLACE_SETUP + '''
def run_kernel(x, y, **_):
    x.copy_(y)  # as if x started at zero: never reads it
'''


def test_an_honest_in_place_kernel_passes(tmp_path: Path) -> None:
    (result,) = _run(tmp_path, INPLACE_HONEST, INPLACE_REF, 64)
    assert result.status == "ok", result.message
    assert result.correctness is not None and result.correctness.passed
    assert result.post_timing_check is True and result.rounds_ms
    assert result.fresh_inputs is not None and "versions of the inputs" in result.fresh_inputs


def test_an_in_place_kernel_that_ignores_the_outputs_contents_fails(tmp_path: Path) -> None:
    (result,) = _run(tmp_path, INPLACE_IGNORES_CONTENTS, INPLACE_REF, 64)
    assert result.status == "incorrect"
    assert result.message is not None and "output 'x'" in result.message
    check = result.correctness.trials[0].outputs[0] if result.correctness else None
    assert check is not None and 0 < check.max_abs_error < float("inf")  # its own error, not poison's


def test_in_place_sides_sharing_one_set_of_timed_tensors_both_pass_the_post_timing_check(tmp_path: Path) -> None:
    """Base and head with the same setup are timed on one set of tensors: the head's re-check
    must get the original contents, not those the base's re-check left in place."""
    results = _run(tmp_path, INPLACE_HONEST, INPLACE_REF, 64, sides=2)
    assert [(r.status, r.post_timing_check) for r in results] == [("ok", True), ("ok", True)], [r.message for r in results]


def test_in_place_outputs_are_staged_like_inputs_and_never_poisoned() -> None:
    def make(seed: int) -> InputSet:
        generator = torch.Generator().manual_seed(seed)
        return InputSet({"x": torch.randn(16, generator=generator), "y": torch.randn(16, generator=generator),
                         "z": torch.empty(16)}, ("x", "z"), seed, inplace_names=("x",))

    def reference(inputs: InputSet) -> dict[str, torch.Tensor]:
        return {"x": inputs.kwargs["x"] + inputs.kwargs["y"], "z": inputs.kwargs["y"] * 2}

    inputs = make(42)
    assert inputs.poisoned_names == ("z",)
    timed = TimedSet.prepare(inputs, inputs.fresh_copy(), make, reference, CPU)
    assert timed.varied
    for version in timed.versions:
        timed.stage(version)
        assert torch.equal(timed.kwargs["x"], version.contents["x"])  # the pre-call contents, staged
        assert torch.equal(version.expected["x"], version.contents["x"] + version.contents["y"])
        assert still_poisoned(timed.kwargs["z"])  # the output it only writes is poisoned


@pytest.mark.parametrize(
    ("inplace", "message"),
    [
        ("x", "'inplace' must be a list of output names, got 'x'"),
        (["y"], "'inplace' names 'y', which is not in 'outputs' ['x']"),
    ],
)
def test_a_bad_inplace_list_is_named(inplace: object, message: str) -> None:
    def setup(N: int) -> dict[str, object]:
        return {"inputs": {"x": torch.zeros(N), "y": torch.zeros(N)}, "outputs": ["x"], "inplace": inplace}

    with pytest.raises(UserFileError, match=message.replace("[", r"\[").replace("]", r"\]")):
        inputs_from_setup(setup, {"N": 4}, seed=0, device=CPU, where="kernel.py setup()")


def test_setup_declares_in_place_outputs() -> None:
    def setup(N: int) -> dict[str, object]:
        return {"inputs": {"x": torch.zeros(N)}, "outputs": ["x"], "inplace": ["x"]}

    inputs = inputs_from_setup(setup, {"N": 4}, seed=0, device=CPU, where="kernel.py setup()")
    assert (inputs.output_names, inputs.inplace_names, inputs.poisoned_names) == (("x",), ("x",), ())


def test_sides_share_timed_tensors_only_when_in_place_contents_and_layouts_agree() -> None:
    def made(fill: float, *, offset: int = 0, inplace: tuple[str, ...] = ("x",)) -> InputSet:
        x = torch.full((9,), fill)[offset:offset + 8]
        return InputSet({"x": x, "y": torch.ones(8)}, ("x",), 0, inplace_names=inplace)

    assert same_inputs(made(1.0), made(1.0))
    assert not same_inputs(made(1.0), made(2.0))  # an in-place output's contents are an input
    assert same_inputs(made(1.0, inplace=()), made(2.0, inplace=()))  # a write-only output's are not
    assert not same_inputs(made(1.0), made(1.0, inplace=()))
    assert not same_inputs(made(1.0), made(1.0, offset=1))  # another storage offset: another layout
