"""``kbench-ci compare``: head vs base, case by case, into verdicts and a gate.

The flow for one comparison:

1. Resolve both revisions once (:meth:`GitRepo.resolve_revisions`): by default the base is the
   merge base of ``--base`` and the head, so commits that landed on the base branch since are not
   blamed on the head. The head is the working tree as it is (uncommitted changes included)
   unless ``--head REV`` names a commit.
2. Check the base (and a ``--head`` commit) out into temporary git worktrees, removed on the way
   out, also on an error or Ctrl-C. The user's tree is only read.
3. Each side reads its own copy of the suite. Cases are matched by kernel name and dimensions;
   a case on one side only is ``added`` or ``removed``.
4. Every side's ``.cu`` starts building at once, before the first case (see
   :class:`~kbench_ci.gate.execute.SideBuilder`; cached across runs). Per case, the warm worker
   (one process for the whole suite, see :class:`~kbench_ci.measure.parent.WorkerPool`) checks
   both sides' correctness and times them interleaved in rounds (A B, B A, ...).
   A suspected regression (:func:`~kbench_ci.stats.needs_remeasure`) is measured again with
   ``remeasure_factor`` times the rounds, and that second measurement decides. With ``--gpus``
   the cases are spread over one warm worker per GPU (:func:`~kbench_ci.gate.execute.distribute`);
   a case's sides and its re-measurement stay on one GPU.
5. After every case, results.json and benchmark.md are rewritten (atomically, by the main thread
   only, with the cases in suite order).

Everything here returns frozen dataclasses; nothing prints. The verdict of one case is decided
by :func:`assess`, a pure function of the two sides' results (unit-tested without a worker).
"""

from __future__ import annotations

