"""Adaptive rounds: rounds past the minimum until the verdict is decided, the
timing budget is spent, or the round cap is reached; whole batches, so A B / B A stays balanced."""

from __future__ import annotations

import time
from pathlib import Path
from random import Random

import pytest

from kbench_ci.measure import stopping
from kbench_ci.measure.child import run_case
from kbench_ci.results.model import MeasureSettings, VariantResult
from kbench_ci.stats import Reach, compare_rounds, decision_reach
from kbench_ci.wire.protocol import CaseJob, SideSpec, StoppingRule, VariantDone, WorkerEvent

FIXTURES = Path(__file__).parents[2] / "fixtures" / "cheats_py"
MIN_ROUNDS = 4


def _job(stopping: StoppingRule | None) -> CaseJob:
    sides = tuple(
        SideSpec(label=label, solution=str(FIXTURES / "honest.py"), ref=str(FIXTURES / "ref.py"), implementation="pytorch")
        for label in ("base", "head")
    )
    settings = MeasureSettings(device="cpu", seed=42, correctness_trials=1, timing_method="host_time", num_warmup=1,
                               trials_per_round=3, discard_first=0, rounds=MIN_ROUNDS, flush_l2=False)
    return CaseJob(case_id="k[N=256]", dims={"N": 256}, sides=sides, baselines=(), settings=settings, stopping=stopping)


def _rule(*, threshold: float, budget_s: float = 60.0, max_rounds: int = 400, alpha: float = 0.05) -> StoppingRule:
    return StoppingRule(threshold=threshold, budget_s=budget_s, max_rounds=max_rounds, batch_rounds=2,
                        batch_growth=0.25, check_bootstrap=200,
                        confidence=0.95, alpha=alpha)


def _undecidable(**limits: float) -> StoppingRule:
    """A band of +-1e-9 is never `unchanged` on a real clock, and with alpha 1e-300 no p-value from
    at most 400 rounds is small enough for `slower` or `faster`: only a limit ends it. (Not 1e-12:
    head and base of the same CPU kernel can differ by 1% on this host, and once the checks got
    cheaper 242 rounds reached p = 8e-13.)"""
    return _rule(threshold=1e-9, alpha=1e-300, **limits)  # type: ignore[arg-type]


def _rounds(job: CaseJob) -> dict[str, int]:
    events: list[WorkerEvent] = []
    run_case(job, events.append)
    results: list[VariantResult] = [e.result for e in events if isinstance(e, VariantDone)]
    assert [r.status for r in results] == ["ok", "ok"], [r.message for r in results]
    return {r.label: len(r.rounds_ms) for r in results}


def test_without_a_rule_exactly_the_minimum_rounds_are_timed() -> None:
    assert _rounds(_job(None)) == {"base": MIN_ROUNDS, "head": MIN_ROUNDS}


def test_a_verdict_decided_at_the_minimum_stops_there() -> None:
    # A band of x0.09 .. x11: any two timings of the same kernel are `unchanged` at once.
    assert _rounds(_job(_rule(threshold=10.0))) == {"base": MIN_ROUNDS, "head": MIN_ROUNDS}


def test_an_undecidable_verdict_stops_at_the_round_cap_in_whole_batches() -> None:
    # 6 rounds: below stats.MIN_ROUNDS_TO_PROJECT, so only the cap can end it
    assert _rounds(_job(_undecidable(max_rounds=6))) == {"base": 6, "head": 6}


def test_a_verdict_out_of_reach_stops_early_and_says_what_the_case_can_resolve() -> None:
    """8 rounds of samples scattered by 5% cannot resolve 1% in
    the 16 rounds the budget still buys; the rounds stop and the head says what it can resolve.
    With 400 rounds affordable they go on."""
    random = Random(3)
    base = [tuple(1.0 + random.gauss(0, 0.05) for _ in range(5)) for _ in range(8)]
    head = [tuple(1.0 + random.gauss(0, 0.05) for _ in range(5)) for _ in range(8)]
    rule = _rule(threshold=0.01, budget_s=2.0)
    quick = compare_rounds(base, head, n_bootstrap=rule.check_bootstrap)  # what a check computes
    reach = stopping.reach(rule, quick, done=8, elapsed_s=1.0)
    assert reach is not None and reach.out_of_reach
    watch = stopping.VerdictWatch(rule)
    assert watch.look([base, head], 8, 1.0) == stopping.Look(stop=False)  # one look alone stops nothing
    look = watch.look([base, head], 8, 1.0)
    assert look.stop and look.note is not None
    note = look.note
    assert note.startswith("stopped after 8 rounds, undecided: the time budget allows about 16 rounds")
    assert "not the 1.0% threshold" in note
    # The figure it states comes from the report's interval, not from the check's (here made far
    # off, so the two cannot print alike) ...
    reported = decision_reach(compare_rounds(base, head), 0.01, 16)
    assert reported is not None and f"can resolve ±{reported.resolvable:.1%}," in note
    far_off = Reach(rounds_possible=16, resolvable=0.5, out_of_reach=True)
    assert f"can resolve ±{reported.resolvable:.1%}," in stopping.early_stop_note(base, head, rule, 8, far_off)
    # ... unless the report's would fall within the threshold: the note would contradict itself.
    wide = _rule(threshold=reported.resolvable + 0.005, budget_s=2.0)
    assert "can resolve ±50.0%," in stopping.early_stop_note(base, head, wide, 8, far_off)
    going = stopping.reach(_rule(threshold=0.01, budget_s=50.0), quick, done=8, elapsed_s=1.0)
    assert going is not None and not going.out_of_reach
    assert not stopping.VerdictWatch(_rule(threshold=0.01, budget_s=50.0)).look([base, head], 8, 1.0).stop
    # one side failed while timing: nothing left to compare, the rounds stop without a note
    assert stopping.VerdictWatch(rule).look([base], 8, 1.0) == stopping.Look(stop=True)
    assert stopping.undecided_note([base], rule, 8) is None


