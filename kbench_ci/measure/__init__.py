"""Both sides of the worker boundary: the parent spawns a worker per case (``parent``), the
worker loads, checks and times (``child``), and they speak only ``protocol``'s typed job and
events. Only ``parent`` and ``protocol`` are imported here: the child side imports torch."""

from kbench_ci.measure.parent import WorkerOutcome, run_case_in_worker
from kbench_ci.measure.protocol import CaseJob, SideSpec, WorkerEvent

__all__ = ["CaseJob", "SideSpec", "WorkerEvent", "WorkerOutcome", "run_case_in_worker"]
