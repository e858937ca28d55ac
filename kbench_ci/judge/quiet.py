"""Is the GPU free of the last side's work when the turn changes?

A side's worker is stopped (``SIGSTOP``) when its turn ends, but GPU work its context already
enqueued runs on: a long kernel launched after its last call would share the GPU with the next
side's calls (without MPS the GPU time-slices between contexts) and lengthen the next side's
own times: a head slowing the base without touching it. So before the next side's turn the
judge, every side's worker stopped, launches a one-thread kernel of its own and times it from
the host until it has run: tens of microseconds on a GPU no other context keeps busy, and up
to a time slice more while one does. It waits until :data:`QUIET_RUN` such probes in a row are
quick, at most :data:`QUIET_TIMEOUT_S`; a GPU still busy then makes the case not comparable
(:func:`kbench_ci.judge.trials.settle_gpu`: busy work cannot be told from another process's).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

#: a probe slower than this (us, launch to synchronised) found the GPU busy
QUIET_LIMIT_US = 200.0
#: this many quick probes in a row: quiet
QUIET_RUN = 3
#: seconds the judge waits for a busy GPU to go quiet before the case is not comparable
QUIET_TIMEOUT_S = 3.0


@dataclass(frozen=True, slots=True)
class Quiet:
    """What the probes found: quiet or not, how long the judge waited, the slowest probe."""

    quiet: bool
    waited_s: float
    slowest_us: float
    probes: int


def wait_quiet(
    probe: Callable[[], float], *, limit_us: float = QUIET_LIMIT_US, run: int = QUIET_RUN,
    timeout_s: float | None = None, clock: Callable[[], float] = time.monotonic,
) -> Quiet:
    """Probe (``probe`` returns one probe's host time in us) until ``run`` in a row take at most
    ``limit_us``, or ``timeout_s`` (default :data:`QUIET_TIMEOUT_S`) has passed."""
    timeout_s = QUIET_TIMEOUT_S if timeout_s is None else timeout_s
    began = clock()
    streak, slowest, probes = 0, 0.0, 0
    while True:
        latency_us = probe()
        probes += 1
        slowest = max(slowest, latency_us)
        streak = streak + 1 if latency_us <= limit_us else 0
        waited = clock() - began
        if streak >= run:
            return Quiet(True, waited, slowest, probes)
        if waited >= timeout_s:
            return Quiet(False, waited, slowest, probes)
