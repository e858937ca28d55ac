"""What ``run`` and ``compare`` share: suite settings into worker jobs, building a side's ``.cu``
without writing into the user's tree, and one worker call that records where its time went
(load, correctness, timing) and what it reported."""

from __future__ import annotations

import difflib
import itertools
import logging
import os
import queue
import shutil
import subprocess
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from types import TracebackType
from typing import Any, TypeVar

from kbench_ci.cuda import build as build_module
from kbench_ci.cuda.build import shared_library_path
from kbench_ci.errors import ConfigError, ConfigProblems, EnvironmentProblem, ExitCode, KbenchError, UsageError
from kbench_ci.measure.impls import COMPILED_KINDS, resolve_implementation
from kbench_ci.measure.parent import WorkerOutcome, WorkerPool, run_case_in_worker
from kbench_ci.measure.protocol import Begin, CaseFinished, CaseJob, LoadError, SideSpec, StoppingRule, WorkerEvent
from kbench_ci.procgroup import kill_process_group, kill_tracked, tracked, user_code_environment
from kbench_ci.results.model import CaseResult, MeasureSettings
from kbench_ci.results.outcome import BuildOutcome, GpuSlot, PhaseTimes
from kbench_ci.scratch import make_scratch, remove_stale
from kbench_ci.suite.model import Case, KernelSpec
from kbench_ci.suite.settings import Execution, parallel_builds

_log = logging.getLogger(__name__)

#: seconds a kernel's own ``build`` command or nvcc may run
BUILD_TIMEOUT_S = 900.0


def job_timeout_s(case_timeout_s: float, job: CaseJob) -> float:
    """The time a worker job may take: the case timeout is for a case of two timed variants (a
    compare's base and head; a run's solution with one baseline, or alone), and each further
    variant (a suite baseline: torch.compile's first call alone can take a minute) adds half of it."""
    variants = len(job.sides) + len(job.baselines)
    return case_timeout_s * max(1.0, variants / 2)


def make_job(
    case: Case,
    sides: Sequence[SideSpec],
    settings: MeasureSettings,
    *,
    rounds: int | None = None,
    stopping: StoppingRule | None = None,
    accept_changed_reference: bool = False,
) -> CaseJob:
    """One worker job: the same seed and dimensions for every side, and the kernel's baselines,
    which the worker times with the first side (the base of a compare)."""
    return CaseJob(
        case_id=case.case_id,
        dims=dict(case.dims),
        sides=tuple(sides),
        baselines=tuple(case.kernel.baselines),
        settings=settings if rounds is None else replace(settings, rounds=rounds),
        stopping=stopping,
        accept_changed_reference=accept_changed_reference,
    )


def select_kernels(
    kernels: Sequence[KernelSpec], names: Sequence[str], *, also_known: Sequence[str] = ()
) -> tuple[KernelSpec, ...]:
    """The kernels named by ``--kernel`` (all when none is named), in file order.

    A name that no side knows is bad usage; ``also_known`` are names that exist elsewhere (the
    base side of a compare), which select nothing here but are not an error.
    """
    if not names:
        return tuple(kernels)
    known = [k.name for k in kernels] + [n for n in also_known if n not in {k.name for k in kernels}]
    for name in names:
        if name not in known:

            close = difflib.get_close_matches(name, known, n=1)
            hint = f"did you mean {close[0]}?" if close else f"kernels: {', '.join(known) or 'none'}"
            raise UsageError(f"--kernel {name}: no kernel of that name in the suite", hint=hint)
    wanted = set(names)
    return tuple(k for k in kernels if k.name in wanted)


def implementation_of(kernel: KernelSpec) -> str:
    """The kernel's implementation kind with ``auto`` resolved by file type."""
    return resolve_implementation(kernel.implementation, kernel.solution)