def test_an_undecidable_verdict_stops_when_the_budget_is_spent() -> None:
    started = time.perf_counter()
    counts = _rounds(_job(_undecidable(budget_s=0.5)))
    elapsed = time.perf_counter() - started
    assert counts["base"] == counts["head"] > MIN_ROUNDS
    assert (counts["base"] - MIN_ROUNDS) % 2 == 0  # whole batches only
    # The budget bounds the timing (start-up and correctness come on top of it).
    assert elapsed < 30


def test_the_stopping_rule_travels_in_the_job_json() -> None:
    job = _job(_rule(threshold=0.01, budget_s=7.5, max_rounds=123))
    assert CaseJob.from_json(job.to_json()) == job
    assert CaseJob.from_json(_job(None).to_json()).stopping is None


@pytest.mark.parametrize("value", [-1, "ten", True])
def test_time_budget_in_the_config_must_be_zero_or_positive_seconds(tmp_path: Path, value: object) -> None:
    from kbench_ci.errors import ConfigError
    from kbench_ci.suite.loader import load_suite

    text = f'[defaults]\ntime_budget = {value if not isinstance(value, str) else repr(value).replace(chr(39), chr(34))}\n'
    text = text.replace("True", "true")
    text += '[[kernels]]\nname = "k"\nsolution = "k.py"\nref = "ref.py"\nshapes = [{N = 8}]\n'
    path = tmp_path / "kbench.toml"
    path.write_text(text)
    with pytest.raises(ConfigError) as info:
        load_suite(path, check_files=False)
    assert "time_budget" in info.value.message


def test_time_budget_zero_and_positive_load(tmp_path: Path) -> None:
    from kbench_ci.suite.loader import load_suite

    for value, expected in (("0", 0.0), ("2.5", 2.5)):
        path = tmp_path / "kbench.toml"
        path.write_text(f'[defaults]\ntime_budget = {value}\n[[kernels]]\nname = "k"\nsolution = "k.py"\nref = "ref.py"\nshapes = [{{N = 8}}]\n')
        assert load_suite(path, check_files=False).settings.time_budget_s == expected


def test_the_rounds_stop_only_after_two_checks_in_a_row_find_no_verdict_in_reach(monkeypatch: pytest.MonkeyPatch) -> None:
    """One check out of reach, then one within, then two out: the stop comes at the fourth check."""
    answers = iter([True, False, True, True])
    monkeypatch.setattr(stopping, "reach", lambda *args: Reach(rounds_possible=400, resolvable=0.05,
                                                                out_of_reach=next(answers)))
    # checks at 4, 6, 8, 10 rounds (batches of 2): the second strike in a row is the check at 10
    assert _rounds(_job(_undecidable(max_rounds=400))) == {"base": 10, "head": 10}


def test_a_case_the_budget_ends_undecided_says_what_it_can_resolve() -> None:
    """The 6 us vector add on the H200 ran out of time budget undecided (206 of
    400 rounds) without a word on what it could resolve; now the limit that ended it says so."""
    job = _job(_undecidable(budget_s=0.5))
    events: list[WorkerEvent] = []
    run_case(job, events.append)
    results = {e.result.label: e.result for e in events if isinstance(e, VariantDone)}
    notes = [note for note in results["head"].notes if note.startswith("stopped after")]
    # Which limit comes first depends on this machine's speed (400 rounds of a CPU kernel can
    # take less than the budget; on a busy machine the projection of the rounds the budget
    # allows can end them early): the note must name the one that did.
    done = len(results["head"].rounds_ms)
    limit = "the round cap" if done >= 400 else "the time budget"
    early = f"stopped after {done} rounds, undecided: the time budget allows about"
    assert len(notes) == 1 and "can resolve ±" in notes[0], notes
    assert f"stopped after {done} rounds at {limit}, undecided" in notes[0] or notes[0].startswith(early), notes
    assert not any(note.startswith("stopped after") for note in results["base"].notes)
    decided = _job(_rule(threshold=10.0, budget_s=0.5))
    events = []
    run_case(decided, events.append)
    assert not any(n.startswith("stopped after") for e in events if isinstance(e, VariantDone) for n in e.result.notes)
