"""``kbench-ci compare``: head vs base, case by case, into verdicts and a gate.

The flow for one comparison:

1. Resolve both revisions once (:meth:`GitRepo.resolve_revisions`): by default the base is the
   merge base of ``--base`` and the head, so commits that landed on the base branch since are not
   blamed on the head. The head is the working tree as it is (uncommitted changes included)
   unless ``--head REV`` names a commit.
2. Check the base (and a ``--head`` commit) out into temporary git worktrees, removed on the way
   out, also on an error or Ctrl-C. The user's tree is only read.
3. Each side reads its own copy of the suite. Cases are matched by kernel name and dimensions;
   a case on one side only is ``added`` or ``removed``. The suite's ``[defaults]`` (rounds,
   trials, timing method, isolation, ...) are the base's where it has a suite: the head's are
   the pull request's, named in the report where they differ and applied once merged.
4. Every side's ``.cu`` starts building at once, before the first case (see
   :class:`~kbench_ci.gate.builds.SideBuilder`; cached across runs). Per case, the warm worker
   (one process for the whole suite, see :class:`~kbench_ci.measure.parent.WorkerPool`) checks
   both sides' correctness and times them interleaved in rounds (A B, B A, ...).
   A suspected regression (:func:`~kbench_ci.stats.needs_remeasure`) is measured again with
   ``remeasure_factor`` times the rounds, and that second measurement decides. With ``--gpus``
   the cases are spread over one warm worker per GPU (:func:`~kbench_ci.gate.distribute.distribute`);
   a case's sides and its re-measurement stay on one GPU. One case is
   :class:`~kbench_ci.gate.compare_case.MeasureComparison`'s job.
5. After every case, results.json and benchmark.md are rewritten (atomically, by the main thread
   only, with the cases in suite order): the :class:`~kbench_ci.gate.driver.SuiteDriver`'s loop,
   which ``run`` shares.

Everything here returns frozen dataclasses; nothing prints. The verdict of one case is decided
by :func:`assess`, a pure function of the two sides' results (unit-tested without a worker).
"""

from __future__ import annotations

import difflib
import logging
import time
from collections.abc import Mapping, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from kbench_ci.basefiles import GuardedFile, record
from kbench_ci.errors import ConfigError, KbenchError, UsageError
from kbench_ci.gate.builds import BuildFn, BuildRequest
from kbench_ci.gate.changed import changed_selection, selection_record
from kbench_ci.gate.compare_case import CasePlan, MeasureComparison, base_kind
from kbench_ci.gate.driver import SuiteDriver
from kbench_ci.gate.jobs import check_runnable, check_user_files, implementation_of, select_kernels
from kbench_ci.gate.lanes import suite_execution
from kbench_ci.gate.progress import ProgressFn
from kbench_ci.gate.shard import plan_shard
from kbench_ci.gate.worker_call import WorkerFn
from kbench_ci.git import GitRepo, ResolvedRevisions
from kbench_ci.report.compare import render_compare
from kbench_ci.results.decide import evaluate_gate
from kbench_ci.results.model import MeasureSettings
from kbench_ci.results.outcome import (
    ACCEPT_ALL,
    BASE,
    HEAD,
    CaseComparison,
    ChangedSelection,
    CompareOutcome,
    CompareRequest,
    RevisionInfo,
    ShardRecord,
)
from kbench_ci.results.writers import compare_payload
from kbench_ci.suite.loader import find_config, load_suite
from kbench_ci.suite.model import Case, KernelSpec, Suite
from kbench_ci.suite.settings import (
    Execution,
    ExecutionOptions,
    SuiteSettings,
    changed_settings,
    default_cache_dir,
    job_settings,
    relative_label,
)
from kbench_ci.suite.settings import execution as suite_execution_settings

