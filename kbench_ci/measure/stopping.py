"""The looks at a compare's verdict between rounds, and when they stop the rounds: pure, no device,
the same for both engines (the in-process worker's :mod:`.rounds` and the judge's
:mod:`kbench_ci.judge.trials`).

A look first asks the check's cheap interval (``rule.check_bootstrap`` replicates); a verdict
decided there is confirmed with the interval the report will compute (stats' default
replicates), or a borderline interval would stop the rounds and then be reported
`inconclusive` (5 of 8 such verdicts in 10 A/A runs on an H200). Undecided, the look projects
where the comparison can get in the rounds the time budget still buys (stats.decision_reach):
:data:`OUT_OF_REACH_CHECKS` looks in a row that find the threshold out of reach stop the rounds,
and the head's note says what the case can resolve at its noise. Noise made on purpose in the
first rounds, or a warm-up that spills into them, must not end the comparison at its first
projection.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from kbench_ci.measure.schedule import affordable_rounds
from kbench_ci.stats import RatioEstimate, Reach, Verdict, classify, compare_rounds, decision_reach
from kbench_ci.wire.protocol import StoppingRule

__all__ = ["OUT_OF_REACH_CHECKS", "Look", "VerdictWatch", "early_stop_note", "reach", "undecided_note"]

#: looks in a row that must find the verdict out of reach before the rounds stop early
OUT_OF_REACH_CHECKS = 2

Rounds = Sequence[Sequence[float]]


@dataclass(frozen=True, slots=True)
class Look:
    """What one look at the verdict between rounds found."""

    #: the rounds stop here: the verdict is decided, or out of reach (``note`` then says so)
    stop: bool
    #: the line for the head's notes where the rounds stop undecided
    note: str | None = None


class VerdictWatch:
    """The looks of one case's rounds under ``rule``: it counts the looks in a row that found the
    verdict out of reach."""

    def __init__(self, rule: StoppingRule) -> None:
        self.rule = rule
        self._strikes = 0

    def look(self, rounds: Sequence[Rounds], done: int, elapsed_s: float) -> Look:
        """After ``done`` rounds of each side, ``elapsed_s`` seconds of timing (checks included).
        ``rounds``: each solution's rounds still timed, base first; fewer than two (one failed
        while timing) leave nothing to compare, and the rounds stop."""
        if len(rounds) != 2:
            return Look(stop=True)
        base, head = rounds
        rule = self.rule
        quick = compare_rounds(base, head, confidence=rule.confidence, n_bootstrap=rule.check_bootstrap)
        if classify(quick, rule.threshold, alpha=rule.alpha) is not Verdict.INCONCLUSIVE:
            final = compare_rounds(base, head, confidence=rule.confidence)
            if classify(final, rule.threshold, alpha=rule.alpha) is not Verdict.INCONCLUSIVE:
                return Look(stop=True)
        projected = reach(rule, quick, done, elapsed_s)
        if projected is None or not projected.out_of_reach:
            self._strikes = 0
            return Look(stop=False)
        self._strikes += 1
        if self._strikes < OUT_OF_REACH_CHECKS:
            return Look(stop=False)
        return Look(stop=True, note=early_stop_note(base, head, rule, done, projected))


def reach(rule: StoppingRule, quick: RatioEstimate, done: int, elapsed_s: float) -> Reach | None:
    """Where the head/base comparison can get in the rounds the budget still buys, projected from
    the check's cheap interval. Not from the report's: a projection of the width to the rounds
    left is coarser than the few percent of width that 500 replicates give away, and at a 6 us
    case's ~200 rounds the report's 2000 replicates at every check were about a third of its
    timing phase (replayed on the kept samples of an H200 run)."""
    if done <= 0 or elapsed_s <= 0:
        return None
    possible = max(done, min(rule.max_rounds, done + int(affordable_rounds(rule, done, elapsed_s))))
    return decision_reach(quick, rule.threshold, possible)


def early_stop_note(base: Rounds, head: Rounds, rule: StoppingRule, done: int, projected: Reach) -> str:
    """What the case can resolve at its noise, for the head's notes: ``projected`` again from the
    interval the report will compute (stats' default replicates)."""
    estimate = compare_rounds(base, head, confidence=rule.confidence)
    reported = decision_reach(estimate, rule.threshold, projected.rounds_possible)
    # The report's interval may project a little narrower than the check's that stopped the
    # rounds; one at or under the threshold would make the note contradict itself.
    if reported is not None and reported.resolvable > rule.threshold:
        projected = reported
    return (f"stopped after {done} rounds, undecided: the time budget allows about {projected.rounds_possible} rounds, "
            f"where the interval would still be about ±{projected.resolvable:.1%}; at its noise this case can resolve "
            f"±{projected.resolvable:.1%}, not the {rule.threshold:.1%} threshold (raise the threshold or time_budget for it)")


def undecided_note(rounds: Sequence[Rounds], rule: StoppingRule, done: int) -> str | None:
    """The time budget or the round cap ended the rounds: where the verdict is still undecided,
    what this case resolves at its noise, as an early stop says. ``rounds`` as :meth:`VerdictWatch.look`
    takes them (None: decided, fewer than two solutions, or no rounds)."""
    if len(rounds) != 2 or not all(rounds):
        return None
    base, head = rounds
    estimate = compare_rounds(base, head, confidence=rule.confidence)
    if classify(estimate, rule.threshold, alpha=rule.alpha) is not Verdict.INCONCLUSIVE:
        return None
    projected = decision_reach(estimate, rule.threshold, done)
    limit = "the round cap" if done >= rule.max_rounds else "the time budget"
    resolves = (f"at its noise this case can resolve ±{projected.resolvable:.1%}, not the {rule.threshold:.1%} threshold"
                if projected is not None
                else f"too few rounds to say what change it can resolve at the {rule.threshold:.1%} threshold")
    return f"stopped after {done} rounds at {limit}, undecided: {resolves} (raise the threshold or time_budget for it)"
