"""The judge's verdicts from its own clock (kbench_ci.judge.trials.judge_outside_clock), on sides
made up here: what each side's calls looked like to the judge, against its trusted sides."""

from __future__ import annotations

import random
from typing import Any, cast

from kbench_ci.judge.clock import CallStamps
from kbench_ci.judge.handoff import Handoff
from kbench_ci.judge.sides import SideWorker
from kbench_ci.judge.state import Side
from kbench_ci.judge.trials import _pairs, judge_outside_clock
from kbench_ci.results.model import VariantResult


def _side(label: str, role: str, own_us: float, *, hidden_us: float = 0.0, pre_extra_us: float = 0.0, seed: int = 1) -> Side:
    """A side of 120 calls: the judge's span is the handoff (~300 us) plus the call's own time,
    plus ``hidden_us`` its own clock left out; its reported time is ``own_us``."""
    rng = random.Random(seed)
    side = Side(label, role, cast(SideWorker, object()), VariantResult(label=label, kind="triton", role=role, status="ok"))  # type: ignore[arg-type]
    for _ in range(120):
        own = own_us + rng.gauss(0.0, 0.2)
        span = 300.0 + own_us + hidden_us + rng.gauss(0.0, 0.4)
        side.judged.append((CallStamps(pre_us=45.0 + pre_extra_us + rng.gauss(0.0, 0.3), span_us=span, post_us=5.0), own / 1e3))
    side.rounds = [tuple(ms for _, ms in side.judged[i : i + 10]) for i in range(0, 120, 10)]
    return side


def _handoff() -> Handoff:
    return cast(Handoff, type("H", (), {"source": "gpu-globaltimer"})())


def test_a_head_that_reports_half_of_a_7_us_call_is_incorrect_and_an_honest_one_is_not() -> None:
    base, honest = _side("base", "solution", 7.0), _side("head", "solution", 7.0, seed=2)
    judge_outside_clock([base, honest], _handoff(), on_gpu=True)
    assert honest.ok and honest.result.outside_clock is not None
    assert abs(honest.result.outside_clock.unexplained_us or 0.0) < 1.0
    assert base.result.outside_clock is not None and base.result.outside_clock.reference is None  # trusted: not judged

    liar = _side("head", "solution", 3.5, hidden_us=3.5, seed=3)
    judge_outside_clock([_side("base", "solution", 7.0), liar], _handoff(), on_gpu=True)
    assert liar.result.status == "incorrect"
    assert (liar.result.message or "").startswith("its process reported less time than the GPU spent")
    assert liar.result.outside_clock is not None and liar.result.outside_clock.finding == liar.result.message


def test_gpu_work_inside_the_judges_staging_makes_a_side_incorrect() -> None:
    early = _side("head", "solution", 7.0, pre_extra_us=20.0, seed=4)
    judge_outside_clock([_side("base", "solution", 7.0), early], _handoff(), on_gpu=True)
    assert early.result.status == "incorrect"
    assert "GPU work of its own ran while the judge staged and flushed" in (early.result.message or "")


def test_a_baseline_is_a_trusted_reference_where_no_base_was_timed() -> None:
    solution = _side("solution", "solution", 50.0, hidden_us=25.0)
    judge_outside_clock([solution, _side("pytorch-eager", "baseline", 50.0, seed=5)], _handoff(), on_gpu=True)
    assert solution.result.status == "incorrect"
    assert solution.result.outside_clock is not None and solution.result.outside_clock.reference == "pytorch-eager"


def test_without_a_trusted_side_the_figures_are_kept_and_nothing_is_judged() -> None:
    alone = _side("solution", "solution", 50.0, hidden_us=25.0)
    judge_outside_clock([alone], _handoff(), on_gpu=True)
    assert alone.ok and alone.result.outside_clock is not None and alone.result.outside_clock.reference is None
    assert alone.result.outside_clock.calls == 120


