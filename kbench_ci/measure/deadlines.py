"""Whose time a case's timeout counts, and when the judge itself is out of time.

The in-process worker runs the pull request's code from its first instruction, so every second
of a case there counts against the case's timeout. Under ``--isolation judge`` the parent watches
the judge, which runs no pull-request code and spends time of its own (starting the side workers,
importing torch) before any side has the turn. Counting that against the sides' timeout made the
blame a race on a busy machine: the judge's start and a hanging head's turn used one deadline, and
whichever ran into it decided who was blamed ("the judge ... timed out after 8 s" where an idle
machine said "head timed out after 8 s").

So there are two clocks. Time in which a side has the turn (its load, checks or rounds, the
parent's cursor names it) counts against the case's timeout, and a timeout there blames whoever
has the turn, as before. Time in which no side has the turn counts against the judge's own
allowance, which is larger than the case's timeout by the time its workers may take to start: the
judge is blamed only for its own time, and never before the case's timeout has passed on the wall
clock.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = ["WORKER_START_TIMEOUT_S", "CaseClock", "Expired", "judge_allowance_s"]

#: seconds a side's worker may take to start (import torch, make its CUDA context) before the
#: judge gives up on it; the judge's own allowance in a case adds it to the case's timeout
WORKER_START_TIMEOUT_S = 300.0

Expired = Literal["sides", "judge"]


def judge_allowance_s(case_timeout_s: float) -> float:
    """The judge's own time in a case (no side has the turn): strictly more than the case's
    timeout, by the time its workers may take to start."""
    return case_timeout_s + WORKER_START_TIMEOUT_S


@dataclass(slots=True)
class CaseClock:
    """The time a case has taken, charged to the sides or to the judge.

    ``judge_allowance_s`` None: one clock, everything is the sides' (the in-process worker).
    :meth:`advance` charges the time since its last call to whoever had the turn during it."""

    timeout_s: float
    started: float
    judge_allowance_s: float | None = None
    sides_s: float = 0.0
    judge_s: float = 0.0
    _last: float | None = None

    def advance(self, now: float, *, side_has_turn: bool) -> None:
        last = self.started if self._last is None else self._last
        elapsed = max(0.0, now - last)
        self._last = now
        if side_has_turn or self.judge_allowance_s is None:
            self.sides_s += elapsed
        else:
            self.judge_s += elapsed

    def expired(self) -> Expired | None:
        """``"sides"``: the turns took more than the case's timeout (whoever has the turn is
        blamed); ``"judge"``: the judge's own time ran past its allowance; None: neither."""
        if self.sides_s > self.timeout_s:
            return "sides"
        if self.judge_allowance_s is not None and self.judge_s > self.judge_allowance_s:
            return "judge"
        return None
