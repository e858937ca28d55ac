"""``kbench-ci run``: every kernel × shape of the suite, on this tree, one side per case.

The suite loop itself (builds, lanes, writing after every case) is the
:class:`~kbench_ci.gate.driver.SuiteDriver`'s; ``run`` supplies how one case is measured (its
solution alone, with the suite's baselines), and how its cases make results.json and
benchmark.md. Nothing here prints.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from kbench_ci.errors import KbenchError
from kbench_ci.gate.builds import BuildFn, BuildRequest, SideBuilder
from kbench_ci.gate.driver import CaseSlot, Measured, SuiteDriver
from kbench_ci.gate.jobs import (
    check_runnable,
    check_user_files,
    implementation_of,
    job_timeout_s,
    make_job,
    select_kernels,
)
from kbench_ci.gate.lanes import suite_execution
from kbench_ci.gate.progress import ProgressFn
from kbench_ci.gate.shard import plan_shard
from kbench_ci.gate.worker_call import WorkerFn, WorkerRun, run_worker
from kbench_ci.git import GitRepo, rev_parse
from kbench_ci.report.run import render_run
from kbench_ci.results.model import CaseResult, MeasureSettings, throttle_reasons
from kbench_ci.results.outcome import (
    BuildOutcome,
    CommitRecord,
    GpuSlot,
    PhaseTimes,
    RunCase,
    RunOutcome,
    RunRequest,
    RunStatus,
    ShardRecord,
)
from kbench_ci.results.writers import run_payload
from kbench_ci.suite.loader import find_config, load_suite
from kbench_ci.suite.model import Case, KernelSpec
from kbench_ci.suite.settings import Execution, ExecutionOptions, job_settings
from kbench_ci.suite.settings import execution as suite_execution_settings


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
    worker: WorkerFn | None = None,
    execution: Execution | None = None,
    options: ExecutionOptions | None = None,
) -> RunOutcome:
    """Check and time every selected case of the suite found from ``request.start``.

    ``options``: the command line's ``--fresh-worker``, ``--cache-dir``, ``--no-cache``, resolved
    against the environment and kbench.toml; ``execution`` (tests) is an already resolved choice.
    ``worker`` (tests) stands in for the worker pool.
    """
    started = time.perf_counter()
    config_path = find_config(request.start, request.config)
    suite = load_suite(config_path)
    kernels = select_kernels(suite.kernels, request.kernels)
    kinds = {k.name: implementation_of(k) for k in kernels}
    check_runnable(kernels, request.device)
    check_user_files(kernels)
    settings = job_settings(suite.settings, device=request.device, rounds=request.rounds, seeds=request.seeds)
    cases, shard = _plan_cases(kernels, request, suite.root)
    gpus = request.gpus if len(request.gpus) > 1 else ()
    chosen = execution or suite_execution_settings(suite.settings, options)
    report = _RunReport(
        request=request, config_path=config_path, settings=settings, total_cases=len(cases), shard=shard,
        gpus=gpus, started=started, isolation=chosen.isolation,
        # Read before anything runs (a kernel could change the tree): history records it.
        commit=measured_commit(suite.root, request.output_dir),
    )
    driver = SuiteDriver(cases, report, on_progress=on_progress)
    with suite_execution(
        chosen, device=request.device, gpus=gpus,
        build_fn=build_fn, worker=worker, kinds=kinds.values(), sides=("solution",),
    ) as shared:
        measure = _MeasureRunCase(request, settings, kinds, suite.root, shared.builder)
        builds = [BuildRequest(k, "solution", kinds[k.name], suite.root) for k in kernels]
        driver.measure_all(shared, builds, measure)
    return driver.write()


def _plan_cases(
    kernels: Sequence[KernelSpec], request: RunRequest, root: Path
) -> tuple[tuple[Case, ...], ShardRecord | None]:
    """Every kernel × shape in file order; with ``--shard K/N`` this job's share of them, and the
    shard record (with the commit it ran on: merge checks both)."""
    cases = tuple(Case(k, dims) for k in kernels for dims in k.shapes)
    shard = plan_shard(
        [case.case_id for case in cases], request.shard,
        commit=rev_parse("HEAD", root) if request.shard is not None else None,
    )
    if shard is not None:
        cases = tuple(case for case in cases if case.case_id in shard.case_ids)
    return cases, shard


@dataclass(frozen=True, slots=True)
class _RunReport:
    """``run``'s results: its finished cases into a :class:`RunOutcome`, results.json and
    benchmark.md (for :class:`~kbench_ci.gate.driver.SuiteDriver`)."""

    request: RunRequest
    config_path: Path
    settings: MeasureSettings
    total_cases: int
    shard: ShardRecord | None
    gpus: tuple[GpuSlot, ...]
    commit: CommitRecord | None
    #: perf_counter() when the command began: the outcome's wall time counts from it
    started: float
    #: how the cases run (the resolved ``--isolation``)
    isolation: str = "process"

    def outcome(self, cases: tuple[RunCase, ...], environment: Mapping[str, Any] | None) -> RunOutcome:
        return RunOutcome(
            cases=cases, total_cases=self.total_cases, config_path=self.config_path, settings=self.settings,
            environment=environment, results_path=self.request.output_dir / "results.json",
            report_path=self.request.output_dir / "benchmark.md", wall_s=time.perf_counter() - self.started,
            shard=self.shard, gpus=self.gpus, commit=self.commit, isolation=self.isolation,
        )

    def payload(self, outcome: RunOutcome) -> dict[str, Any]:
        return run_payload(outcome, self.request)

    def render(self, outcome: RunOutcome) -> str:
        return render_run(outcome)


@dataclass(frozen=True, slots=True)
class _MeasureRunCase:
    """How ``run`` measures one case, on its lane's worker: the solution built (a ``.cu``), then
    checked and timed with the suite's baselines."""

    request: RunRequest
    settings: MeasureSettings
    #: kernel name → implementation kind
    kinds: Mapping[str, str]
    root: Path
    builder: SideBuilder

    def __call__(self, slot: CaseSlot, case: Case) -> Measured[RunCase]:
        kind = self.kinds[case.kernel.name]
        slot.say("build")
        t0 = time.perf_counter()
        spec, build = self.builder.side(case.kernel, label="solution", kind=kind, cwd=self.root)
        build_s = time.perf_counter() - t0 if build is not None else 0.0
        run: WorkerRun | None = None
        if spec is not None:
            job = make_job(case, (spec,), replace(self.settings, device=slot.lane.device))
            timeout = self.request.case_timeout_s or case.kernel.timeout_s
            run = run_worker(
                job, timeout_s=job_timeout_s(timeout, job), worker=slot.lane.worker, on_event=slot.listener("measure"),
            )
        result = run.result if run is not None else None
        status, message = assess_run_case(result, build)
        measured = RunCase(
            case_id=case.case_id, kernel=case.kernel.name, dims=case.dims, status=status, message=message,
            variant=result.variant("solution") if result is not None else None, result=result, build=build,
            throttle_reasons=throttle_reasons(result),
            phases=PhaseTimes(build_s=build_s) + (run.phases if run is not None else PhaseTimes()),
            implementation=kind, gpu=slot.gpu,
            # ref.py, setup() or a setting to blame, not the kernel: run exits 2 for it
            user_error=run.user_error("solution") if run is not None and status == "failed" else None,
        )
        return Measured(
            measured, measured.status, measured.message, environment=run.environment if run is not None else None,
            problem=run.environment_error() if run is not None else None,
        )


def measured_commit(root: Path, output_dir: Path) -> CommitRecord | None:
    """HEAD of the repository holding the suite, and whether the tree differs from it; None
    outside a git repository (or without git)."""
    sha = rev_parse("HEAD", root)
    if sha is None:
        return None
    try:
        dirty = GitRepo(root).is_dirty(own_outputs=[output_dir])
    except KbenchError:
        return None
    return CommitRecord(sha, dirty)
