"""Whose time a case's timeout counts, and when the judge (or a worker's start) is out of time.

The in-process worker runs the pull request's code from its first instruction, so every second
of a case there counts against the case's timeout. Under ``--isolation judge`` the parent watches
the judge, which runs no pull-request code and spends time of its own (starting the side workers,
importing torch) before any side has the turn. Counting that against the sides' timeout made the
blame a race on a busy machine: the judge's start and a hanging head's turn used one deadline, and
whichever ran into it decided who was blamed ("the judge ... timed out after 8 s" where an idle
machine said "head timed out after 8 s").

So there are two clocks. Time in which a side has the turn (its load, checks or rounds, the
parent's cursor names it) counts against the case's timeout, and a timeout there blames whoever
has the turn, as before. Time in which no side has the turn counts against the process's own
allowance, which is larger than the case's timeout by the time a worker may take to start: the
judge is blamed only for its own time, and never before the case's timeout has passed on the wall
clock. The in-process worker runs a kernel's code in itself, so there only its start (no side has
had the turn yet: it still imports torch) is its own; from the first turn on every second is the
case's, as before (the same busy machine read "worker timed out after 6 s" for a hanging ref.py
whose worker had not started yet).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = ["WORKER_START_TIMEOUT_S", "CaseClock", "Expired", "own_allowance_s"]

#: seconds a side's worker may take to start (import torch, make its CUDA context) before the
#: judge gives up on it; the judge's own allowance in a case adds it to the case's timeout
WORKER_START_TIMEOUT_S = 300.0

#: "sides": the turns ran past the case's timeout; "own": the judge's (or a starting worker's)
#: own time ran past its allowance
Expired = Literal["sides", "own"]


def own_allowance_s(case_timeout_s: float) -> float:
    """The time of its own (no side has the turn) a process may take in a case: strictly more than
    the case's timeout, by the time a worker may take to start."""
    return case_timeout_s + WORKER_START_TIMEOUT_S


@dataclass(slots=True)
class CaseClock:
    """The time a case has taken, charged to the sides or to the watched process itself.

    ``judged``: the process is the judge, whose time between turns is its own too; otherwise (the
    in-process worker) only the time before the first turn is. :meth:`advance` charges the time
    since its last call to whoever had the turn during it."""

    timeout_s: float
    started: float
    judged: bool = False
    sides_s: float = 0.0
    own_s: float = 0.0
    _last: float | None = None
    _turned: bool = False

    @property
    def own_allowance_s(self) -> float:
        return own_allowance_s(self.timeout_s)

    def advance(self, now: float, *, side_has_turn: bool) -> None:
        last = self.started if self._last is None else self._last
        elapsed = max(0.0, now - last)
        self._last = now
        self._turned = self._turned or side_has_turn
        if side_has_turn or (self._turned and not self.judged):
            self.sides_s += elapsed
        else:
            self.own_s += elapsed

    def expired(self) -> Expired | None:
        """``"sides"``: the turns took more than the case's timeout (whoever has the turn is
        blamed); ``"own"``: the process's own time ran past its allowance; None: neither."""
        if self.sides_s > self.timeout_s:
            return "sides"
        if self.own_s > self.own_allowance_s:
            return "own"
        return None
