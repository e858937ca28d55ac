"""One worker call that records where its time went (load, correctness, timing, audit) and what
it reported."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from kbench_ci.errors import EnvironmentProblem, ExitCode
from kbench_ci.measure.parent import WorkerOutcome, run_case_in_worker
from kbench_ci.results.model import CaseResult
from kbench_ci.results.outcome import PhaseTimes
from kbench_ci.wire.protocol import Begin, CaseFinished, CaseJob, LoadError, WorkerEvent

#: ``worker(job, timeout_s=..., on_event=...)``: a worker pool's ``run_case``, or a test's stand-in
WorkerFn = Callable[..., tuple[CaseResult, WorkerOutcome]]


@dataclass(frozen=True, slots=True)
class WorkerRun:
    """One worker call: its result, what it reported about the machine, and its phases."""

    result: CaseResult
    environment: Mapping[str, Any] | None
    #: load errors (a broken user-file contract, a missing package), in order
    load_errors: tuple[LoadError, ...]
    phases: PhaseTimes
    rounds: int
    #: the process id of each worker that served the call (one, unless a variant crashed or hung it)
    worker_pids: tuple[int, ...] = ()

    def user_error(self, label: str) -> str | None:
        """Why variant ``label`` failed, when the user's ref.py, setup() or settings are to blame
        and not its kernel (a ``user`` LoadError of exit code 2): one line, hint included."""
        for error in self.load_errors:
            if error.variant == label and error.blame == "user" and error.exit_code == int(ExitCode.USAGE):
                return error.one_line()
        return None

    def environment_error(self) -> EnvironmentProblem | None:
        """A load error the machine is to blame for (exit code 3), to abort the run with."""
        for error in self.load_errors:
            if error.exit_code == int(ExitCode.ENVIRONMENT):
                return EnvironmentProblem(error.message, hint=error.hint)
        return None


EventCallback = Callable[[WorkerEvent], None]


#: device -> event overhead (ms) calibrated by the first cuda_event worker of this process
_CALIBRATED_OVERHEAD_MS: dict[str, float] = {}


@dataclass(slots=True)
class _PhaseClock:
    """The phase a worker is in and since when, and when the worker last said the case had
    finished (seconds on the system-wide monotonic clock, the worker's events' own)."""

    bucket: str
    since: float
    finished: float | None = None


_PHASE_BUCKET = {"load": "load", "compile": "load", "correctness": "correctness", "timing": "timing", "audit": "audit"}


def run_worker(
    job: CaseJob,
    *,
    timeout_s: float,
    on_event: EventCallback | None = None,
    worker: WorkerFn = run_case_in_worker,
) -> WorkerRun:
    """Run ``job`` in a worker subprocess; time each phase from the worker's ``begin`` events."""
    buckets = {"load": 0.0, "correctness": 0.0, "timing": 0.0, "audit": 0.0}
    # Phases are timed by the worker's own timestamps (the system-wide monotonic clock), not
    # by when the parent's poll (every 10 ms) sees them.
    state = _PhaseClock("load", time.monotonic())
    load_errors: list[LoadError] = []

    def listen(event: WorkerEvent) -> None:
        if isinstance(event, Begin):
            bucket = _PHASE_BUCKET.get(event.phase, "load")
            buckets[state.bucket] += max(event.at - state.since, 0.0)
            state.bucket, state.since = bucket, max(event.at, state.since)
        elif isinstance(event, CaseFinished):
            state.finished = event.at
        elif isinstance(event, LoadError):
            load_errors.append(event)
        if on_event is not None:
            on_event(event)

    # The event-pair overhead is a property of the GPU and driver: calibrate it in the first
    # worker of the run and hand it to the rest.
    if job.settings.timing_method == "cuda_event" and job.event_overhead_ms is None and job.settings.device in _CALIBRATED_OVERHEAD_MS:
        job = replace(job, event_overhead_ms=_CALIBRATED_OVERHEAD_MS[job.settings.device])
    result, outcome = worker(job, timeout_s=timeout_s, on_event=listen)
    if outcome.load_error is not None and outcome.load_error not in load_errors:
        # the parent's own (a reference that hung or crashed the worker): no event carried it
        load_errors.append(outcome.load_error)
    if result is not None and result.event_overhead_ms is not None:
        _CALIBRATED_OVERHEAD_MS.setdefault(job.settings.device, result.event_overhead_ms)
    # The last phase ends at the worker's last CaseFinished, when it came after the last Begin (a
    # crashed or timed-out worker sends none, or a stale one).
    ended = state.finished if state.finished is not None and state.finished >= state.since else time.monotonic()
    buckets[state.bucket] += max(ended - state.since, 0.0)
    return WorkerRun(
        result=result,
        environment=outcome.environment,
        load_errors=tuple(load_errors),
        phases=PhaseTimes(0.0, buckets["load"], buckets["correctness"], buckets["timing"], buckets["audit"]),
        # the rounds actually timed: more than asked for when a stopping rule added some
        rounds=max((len(v.rounds_ms) for v in result.variants), default=0) or job.settings.rounds,
        worker_pids=tuple(outcome.worker_pids),
    )

