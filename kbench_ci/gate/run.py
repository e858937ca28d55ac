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
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from kbench_ci import __version__
from kbench_ci.errors import KbenchError
from kbench_ci.gate.execute import (
    BuildFn,
    BuildRequest,
    Lane,
    ProgressFn,
    SuiteProgress,
    WorkerFn,
    WorkerRun,
    check_runnable,
    check_size_expressions,
    distribute,
    implementation_of,
    job_timeout_s,
    make_job,
    run_worker,
    select_kernels,
    suite_execution,
    worker_listener,
)
from kbench_ci.gate.shard import plan_shard
from kbench_ci.git import GitRepo, rev_parse
from kbench_ci.report.run import render_run
from kbench_ci.results.atomic import write_json_atomically, write_text_atomically
from kbench_ci.results.model import BaselineSpeedup, CaseResult, throttle_reasons
from kbench_ci.results.outcome import (
    BuildOutcome,
    CommitRecord,
    PhaseTimes,
    RunCase,
    RunOutcome,
    RunRequest,
    RunStatus,
    gpus_shared,
)
from kbench_ci.results.schema import RUN_SCHEMA, RUN_SCHEMA_VERSION
from kbench_ci.stats import summarize
from kbench_ci.suite.loader import find_config, load_suite
from kbench_ci.suite.model import Case, Suite
from kbench_ci.suite.settings import Execution, ExecutionOptions, job_settings
from kbench_ci.suite.settings import execution as suite_execution_settings

# --------------------------------------------------------------------------------------------
# Settings → job
# --------------------------------------------------------------------------------------------


# --------------------------------------------------------------------------------------------
# Building a side
# --------------------------------------------------------------------------------------------


# --------------------------------------------------------------------------------------------
# One worker call, with the time split by phase
# --------------------------------------------------------------------------------------------


# --------------------------------------------------------------------------------------------
# Progress (for the CLI's progress line)
# --------------------------------------------------------------------------------------------


# --------------------------------------------------------------------------------------------
# `kbench-ci run`
# --------------------------------------------------------------------------------------------


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