_log = logging.getLogger(__name__)


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
    with ExitStack() as stack:
        sides = _read_sides(repo, revisions, request, stack)
        kernels, selection = _changed_only(repo, revisions, sides, _select_kernels(sides, request), request)
        # The head's files (the pull request's): read, never imported, before anything is built
        check_user_files(kernels.head)
        # The base's files as they are before any of the pull request's code runs (the head's
        # build command, a head's load): what is put back and checked before each base load.
        base_files = _record_base_files(kernels.base, sides.base_tree)
        settings = job_settings(
            sides.governing, device=request.device, rounds=request.rounds, time_budget_s=request.time_budget_s,
            seeds=request.seeds,
        )
        plans, shard = _plan_cases(kernels, request)
        chosen = execution or _cache_outside_the_pull_request(suite_execution_settings(sides.governing, options), sides)
        report = _CompareReport(
            request=request, base=sides.base_info, head=sides.head_info, settings=settings, total_cases=len(plans),
            max_geomean_slowdown=_max_geomean_slowdown(request, sides.governing), shard=shard, started=started,
            setup_s=time.perf_counter() - started, selection=selection, isolation=chosen.isolation,
        )
        driver = SuiteDriver(plans, report, on_progress=on_progress)
        driver.write()  # an empty, incomplete report at once: the gate reads "not passed" until the end
        # One builder and one warm worker (one per --gpus entry) for the whole suite, closed on the
        # way out (Ctrl-C and SIGTERM included: the stack unwinds before the worktrees go).
        shared = stack.enter_context(suite_execution(
            chosen, device=request.device,
            gpus=request.gpus if len(request.gpus) > 1 else (), build_fn=build_fn, worker=worker,
            kinds=[*kernels.head_kinds.values(), *(k for k in kernels.base_kinds.values() if k is not None)],
            sides=("base", "head"),
        ))
        _log.debug("set up in %.0f ms (git, suites); beginning builds, starting workers", 1e3 * report.setup_s)
        measure = MeasureComparison(
            request, settings, shared.builder, sides.head_suite, sides.base_suite, kernels.head_kinds,
            base_files=base_files, isolation=chosen.isolation,
        )
        driver.measure_all(shared, _build_requests(plans, sides, kernels, request.device), measure)
        _log.debug("%d cases measured; writing the report, then stopping workers and removing worktrees", len(plans))
        return driver.write()


@dataclass(frozen=True, slots=True)
class _Sides:
    """Both sides as read from their trees: each one's suite (the base may have none) and how
    the report names it."""

    head_suite: Suite
    head_config: Path
    head_info: RevisionInfo
    base_suite: Suite | None
    base_info: RevisionInfo
    #: each side's checkout root (the user's working tree for a head that is not a commit)
    head_tree: Path
    base_tree: Path

    @property
    def governing(self) -> SuiteSettings:
        """The ``[defaults]`` this compare runs with: the base's where it has a suite (trusted
        code, as its ref.py is), else the head's (a suite new in the pull request)."""
        return (self.base_suite or self.head_suite).settings


def _read_sides(repo: GitRepo, revisions: ResolvedRevisions, request: CompareRequest, stack: ExitStack) -> _Sides:
    """Check out what is not the working tree (into worktrees ``stack`` removes) and read each
    side's own suite. The working tree's suite is read before any checkout, so that a bad config
    fails in a second."""
    start_rel, explicit_rel = _config_relative(request, repo.root)
    if revisions.head_sha is None:
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
            tree="working tree", config=relative_label(head_config, head_tree),
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
            config=relative_label(head_config, head_tree),
        )
    base_suite, base_note, base_config = _load_base_suite(base_tree, start_rel, explicit_rel)
    if base_suite is not None:
        changes = changed_settings(base_suite.settings, head_suite.settings, base_root=base_suite.root,
                                   head_root=head_suite.root)
        if changes:
            head_info = replace(head_info, note=(
                f"the pull request changes the suite's [defaults] ({'; '.join(changes)}); this compare ran with "
                "the base's, as every compare does until the change is merged (the command line's options still apply)"
            ))
    base_info = RevisionInfo(
        label=BASE, ref=revisions.base_ref, sha=revisions.base_sha,
        description=(
            f"merge base of {revisions.base_ref} and {request.head or 'HEAD'} @ {revisions.base_sha[:12]}"
            if revisions.base_mode == "merge-base"
            else f"{revisions.base_ref} @ {revisions.base_sha[:12]}"
        ),
        tree="worktree", mode=revisions.base_mode, merge_base_of=revisions.merge_base_of,
        config=relative_label(base_config, base_tree), note=base_note,
    )
    return _Sides(head_suite, head_config, head_info, base_suite, base_info, head_tree, base_tree)


