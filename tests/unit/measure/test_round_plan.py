"""The round plan: few interim checks, balanced order, and the side that goes
first after a check alternates, so a penalty on "first after the GPU idled" is not a side bias."""

from __future__ import annotations

import math

import pytest

from kbench_ci.measure import schedule
from kbench_ci.measure.schedule import RoundPlan
from kbench_ci.wire.protocol import StoppingRule


def _rule(*, budget_s: float = 1e9, max_rounds: int = 400, growth: float = 0.25) -> StoppingRule:
    return StoppingRule(threshold=0.01, budget_s=budget_s, max_rounds=max_rounds, batch_rounds=2, batch_growth=growth,
                        check_bootstrap=500, confidence=0.95, alpha=0.05)


def _batches(plan: RoundPlan, *, seconds_per_round: float = 0.0) -> list[int]:
    """Every batch until the plan stops, no check ever deciding."""
    done, batches = 0, []
    while batch := plan.next_batch(done, done * seconds_per_round):
        batches.append(batch)
        done += batch
        if plan.may_continue(done, done * seconds_per_round):
            plan.checked(done, 0.01)
    return batches


def test_without_a_rule_only_the_minimum_rounds() -> None:
    assert _batches(RoundPlan(10, None)) == [10]


def test_batches_are_even_grow_with_the_rounds_and_stop_at_the_cap() -> None:
    batches = _batches(RoundPlan(10, _rule(max_rounds=400)))
    assert batches[0] == 10 and sum(batches) == 400
    assert all(b % 2 == 0 for b in batches)
    assert batches[1:4] == [2, 2, 2]  # 25% of 10..14 rounds is under the smallest batch
    assert max(batches) >= 60  # ... and of 300 rounds far above it
    # Few pauses: about log(400/10)/log(1.25) + the small batches, not 195 checks of 2 rounds.
    assert len(batches) - 1 < 25


def test_a_batch_fits_the_budget_left_at_the_pace_so_far() -> None:
    # 100 rounds in 10 s: 25% more (24 rounds) would take 2.4 s.
    assert RoundPlan(10, _rule(budget_s=20.0)).next_batch(100, 10.0) == 24
    assert RoundPlan(10, _rule(budget_s=12.0)).next_batch(100, 10.0) == 20  # 2 s left buy 20
    assert RoundPlan(10, _rule(budget_s=10.1)).next_batch(100, 10.0) == 2  # never under one batch
    assert RoundPlan(10, _rule(budget_s=10.0)).next_batch(100, 10.0) == 0  # spent


def test_the_cap_is_never_passed() -> None:
    assert RoundPlan(10, _rule(max_rounds=102)).next_batch(100, 1.0) == 2
    assert RoundPlan(10, _rule(max_rounds=100)).next_batch(100, 1.0) == 0


def test_the_side_first_after_each_check_alternates_and_each_batch_is_balanced() -> None:
    plan = RoundPlan(10, _rule())
    done, first_after_check = 0, []
    while batch := plan.next_batch(done, 0.0):
        orders = [plan.reversed_order(r) for r in range(done, done + batch)]
        assert orders.count(True) == orders.count(False)  # A B as often as B A
        if done:
            first_after_check.append("head" if orders[0] else "base")
        done += batch
        if plan.may_continue(done, 0.0):
            plan.checked(done, 0.01)
    assert len(first_after_check) >= 10
    assert first_after_check[0::2] == ["head"] * len(first_after_check[0::2])
    assert first_after_check[1::2] == ["base"] * len(first_after_check[1::2])


def test_the_expected_check_time_scales_with_the_rounds() -> None:
    plan = RoundPlan(10, _rule())
    assert plan.expected_check_s(10) == schedule.FIRST_CHECK_GUESS_S
    plan.checked(10, 0.1)
    assert plan.expected_check_s(40) == pytest.approx(schedule.CHECK_MARGIN * 0.4)


def _simulated_ratio(plan: RoundPlan, penalty: float) -> float:
    """head/base (geometric mean of round ratios) of two identical kernels when the side timed
    first after each check runs ``penalty`` slower, as an H200 did after idling (1% at 5.8 us)."""
    done, logs = 0, []
    while batch := plan.next_batch(done, 0.0):
        for r in range(done, done + batch):
            base = head = 1.0
            if r == done and done:  # the first side of the first round after a check
                if plan.reversed_order(r):
                    head *= 1 + penalty
                else:
                    base *= 1 + penalty
            logs.append(math.log(head / base))
        done += batch
        if plan.may_continue(done, 0.0):
            plan.checked(done, 0.01)
    return math.exp(sum(logs) / len(logs))


def test_a_penalty_after_each_pause_is_no_side_bias() -> None:
    ratio = _simulated_ratio(RoundPlan(10, _rule()), penalty=0.10)
    # One unpaired pause at most: 10% spread over the rounds, against the old order's
    # every-pause-hits-the-base bias (that would be about 10% x checks / rounds below 1).
    assert abs(ratio - 1) < 0.10 / 100