def test_a_side_faster_on_contents_it_had_seen_is_incorrect() -> None:
    """Judged on the judge's spans: a replayer that also reports a replay's time for the new
    contents (its own clock lies only there, too few calls to move its gap's median) is caught."""
    replay = _side("head", "solution", 20.0, seed=6)
    rng = random.Random(7)
    # the judge's spans: new contents computed (180 us), the seen beside them replayed (20 us)
    replay.memo_pairs = [(300.0 + 180.0 + rng.gauss(0, 1), 300.0 + 20.0 + rng.gauss(0, 1)) for _ in range(12)]
    judge_outside_clock([_side("base", "solution", 180.0), replay], _handoff(), on_gpu=True)
    assert replay.result.status == "incorrect"
    assert "faster on contents it had seen than on contents new to it" in (replay.result.message or "")


def test_an_honest_side_is_never_read_as_caching_for_its_noise() -> None:
    honest = _side("head", "solution", 7.0, seed=8)
    rng = random.Random(9)
    honest.memo_pairs = [(307.0 + rng.gauss(0, 2.0), 307.0 + rng.gauss(0, 2.0)) for _ in range(40)]
    judge_outside_clock([_side("base", "solution", 7.0), honest], _handoff(), on_gpu=True)
    assert honest.ok, honest.result.message


def test_a_side_that_lies_on_a_third_of_its_calls_is_caught_by_the_tail() -> None:
    """A lie on a minority of calls leaves the median gap where it was; the tail test counts them."""
    liar = _side("head", "solution", 180.0, seed=10)
    for index in range(0, len(liar.judged), 3):
        stamps, ms = liar.judged[index]
        liar.judged[index] = (stamps, ms * 0.8)  # reports 36 us less on every third call
    judge_outside_clock([_side("base", "solution", 180.0), liar], _handoff(), on_gpu=True)
    assert liar.result.status == "incorrect"
    assert "on 40 of its 120 calls" in (liar.result.message or "")


def test_each_new_content_is_paired_with_the_call_beside_it_on_seen_content() -> None:
    samples: list[Any] = [9.0, 1.0, 2.0, 5.0, 3.0, 6.0]
    new = [True, False, False, True, False, True]
    # index 0 is discarded; 3 pairs with 2 (before); 5 with 4 (before)
    assert _pairs(samples, new, 1) == [(5.0, 2.0), (6.0, 3.0)]
    assert _pairs([5.0, 1.0], [True, False], 0) == [(5.0, 1.0)]  # no call before: the one after


class _RawTimer:
    """A side's worker that reports a raw event time for every call, as a judged side does."""

    paused = False

    def __init__(self, raw_ms: float) -> None:
        self.raw_ms = raw_ms
        self.requests: list[Any] = []

    def pause(self) -> None:
        self.paused = True

    def resume(self) -> None:
        self.paused = False

    def ask(self, request: Any, _kind: Any, *, timeout_s: float) -> Any:
        from kbench_ci.wire.sideproto import Called

        self.requests.append(request)
        return Called(samples_ms=(self.raw_ms,))


def test_the_judge_subtracts_its_one_event_overhead_from_every_sides_raw_time(tmp_path: Any) -> None:
    """Sides report raw event times; the judge takes its one calibration off each, so two sides
    with the same raw time read the same, whatever either would have calibrated for itself."""
    import torch

    from kbench_ci.judge.arena import make_arena
    from kbench_ci.measure.inputs import InputSet
    from kbench_ci.measure.timing import CacheFlush

    cpu = torch.device("cpu")
    template = {"x": torch.ones(4), "out": torch.zeros(4)}
    handoff = Handoff(cpu, CacheFlush(cpu, enabled=False), None, event_overhead_ms=0.003)
    inputs = InputSet(kwargs=template, output_names=("out",), seed=1)
    readings = []
    for label in ("base", "head"):
        worker = _RawTimer(raw_ms=0.0083)
        side = Side(label, "solution", cast(SideWorker, worker), VariantResult(label=label, kind="triton", role="solution", status="ok"))  # type: ignore[arg-type]
        arena = make_arena(template, ("out",), cpu, slot=0)
        readings.append(handoff.call(side, arena, inputs).sample_ms)
        assert worker.requests and worker.requests[-1].count == 1
    assert readings == [readings[0]] * 2
    assert abs(readings[0] - 0.0053) < 1e-12
    assert Handoff(cpu, CacheFlush(cpu, enabled=False), None).event_overhead_ms == 0.0  # a host timer: nothing taken off