@dataclass(frozen=True, slots=True)
class _Kernels:
    """The kernels ``--kernel`` selects on each side, and each one's implementation kind (a base
    kernel's None when its entry is not usable)."""

    head: tuple[KernelSpec, ...]
    base: tuple[KernelSpec, ...]
    head_kinds: Mapping[str, str]
    base_kinds: Mapping[str, str | None]


def _select_kernels(sides: _Sides, request: CompareRequest) -> _Kernels:
    """The selected kernels of both sides, the head's checked before anything is built or run.
    A ``--kernel`` name known to the base only is no error (the kernel was removed)."""
    base_all = sides.base_suite.kernels if sides.base_suite is not None else ()
    head = select_kernels(sides.head_suite.kernels, request.kernels, also_known=[k.name for k in base_all])
    wanted = {k.name for k in head} | (set(request.kernels) if request.kernels else {k.name for k in base_all})
    base = tuple(k for k in base_all if k.name in wanted)
    head_kinds = {k.name: implementation_of(k) for k in head}
    check_runnable(head, request.device)
    return _Kernels(head, base, head_kinds, {k.name: base_kind(k, request.device)[0] for k in base})


def _changed_only(
    repo: GitRepo, revisions: ResolvedRevisions, sides: _Sides, kernels: _Kernels, request: CompareRequest
) -> tuple[_Kernels, ChangedSelection | None]:
    """``--changed-only``: the selected kernels that a change between the sides reaches, and
    the report's record of what was left out (gate/changed.py)."""
    if not request.changed_only:
        return kernels, None
    plan = changed_selection(
        repo, revisions.base_sha, revisions.head_sha,
        (sides.base_tree, sides.base_suite), (sides.head_tree, sides.head_suite),
    )
    keep = plan.affected_names
    record = selection_record(plan)
    selected = {k.name for k in kernels.head}
    record = replace(record, not_affected=tuple(name for name in record.not_affected if name in selected))
    return _Kernels(
        head=tuple(k for k in kernels.head if k.name in keep), base=tuple(k for k in kernels.base if k.name in keep),
        head_kinds={n: kind for n, kind in kernels.head_kinds.items() if n in keep},
        base_kinds={n: kind for n, kind in kernels.base_kinds.items() if n in keep},
    ), record


def _cache_outside_the_pull_request(execution: Execution, sides: _Sides) -> Execution:
    """The cache folder where the base's kbench.toml puts it inside its tree: the same place in
    the head's (the base's is a temporary worktree, gone after the run). Under the judge, never
    inside the head's tree: its files there are the pull request's, and a compiled kernel it
    committed under the base's cache folder would be the base's to load (slowed, or wrong);
    there the default folder serves instead."""
    folder = execution.cache_dir
    if folder is None:
        return execution
    head = Path(sides.head_tree)
    try:
        folder = head / Path(folder).resolve().relative_to(Path(sides.base_tree).resolve())
    except ValueError:
        pass
    # as written and as resolved: a link the pull request committed there may point anywhere
    inside = any(path.is_relative_to(tree) for path in (Path(folder).absolute(), Path(folder).resolve())
                 for tree in (head.absolute(), head.resolve()))
    if execution.isolation == "judge" and inside:
        _log.info("the cache folder %s is inside the pull request's tree: %s serves instead", folder, default_cache_dir())
        folder = default_cache_dir()
    return replace(execution, cache_dir=folder)


def _max_geomean_slowdown(request: CompareRequest, governing: SuiteSettings) -> float | None:
    if request.max_geomean_slowdown is not None:
        return request.max_geomean_slowdown
    return governing.max_geomean_slowdown