def check_size_expressions(kernels: Sequence[KernelSpec], label: str) -> None:
    """Every ``ptr_size`` / ``ptr_sizes`` expression of the config by ``--ptr-size``'s rules, all
    problems at once (the loader cannot: the expression grammar lives in cuda/, beside it)."""
    from kbench_ci.cuda.size_expr import check_size_expression  # noqa: PLC0415 - cuda imports torch-free, but lazily like its siblings

    problems: list[ConfigError] = []
    for kernel in kernels:
        named = [(f"ptr_sizes.{name}", expr) for name, expr in kernel.ptr_sizes.items()]
        for key, expression in ([("ptr_size", kernel.ptr_size)] if kernel.ptr_size else []) + named:
            try:
                check_size_expression(expression)
            except UsageError as exc:
                problems.append(ConfigError(f'{label}: kernel "{kernel.name}": {key}: {exc.message}', hint=exc.hint))
    if len(problems) == 1:
        raise problems[0]
    if problems:
        raise ConfigProblems(label, tuple(problems))


def check_runnable(kernels: Sequence[KernelSpec], device: str) -> None:
    """CUDA C++ kernels need a GPU: say so before anything is built or run."""
    if device.startswith("cuda"):
        return
    compiled = [k.name for k in kernels if implementation_of(k) in COMPILED_KINDS]
    if compiled:
        raise EnvironmentProblem(
            f"kernel(s) {', '.join(compiled)} are CUDA C++ and need a CUDA GPU; this run is on the CPU",
            hint="run on a GPU machine, or pick Triton/PyTorch kernels with --kernel NAME",
        )


class SideBuildFailed(Exception):
    """Compiling one side's ``.cu`` failed. Not a KbenchError: it is a verdict, not an abort."""

    def __init__(self, message: str, *, command: str | None, compiler_output: str | None) -> None:
        super().__init__(message)
        self.message = message
        self.command = command
        self.compiler_output = compiler_output


#: ``build_fn(kernel, kind, source, output, cwd) -> the command that ran``; raises
#: :class:`SideBuildFailed` when the build fails, a KbenchError when it cannot even start.
BuildFn = Callable[[KernelSpec, str, Path, Path, Path], str]


def default_build(kernel: KernelSpec, kind: str, source: Path, output: Path, cwd: Path) -> str:
    """The kernel's ``build`` command when the config gives one, else build.py's nvcc line."""
    return _build_side(kernel, kind, source, output, cwd, cache=None)[0]


def _build_side(
    kernel: KernelSpec, kind: str, source: Path, output: Path, cwd: Path, *, cache: build_module.BuildCache | None,
    gpu_index: int | None = None,
) -> tuple[str, bool]:
    """:func:`default_build` with the build cache: the command, and whether the library came
    from the cache. A kernel's own ``build`` command is never cached: it may read anything."""
    custom = kernel.build_command(source, output)
    if custom is not None:
        code, text = _run_shell(custom, cwd=cwd, timeout_s=BUILD_TIMEOUT_S)
        if code != 0:
            raise SideBuildFailed(f"build command failed (exit {code})", command=custom, compiler_output=text)
        if not output.is_file():
            raise SideBuildFailed(
                "build command succeeded but wrote no library at {out}", command=custom, compiler_output=text
            )
        return custom, False
    plan = build_module.plan_build(source, cutlass=kind == "cutlass", output=output, gpu_index=gpu_index)
    command = build_module.format_command(plan)
    try:
        built = build_module.build(plan, use_cache=False, cache=cache, timeout_s=BUILD_TIMEOUT_S)
    except build_module.CompileError as exc:
        raise SideBuildFailed(exc.one_line(), command=command, compiler_output=exc.compiler_output) from None
    except KbenchError as exc:
        if isinstance(exc, EnvironmentProblem):
            raise
        raise SideBuildFailed(exc.one_line(), command=command, compiler_output=None) from None
    return command, built.cached


def _run_shell(command: str, *, cwd: Path, timeout_s: float) -> tuple[int, str]:
    """A user's build command in its own process group, so a timeout or Ctrl-C ends all of it,
    without the runner's step files and tokens (it is code from the repository under test)."""
    process = subprocess.Popen(
        command, shell=True, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL, start_new_session=True, env=user_code_environment(),
    )
    try:
        with tracked(process):  # builds run in threads: Ctrl-C's clean-up kills it from there
            out, _ = process.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        kill_process_group(process)
        return 124, f"build command timed out after {timeout_s:g} s"
    except BaseException:
        kill_process_group(process)
        raise
    return process.returncode, out.decode("utf-8", errors="replace")


