"""``kbench-ci run``: every kernel × shape of the suite, on this tree, one side per case.

Also the building blocks that ``compare`` shares with ``run``: how suite settings become a
:class:`CaseJob`, how a side's ``.cu`` is built without writing into the user's tree, and a
worker call that records where its time went (load, correctness, timing).

Nothing here prints. Results are written after every case (write-then-rename), so a later case
that crashes the process, or a Ctrl-C, loses nothing already measured.

Never touching the user's tree
------------------------------
* A ``.cu`` solution is compiled with its library written to a private staging directory, next
  to a copy of the source (the worker loads ``<stem>.so`` beside the ``.cu`` it is given). The
  compiler still reads the original, so ``#include "..."`` resolves as in the tree.
* Worker processes run with ``PYTHONDONTWRITEBYTECODE=1``, so importing a user's ``kernel.py``
  leaves no ``__pycache__`` beside it.
* A kernel's own ``build`` command runs in the suite's directory; what it writes besides ``{out}``
  is its own business.
"""

from __future__ import annotations

import datetime as dt
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal

from kbench_ci.procgroup import kill_process_group
from kbench_ci import __version__
from kbench_ci.cuda.build import shared_library_path
from kbench_ci.suite.loader import Case, KernelSpec, Suite, SuiteSettings, find_config, load_suite
from kbench_ci.errors import EnvironmentProblem, ExitCode, KbenchError, UsageError
from kbench_ci.measure.impls import COMPILED_KINDS, resolve_implementation
from kbench_ci.measure.protocol import CaseJob, SideSpec
from kbench_ci.results.model import CaseResult, VariantResult, write_json_atomically, write_text_atomically
from kbench_ci.measure.parent import WorkerOutcome, run_case_in_worker

__all__ = [
    "MIN_TRIALS_PER_ROUND",
    "BuildOutcome",
    "JobSettings",
    "PhaseTimes",
    "RunCase",
    "RunOutcome",
    "RunRequest",
    "SideBuildFailed",
    "SideBuilder",
    "SuiteProgress",
    "WorkerRun",
    "job_settings",
    "make_job",
    "run_suite",
    "run_worker",
    "select_kernels",
    "throttle_reasons",
    "trials_per_round",
]

RUN_SCHEMA = "kbench-ci/run"
RUN_SCHEMA_VERSION = 1

#: the fewest timed trials a round may have (see :func:`trials_per_round`)
MIN_TRIALS_PER_ROUND = 10

#: seconds a kernel's own ``build`` command or nvcc may run
BUILD_TIMEOUT_S = 900.0


# --------------------------------------------------------------------------------------------
# Settings → job
# --------------------------------------------------------------------------------------------


