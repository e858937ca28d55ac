"""The lanes of a suite run: one warm worker per GPU (or one for the whole run), each pinned to
its GPU, and the builder they share; set up and torn down together by :func:`suite_execution`."""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, replace

from kbench_ci.cuda import build as build_module
from kbench_ci.gate.builds import BuildFn, BuildRequest, SideBuilder
from kbench_ci.gate.worker_call import WorkerFn
from kbench_ci.measure.parent import WorkerPool
from kbench_ci.results.outcome import HEAD, GpuSlot
from kbench_ci.scratch import make_scratch, remove_stale, remove_tree
from kbench_ci.suite.settings import JUDGE_SIDES_ENV, Execution

_log = logging.getLogger(__name__)



@dataclass(frozen=True, slots=True)
class Lane:
    """One worker of a suite run and the cases it serves: the GPU it is pinned to (None: the one
    device of an ordinary run), the device its jobs name (``cuda:0`` for a pinned GPU: the worker
    sees only that one), and the call that runs a job in it."""

    gpu: GpuSlot | None
    device: str
    worker: WorkerFn
    pool: WorkerPool | None


@dataclass(slots=True)
class SuiteExecution:
    """What the cases of one suite run share: the builder (every build begun at once, cached
    across runs) and the workers: one lane (one warm process, replaced on a crash or hang), or
    one per ``--gpus`` entry."""

    builder: SideBuilder
    lanes: tuple[Lane, ...]

    @property
    def worker(self) -> WorkerFn:
        """The first lane's worker (the only one without ``--gpus``)."""
        return self.lanes[0].worker

    @property
    def pool(self) -> WorkerPool | None:
        return self.lanes[0].pool

    def start(self, builds: Sequence[BuildRequest]) -> None:
        """Begin every build, and start the warm workers meanwhile (torch imports while nvcc
        compiles), before the first case is measured."""
        self.builder.start(builds)
        for lane in self.lanes:
            if lane.pool is not None:
                lane.pool.start(lane.device)


#: the module each implementation kind's first case imports, heavy enough (Triton: ~0.5 s) to
#: import in the worker while the parent still sets up
_PRELOAD = {"triton": "triton", "cute-dsl": "cutlass"}


def preload_modules(kinds: Iterable[str], device: str = "cuda") -> tuple[str, ...]:
    """What a worker for a suite of these implementation kinds imports before its first case (on
    the CPU no CuTe DSL: those cases refuse it)."""
    wanted = {_PRELOAD[kind] for kind in kinds if kind in _PRELOAD}
    if not device.startswith("cuda"):
        wanted.discard("cutlass")
    return tuple(sorted(wanted))


def _gpu_index(device: str) -> int | None:
    """``cuda:1`` → 1; None for ``cuda`` or the CPU (builds then target the first GPU)."""
    kind, _, index = device.partition(":")
    return int(index) if kind == "cuda" and index.isdigit() else None


def visible_device(index: int, environ: Mapping[str, str] | None = None) -> str:
    """``CUDA_VISIBLE_DEVICES`` for a worker that is to see only the parent's GPU ``index``: the
    index itself, or the parent's own ``CUDA_VISIBLE_DEVICES`` entry at that place (a runner that
    hands this job GPUs 2,3 makes the parent's ``cuda:1`` the physical GPU 3)."""
    source = os.environ if environ is None else environ
    entries = [entry.strip() for entry in source.get("CUDA_VISIBLE_DEVICES", "").split(",") if entry.strip()]
    if entries and 0 <= index < len(entries):
        return entries[index]
    return str(index)


def lane_device(device: str, gpu: GpuSlot | None) -> str:
    """The device a lane's jobs name: a pinned GPU is the worker's ``cuda:0``."""
    return "cuda:0" if gpu is not None and device.startswith("cuda") else device


@contextmanager
def suite_execution(
    execution: Execution, *, device: str, gpus: Sequence[GpuSlot] = (), build_fn: BuildFn | None = None,
    worker: WorkerFn | None = None, kinds: Iterable[str] = (), sides: Sequence[str] = (),
) -> Iterator[SuiteExecution]:
    """The builder and worker pools of one suite run; on the way out (an error, Ctrl-C or SIGTERM
    included) the workers are stopped, compilers still running are killed and the staging
    folder is removed. ``gpus`` (two or more): one warm worker per entry, each pinned to its GPU
    with ``CUDA_VISIBLE_DEVICES``. ``kinds``: the suite's implementation kinds, whose heavy modules
    the workers import before the first case. ``worker`` (tests) stands in for every pool."""
    with ExitStack() as stack:
        # the first callback runs last (LIFO): once everything below is stopped and removed
        stack.callback(_log.debug, "workers stopped, compilers ended, staging folder removed")
        # Folders of earlier runs that were killed (SIGKILL runs no clean-up) go first.
        remove_stale()
        staging = make_scratch("kbench-build-")
        stack.callback(remove_tree, staging)
        cache = build_module.BuildCache(execution.cache_dir) if execution.cache_dir is not None else None
        # A compare's head is the pull request: under the judge its own build command is too.
        sandboxed = (HEAD,) if execution.isolation == "judge" and HEAD in sides else ()
        builder = stack.enter_context(SideBuilder(staging, build_fn, cache=cache, gpu_index=_gpu_index(device),
                                                  sandboxed=sandboxed))
        environment = execution.worker_environment()
        if execution.cache_dir is None:
            # Nothing is kept across runs: Triton's and TorchInductor's on-disk caches go to
            # a folder of this run's own, removed with it (a first call JIT-compiles afresh).
            environment = replace(execution, cache_dir=staging / "jit-cache").worker_environment(bytecode=False)
        preload = preload_modules(kinds, device)
        lanes = []
        for gpu in (tuple(gpus) if len(gpus) > 1 else (None,)):
            pool = None
            lane_worker = worker
            if lane_worker is None:
                pinned = dict(environment)
                if execution.isolation == "judge" and sides:
                    # the judge starts these side workers while the kernels build
                    pinned[JUDGE_SIDES_ENV] = ",".join(sides)
                if gpu is not None and device.startswith("cuda"):
                    pinned["CUDA_VISIBLE_DEVICES"] = visible_device(gpu.index)
                pool = stack.enter_context(
                    WorkerPool(warm=execution.warm_worker, environment=pinned, preload=preload, module=execution.worker_module)
                )
                lane_worker = pool.run_case
            lanes.append(Lane(gpu, lane_device(device, gpu), lane_worker, pool))
        yield SuiteExecution(builder, tuple(lanes))