@dataclass(frozen=True, slots=True)
class BuildRequest:
    """One kernel of one side to build: what :meth:`SideBuilder.start` takes."""

    kernel: KernelSpec
    label: str
    kind: str
    cwd: Path


class SideBuilder:
    """Turns a kernel of one side into the worker's :class:`SideSpec`, building ``.cu`` first.

    The library goes to ``staging/<side>/<kernel>/<stem>.so`` next to a copy of the source, so
    no tree (the user's, or a worktree) gets build products. Each kernel is built once per side,
    however many shapes it has. :meth:`start` begins every build of a suite at once, in a pool
    of threads (compilers are processes: the threads only wait), so later cases find theirs
    done; ``cache`` keeps libraries across runs (:class:`~kbench_ci.cuda.build.BuildCache`).

    A context manager: leaving it (Ctrl-C included) cancels builds not begun and kills the
    compilers still running.
    """

    def __init__(
        self, staging: Path, build_fn: BuildFn | None = None, *, cache: build_module.BuildCache | None = None,
        parallel: int | None = None, gpu_index: int | None = None,
    ) -> None:
        self.staging = Path(staging)
        #: the GPU the libraries will run on (``--gpu N``; with ``--gpus``, all are one model):
        #: nvcc targets its architecture
        self.gpu_index = gpu_index
        self.build_fn = build_fn
        self.cache = cache
        self._pool = ThreadPoolExecutor(max_workers=parallel or parallel_builds(), thread_name_prefix="kbench-build")
        self._lock = threading.Lock()
        self._futures: dict[tuple[str, str], Future[tuple[Path | None, BuildOutcome]]] = {}
        self._handed_out: set[tuple[str, str]] = set()

    def __enter__(self) -> SideBuilder:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, value: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self.close()

    def close(self) -> None:
        """Cancel builds not begun, kill running compilers, and wait for the threads."""
        self._pool.shutdown(wait=False, cancel_futures=True)
        if any(not future.done() for future in self._futures.values()):
            kill_tracked()
        self._pool.shutdown(wait=True)

    def start(self, requests: Sequence[BuildRequest]) -> None:
        """Begin building every compiled kernel of ``requests`` (the others need no build)."""
        for request in requests:
            if request.kind in COMPILED_KINDS:
                self._future(request)

    def side(
        self, kernel: KernelSpec, *, label: str, kind: str, cwd: Path
    ) -> tuple[SideSpec | None, BuildOutcome | None]:
        """The side's spec, and its build outcome for a compiled kernel (None otherwise); waits
        for the build when it is still running.

        A failed build gives ``(None, outcome)``.
        """
        solution: Path = kernel.solution
        outcome: BuildOutcome | None = None
        if kind in COMPILED_KINDS:
            key = (label, kernel.name)
            staged, outcome = self._future(BuildRequest(kernel, label, kind, cwd)).result()
            with self._lock:  # cases of several GPUs ask from their own threads
                if key in self._handed_out:
                    # Built once per side; later shapes reuse it and add no build time.
                    outcome = replace(outcome, duration_s=0.0)
                self._handed_out.add(key)
            if staged is None:
                return None, outcome
            solution = staged
        spec = SideSpec(
            label=label,
            solution=str(Path(solution).resolve()),
            ref=str(Path(kernel.ref).resolve()),
            implementation=kind,
            atol=kernel.atol,
            rtol=kernel.rtol,
            ptr_sizes=dict(kernel.ptr_sizes),
            ptr_size=kernel.ptr_size,
            bytes_expr=kernel.bytes_expr,
            flops_expr=kernel.flops_expr,
        )
        return spec, outcome

    def _future(self, request: BuildRequest) -> Future[tuple[Path | None, BuildOutcome]]:
        key = (request.label, request.kernel.name)
        with self._lock:
            if key not in self._futures:
                self._futures[key] = self._pool.submit(self._build, request)
            return self._futures[key]

    def _build(self, request: BuildRequest) -> tuple[Path | None, BuildOutcome]:
        kernel, label = request.kernel, request.label
        directory = self.staging / label / kernel.name
        directory.mkdir(parents=True, exist_ok=True)
        source = Path(kernel.solution)
        staged_source = directory / source.name
        output = shared_library_path(staged_source)
        started = time.perf_counter()
        try:
            shutil.copyfile(source, staged_source)
            if self.build_fn is not None:
                command, cached = self.build_fn(kernel, request.kind, source, output, request.cwd), False
            else:
                command, cached = _build_side(
                    kernel, request.kind, source, output, request.cwd, cache=self.cache, gpu_index=self.gpu_index,
                )
            return staged_source, BuildOutcome(
                label, kernel.name, True, time.perf_counter() - started, command, cached=cached,
            )
        except SideBuildFailed as exc:
            return None, BuildOutcome(
                label, kernel.name, False, time.perf_counter() - started, exc.command, exc.message, exc.compiler_output,
            )
        except OSError as exc:
            return None, BuildOutcome(
                label, kernel.name, False, time.perf_counter() - started, None, f"cannot read {source}: {exc.strerror or exc}",
            )