def trials_per_round(num_trials: int, rounds: int) -> int:
    """Timed trials per round per side: ``max(10, num_trials // rounds)``.

    ``num_trials`` in kbench.toml is the budget of one side across all rounds (100 by default,
    as in ``bench``), so splitting it over the rounds keeps a suite's run time about what the
    user asked for, whatever ``rounds`` is. The floor of 10 keeps each round's median
    meaningful: the paired bootstrap resamples *within* rounds, and a round of 2-3 samples
    gives a median that jumps between order statistics. So with the defaults (100 trials,
    10 rounds) each side gets 10 trials in each of 10 rounds; with ``rounds = 20`` each round
    still has 10 (200 in all), with ``rounds = 2`` each has 50.
    """
    if num_trials < 1 or rounds < 1:
        raise ValueError(f"num_trials and rounds must be >= 1, got {num_trials} and {rounds}")
    return max(MIN_TRIALS_PER_ROUND, num_trials // rounds)


@dataclass(frozen=True, slots=True)
class JobSettings:
    """The suite's ``[defaults]`` as the worker sees them, after the device is known."""

    device: str
    seed: int
    correctness_trials: int
    timing_method: str
    num_warmup: int
    trials_per_round: int
    discard_first: int
    rounds: int
    #: the suite asked for cuda_event but the device is the CPU
    timing_method_changed: bool = False
    flush_l2: bool = True

    def as_json(self) -> dict[str, Any]:
        return {
            "device": self.device,
            "seed": self.seed,
            "correctness_trials": self.correctness_trials,
            "timing_method": self.timing_method,
            "num_warmup": self.num_warmup,
            "trials_per_round": self.trials_per_round,
            "trials_per_round_rule": f"max({MIN_TRIALS_PER_ROUND}, num_trials // rounds)",
            "discard_first": self.discard_first,
            "rounds": self.rounds,
            "cache_mode": "cold" if self.flush_l2 else "warm",
        }


def job_settings(settings: SuiteSettings, *, device: str, rounds: int | None = None) -> JobSettings:
    """Map the suite settings (and a ``--rounds`` override) onto what every case's job uses.

    On the CPU the timing method becomes ``host_time``: CUDA events need a GPU.
    """
    n_rounds = settings.rounds if rounds is None else rounds
    if isinstance(n_rounds, bool) or not isinstance(n_rounds, int) or n_rounds < 1:
        raise UsageError(f"--rounds must be a positive integer, got {n_rounds!r}")
    method = settings.timing_method
    changed = False
    if not device.startswith("cuda") and method == "cuda_event":
        method, changed = "host_time", True
    return JobSettings(
        device=device,
        seed=settings.seed,
        correctness_trials=settings.correctness_trials,
        timing_method=method,
        num_warmup=settings.num_warmup,
        trials_per_round=trials_per_round(settings.num_trials, n_rounds),
        discard_first=settings.discard_first,
        rounds=n_rounds,
        timing_method_changed=changed,
    )


def make_job(
    case: Case, sides: Sequence[SideSpec], settings: JobSettings, *, rounds: int | None = None
) -> CaseJob:
    """One worker job: the same seed and dimensions for every side, no baselines."""
    return CaseJob(
        case_id=case.case_id,
        dims=dict(case.dims),
        sides=tuple(sides),
        baselines=(),
        seed=settings.seed,
        correctness_trials=settings.correctness_trials,
        timing_method=settings.timing_method,
        num_warmup=settings.num_warmup,
        num_trials=settings.trials_per_round,
        discard_first=settings.discard_first,
        flush_l2=settings.flush_l2,
        rounds=settings.rounds if rounds is None else rounds,
        device=settings.device,
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
            import difflib

            close = difflib.get_close_matches(name, known, n=1)
            hint = f"did you mean {close[0]}?" if close else f"kernels: {', '.join(known) or 'none'}"
            raise UsageError(f"--kernel {name}: no kernel of that name in the suite", hint=hint)
    wanted = set(names)
    return tuple(k for k in kernels if k.name in wanted)


def implementation_of(kernel: KernelSpec) -> str:
    """The kernel's implementation kind with ``auto`` resolved by file type."""
    return resolve_implementation(kernel.implementation, kernel.solution)


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


# --------------------------------------------------------------------------------------------
# Building a side
# --------------------------------------------------------------------------------------------


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


@dataclass(frozen=True, slots=True)
class BuildOutcome:
    """Building one kernel's ``.cu`` for one side."""

    side: str
    kernel: str
    ok: bool
    duration_s: float
    command: str | None
    message: str | None = None
    compiler_output: str | None = None

    def as_json(self) -> dict[str, Any]:
        return {
            "side": self.side, "kernel": self.kernel, "ok": self.ok, "seconds": self.duration_s,
            "command": self.command, "message": self.message, "compiler_output": self.compiler_output,
        }


def default_build(kernel: KernelSpec, kind: str, source: Path, output: Path, cwd: Path) -> str:
    """The kernel's ``build`` command when the config gives one, else build.py's nvcc line."""
    custom = kernel.build_command(source, output)
    if custom is not None:
        code, text = _run_shell(custom, cwd=cwd, timeout_s=BUILD_TIMEOUT_S)
        if code != 0:
            raise SideBuildFailed(f"build command failed (exit {code})", command=custom, compiler_output=text)
        if not output.is_file():
            raise SideBuildFailed(
                "build command succeeded but wrote no library at {out}", command=custom, compiler_output=text
            )
        return custom
    # Imported lazily: build.py finds nvcc and CUTLASS, which only compiled kernels need.
    from kbench_ci.cuda import build as build_module

    plan = build_module.plan_build(source, cutlass=kind == "cutlass", output=output)
    command = build_module.format_command(plan)
    try:
        build_module.build(plan, use_cache=False)
    except build_module.CompileError as exc:
        raise SideBuildFailed(exc.one_line(), command=command, compiler_output=exc.compiler_output) from None
    except KbenchError as exc:
        if isinstance(exc, EnvironmentProblem):
            raise
        raise SideBuildFailed(exc.one_line(), command=command, compiler_output=None) from None
    return command


def _run_shell(command: str, *, cwd: Path, timeout_s: float) -> tuple[int, str]:
    """A user's build command in its own process group, so a timeout or Ctrl-C ends all of it."""
    process = subprocess.Popen(
        command, shell=True, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL, start_new_session=True,
    )
    try:
        out, _ = process.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        kill_process_group(process)
        return 124, f"build command timed out after {timeout_s:g} s"
    except BaseException:
        kill_process_group(process)
        raise
    return process.returncode, out.decode("utf-8", errors="replace")




class SideBuilder:
    """Turns a kernel of one side into the worker's :class:`SideSpec`, building ``.cu`` first.

    The library goes to ``staging/<side>/<kernel>/<stem>.so`` next to a copy of the source, so
    no tree (the user's, or a worktree) gets build products. Each kernel is built once per side,
    however many shapes it has.
    """

    def __init__(self, staging: Path, build_fn: BuildFn | None = None) -> None:
        self.staging = Path(staging)
        self.build_fn = build_fn or default_build
        self._done: dict[tuple[str, str], tuple[Path | None, BuildOutcome]] = {}

    def side(
        self, kernel: KernelSpec, *, label: str, kind: str, cwd: Path
    ) -> tuple[SideSpec | None, BuildOutcome | None]:
        """The side's spec, and its build outcome for a compiled kernel (None otherwise).

        A failed build gives ``(None, outcome)``.
        """
        solution: Path = kernel.solution
        outcome: BuildOutcome | None = None
        if kind in COMPILED_KINDS:
            staged, outcome = self._build(kernel, label=label, kind=kind, cwd=cwd)
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
        )
        return spec, outcome

    def _build(self, kernel: KernelSpec, *, label: str, kind: str, cwd: Path) -> tuple[Path | None, BuildOutcome]:
        key = (label, kernel.name)
        if key in self._done:
            staged, previous = self._done[key]
            # Built once per side; later shapes reuse it and add no build time.
            return staged, replace(previous, duration_s=0.0)
        directory = self.staging / label / kernel.name
        directory.mkdir(parents=True, exist_ok=True)
        source = Path(kernel.solution)
        staged_source = directory / source.name
        output = shared_library_path(staged_source)
        started = time.perf_counter()
        try:
            shutil.copyfile(source, staged_source)
            command = self.build_fn(kernel, kind, source, output, cwd)
            result: tuple[Path | None, BuildOutcome] = (
                staged_source,
                BuildOutcome(label, kernel.name, True, time.perf_counter() - started, command),
            )
        except SideBuildFailed as exc:
            result = (None, BuildOutcome(
                label, kernel.name, False, time.perf_counter() - started, exc.command, exc.message, exc.compiler_output,
            ))
        except OSError as exc:
            result = (None, BuildOutcome(
                label, kernel.name, False, time.perf_counter() - started, None, f"cannot read {source}: {exc.strerror or exc}",
            ))
        self._done[key] = result
        return result


# --------------------------------------------------------------------------------------------
# One worker call, with the time split by phase
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PhaseTimes:
    """Where a case's wall time went, in seconds.

    ``load`` is worker start-up (Python, torch, CUDA context), loading the files and the first
    (compile/JIT) call; ``correctness`` the seeded checks; ``timing`` the rounds and the
    post-timing check. Read from the worker's events as the parent drains them (every 0.1 s),
    so each figure is good to about a tenth of a second.
    """

    build_s: float = 0.0
    load_s: float = 0.0
    correctness_s: float = 0.0
    timing_s: float = 0.0

    @property
    def total_s(self) -> float:
        return self.build_s + self.load_s + self.correctness_s + self.timing_s

    def __add__(self, other: PhaseTimes) -> PhaseTimes:
        return PhaseTimes(
            self.build_s + other.build_s,
            self.load_s + other.load_s,
            self.correctness_s + other.correctness_s,
            self.timing_s + other.timing_s,
        )

    def as_json(self) -> dict[str, float]:
        return {
            "build": self.build_s, "load": self.load_s, "correctness": self.correctness_s,
            "timing": self.timing_s, "total": self.total_s,
        }


@dataclass(frozen=True, slots=True)
class WorkerRun:
    """One worker call: its result, what it reported about the machine, and its phases."""

    result: CaseResult
    environment: Mapping[str, Any] | None
    #: ``load_error`` events (a broken user-file contract, a missing package), in order
    load_errors: tuple[Mapping[str, Any], ...]
    phases: PhaseTimes
    rounds: int

    def environment_error(self) -> EnvironmentProblem | None:
        """A load error the machine is to blame for (exit code 3), to abort the run with."""
        for error in self.load_errors:
            if error.get("exit_code") == int(ExitCode.ENVIRONMENT):
                return EnvironmentProblem(str(error.get("message")), hint=error.get("hint"))
        return None


WorkerFn = Callable[..., tuple[CaseResult, WorkerOutcome]]
EventCallback = Callable[[Mapping[str, Any]], None]


@contextmanager
def _no_bytecode() -> Iterator[None]:
    """Workers inherit os.environ: keep them from writing __pycache__ into the user's tree."""
    previous = os.environ.get("PYTHONDONTWRITEBYTECODE")
    os.environ["PYTHONDONTWRITEBYTECODE"] = "1"
    try:
        yield
    finally:
        if previous is None:
            os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
        else:
            os.environ["PYTHONDONTWRITEBYTECODE"] = previous


#: device -> event overhead (ms) calibrated by the first cuda_event worker of this process
_CALIBRATED_OVERHEAD_MS: dict[str, float] = {}

_PHASE_BUCKET = {"load": "load", "compile": "load", "correctness": "correctness", "timing": "timing"}


def run_worker(
    job: CaseJob,
    *,
    timeout_s: float,
    on_event: EventCallback | None = None,
    worker: WorkerFn = run_case_in_worker,
) -> WorkerRun:
    """Run ``job`` in a worker subprocess; time each phase from the worker's ``begin`` events."""
    buckets = {"load": 0.0, "correctness": 0.0, "timing": 0.0}
    state = {"bucket": "load", "since": time.perf_counter()}
    load_errors: list[Mapping[str, Any]] = []

    def listen(event: dict[str, Any]) -> None:
        kind = event.get("event")
        if kind == "begin":
            bucket = _PHASE_BUCKET.get(str(event.get("phase")), "load")
            now = time.perf_counter()
            buckets[state["bucket"]] += now - state["since"]  # type: ignore[index,operator]
            state["bucket"], state["since"] = bucket, now
        elif kind == "load_error":
            load_errors.append(dict(event))
        if on_event is not None:
            on_event(event)

    # The event-pair overhead is a property of the GPU and driver: calibrate it in the first
    # worker of the run and hand it to the rest.
    if job.timing_method == "cuda_event" and job.event_overhead_ms is None and job.device in _CALIBRATED_OVERHEAD_MS:
        job = replace(job, event_overhead_ms=_CALIBRATED_OVERHEAD_MS[job.device])
    with _no_bytecode():
        result, outcome = worker(job, timeout_s=timeout_s, on_event=listen)
    if result is not None and result.event_overhead_ms is not None:
        _CALIBRATED_OVERHEAD_MS.setdefault(job.device, result.event_overhead_ms)
    buckets[state["bucket"]] += time.perf_counter() - state["since"]  # type: ignore[index,operator]
    return WorkerRun(
        result=result,
        environment=outcome.environment,
        load_errors=tuple(load_errors),
        phases=PhaseTimes(0.0, buckets["load"], buckets["correctness"], buckets["timing"]),
        rounds=job.rounds,
    )


def throttle_reasons(result: CaseResult | None) -> tuple[str, ...]:
    """The GPU's active throttle reasons before or after the case (none on the CPU)."""
    if result is None:
        return ()
    reasons: list[str] = []
    for state in (result.gpu_state_before, result.gpu_state_after):
        for reason in (state or {}).get("throttle_reasons") or ():
            if reason not in reasons:
                reasons.append(str(reason))
    return tuple(reasons)


# --------------------------------------------------------------------------------------------
# Progress (for the CLI's progress line)
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SuiteProgress:
    """Where a suite run is: case ``index`` of ``total`` (1-based), and what is happening.

    ``stage`` is ``build``, ``measure``, ``remeasure`` (a suspected regression timed again) or
    ``done``; ``event`` is the worker's own event while it measures (``progress`` events carry
    ``variant``, ``phase``, ``done`` and ``total``); ``outcome`` is a one-word result on ``done``.
    """

    index: int
    total: int
    case_id: str
    stage: str
    event: Mapping[str, Any] | None = None
    outcome: str | None = None
    detail: str | None = None


ProgressFn = Callable[[SuiteProgress], None]


def worker_listener(progress: ProgressFn | None, index: int, total: int, case_id: str, stage: str) -> EventCallback | None:
    if progress is None:
        return None

    def listen(event: Mapping[str, Any]) -> None:
        progress(SuiteProgress(index, total, case_id, stage, event=event))

    return listen


# --------------------------------------------------------------------------------------------
# `kbench-ci run`
# --------------------------------------------------------------------------------------------

RunStatus = Literal["ok", "incorrect", "failed"]
RUN_STATUSES: tuple[RunStatus, ...] = ("failed", "incorrect", "ok")


@dataclass(frozen=True, slots=True)
class RunRequest:
    start: Path
    device: str
    output_dir: Path = Path("bench_out")
    config: Path | None = None
    rounds: int | None = None
    case_timeout_s: float | None = None
    kernels: tuple[str, ...] = ()
    command_line: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class RunCase:
    """One case of ``run``: its status, the worker's result and the build, if any."""

    case_id: str
    kernel: str
    dims: Mapping[str, int]
    status: RunStatus
    message: str | None
    variant: VariantResult | None
    result: CaseResult | None
    build: BuildOutcome | None
    throttle_reasons: tuple[str, ...]
    phases: PhaseTimes
    implementation: str

    @property
    def throttled(self) -> bool:
        return bool(self.throttle_reasons)


@dataclass(frozen=True, slots=True)
class RunOutcome:
    cases: tuple[RunCase, ...]
    total_cases: int
    config_path: Path
    settings: JobSettings
    environment: Mapping[str, Any] | None
    results_path: Path
    report_path: Path
    wall_s: float

    @property
    def complete(self) -> bool:
        return len(self.cases) == self.total_cases

    @property
    def counts(self) -> dict[str, int]:
        return {status: sum(1 for c in self.cases if c.status == status) for status in RUN_STATUSES}

    @property
    def passed(self) -> bool:
        return self.complete and all(c.status == "ok" for c in self.cases)

    @property
    def summary(self) -> str:
        counts = self.counts
        words = {"ok": "passed", "incorrect": "incorrect", "failed": "failed"}
        parts = [f"{counts[s]} {words[s]}" for s in ("incorrect", "failed", "ok") if counts[s]]
        text = ", ".join(parts) or "no cases"
        if not self.complete:
            return f"{text} — incomplete ({len(self.cases)} of {self.total_cases} cases)"
        return f"{text} — {'all correct' if self.passed else 'FAILED'}"


def assess_run_case(result: CaseResult | None, build: BuildOutcome | None, label: str = "solution") -> tuple[RunStatus, str | None]:
    """``failed`` (build, load, crash, hang, raise), ``incorrect``, or ``ok``."""
    if build is not None and not build.ok:
        return "failed", f"failed to build: {build.message}"
    variant = result.variant(label) if result is not None else None
    if variant is None:
        return "failed", (result.error if result is not None else None) or "no result"
    if variant.status == "incorrect":
        return "incorrect", variant.message
    if variant.status != "ok":
        return "failed", variant.message or (result.error if result else None)
    if not variant.timed:
        return "failed", "no timing samples were recorded"
    return "ok", None


def run_suite(
    request: RunRequest,
    *,
    on_progress: ProgressFn | None = None,
    build_fn: BuildFn | None = None,
    worker: WorkerFn = run_case_in_worker,
) -> RunOutcome:
    """Check and time every selected case of the suite found from ``request.start``."""
    from kbench_ci.report.compare import render_run

    started = time.perf_counter()
    config_path = find_config(request.start, request.config)
    suite = load_suite(config_path)
    kernels = select_kernels(suite.kernels, request.kernels)
    kinds = {k.name: implementation_of(k) for k in kernels}
    check_runnable(kernels, request.device)
    settings = job_settings(suite.settings, device=request.device, rounds=request.rounds)
    cases = tuple(Case(k, dims) for k in kernels for dims in k.shapes)
    results_path = request.output_dir / "results.json"
    report_path = request.output_dir / "benchmark.md"

    done: list[RunCase] = []
    environment: Mapping[str, Any] | None = None

    def snapshot() -> RunOutcome:
        return RunOutcome(
            cases=tuple(done), total_cases=len(cases), config_path=config_path, settings=settings,
            environment=environment, results_path=results_path, report_path=report_path,
            wall_s=time.perf_counter() - started,
        )

    def write() -> RunOutcome:
        outcome = snapshot()
        write_json_atomically(results_path, run_payload(outcome, suite, request))
        write_text_atomically(report_path, render_run(outcome))
        return outcome

    with tempfile.TemporaryDirectory(prefix="kbench-build-") as staging:
        builder = SideBuilder(Path(staging), build_fn)
        for index, case in enumerate(cases, start=1):
            kind = kinds[case.kernel.name]
            if on_progress is not None:
                on_progress(SuiteProgress(index, len(cases), case.case_id, "build"))
            t0 = time.perf_counter()
            spec, build = builder.side(case.kernel, label="solution", kind=kind, cwd=suite.root)
            build_s = time.perf_counter() - t0 if build is not None else 0.0
            run: WorkerRun | None = None
            if spec is not None:
                job = make_job(case, (spec,), settings)
                timeout = request.case_timeout_s or case.kernel.timeout_s
                run = run_worker(
                    job, timeout_s=timeout, worker=worker,
                    on_event=worker_listener(on_progress, index, len(cases), case.case_id, "measure"),
                )
                environment = environment or run.environment
            result = run.result if run is not None else None
            status, message = assess_run_case(result, build)
            phases = PhaseTimes(build_s=build_s) + (run.phases if run is not None else PhaseTimes())
            done.append(RunCase(
                case_id=case.case_id, kernel=case.kernel.name, dims=case.dims, status=status, message=message,
                variant=result.variant("solution") if result is not None else None, result=result, build=build,
                throttle_reasons=throttle_reasons(result), phases=phases, implementation=kind,
            ))
            write()
            if on_progress is not None:
                on_progress(SuiteProgress(index, len(cases), case.case_id, "done", outcome=status, detail=message))
            problem = run.environment_error() if run is not None else None
            if problem is not None:
                raise problem
    return write()


def run_payload(outcome: RunOutcome, suite: Suite, request: RunRequest) -> dict[str, Any]:
    """results.json of ``run``: schema ``kbench-ci/run`` version 1."""
    from kbench_ci.stats import summarize

    cases = []
    for case in outcome.cases:
        summary = summarize(case.variant.samples_ms) if case.variant is not None and case.variant.timed else None
        cases.append({
            "case_id": case.case_id,
            "kernel": case.kernel,
            "dims": dict(case.dims),
            "implementation": case.implementation,
            "status": case.status,
            "message": case.message,
            "median_ms": summary.median if summary else None,
            "ci_low_ms": summary.ci_low if summary else None,
            "ci_high_ms": summary.ci_high if summary else None,
            "n_samples": summary.n if summary else 0,
            "throttled": case.throttled,
            "throttle_reasons": list(case.throttle_reasons),
            "gpu_state_before": case.result.gpu_state_before if case.result else None,
            "gpu_state_after": case.result.gpu_state_after if case.result else None,
            "timing_description": case.result.timing_description if case.result else None,
            "error": case.result.error if case.result else None,
            "build": case.build.as_json() if case.build else None,
            "seconds": case.phases.as_json(),
            "result": case.variant,
        })
    return {
        "schema": RUN_SCHEMA,
        "schema_version": RUN_SCHEMA_VERSION,
        "tool_version": __version__,
        "created": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "command_line": list(request.command_line) or sys.argv,
        "gate": {
            "passed": outcome.passed,
            "complete": outcome.complete,
            "summary": outcome.summary,
            "counts": outcome.counts,
        },
        "config": str(outcome.config_path),
        "settings": {**outcome.settings.as_json(), "kernels": list(request.kernels)},
        "environment": outcome.environment,
        "seconds": {"wall": outcome.wall_s},
        "cases": cases,
    }
