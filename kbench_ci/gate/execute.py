"""The names ``run`` and ``compare`` shared when they lived in one module, kept importable from
here; each now lives in the module of its one job:

* :mod:`~kbench_ci.gate.jobs`: suite settings into worker jobs, which kernels a run takes;
* :mod:`~kbench_ci.gate.builds`: building a side's ``.cu`` outside the user's tree;
* :mod:`~kbench_ci.gate.lanes`: the warm workers (one per GPU) and the builder they share;
* :mod:`~kbench_ci.gate.distribute`: cases spread over the lanes' threads;
* :mod:`~kbench_ci.gate.worker_call`: one worker call, its time split by phase;
* :mod:`~kbench_ci.gate.progress`: what the CLI's progress line reads.

New code imports from those modules.
"""

from __future__ import annotations

from kbench_ci.gate.builds import (
    BUILD_TIMEOUT_S,
    BuildFn,
    BuildRequest,
    SideBuilder,
    SideBuildFailed,
    default_build,
)
from kbench_ci.gate.distribute import distribute
from kbench_ci.gate.jobs import (
    check_runnable,
    implementation_of,
    job_timeout_s,
    make_job,
    select_kernels,
)
from kbench_ci.gate.lanes import (
    Lane,
    SuiteExecution,
    lane_device,
    preload_modules,
    suite_execution,
    visible_device,
)
from kbench_ci.gate.progress import ProgressFn, SuiteProgress, worker_listener
from kbench_ci.gate.worker_call import EventCallback, WorkerFn, WorkerRun, run_worker

__all__ = [
    "BUILD_TIMEOUT_S",
    "BuildFn",
    "BuildRequest",
    "EventCallback",
    "Lane",
    "ProgressFn",
    "SideBuildFailed",
    "SideBuilder",
    "SuiteExecution",
    "SuiteProgress",
    "WorkerFn",
    "WorkerRun",
    "check_runnable",
    "default_build",
    "distribute",
    "implementation_of",
    "job_timeout_s",
    "lane_device",
    "make_job",
    "preload_modules",
    "run_worker",
    "select_kernels",
    "suite_execution",
    "visible_device",
    "worker_listener",
]