WorkerFn = Callable[..., tuple[CaseResult, WorkerOutcome]]


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
    worker: WorkerFn | None = None, kinds: Iterable[str] = (),
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
        stack.callback(shutil.rmtree, staging, True)
        cache = build_module.BuildCache(execution.cache_dir) if execution.cache_dir is not None else None
        builder = stack.enter_context(SideBuilder(staging, build_fn, cache=cache, gpu_index=_gpu_index(device)))
        environment = execution.worker_environment()
        if execution.cache_dir is None:
            # Nothing is kept across runs: Triton's and TorchInductor's on-disk caches go to
            # a folder of this run's own, removed with it (a first call JIT-compiles afresh).
            environment = replace(execution, cache_dir=staging / "jit-cache").worker_environment()
        preload = preload_modules(kinds, device)
        lanes = []
        for gpu in (tuple(gpus) if len(gpus) > 1 else (None,)):
            pool = None
            lane_worker = worker
            if lane_worker is None:
                pinned = dict(environment)
                if gpu is not None and device.startswith("cuda"):
                    pinned["CUDA_VISIBLE_DEVICES"] = visible_device(gpu.index)
                pool = stack.enter_context(
                    WorkerPool(warm=execution.warm_worker, environment=pinned, preload=preload)
                )
                lane_worker = pool.run_case
            lanes.append(Lane(gpu, lane_device(device, gpu), lane_worker, pool))
        yield SuiteExecution(builder, tuple(lanes))


Item = TypeVar("Item")
Result = TypeVar("Result")
LaneT = TypeVar("LaneT")


@dataclass(frozen=True, slots=True)
class _LaneFailed:
    index: int
    error: BaseException


@dataclass(frozen=True, slots=True)
class _LaneResult:
    index: int
    result: Any


_LANE_DONE = object()


