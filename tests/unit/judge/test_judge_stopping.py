"""The judge's rounds stop as the in-process engine's do (measure/stopping.py, one rule for both):
at a decided verdict, or once two looks in a row find the threshold out of reach, with a note on
the head saying what the case can resolve; the budget's end says the same. The sides' calls are
faked here (the handoffs, the turns and the versions are other tests'): each round appends its
samples as a handed-over round would."""

from __future__ import annotations

import random
from types import SimpleNamespace
from typing import Any

import pytest
import torch

from kbench_ci.judge import trials
from kbench_ci.judge.state import Side
from kbench_ci.results.model import MeasureSettings, VariantResult
from kbench_ci.wire.protocol import StoppingRule


def _side(label: str) -> Side:
    worker = SimpleNamespace(alive=lambda: True, paused=True, pause=lambda: None)
    side = Side(label, "solution", worker, VariantResult(label=label, kind="pytorch", role="solution", status="ok"))  # type: ignore[arg-type]
    side.arenas = [SimpleNamespace()]  # type: ignore[list-item]
    return side


def _job(rule: StoppingRule) -> Any:
    settings = MeasureSettings(device="cpu", seed=0, correctness_trials=1, timing_method="host_time", num_warmup=1,
                               trials_per_round=5, discard_first=0, rounds=4, flush_l2=False)
    return SimpleNamespace(settings=settings, stopping=rule)


def _rule(threshold: float, budget_s: float) -> StoppingRule:
    return StoppingRule(threshold=threshold, budget_s=budget_s, max_rounds=400, batch_rounds=2, batch_growth=0.25,
                        check_bootstrap=200, confidence=0.95, alpha=0.05)


def _run(monkeypatch: pytest.MonkeyPatch, rule: StoppingRule, spread: float) -> list[Side]:
    """Both sides' calls around 1 ms, each scattered by ``spread`` (a fraction)."""
    noise = random.Random(7)

    def one_round(side: Side, *args: Any) -> bool:
        side.rounds.append(tuple(1.0 + noise.gauss(0, spread) for _ in range(5)))
        return True

    monkeypatch.setattr(trials, "_one_round", one_round)
    monkeypatch.setattr(trials, "_warm_up", lambda *args: None)
    monkeypatch.setattr(trials, "turn", lambda *args: None)
    monkeypatch.setattr(trials, "make_version", lambda *args, **kwargs: None)
    sides = [_side("base"), _side("head")]
    trials.time_in_rounds(list(sides), sides, [SimpleNamespace()], _job(rule), None, None, None,  # type: ignore[arg-type]
                          torch.device("cpu"), SimpleNamespace(clock=None), lambda event: None)  # type: ignore[arg-type]
    return sides


def test_a_judged_verdict_out_of_reach_stops_early_and_says_what_the_case_can_resolve(monkeypatch: pytest.MonkeyPatch) -> None:
    # 20% noise cannot resolve 1% in any rounds a 60 s budget buys at this pace: the projection
    # says so at once, and the second look in a row stops the rounds
    base, head = _run(monkeypatch, _rule(threshold=0.01, budget_s=60.0), spread=0.2)
    assert len(base.rounds) == len(head.rounds) < 400
    (note,) = head.result.notes
    assert note.startswith(f"stopped after {len(head.rounds)} rounds, undecided: the time budget allows about"), note
    assert "not the 1.0% threshold" in note and base.result.notes == ()


def test_a_judged_verdict_decided_at_the_minimum_stops_there(monkeypatch: pytest.MonkeyPatch) -> None:
    base, head = _run(monkeypatch, _rule(threshold=10.0, budget_s=60.0), spread=0.01)
    assert len(base.rounds) == len(head.rounds) == 4
    assert head.result.notes == ()


def test_a_judged_case_the_budget_ends_undecided_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    # no budget past the minimum rounds: the budget, not a look, ends them
    base, head = _run(monkeypatch, _rule(threshold=0.01, budget_s=1e-9), spread=0.2)
    assert len(head.rounds) == 4
    (note,) = head.result.notes
    assert note.startswith("stopped after 4 rounds at the time budget, undecided"), note