def _plan_cases(kernels: _Kernels, request: CompareRequest) -> tuple[list[CasePlan], ShardRecord | None]:
    """The head's cases in file order, each with its base copy, then the cases of the base only;
    with ``--shard K/N`` this job's share of them (``--accept`` is checked against all)."""
    base_by_key = {_case_key(c): c for k in kernels.base for c in (Case(k, d) for d in k.shapes)}
    plans: list[CasePlan] = []
    for kernel in kernels.head:
        for dims in kernel.shapes:
            case = Case(kernel, dims)
            plans.append(CasePlan(case, base_by_key.pop(_case_key(case), None)))
    plans.extend(CasePlan(None, case) for case in base_by_key.values())
    check_accept(request.accept, plans)
    shard = plan_shard([plan.case.case_id for plan in plans], request.shard)
    if shard is not None:
        plans = [plan for plan in plans if plan.case.case_id in shard.case_ids]
    return plans, shard


@dataclass(frozen=True, slots=True)
class _CompareReport:
    """``compare``'s results: its finished cases into a :class:`CompareOutcome` with the gate,
    results.json and benchmark.md (for :class:`~kbench_ci.gate.driver.SuiteDriver`)."""

    request: CompareRequest
    base: RevisionInfo
    head: RevisionInfo
    settings: MeasureSettings
    total_cases: int
    max_geomean_slowdown: float | None
    shard: ShardRecord | None
    #: perf_counter() when the command began: the outcome's wall time counts from it
    started: float
    #: git, both suites and the plan, before the first build
    setup_s: float
    #: ``--changed-only``: what was left out, and why the rest was measured
    selection: ChangedSelection | None = None
    #: how the sides run (the resolved ``--isolation``)
    isolation: str = "process"

    def outcome(self, cases: tuple[CaseComparison, ...], environment: Mapping[str, Any] | None) -> CompareOutcome:
        return CompareOutcome(
            cases=cases, total_cases=self.total_cases,
            gate=evaluate_gate(cases, total=self.total_cases, max_geomean_slowdown=self.max_geomean_slowdown),
            base=self.base, head=self.head, settings=self.settings, request=self.request, environment=environment,
            results_path=self.request.output_dir / "results.json", report_path=self.request.output_dir / "benchmark.md",
            wall_s=time.perf_counter() - self.started, setup_s=self.setup_s,
            max_geomean_slowdown=self.max_geomean_slowdown, shard=self.shard, selection=self.selection,
            isolation=self.isolation,
        )

    def payload(self, outcome: CompareOutcome) -> dict[str, Any]:
        return compare_payload(outcome)

    def render(self, outcome: CompareOutcome) -> str:
        return render_compare(outcome)


def _record_base_files(kernels: Sequence[KernelSpec], base_tree: Path) -> dict[str, tuple[GuardedFile, ...]]:
    """Each base kernel's files (the folders of its solution and ref.py, where the modules they
    import beside them are) and the folders above them in the base's worktree, by kernel name."""
    return {
        kernel.name: record(base_tree, dict.fromkeys((Path(kernel.solution).parent, Path(kernel.ref).parent)))
        for kernel in kernels
    }


def _build_requests(plans: Sequence[CasePlan], sides: _Sides, kernels: _Kernels, device: str) -> list[BuildRequest]:
    """Every build the cases will ask for, so all start at once (each kernel once per side)."""
    builds = []
    for plan in plans:
        if plan.head is None:
            continue
        head = plan.head.kernel
        builds.append(BuildRequest(head, HEAD, kernels.head_kinds[head.name], sides.head_suite.root))
        if plan.base is not None and sides.base_suite is not None:
            kind, unavailable = base_kind(plan.base.kernel, device)
            if unavailable is None and kind is not None:
                builds.append(BuildRequest(plan.base.kernel, BASE, kind, sides.base_suite.root))
    return builds


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


def check_accept(accept: tuple[str, ...], plans: Sequence[CasePlan]) -> None:
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