def test_the_worker_keeps_the_device_busy_during_every_check(monkeypatch: pytest.MonkeyPatch) -> None:
    from pathlib import Path

    from kbench_ci.measure.child import run_case
    from kbench_ci.measure.timing import HostTimer
    from kbench_ci.results.model import MeasureSettings
    from kbench_ci.wire.protocol import CaseJob, SideSpec

    busy: list[float] = []
    checks: list[int] = []
    monkeypatch.setattr(HostTimer, "keep_busy", lambda self, seconds: busy.append(seconds))
    original = RoundPlan.checked

    def checked(self: RoundPlan, done: int, seconds: float) -> None:
        checks.append(done)
        original(self, done, seconds)

    monkeypatch.setattr(RoundPlan, "checked", checked)
    # The early stop (a verdict out of reach, tested in test_adaptive_rounds) would end this
    # undecidable case at its first projection: here only the budget and the cap end it.
    monkeypatch.setattr("kbench_ci.measure.stopping.reach", lambda *args: None)
    fixtures = Path(__file__).parents[2] / "fixtures" / "cheats_py"
    sides = tuple(
        SideSpec(label=label, solution=str(fixtures / "honest.py"), ref=str(fixtures / "ref.py"), implementation="pytorch")
        for label in ("base", "head")
    )
    settings = MeasureSettings(device="cpu", seed=42, correctness_trials=1, timing_method="host_time", num_warmup=1,
                               trials_per_round=3, discard_first=0, rounds=4, flush_l2=False)
    # Undecidable: a band of +-1e-9 is never `unchanged` and alpha 1e-12 is never `slower`.
    rule = StoppingRule(threshold=1e-9, budget_s=60.0, max_rounds=20, batch_rounds=2, batch_growth=0.25,
                        check_bootstrap=100, confidence=0.95, alpha=1e-12)
    run_case(CaseJob(case_id="k[N=256]", dims={"N": 256}, sides=sides, baselines=(), settings=settings, stopping=rule),
             lambda event: None)
    assert checks == [4, 6, 8, 10, 12, 14, 16]  # then 25% of 16 rounds: 4 more reach the cap of 20
    assert len(busy) == len(checks)
    assert busy[0] == schedule.FIRST_CHECK_GUESS_S and all(seconds > 0 for seconds in busy)


def test_every_variant_is_fully_warmed_before_round_0_in_the_reverse_of_its_order_and_the_hold_is_sized_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Round 0 then looks like every later round: its first side follows its own calls."""
    from pathlib import Path

    from kbench_ci.measure.child import run_case
    from kbench_ci.measure.timing import HostTimer
    from kbench_ci.results.model import MeasureSettings
    from kbench_ci.wire.protocol import Begin, CaseJob, Progress, SideSpec, WorkerEvent

    log: list[tuple[str, ...]] = []
    original = HostTimer.warm_up

    def warm_up(self: HostTimer, fn: object, count: int, *, resize_hold: bool = True) -> None:
        log.append(("warm_up", str(count)) if resize_hold else ("warm_up", str(count), "same hold"))
        original(self, fn, count, resize_hold=resize_hold)  # type: ignore[arg-type]

    def emit(event: WorkerEvent) -> None:
        if isinstance(event, Begin) and event.phase == "timing":
            log.append(("begin", event.variant))
        elif isinstance(event, Progress) and event.phase == "timing":
            log.append(("round", event.variant, str(event.done)))

    monkeypatch.setattr(HostTimer, "warm_up", warm_up)
    fixtures = Path(__file__).parents[2] / "fixtures" / "cheats_py"
    sides = tuple(
        SideSpec(label=label, solution=str(fixtures / "honest.py"), ref=str(fixtures / "ref.py"), implementation="pytorch")
        for label in ("base", "head")
    )
    settings = MeasureSettings(device="cpu", seed=42, correctness_trials=1, timing_method="host_time", num_warmup=7,
                               trials_per_round=3, discard_first=0, rounds=2, flush_l2=False)
    run_case(CaseJob(case_id="k[N=256]", dims={"N": 256}, sides=sides, baselines=(), settings=settings), emit)
    # (each variant's timed inputs are prepared first: a Begin each)
    assert log[:2] == [("begin", "base"), ("begin", "head")]
    assert log[2:12] == [
        ("begin", "head"), ("warm_up", "7"), ("begin", "base"), ("warm_up", "7"),
        ("begin", "base"), ("round", "base", "0"), ("warm_up", "3", "same hold"),
        ("begin", "head"), ("round", "head", "0"), ("warm_up", "3", "same hold"),
    ]  # the re-warm-ups keep the case's one hold: the event-to-kernel gap grows with it


def test_rounds_stop_only_on_a_verdict_the_report_will_also_reach() -> None:
    """Real A/A rounds from an H200 whose interval sits on the band's edge: 500 bootstrap
    replicates call it `unchanged`, the report's 2000 `inconclusive`. Stopping there would report
    `inconclusive` with budget left, so the check must not count it as decided."""
    import json
    from pathlib import Path

    from kbench_ci.measure.stopping import VerdictWatch
    from kbench_ci.stats import Verdict, classify, compare_rounds

    data = json.loads((Path(__file__).parents[2] / "fixtures" / "stats" / "borderline_aa_rounds.json").read_text())
    base, head = data["base_rounds_ms"], data["head_rounds_ms"]
    rule = _rule()
    assert classify(compare_rounds(base, head, n_bootstrap=rule.check_bootstrap), rule.threshold) is Verdict.UNCHANGED
    assert classify(compare_rounds(base, head), rule.threshold) is Verdict.INCONCLUSIVE
    # (elapsed 0: no projection, so nothing but the verdict can stop the rounds)
    assert VerdictWatch(rule).look([base, head], len(base), 0.0).stop is False