@dataclass(frozen=True, slots=True)
class _Measured:
    """One case as its lane hands it to the writer: the case, the worker call, its wall time."""

    case: RunCase
    run: WorkerRun | None
    seconds: float
    gpu: str | None


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
    check_size_expressions(kernels, config_path.name)
    check_runnable(kernels, request.device)
    settings = job_settings(suite.settings, device=request.device, rounds=request.rounds)
    cases = tuple(Case(k, dims) for k in kernels for dims in k.shapes)
    # --shard K/N: this job's share of the cases, and the commit it ran on (merge checks both)
    shard = plan_shard(
        [case.case_id for case in cases], request.shard,
        commit=rev_parse("HEAD", suite.root) if request.shard is not None else None,
    )
    if shard is not None:
        cases = tuple(case for case in cases if case.case_id in shard.case_ids)
    results_path = request.output_dir / "results.json"
    report_path = request.output_dir / "benchmark.md"
    # Read before anything runs (a kernel could change the tree): history records it.
    commit = measured_commit(suite.root, request.output_dir)

    gpus = request.gpus if len(request.gpus) > 1 else ()
    finished: dict[int, RunCase] = {}
    environment: Mapping[str, Any] | None = None

    def snapshot() -> RunOutcome:
        return RunOutcome(
            # in suite order, whichever GPU finished first
            cases=tuple(finished[i] for i in sorted(finished)), total_cases=len(cases), config_path=config_path,
            settings=settings, environment=environment, results_path=results_path, report_path=report_path,
            wall_s=time.perf_counter() - started, shard=shard, gpus=gpus, commit=commit,
        )

    def write() -> RunOutcome:
        outcome = snapshot()
        write_json_atomically(results_path, run_payload(outcome, suite, request))
        write_text_atomically(report_path, render_run(outcome))
        return outcome

    with suite_execution(
        execution or suite_execution_settings(suite.settings, options), device=request.device, gpus=gpus,
        build_fn=build_fn, worker=worker, kinds=kinds.values(),
    ) as shared:
        shared.start([BuildRequest(k, "solution", kinds[k.name], suite.root) for k in kernels])
        if on_progress is not None:
            on_progress(SuiteProgress(0, len(cases), "", "start"))

        def measure(lane: Lane, position: int, case: Case) -> _Measured:
            """One case on ``lane``'s worker (in that lane's thread when there are several)."""
            index = position + 1
            gpu = lane.gpu.label if gpus and lane.gpu is not None else None
            case_started = time.perf_counter()
            kind = kinds[case.kernel.name]
            if on_progress is not None:
                on_progress(SuiteProgress(index, len(cases), case.case_id, "build", gpu=gpu))
            t0 = time.perf_counter()
            spec, build = shared.builder.side(case.kernel, label="solution", kind=kind, cwd=suite.root)
            build_s = time.perf_counter() - t0 if build is not None else 0.0
            run: WorkerRun | None = None
            if spec is not None:
                job = make_job(case, (spec,), replace(settings, device=lane.device))
                timeout = request.case_timeout_s or case.kernel.timeout_s
                run = run_worker(
                    job, timeout_s=job_timeout_s(timeout, job), worker=lane.worker,
                    on_event=worker_listener(on_progress, index, len(cases), case.case_id, "measure", gpu),
                )
            result = run.result if run is not None else None
            status, message = assess_run_case(result, build)
            phases = PhaseTimes(build_s=build_s) + (run.phases if run is not None else PhaseTimes())
            measured = RunCase(
                case_id=case.case_id, kernel=case.kernel.name, dims=case.dims, status=status, message=message,
                variant=result.variant("solution") if result is not None else None, result=result, build=build,
                throttle_reasons=throttle_reasons(result), phases=phases, implementation=kind,
                gpu=lane.gpu if gpus else None,
            )
            return _Measured(measured, run, time.perf_counter() - case_started, gpu)

        def record(position: int, measured: _Measured) -> None:
            """Write the case (the only writer: the main thread), say so, then stop on a problem
            of the machine."""
            nonlocal environment
            run = measured.run
            if run is not None:
                environment = environment or run.environment
            finished[position] = measured.case
            write()
            if on_progress is not None:
                case = measured.case
                on_progress(SuiteProgress(
                    position + 1, len(cases), case.case_id, "done", outcome=case.status, detail=case.message,
                    seconds=measured.seconds, gpu=measured.gpu,
                ))
            problem = run.environment_error() if run is not None else None
            if problem is not None:
                raise problem

        distribute(cases, shared.lanes, measure, record)
    return write()


def _baseline_json(speedup: BaselineSpeedup, result: CaseResult | None) -> dict[str, Any]:
    return {**speedup.as_json(), "result": result.variant(speedup.name) if result is not None else None}


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


def run_payload(outcome: RunOutcome, suite: Suite | None, request: RunRequest) -> dict[str, Any]:
    """results.json of ``run``: schema ``kbench-ci/run`` version 1."""

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
            "event_overhead_ms": case.result.event_overhead_ms if case.result else None,
            "cupti_residual_ms": case.result.cupti_residual_ms if case.result else None,
            "error": case.result.error if case.result else None,
            "build": case.build.as_json() if case.build else None,
            "seconds": case.phases.as_json(),
            "result": case.variant,
            # the suite's baselines, each with its raw samples, and the solution's speedup over it
            "baselines": [_baseline_json(b, case.result) for b in case.baselines],
            # --gpus: the CUDA index (as this machine counts them) of the GPU that measured it
            "gpu_index": case.gpu.index if case.gpu is not None else None,
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
        "shard": outcome.shard.as_json() if outcome.shard is not None else None,
        # --gpus: the workers the cases were spread over; shared: two on one GPU (timings not valid)
        "gpus": [slot.as_json() for slot in outcome.gpus],
        "gpus_shared": gpus_shared(outcome.gpus),
        # the commit measured, for `history record` (dirty: the tree differed from it)
        "commit": outcome.commit.as_json() if outcome.commit is not None else None,
    }
