"""Each judged worker's own cost of a call (kbench_ci.judge.calibration): from the workers'
figures to what is taken off each side's samples, and when the judge measures a figure."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from kbench_ci.judge import handoff as handoff_module
from kbench_ci.judge.calibration import MAX_CORRECTION_MS, WARM_UP_CALLS, Calibration, centre_ms, corrections, kept
from kbench_ci.judge.handoff import Handoff
from kbench_ci.judge.state import Side
from kbench_ci.measure.inputs import InputSet
from kbench_ci.measure.sideproto import Called
from kbench_ci.measure.timing import CacheFlush
from kbench_ci.results.model import VariantResult

US = 1e-3  # ms


def test_each_side_loses_its_figure_less_the_cases_mean() -> None:
    adjust = corrections({"base": Calibration(5.00 * US, calls=195), "head": Calibration(5.24 * US, calls=195)})
    assert adjust.by_label == pytest.approx({"base": -0.12 * US, "head": 0.12 * US})
    assert "measured on 195 trusted calls" in adjust.words
    assert "taken out: base -0.12 us, head +0.12 us" in adjust.words


def test_the_cases_level_stays_with_three_sides() -> None:
    adjust = corrections({"base": Calibration(5.1 * US, calls=10), "head": Calibration(5.4 * US, calls=10),
                          "pytorch-eager": Calibration(5.1 * US, calls=10)})
    assert adjust.by_label == pytest.approx({"base": -0.1 * US, "head": 0.2 * US, "pytorch-eager": -0.1 * US})
    assert sum(adjust.by_label.values()) == pytest.approx(0.0, abs=1e-12)


@pytest.mark.parametrize(("missing", "why"), [
    (None, "head's worker was not calibrated before its first load"),
    (Calibration(None, refused="its trusted calls failed: hung"), "head's worker has no figure (its trusted calls failed: hung)"),
])
def test_a_side_without_a_figure_leaves_every_side_as_it_was(missing: Calibration | None, why: str) -> None:
    adjust = corrections({"base": Calibration(5.0 * US, calls=10), "head": missing})
    assert adjust.by_label == {}
    assert adjust.words == f"each worker's own cost of a call not taken out: {why}"


def test_a_correction_beyond_the_bound_is_said_and_none_is_taken_out() -> None:
    adjust = corrections({"base": Calibration(5.0 * US, calls=10), "head": Calibration(6.2 * US, calls=10)})
    assert adjust.by_label == {}
    assert "not taken out: base's is beyond the ±0.50 us" in adjust.words
    assert "base -0.60 us, head +0.60 us" in adjust.words and "head 6.200 us" in adjust.words
    at_bound = corrections({"base": Calibration(5.0 * US, calls=10), "head": Calibration(5.0 * US + 2 * MAX_CORRECTION_MS)})
    assert at_bound.by_label == pytest.approx({"base": -MAX_CORRECTION_MS, "head": MAX_CORRECTION_MS})


def test_no_sides_no_words() -> None:
    assert corrections({}).by_label == {} and corrections({}).words == ""


def test_the_centre_is_the_mean_of_the_middle_half_between_the_clocks_ticks() -> None:
    tick = 0.032 * US
    # 60% of calls on one tick, 40% on the next, and two calls held up by something else
    samples = [5 * US] * 30 + [5 * US + tick] * 20 + [9 * US, 12 * US]
    centre = centre_ms(samples)
    assert 5 * US < centre < 5 * US + tick
    assert centre == pytest.approx(sum(sorted(samples)[13:39]) / 26)
    assert centre_ms([7 * US]) == 7 * US
    with pytest.raises(ValueError):
        centre_ms([])


def test_the_first_calls_are_warm_up() -> None:
    assert kept(list(range(20))) == list(range(WARM_UP_CALLS, 20))
    assert kept([1.0, 2.0, 3.0]) == [2.0, 3.0]  # at most half left out
    assert kept([1.0]) == [1.0] and kept([]) == []


class _ReplyingWorker:
    """A worker that answers every call with one time of ``sample_ms``."""

    paused = False

    def __init__(self, sample_ms: float) -> None:
        self.sample_ms = sample_ms

    def pause(self) -> None:
        pass

    def resume(self) -> None:
        pass

    def ask(self, request: object, kind: object, *, timeout_s: float) -> Called:
        return Called(samples_ms=(self.sample_ms,))


def _side(label: str, worker: object) -> Side:
    return Side(label, "solution", worker, VariantResult(label=label, kind="triton", role="solution", status="ok"))  # type: ignore[arg-type]


def test_the_handoff_takes_each_sides_correction_off_its_every_sample(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(handoff_module, "end_side_strays", lambda: [])
    cpu = torch.device("cpu")
    handoff = Handoff(cpu, CacheFlush(cpu, enabled=False), None, event_overhead_ms=2.0 * US,
                      corrections_ms={"base": -0.12 * US, "head": 0.12 * US})
    arena = SimpleNamespace(slot=0, views={})
    nothing = InputSet(kwargs={}, output_names=(), seed=0)
    times = {label: handoff.call(_side(label, _ReplyingWorker(10.0 * US)), arena, nothing).sample_ms  # type: ignore[arg-type]
             for label in ("base", "head", "pytorch-eager")}
    assert times == pytest.approx({"base": 8.12 * US, "head": 7.88 * US, "pytorch-eager": 8.0 * US})
    assert handoff._corrected(Called(samples_ms=(10.0 * US,)), "head") == pytest.approx(7.88 * US)
    # without corrections, only the one event overhead, as before
    plain = Handoff(cpu, CacheFlush(cpu, enabled=False), None, event_overhead_ms=2.0 * US)
    assert plain._corrected(Called(samples_ms=(10.0 * US,)), "head") == pytest.approx(8.0 * US)
