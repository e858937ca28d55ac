"""Where a case's time went, read from the worker's phase events: the CUPTI audit's share is its
own phase (at most 10% of a case), and what follows it is not counted as audit time."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from kbench_ci.gate import worker_call
from kbench_ci.measure.parent import WorkerOutcome
from kbench_ci.results.model import CaseResult, MeasureSettings
from kbench_ci.wire.protocol import Begin, CaseFinished, CaseJob, SideSpec, WorkerEvent


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _job() -> CaseJob:
    side = SideSpec(label="base", solution=str(Path("k.py")), ref=str(Path("ref.py")), implementation="pytorch")
    settings = MeasureSettings(device="cpu", seed=42, correctness_trials=1, timing_method="host_time", num_warmup=1,
                               trials_per_round=3, discard_first=0, rounds=2, flush_l2=False)
    return CaseJob(case_id="k", dims={}, sides=(side,), baselines=(), settings=settings)

def test_audit_time_is_its_own_bucket_and_ends_at_the_next_phase(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = FakeClock()
    monkeypatch.setattr(worker_call.time, "monotonic", clock)
    # phase the worker enters, then seconds spent in it
    script = [("compile", 2.0), ("correctness", 3.0), ("timing", 10.0), ("audit", 0.25), ("timing", 1.5)]

    def worker(job: CaseJob, *, timeout_s: float, on_event: Callable[[WorkerEvent], None]) -> tuple[CaseResult, WorkerOutcome]:
        clock.now += 4.0  # start-up, before any event: load
        for phase, seconds in script:
            on_event(Begin("base", phase, at=clock.now))  # type: ignore[arg-type]
            clock.now += seconds
        return CaseResult(case_id=job.case_id, dims={}, seed=42, variants=(), timing_method="cuda_event"), WorkerOutcome()

    job = _job()
    run = worker_call.run_worker(job, timeout_s=60, worker=worker)
    phases = run.phases
    assert (phases.load_s, phases.correctness_s, phases.timing_s, phases.audit_s) == pytest.approx((6.0, 3.0, 11.5, 0.25))
    assert phases.total_s == pytest.approx(20.75)
    assert phases.as_json()["audit"] == pytest.approx(0.25)


def test_phases_are_timed_by_the_workers_timestamps_not_by_when_the_parent_reads_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The parent reads the events file every 50 ms: a 20 ms audit timed on arrival read as 0 or
    50 ms (H200, 90 A/A case-runs). Here every event arrives 0.05 s late, in bursts, and the case
    ends at the worker's CaseFinished, however late the parent notices it."""
    clock = FakeClock()
    monkeypatch.setattr(worker_call.time, "monotonic", clock)
    script = [("correctness", 0.1), ("timing", 0.2), ("audit", 0.02), ("timing", 0.03)]

    def worker(job: CaseJob, *, timeout_s: float, on_event: Callable[[WorkerEvent], None]) -> tuple[CaseResult, WorkerOutcome]:
        written: list[WorkerEvent] = []
        at = clock.now + 1.0  # load
        for phase, seconds in script:
            written.append(Begin("base", phase, at=at))  # type: ignore[arg-type]
            at += seconds
        written.append(CaseFinished(at=at))
        clock.now = at + 0.05  # the poll that reads them all
        for event in written:
            on_event(event)
        clock.now += 0.3  # the parent's own work after the case
        return CaseResult(case_id=job.case_id, dims={}, seed=42, variants=(), timing_method="cuda_event"), WorkerOutcome()

    job = _job()
    phases = worker_call.run_worker(job, timeout_s=60, worker=worker).phases
    assert (phases.load_s, phases.correctness_s, phases.timing_s, phases.audit_s) == pytest.approx((1.0, 0.1, 0.23, 0.02))


def test_a_stale_case_finished_does_not_end_a_later_phase(monkeypatch: pytest.MonkeyPatch) -> None:
    """A CaseFinished from before the last Begin (a worker that timed out, whose late event the
    retry's stream still carries) must not make the retry's last phase zero."""
    clock = FakeClock()
    monkeypatch.setattr(worker_call.time, "monotonic", clock)

    def worker(job: CaseJob, *, timeout_s: float, on_event: Callable[[WorkerEvent], None]) -> tuple[CaseResult, WorkerOutcome]:
        on_event(Begin("base", "timing", at=clock.now + 1.0))  # type: ignore[arg-type]
        on_event(CaseFinished(at=clock.now + 0.5))
        on_event(Begin("base", "audit", at=clock.now + 2.0))  # type: ignore[arg-type]
        clock.now += 2.75  # then the worker died: no CaseFinished of its own
        return CaseResult(case_id=job.case_id, dims={}, seed=42, variants=(), timing_method="cuda_event"), WorkerOutcome()

    job = _job()
    phases = worker_call.run_worker(job, timeout_s=60, worker=worker).phases
    assert (phases.load_s, phases.timing_s, phases.audit_s) == pytest.approx((1.0, 1.0, 0.75))
