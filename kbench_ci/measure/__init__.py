"""Measuring: the parent keeps a warm worker for a suite's cases (``parent``), the in-process
worker loads, checks and times case after case (``child``), and the pieces the judge uses too
(timing, staging, correctness, inputs, the reference, CUPTI). Parent and worker speak only
:mod:`kbench_ci.wire.protocol`'s typed jobs and events. Only ``parent`` and the protocol are
imported here: the child side imports torch."""

from kbench_ci.measure.parent import WorkerOutcome, WorkerPool, run_case_in_worker
from kbench_ci.wire.protocol import CaseJob, SideSpec, WorkerEvent

__all__ = ["CaseJob", "SideSpec", "WorkerEvent", "WorkerOutcome", "WorkerPool", "run_case_in_worker"]