import datetime as dt
import difflib
import logging
import sys
import time
from collections.abc import Mapping
from contextlib import ExitStack
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from kbench_ci import __version__
from kbench_ci.errors import ConfigError, KbenchError, UsageError
from kbench_ci.gate.execute import (
    BuildFn,
    BuildRequest,
    Lane,
    ProgressFn,
    SideBuilder,
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
from kbench_ci.gate.verdicts import _percent, assess, evaluate_gate, measure_case
from kbench_ci.git import GitRepo
from kbench_ci.measure.impls import COMPILED_KINDS
from kbench_ci.measure.protocol import StoppingRule
from kbench_ci.report.compare import render_compare
from kbench_ci.results.atomic import write_json_atomically, write_text_atomically
from kbench_ci.results.model import CaseResult, MeasureSettings
from kbench_ci.results.outcome import (
    ACCEPT_ALL,
    ALPHA,
    BASE,
    CONFIDENCE,
    HEAD,
    Assessment,
    CaseComparison,
    CompareOutcome,
    CompareRequest,
    Measurement,
    PhaseTimes,
    RevisionInfo,
    gpus_shared,
)
from kbench_ci.results.schema import COMPARE_SCHEMA, COMPARE_SCHEMA_VERSION
from kbench_ci.stats import RatioEstimate, Verdict
from kbench_ci.suite.loader import find_config, load_suite
from kbench_ci.suite.model import Case, KernelSpec, Suite
from kbench_ci.suite.settings import (
    ADAPTIVE_BATCH_GROWTH,
    ADAPTIVE_BATCH_ROUNDS,
    ADAPTIVE_CHECK_BOOTSTRAP,
    MAX_ADAPTIVE_ROUNDS,
    Execution,
    ExecutionOptions,
    job_settings,
)
from kbench_ci.suite.settings import execution as suite_execution_settings

_log = logging.getLogger(__name__)

# --------------------------------------------------------------------------------------------
# Value objects
# --------------------------------------------------------------------------------------------


# --------------------------------------------------------------------------------------------
# Verdicts (pure)
# --------------------------------------------------------------------------------------------


def _progress_detail(case: CaseComparison) -> str | None:
    """``+2.31% [+1.90%, +2.75%] (remeasured)``, or the case's message when it has no ratio."""
    estimate = case.estimate
    if estimate is None:
        return case.message
    text = (
        f"{_percent(estimate.ratio - 1.0)} "
        f"[{_percent(estimate.ci_low - 1.0)}, {_percent(estimate.ci_high - 1.0)}], p = {estimate.p_value:.3g}"
    )
    return text + (" (remeasured)" if case.remeasured else "") + (" ⚠️ throttled" if case.throttled else "")


# --------------------------------------------------------------------------------------------
# Orchestration
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Plan:
    """One case to compare: its head and base copies (either may be missing)."""

    head: Case | None
    base: Case | None

    @property
    def case(self) -> Case:
        return self.head if self.head is not None else self.base  # type: ignore[return-value]


def _case_key(case: Case) -> tuple[str, frozenset[tuple[str, int]]]:
    # Dimensions as a set: the same shape written in another order is the same case.
    return case.kernel.name, frozenset(case.dims.items())


def _config_relative(request: CompareRequest, repo_root: Path) -> tuple[Path, Path | None]:
    """Where the command ran, and an explicit ``--config``, relative to the repository root."""
    root = repo_root.resolve()
    start = Path(request.start).resolve()
    try:
        start_rel = start.relative_to(root)
    except ValueError:
        start_rel = Path(".")
    explicit_rel = None
    if request.config is not None:
        path = Path(request.config)
        absolute = (path if path.is_absolute() else start / path).resolve()
        try:
            explicit_rel = absolute.relative_to(root)
        except ValueError:
            raise UsageError(
                f"--config {request.config} is outside the repository {root}",
                hint="compare reads the suite from each side's own tree, so it must be tracked in the repository",
            ) from None
    return start_rel, explicit_rel


def _find_in_tree(tree: Path, start_rel: Path, explicit_rel: Path | None) -> Path:
    return find_config(tree / start_rel, tree / explicit_rel if explicit_rel is not None else None)


def _load_base_suite(tree: Path, start_rel: Path, explicit_rel: Path | None) -> tuple[Suite | None, str | None, Path | None]:
    """The base's own suite; a base without one (or with one that does not load) has no baselines."""
    try:
        path = _find_in_tree(tree, start_rel, explicit_rel)
    except ConfigError:
        where = explicit_rel or "kbench.toml"
        return None, f"the base has no {where}", None
    try:
        return load_suite(path, check_files=False), None, path
    except KbenchError as exc:
        return None, f"the base's suite does not load: {exc.one_line()}", path


def _relative_label(path: Path | None, tree: Path) -> str | None:
    if path is None:
        return None
    try:
        return str(Path(path).resolve().relative_to(Path(tree).resolve()))
    except ValueError:
        return str(path)


def run_compare(
    request: CompareRequest,
    *,
    on_progress: ProgressFn | None = None,
    build_fn: BuildFn | None = None,
    worker: WorkerFn | None = None,
    execution: Execution | None = None,
    options: ExecutionOptions | None = None,
) -> CompareOutcome:
    """Compare the head with the base over every selected case; see the module docstring.

    ``options``: the command line's ``--fresh-worker``, ``--cache-dir``, ``--no-cache``, resolved
    against the environment and the head's kbench.toml; ``execution`` (tests) is an already
    resolved choice. ``worker`` (tests) stands in for the worker pool.
    """

    started = time.perf_counter()
    if request.remeasure_factor < 1:
        raise UsageError("the remeasure factor must be at least 1")
    repo = GitRepo(Path(request.start))
    revisions = repo.resolve_revisions(request.base, request.head, request.base_mode)
    start_rel, explicit_rel = _config_relative(request, repo.root)

    with ExitStack() as stack:
        if revisions.head_sha is None:
            # The working tree as it is: read its suite before any checkout, so a bad config
            # fails in a second.
            head_tree = repo.root
            head_config = _find_in_tree(head_tree, start_rel, explicit_rel)
            head_suite = load_suite(head_config)
            # "abc1234" or "working tree (dirty) at abc1234"; this run's own output folder (and
            # an earlier run's report folder) is no change of the tree.
            own_output = request.output_dir if request.output_dir.is_absolute() else Path(request.start) / request.output_dir
            described = repo.head_description(own_outputs=(own_output,))
            if not described.startswith("working tree"):
                described = f"working tree (clean) at {described}"
            head_info = RevisionInfo(
                label=HEAD, ref=None, sha=repo.resolve("HEAD"), description=described,
                tree="working tree", config=_relative_label(head_config, head_tree),
            )
            base_tree = stack.enter_context(repo.worktree(revisions.base_sha))
        else:
            base_tree = stack.enter_context(repo.worktree(revisions.base_sha))
            head_tree = stack.enter_context(repo.worktree(revisions.head_sha))
            head_config = _find_in_tree(head_tree, start_rel, explicit_rel)
            head_suite = load_suite(head_config)
            head_info = RevisionInfo(
                label=HEAD, ref=revisions.head_ref, sha=revisions.head_sha,
                description=f"{revisions.head_ref} @ {revisions.head_sha[:12]}", tree="worktree",
                config=_relative_label(head_config, head_tree),
            )
        base_suite, base_note, base_config = _load_base_suite(base_tree, start_rel, explicit_rel)
        base_info = RevisionInfo(
            label=BASE, ref=revisions.base_ref, sha=revisions.base_sha,
            description=(
                f"merge base of {revisions.base_ref} and {request.head or 'HEAD'} @ {revisions.base_sha[:12]}"
                if revisions.base_mode == "merge-base"
                else f"{revisions.base_ref} @ {revisions.base_sha[:12]}"
            ),
            tree="worktree", mode=revisions.base_mode, merge_base_of=revisions.merge_base_of,
            config=_relative_label(base_config, base_tree), note=base_note,
        )

        base_kernels_all = base_suite.kernels if base_suite is not None else ()
        head_kernels = select_kernels(head_suite.kernels, request.kernels, also_known=[k.name for k in base_kernels_all])
        wanted = {k.name for k in head_kernels} | (set(request.kernels) if request.kernels else {k.name for k in base_kernels_all})
        base_kernels = tuple(k for k in base_kernels_all if k.name in wanted)
        head_kinds = {k.name: implementation_of(k) for k in head_kernels}
        check_size_expressions(head_kernels, head_config.name)
        check_runnable(head_kernels, request.device)
        settings = job_settings(
            head_suite.settings, device=request.device, rounds=request.rounds, time_budget_s=request.time_budget_s
        )
        max_geomean = (
            request.max_geomean_slowdown
            if request.max_geomean_slowdown is not None
            else head_suite.settings.max_geomean_slowdown
        )

        base_by_key = {_case_key(c): c for k in base_kernels for c in (Case(k, d) for d in k.shapes)}
        plans: list[_Plan] = []
        for kernel in head_kernels:
            for dims in kernel.shapes:
                case = Case(kernel, dims)
                plans.append(_Plan(case, base_by_key.pop(_case_key(case), None)))
        plans.extend(_Plan(None, case) for case in base_by_key.values())
        check_accept(request.accept, plans)
        # --shard K/N: this job's share of both sides' cases (--accept was checked against all)
        shard = plan_shard([plan.case.case_id for plan in plans], request.shard)
        if shard is not None:
            plans = [plan for plan in plans if plan.case.case_id in shard.case_ids]

        results_path = request.output_dir / "results.json"
        report_path = request.output_dir / "benchmark.md"
        gpus = request.gpus if len(request.gpus) > 1 else ()
        finished: dict[int, CaseComparison] = {}
        environment: dict[str, Any] = {}
        setup_s = time.perf_counter() - started

        def snapshot() -> CompareOutcome:
            # in suite order, whichever GPU finished first
            done = [finished[i] for i in sorted(finished)]
            return CompareOutcome(
                cases=tuple(done), total_cases=len(plans),
                gate=evaluate_gate(done, total=len(plans), max_geomean_slowdown=max_geomean),
                base=base_info, head=head_info, settings=settings, request=request,
                environment=environment.get("value"), results_path=results_path, report_path=report_path,
                wall_s=time.perf_counter() - started, setup_s=setup_s, max_geomean_slowdown=max_geomean,
                shard=shard,
            )

        def write() -> CompareOutcome:

            outcome = snapshot()
            write_json_atomically(results_path, compare_payload(outcome))
            write_text_atomically(report_path, render_compare(outcome))
            return outcome

        write()  # an empty, incomplete report at once: the gate reads "not passed" until the end
        # One builder and one warm worker (one per --gpus entry) for the whole suite, closed on the
        # way out (Ctrl-C and SIGTERM included: the stack unwinds before the worktrees go).
        shared = stack.enter_context(suite_execution(
            execution or suite_execution_settings(head_suite.settings, options), device=request.device, gpus=gpus,
            build_fn=build_fn, worker=worker,
            kinds=[*head_kinds.values(), *(kind for k in base_kernels if (kind := _base_kind(k, request.device)[0]))],
        ))
        shared.start(_build_requests(plans, request, head_suite, base_suite, head_kinds))
        _log.debug("set up in %.0f ms (git, suites); builds begun, workers starting", 1e3 * setup_s)
        if on_progress is not None:
            on_progress(SuiteProgress(0, len(plans), "", "start"))

        def measure(lane: Lane, position: int, plan: _Plan) -> _Compared:
            """Both sides of one case, and its re-measurement, on ``lane``'s worker (one GPU)."""
            case_started = time.perf_counter()
            gpu = lane.gpu.label if gpus and lane.gpu is not None else None
            comparison, problem = _compare_one(
                plan, index=position + 1, total=len(plans), request=request,
                settings=replace(settings, device=lane.device), builder=shared.builder,
                head_suite=head_suite, base_suite=base_suite, head_kinds=head_kinds,
                on_progress=on_progress, worker=lane.worker, gpu=gpu,
            )
            if gpus:
                comparison = replace(comparison, gpu=lane.gpu)
            return _Compared(comparison, problem, time.perf_counter() - case_started, gpu)

        def record(position: int, compared: _Compared) -> None:
            """Write the case (the only writer: the main thread), say so, then stop on a problem
            of the machine."""
            comparison = compared.comparison
            if comparison.verdict is Verdict.SLOWER and accepts(request.accept, comparison.kernel, comparison.case_id):
                comparison = replace(comparison, accepted=True)
            finished[position] = comparison
            if "value" not in environment:
                for measurement in (comparison.first, comparison.measurement):
                    if measurement is not None and measurement.environment:
                        environment["value"] = measurement.environment
                        break
            write()
            if on_progress is not None:
                on_progress(SuiteProgress(
                    position + 1, len(plans), comparison.case_id, "done", outcome=comparison.verdict_text,
                    detail=_progress_detail(comparison), seconds=compared.seconds, gpu=compared.gpu,
                ))
            if compared.problem is not None:
                raise compared.problem

        distribute(plans, shared.lanes, measure, record)
        _log.debug("%d cases measured; writing the report, then stopping workers and removing worktrees", len(plans))
        return write()


@dataclass(frozen=True, slots=True)
class _Compared:
    """One case as its lane hands it to the writer."""

    comparison: CaseComparison
    problem: KbenchError | None
    seconds: float
    gpu: str | None


def _build_requests(
    plans: list[_Plan], request: CompareRequest, head_suite: Suite, base_suite: Suite | None,
    head_kinds: Mapping[str, str],
) -> list[BuildRequest]:
    """Every build the cases will ask for, so all start at once (each kernel once per side)."""
    builds = []
    for plan in plans:
        if plan.head is None:
            continue
        builds.append(BuildRequest(plan.head.kernel, HEAD, head_kinds[plan.head.kernel.name], head_suite.root))
        if plan.base is not None and base_suite is not None:
            base_kind, unavailable = _base_kind(plan.base.kernel, request.device)
            if unavailable is None and base_kind is not None:
                builds.append(BuildRequest(plan.base.kernel, BASE, base_kind, base_suite.root))
    return builds


def accepts(accept: tuple[str, ...], kernel: str, case_id: str) -> bool:
    """Does ``--accept`` (kernel names, exact case ids, ``*``) cover this case?"""
    return any(entry in (ACCEPT_ALL, kernel, case_id) for entry in accept)


def check_accept(accept: tuple[str, ...], plans: list[_Plan]) -> None:
    """Every ``--accept`` entry names a kernel or an exact case id of this comparison: a typo
    would otherwise accept nothing, and the gate would fail for a reason the user thinks gone."""
    kernels = {plan.case.kernel.name for plan in plans}
    case_ids = [plan.case.case_id for plan in plans]
    for entry in accept:
        if entry == ACCEPT_ALL or entry in kernels or entry in case_ids:
            continue
        close = difflib.get_close_matches(entry, sorted(kernels) + case_ids, n=1)
        raise UsageError(
            f"--accept {entry}: no kernel or case of that name in this comparison",
            hint=f"did you mean {close[0]}?" if close else (
                "name a kernel (--accept softmax) or an exact case id (--accept 'softmax[N=2048]'), "
                f"e.g. {case_ids[0] if case_ids else 'KERNEL[N=...]'}"
            ),
        )


def _compare_one(
    plan: _Plan,
    *,
    index: int,
    total: int,
    request: CompareRequest,
    settings: MeasureSettings,
    builder: SideBuilder,
    head_suite: Suite,
    base_suite: Suite | None,
    head_kinds: Mapping[str, str],
    on_progress: ProgressFn | None,
    worker: WorkerFn,
    gpu: str | None = None,
) -> tuple[CaseComparison, KbenchError | None]:
    case = plan.case
    threshold = request.threshold if request.threshold is not None else case.kernel.threshold
    base_dims = dict(case.dims)
    if plan.head is None:
        assessment = assess(None, threshold=threshold, head_present=False)
        return CaseComparison(
            case_id=case.case_id, kernel=case.kernel.name, dims=base_dims, verdict=assessment.verdict,
            threshold=threshold, estimate=None, message=assessment.message,
        ), None

    if on_progress is not None:
        on_progress(SuiteProgress(index, total, case.case_id, "build", gpu=gpu))
    head_kind = head_kinds[case.kernel.name]
    t0 = time.perf_counter()
    head_spec, head_build = builder.side(plan.head.kernel, label=HEAD, kind=head_kind, cwd=head_suite.root)

    base_spec, base_build, base_kind, base_unavailable = None, None, None, None
    if plan.base is not None and head_spec is not None:
        base_kind, base_unavailable = _base_kind(plan.base.kernel, request.device)
        if base_unavailable is None and base_kind is not None and base_suite is not None:
            base_spec, base_build = builder.side(plan.base.kernel, label=BASE, kind=base_kind, cwd=base_suite.root)
    build_s = time.perf_counter() - t0 if (head_build or base_build) else 0.0

    def judge(result: CaseResult) -> Assessment:
        return assess(
            result, threshold=threshold, base_present=plan.base is not None, head_build=head_build,
            base_build=base_build, base_unavailable=base_unavailable,
        )

    if head_spec is None:
        assessment = judge(None)  # type: ignore[arg-type]
        return CaseComparison(
            case_id=case.case_id, kernel=case.kernel.name, dims=base_dims, verdict=assessment.verdict,
            threshold=threshold, estimate=None, message=assessment.message, base_build=base_build,
            head_build=head_build, base_kind=base_kind, head_kind=head_kind, phases=PhaseTimes(build_s=build_s),
        ), None

    sides = (base_spec, head_spec) if base_spec is not None else (head_spec,)
    timeout = request.case_timeout_s if request.case_timeout_s is not None else plan.head.kernel.timeout_s
    stage = {"name": "measure"}

    # Both sides timed: rounds past the minimum until the verdict at this case's threshold is
    # decided or the time budget is spent (see StoppingRule).
    stopping = (
        StoppingRule(
            threshold=threshold, budget_s=settings.time_budget_s, max_rounds=MAX_ADAPTIVE_ROUNDS,
            batch_rounds=ADAPTIVE_BATCH_ROUNDS, batch_growth=ADAPTIVE_BATCH_GROWTH,
            check_bootstrap=ADAPTIVE_CHECK_BOOTSTRAP, confidence=CONFIDENCE, alpha=ALPHA,
        )
        if settings.time_budget_s > 0 and len(sides) == 2
        else None
    )

    def run(n_rounds: int) -> WorkerRun:
        job = make_job(
            plan.head, sides, settings, rounds=n_rounds, stopping=stopping,  # type: ignore[arg-type]
            accept_changed_reference=accepts(request.accept, case.kernel.name, case.case_id),
        )
        return run_worker(
            job,
            # More rounds and more variants take longer: the timeout grows with them, and with the
            # adaptive budget.
            timeout_s=job_timeout_s(timeout, job) * max(1.0, n_rounds / settings.rounds) + settings.time_budget_s,
            worker=worker,
            on_event=worker_listener(on_progress, index, total, case.case_id, stage["name"], gpu),
        )

    def on_remeasure() -> None:
        stage["name"] = "remeasure"
        if on_progress is not None:
            on_progress(SuiteProgress(index, total, case.case_id, "remeasure", gpu=gpu))

    problems: list[KbenchError] = []

    def run_checked(n_rounds: int) -> WorkerRun:
        worker_run = run(n_rounds)
        problem = worker_run.environment_error()
        if problem is not None:
            problems.append(problem)
        return worker_run

    deciding, first = measure_case(
        run_checked, judge, threshold=threshold, rounds=settings.rounds,
        remeasure_factor=request.remeasure_factor, on_remeasure=on_remeasure,
    )
    phases = PhaseTimes(build_s=build_s) + deciding.phases + (first.phases if first is not None else PhaseTimes())
    message = deciding.assessment.message
    if first is not None:
        note = (
            f"remeasured with {deciding.rounds} rounds: first run {first.verdict.value}"
            + (f" ({_percent(first.estimate.ratio - 1.0)})" if first.estimate is not None else "")
        )
        message = f"{message}; {note}" if message else note
    goalposts = moved_goalposts(plan.base.kernel if plan.base else None, plan.head.kernel, base_suite, head_suite)
    if goalposts:
        warning = f"this pull request changes what `{case.kernel.name}` is checked against: {'; '.join(goalposts)}"
        message = f"{warning}. {message}" if message else warning
    comparison = CaseComparison(
        case_id=case.case_id, kernel=case.kernel.name, dims=base_dims, verdict=deciding.verdict,
        threshold=threshold, estimate=deciding.estimate, message=message, measurement=deciding, first=first,
        base_build=base_build, head_build=head_build, base_kind=base_kind, head_kind=head_kind, phases=phases,
        goalposts=goalposts,
    )
    return comparison, (problems[0] if problems else None)


def moved_goalposts(
    base: KernelSpec | None, head: KernelSpec, base_suite: Suite | None, head_suite: Suite
) -> tuple[str, ...]:
    """What the head changed of what its kernel is checked and judged against: ref.py (its
    reference() or setup()), the tolerances, threshold and shapes of its kbench.toml entry, the
    suite's seed. Empty when nothing changed, or the kernel is new."""
    if base is None or base_suite is None:
        return ()
    changes: list[str] = []
    try:
        if Path(base.ref).read_bytes() != Path(head.ref).read_bytes():
            changes.append(f"{Path(head.ref).name} (its reference() or setup())")
    except OSError:
        pass
    for name in ("atol", "rtol", "threshold"):
        before, after = getattr(base, name), getattr(head, name)
        if before != after:
            changes.append(f"{name} {'default' if before is None else before} → {'default' if after is None else after}")
    if [dict(s) for s in base.shapes] != [dict(s) for s in head.shapes]:
        changes.append("its shapes")
    if base_suite.settings.seed != head_suite.settings.seed:
        changes.append(f"seed {base_suite.settings.seed} → {head_suite.settings.seed}")
    return tuple(changes)


def _base_kind(kernel: KernelSpec, device: str) -> tuple[str | None, str | None]:
    """The base kernel's kind, or why the base cannot be run here (then there is no baseline)."""
    try:
        kind = implementation_of(kernel)
    except UsageError as exc:
        return None, f"the base's kernel entry is not usable: {exc.one_line()}"
    for role, path in (("solution", kernel.solution), ("ref", kernel.ref)):
        if not Path(path).is_file():
            return kind, f"the base has no {role} file {Path(path).name}"
    if kind in COMPILED_KINDS and not device.startswith("cuda"):
        return kind, "the base is CUDA C++ and this run is on the CPU"
    return kind, None


# --------------------------------------------------------------------------------------------
# results.json
# --------------------------------------------------------------------------------------------


def _estimate_json(estimate: RatioEstimate | None) -> dict[str, Any] | None:
    if estimate is None:
        return None
    return {
        "ratio": estimate.ratio, "ci_low": estimate.ci_low, "ci_high": estimate.ci_high,
        "p_value": estimate.p_value, "n_rounds": estimate.n_rounds, "confidence": estimate.confidence,
        "round_ratios": list(estimate.round_ratios),
    }


def _measurement_json(measurement: Measurement | None) -> dict[str, Any] | None:
    if measurement is None:
        return None
    result = measurement.result
    return {
        "verdict": measurement.verdict.value,
        "message": measurement.assessment.message,
        "rounds": measurement.rounds,
        "estimate": _estimate_json(measurement.estimate),
        "base": result.variant(BASE),
        "head": result.variant(HEAD),
        "timing_method": result.timing_method,
        "timing_description": result.timing_description,
        "event_overhead_ms": getattr(result, "event_overhead_ms", None),
        "cupti_residual_ms": getattr(result, "cupti_residual_ms", None),
        "error": result.error,
        "gpu_state_before": result.gpu_state_before,
        "gpu_state_after": result.gpu_state_after,
        "seconds": measurement.phases.as_json(),
    }


def case_json(case: CaseComparison) -> dict[str, Any]:
    estimate = case.estimate
    result = case.result
    return {
        "case_id": case.case_id,
        "kernel": case.kernel,
        "dims": dict(case.dims),
        "verdict": case.verdict.value,
        "accepted": case.accepted,
        "goalposts": list(case.goalposts),
        "threshold": case.threshold,
        "ratio": estimate.ratio if estimate else None,
        "ci_low": estimate.ci_low if estimate else None,
        "ci_high": estimate.ci_high if estimate else None,
        "p_value": estimate.p_value if estimate else None,
        "n_rounds": estimate.n_rounds if estimate else None,
        "round_ratios": list(estimate.round_ratios) if estimate else None,
        "remeasured": case.remeasured,
        "throttled": case.throttled,
        "throttle_reasons": list(case.throttle_reasons),
        "base": case.base,
        "head": case.head,
        # the suite's baselines, timed with the head: the head's speedup over each, raw samples
        "baselines": [
            {**b.as_json(), "result": result.variant(b.name) if result is not None else None} for b in case.baselines
        ],
        "message": case.message,
        "implementation": {"base": case.base_kind, "head": case.head_kind},
        "timing_method": result.timing_method if result else None,
        "timing_description": result.timing_description if result else None,
        "event_overhead_ms": getattr(result, "event_overhead_ms", None) if result else None,
        "cupti_residual_ms": getattr(result, "cupti_residual_ms", None) if result else None,
        "error": result.error if result else None,
        "gpu_state_before": result.gpu_state_before if result else None,
        "gpu_state_after": result.gpu_state_after if result else None,
        "first_measurement": _measurement_json(case.first),
        "builds": {
            "base": case.base_build.as_json() if case.base_build else None,
            "head": case.head_build.as_json() if case.head_build else None,
        },
        "seconds": case.phases.as_json(),
        # --gpus: the CUDA index (as this machine counts them) of the GPU that measured both sides
        "gpu_index": case.gpu.index if case.gpu is not None else None,
    }


def compare_payload(outcome: CompareOutcome) -> dict[str, Any]:
    """results.json of ``compare``: schema ``kbench-ci/compare`` version 1 (see docs/compare.md)."""
    phases = outcome.phases
    return {
        "schema": COMPARE_SCHEMA,
        "schema_version": COMPARE_SCHEMA_VERSION,
        "tool_version": __version__,
        "created": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "command_line": list(outcome.request.command_line) or sys.argv,
        "gate": outcome.gate.as_json(),
        "base": outcome.base.as_json(),
        "head": outcome.head.as_json(),
        "settings": outcome.settings_json(),
        "environment": outcome.environment,
        "seconds": {
            "wall": outcome.wall_s,
            "setup": outcome.setup_s,
            **{k: v for k, v in phases.as_json().items() if k != "total"},
        },
        "cases": [case_json(case) for case in outcome.cases],
        "shard": outcome.shard.as_json() if outcome.shard is not None else None,
        # --gpus: the workers the cases were spread over; shared: two on one GPU (timings not valid)
        "gpus": [slot.as_json() for slot in outcome.gpus],
        "gpus_shared": gpus_shared(outcome.gpus),
    }
