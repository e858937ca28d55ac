"""Fresh input content before every timed call (measure/staging.py): the versions, their order,
what is staged, and the device-side output check, on CPU tensors."""

from __future__ import annotations

from collections import Counter

import pytest
import torch

from kbench_ci.measure.inputs import InputSet
from kbench_ci.measure.staging import MAX_VERSIONS, OutputCheck, StagedCalls, TimedSet, mismatches
from kbench_ci.results.model import Tolerance

CPU = torch.device("cpu")


def seeded(seed: int, n: int = 64) -> InputSet:
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(n, generator=generator)
    return InputSet({"x": x, "mask": torch.arange(n) % 3 == 0, "y": torch.empty(n)}, ("y",), seed)


def fixed(seed: int, n: int = 64) -> InputSet:
    return seeded(1234, n)


def expected_for(inputs: InputSet) -> dict[str, torch.Tensor]:
    return {"y": inputs.kwargs["x"] * 2 + inputs.kwargs["mask"]}


def prepare(make=seeded, reference=expected_for) -> TimedSet:
    inputs = make(42)
    return TimedSet.prepare(inputs, inputs.fresh_copy(), make, reference, CPU)


def test_versions_come_from_setup_at_other_seeds_when_it_varies_them() -> None:
    timed = prepare()
    assert timed.varied and len(timed.versions) == MAX_VERSIONS
    contents = [v.contents["x"] for v in timed.versions]
    assert all(not torch.equal(a, b) for i, a in enumerate(contents) for b in contents[i + 1:])
    assert timed.versions[0].contents["x"] is timed.inputs.kwargs["x"]  # the original is version 0
    assert "from setup(seed) at other seeds" in timed.describe()


def test_a_setup_that_ignores_its_seed_gets_its_float_inputs_permuted_and_the_rest_kept() -> None:
    timed = prepare(make=fixed)
    assert timed.varied
    original = timed.inputs.kwargs
    for version in timed.versions[1:]:
        x = version.contents["x"]
        assert not torch.equal(x, original["x"])
        assert torch.equal(x.sort().values, original["x"].sort().values)  # the same values: the same spread
        assert torch.equal(version.contents["mask"], original["mask"])  # bool inputs kept
        assert torch.equal(version.expected["y"], x * 2 + original["mask"])  # the reference says what is right
    assert "setup() gives the same inputs at every seed" in timed.describe() and "'x'" in timed.describe()


def test_integer_only_inputs_that_never_vary_are_said_not_skipped() -> None:
    def ints(seed: int) -> InputSet:
        return InputSet({"i": torch.arange(8), "y": torch.empty(8)}, ("y",), seed)

    timed = prepare(make=ints, reference=lambda inputs: {"y": inputs.kwargs["i"] * 1.0})
    assert not timed.varied and len(timed.versions) == 1  # the original: outputs still checked
    assert timed.describe().startswith("inputs not varied: setup() gives the same inputs at every seed")
    assert "integer and bool inputs are kept" in timed.describe()


def test_a_version_the_reference_cannot_take_is_dropped_and_named() -> None:
    calls = Counter()

    def picky(inputs: InputSet) -> dict[str, torch.Tensor]:
        calls["n"] += 1
        if calls["n"] % 2 == 0:
            raise ValueError("negative scale")
        return expected_for(inputs)

    timed = prepare(reference=picky)
    assert timed.varied
    assert "dropped: reference() failed (ValueError: negative scale)" in timed.describe()


def test_the_order_never_repeats_a_version_and_reaches_them_all() -> None:
    timed = prepare()
    picks = timed.pick(500)
    indices = [next(i for i, w in enumerate(timed.versions) if w is v) for v in picks]
    assert all(a != b for a, b in zip(indices, indices[1:], strict=False))
    assert set(indices) == set(range(len(timed.versions)))
    assert timed.last is picks[-1]
    # drawn from the OS: two sets do not share an order
    assert [id(v) for v in prepare().pick(50)] != [id(v) for v in prepare().pick(50)]


def test_staging_copies_a_version_in_and_poisons_the_outputs() -> None:
    timed = prepare()
    version = timed.versions[3]
    timed.kwargs["y"].fill_(7.0)
    timed.stage(version)
    assert torch.equal(timed.kwargs["x"], version.contents["x"])
    assert timed.kwargs["x"] is not version.contents["x"]  # copied into the kernel's own tensor
    assert torch.isnan(timed.kwargs["y"]).all()
    timed.restore()
    assert torch.equal(timed.kwargs["x"], timed.inputs.kwargs["x"])


def test_mismatches_follow_the_tolerance_and_a_nan_against_a_number_never_passes() -> None:
    tolerance = Tolerance(atol=1e-3, rtol=0.0, source="test")
    expected = torch.zeros(10)
    actual = expected.clone()
    actual[2] = 2e-3
    actual[5] = float("nan")
    assert int(mismatches(actual, expected, tolerance)) == 2
    assert int(mismatches(torch.tensor([1, 2, 3]), torch.tensor([1, 2, 4]), tolerance)) == 1


def test_the_hooks_check_every_call_against_its_own_version() -> None:
    timed = prepare()
    calls = [timed.versions[i] for i in (1, 2, 3, 2, 4, 5)]
    check = OutputCheck(lambda dtype: Tolerance(1e-4, 1e-4, "test"), CPU)
    remembered: dict[str, torch.Tensor] = {}

    def kernel(call: int) -> None:  # right on its first call, then replays it
        if "y" not in remembered:
            remembered["y"] = timed.kwargs["x"] * 2 + timed.kwargs["mask"]
        timed.kwargs["y"].copy_(remembered["y"])

    hooks = StagedCalls(timed, calls, lambda: {"y": timed.kwargs["y"]}, check, first_call=10)
    for index in range(len(calls)):
        hooks.before(index)
        kernel(index)
        hooks.after(index)
    failures = check.failures()
    assert [call for call, _, _ in failures] == [11, 12, 13, 14, 15]  # every call after the first
    assert failures[0][1] == "y" and "elements outside tolerance" in failures[0][2]
    assert check.failures() == []  # read once


def test_a_wrong_shape_is_a_failure_without_a_comparison() -> None:
    check = OutputCheck(lambda dtype: Tolerance(0, 0, "t"), CPU)
    check.check(0, {"y": torch.zeros(3)}, {"y": torch.zeros(4)})
    check.check(1, {}, {"y": torch.zeros(4)})
    (first, second) = check.failures()
    assert "shape/dtype (3,)" in first[2] and "no tensor for 'y'" in second[2]


@pytest.mark.parametrize("nbytes_per_version", [10, 300 * 2**20])
def test_the_pool_is_capped_by_memory(monkeypatch: pytest.MonkeyPatch, nbytes_per_version: int) -> None:
    import kbench_ci.measure.staging as staging

    monkeypatch.setattr(staging.Version, "nbytes", property(lambda self: nbytes_per_version))
    timed = prepare()
    assert len(timed.versions) == (MAX_VERSIONS if nbytes_per_version == 10 else staging.MIN_VERSIONS)


def test_inputs_larger_than_the_budget_get_no_versions_and_say_so(monkeypatch: pytest.MonkeyPatch) -> None:
    import kbench_ci.measure.staging as staging

    monkeypatch.setattr(staging.Version, "nbytes", property(lambda self: 2 * staging.CPU_VERSION_BUDGET_BYTES))
    timed = prepare()
    assert not timed.varied and timed.maker is None and len(timed.versions) == 1
    assert "exceed the memory kept for versions (0.5 GiB)" in timed.describe()
