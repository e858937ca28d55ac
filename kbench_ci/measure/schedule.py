"""The order of timing rounds and when to look at the verdict: pure bookkeeping, no device.

Rounds alternate the sides (A B, B A, ...) so drift hits both alike. Adaptive rounds add one
more hazard: between batches the host computes the interim verdict (a 2000-replicate bootstrap
of 10 samples a round: 0.01 s at 10 rounds, 0.18 s at 200 on a 2-core host), and a GPU left
idle that long drops its clocks. On
an H200 the side timed first after such a pause read about 1% slower at a 5.8 us kernel; with
batches of two rounds that side was always the base, and 10 A/A runs read head/base 0.9972,
its 95% interval excluding 1. So the plan (1) looks at the verdict at geometrically spaced
points, so the pauses are few, (2) alternates which side goes first after each pause, so what
is left of the penalty is spread over both sides instead of always hitting the base, and (3)
says how long the next check is expected to take, so the timer can keep the GPU busy meanwhile.
"""

from __future__ import annotations

import math

from kbench_ci.wire.protocol import StoppingRule

#: the first interim check's expected length, before any has been measured (seconds)
FIRST_CHECK_GUESS_S = 0.05
#: the expected length of a check: the last one's, scaled by rounds, with this margin
CHECK_MARGIN = 1.25


class RoundPlan:
    """Rounds to time before each look at the verdict, and the side order of each round.

    ``min_rounds`` are always timed; past them only under a stopping rule, in even batches of at
    least ``rule.batch_rounds`` and about ``rule.batch_growth`` of the rounds done so far, capped
    by ``rule.max_rounds`` and by the rounds the rest of the budget buys at the pace so far.
    """

    def __init__(self, min_rounds: int, rule: StoppingRule | None) -> None:
        self.min_rounds = min_rounds
        self.rule = rule
        self.checks = 0
        self._last_check: tuple[int, float] | None = None  # (rounds then, seconds it took)

    def reversed_order(self, round_index: int) -> bool:
        """Is this round timed B A (the sides in reverse)? Odd rounds are, and every check flips
        it, so the first round after the k-th check starts with the other side than after the
        (k-1)-th."""
        return (round_index % 2 == 1) != (self.checks % 2 == 1)

    def next_batch(self, done: int, elapsed_s: float) -> int:
        """Rounds to time before the next check; 0: stop timing."""
        if done < self.min_rounds:
            return self.min_rounds - done
        if not self.may_continue(done, elapsed_s):
            return 0
        rule = self.rule
        assert rule is not None  # may_continue is False without a rule
        size = max(rule.batch_rounds, _even(done * rule.batch_growth))
        if done > 0 and elapsed_s > 0:
            # No batch that the budget cannot pay for at the pace so far (checks included).
            size = min(size, max(rule.batch_rounds, _even(affordable_rounds(rule, done, elapsed_s))))
        return min(size, rule.max_rounds - done)

    def may_continue(self, done: int, elapsed_s: float) -> bool:
        """Could more rounds follow ``done`` (a check is worth making)?"""
        rule = self.rule
        return rule is not None and done >= self.min_rounds and done < rule.max_rounds and elapsed_s < rule.budget_s

    def expected_check_s(self, done: int) -> float:
        """How long the check after ``done`` rounds will take: the bootstrap's cost grows with
        the rounds, so the last check's time is scaled by them."""
        if self._last_check is None:
            return FIRST_CHECK_GUESS_S
        rounds, seconds = self._last_check
        return CHECK_MARGIN * seconds * done / max(rounds, 1)

    def checked(self, done: int, seconds: float) -> None:
        """A check after ``done`` rounds took ``seconds`` and did not decide: timing goes on."""
        self.checks += 1
        self._last_check = (done, seconds)


def _even(rounds: float) -> int:
    """The even number of rounds nearest ``rounds`` from below (0 for anything under 2)."""
    whole = math.floor(rounds) if math.isfinite(rounds) else 0
    return max(whole - whole % 2, 0)


def affordable_rounds(rule: StoppingRule, done: int, elapsed_s: float) -> float:
    """Rounds the rest of the budget buys at the pace of the ``done`` rounds so far (checks
    included); ``done`` and ``elapsed_s`` positive."""
    return (rule.budget_s - elapsed_s) / (elapsed_s / done)
