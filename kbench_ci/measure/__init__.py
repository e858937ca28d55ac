"""Both sides of the worker boundary: the parent keeps a warm worker for a suite's cases
(``parent``), the worker loads, checks and times case after case (``child``), and they speak
only ``protocol``'s typed jobs and events. Only ``parent`` and ``protocol`` are imported here:
the child side imports torch."""

from kbench_ci.measure.parent import WorkerOutcome, WorkerPool, run_case_in_worker
from kbench_ci.measure.protocol import CaseJob, SideSpec, WorkerEvent

__all__ = ["CaseJob", "SideSpec", "WorkerEvent", "WorkerOutcome", "WorkerPool", "run_case_in_worker"]