def distribute(
    items: Sequence[Item],
    lanes: Sequence[LaneT],
    work: Callable[[LaneT, int, Item], Result],
    on_done: Callable[[int, Result], None],
    *,
    poll_s: float = 0.1,
) -> None:
    """Run ``work(lane, index, item)`` for every item, each exactly once, and hand each result to
    ``on_done(index, result)``.

    One lane: in order, in this thread (a run without ``--gpus``, as it always was). Several:
    one thread per lane takes the next item in suite order from a shared counter, so a fast
    lane serves more cases; ``on_done`` runs in *this* thread only, one result at a time (the
    one writer of results.json and the report). When a lane's ``work`` or an ``on_done`` raises,
    no further item is handed out; the items already running finish and their results still
    reach ``on_done``; then the first error is raised. Ctrl-C (in this thread) stops the hand-out
    and propagates at once: the caller's clean-up stops the workers.
    """
    if not lanes:
        raise ValueError("distribute needs at least one lane")
    if len(lanes) == 1:
        for index, item in enumerate(items):
            on_done(index, work(lanes[0], index, item))
        return
    counter = itertools.count()
    counter_lock = threading.Lock()
    stop = threading.Event()
    finished: queue.Queue[object] = queue.Queue()

    def serve(lane: LaneT) -> None:
        try:
            while not stop.is_set():
                with counter_lock:
                    index = next(counter)
                if index >= len(items):
                    return
                try:
                    finished.put(_LaneResult(index, work(lane, index, items[index])))
                except BaseException as exc:  # noqa: BLE001  (handed to the main thread, raised there)
                    stop.set()
                    finished.put(_LaneFailed(index, exc))
                    return
        finally:
            finished.put(_LANE_DONE)

    threads = [
        threading.Thread(target=serve, args=(lane,), name=f"kbench-lane-{n}", daemon=True)
        for n, lane in enumerate(lanes)
    ]
    for thread in threads:
        thread.start()
    first_error: BaseException | None = None
    running = len(threads)
    try:
        while running:
            try:
                message = finished.get(timeout=poll_s)
            except queue.Empty:
                continue
            if message is _LANE_DONE:
                running -= 1
            elif isinstance(message, _LaneFailed):
                first_error = first_error or message.error
            elif isinstance(message, _LaneResult):
                try:
                    on_done(message.index, message.result)
                except BaseException as exc:
                    if not isinstance(exc, Exception):
                        raise
                    stop.set()
                    first_error = first_error or exc
    finally:
        stop.set()
    for thread in threads:
        thread.join()
    if first_error is not None:
        raise first_error


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

    def environment_error(self) -> EnvironmentProblem | None:
        """A load error the machine is to blame for (exit code 3), to abort the run with."""
        for error in self.load_errors:
            if error.exit_code == int(ExitCode.ENVIRONMENT):
                return EnvironmentProblem(error.message, hint=error.hint)
        return None


EventCallback = Callable[[WorkerEvent], None]


_BYTECODE_LOCK = threading.Lock()
#: [calls inside _no_bytecode now, the value before the first of them]
_BYTECODE_STATE: list[Any] = [0, None]


@contextmanager
def _no_bytecode() -> Iterator[None]:
    """Workers inherit os.environ: keep them from writing __pycache__ into the user's tree.
    Counted, so that workers of several GPUs (threads) leave the variable as they found it."""
    with _BYTECODE_LOCK:
        if _BYTECODE_STATE[0] == 0:
            _BYTECODE_STATE[1] = os.environ.get("PYTHONDONTWRITEBYTECODE")
            os.environ["PYTHONDONTWRITEBYTECODE"] = "1"
        _BYTECODE_STATE[0] += 1
    try:
        yield
    finally:
        with _BYTECODE_LOCK:
            _BYTECODE_STATE[0] -= 1
            if _BYTECODE_STATE[0] == 0:
                previous = _BYTECODE_STATE[1]
                if previous is None:
                    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
                else:
                    os.environ["PYTHONDONTWRITEBYTECODE"] = previous


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
    with _no_bytecode():
        result, outcome = worker(job, timeout_s=timeout_s, on_event=listen)
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


@dataclass(frozen=True, slots=True)
class SuiteProgress:
    """Where a suite run is: case ``index`` of ``total`` (1-based), and what is happening.

    ``stage`` is ``start`` (builds begun, the worker starting: ``index`` 0), ``build``,
    ``measure``, ``remeasure`` (a suspected regression timed again) or ``done``; ``event`` is the worker's own event while it measures (a
    :class:`~kbench_ci.measure.protocol.Progress` says how far a phase is); ``outcome`` is a
    one-word result on ``done``.
    """

    index: int
    total: int
    case_id: str
    stage: str
    event: WorkerEvent | None = None
    outcome: str | None = None
    detail: str | None = None
    #: ``done``: the case's wall time (build wait, worker calls, remeasurement)
    seconds: float | None = None
    #: the GPU measuring the case (``1 (NVIDIA H200)``) when ``--gpus`` spreads cases over several
    gpu: str | None = None


ProgressFn = Callable[[SuiteProgress], None]


def worker_listener(
    progress: ProgressFn | None, index: int, total: int, case_id: str, stage: str, gpu: str | None = None
) -> EventCallback | None:
    if progress is None:
        return None

    def listen(event: WorkerEvent) -> None:
        progress(SuiteProgress(index, total, case_id, stage, event=event, gpu=gpu))

    return listen
