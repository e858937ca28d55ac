"""One case of ``compare``, on its lane's worker: both sides built, checked and timed together in
interleaved rounds, a suspected regression measured again, and the verdict with its notes.

:class:`MeasureComparison` is what ``compare`` hands the
:class:`~kbench_ci.gate.driver.SuiteDriver` as its per-case measurement; the verdict itself is
:func:`~kbench_ci.gate.verdicts.assess`'s (pure), and the re-measurement rule
:func:`~kbench_ci.gate.verdicts.measure_case`'s.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

from kbench_ci.basefiles import Change, GuardedFile, blame, reclaim, record, restore
from kbench_ci.errors import KbenchError, UsageError
from kbench_ci.gate.builds import SideBuilder
from kbench_ci.gate.driver import CaseSlot, Measured
from kbench_ci.gate.jobs import files_differ, implementation_of, job_timeout_s, make_job
from kbench_ci.gate.profile import profile_sides
from kbench_ci.gate.verdicts import assess, measure_case
from kbench_ci.gate.worker_call import WorkerRun, run_worker
from kbench_ci.measure.impls import COMPILED_KINDS
from kbench_ci.results.decide import p_words, percent
from kbench_ci.results.model import CaseResult, MeasureSettings
from kbench_ci.results.outcome import (
    ACCEPT_ALL,
    ALPHA,
    BASE,
    CONFIDENCE,
    HEAD,
    Assessment,
    BuildOutcome,
    CaseComparison,
    CompareRequest,
    Measurement,
    PhaseTimes,
)
from kbench_ci.stats import Verdict
from kbench_ci.suite.model import Case, KernelSpec, Suite
from kbench_ci.suite.settings import (
    ADAPTIVE_BATCH_GROWTH,
    ADAPTIVE_BATCH_ROUNDS,
    ADAPTIVE_CHECK_BOOTSTRAP,
    MAX_ADAPTIVE_ROUNDS,
    REMEASURE_PLACEMENT_PAD_BYTES,
)
from kbench_ci.wire.protocol import SideSpec, StoppingRule


@dataclass(frozen=True, slots=True)
class CasePlan:
    """One case to compare: its head and base copies (either may be missing)."""

    head: Case | None
    base: Case | None

    @property
    def case(self) -> Case:
        return self.head if self.head is not None else self.base  # type: ignore[return-value]

    @property
    def case_id(self) -> str:
        return self.case.case_id


@dataclass(frozen=True, slots=True)
class _BuiltSides:
    """Both sides of one case, built: each side's spec for the worker (None: nothing to run)
    and build outcome (None: not compiled), and why the base cannot run here, if it cannot."""

    head_kind: str
    head_spec: SideSpec | None
    head_build: BuildOutcome | None
    base_kind: str | None = None
    base_spec: SideSpec | None = None
    base_build: BuildOutcome | None = None
    base_unavailable: str | None = None
    #: the wait for both builds (0 when neither side is compiled)
    build_s: float = 0.0

    @property
    def sides(self) -> tuple[SideSpec, ...]:
        """What the worker checks and times: the base (when it runs here), then the head; empty
        when the head has nothing to run."""
        if self.head_spec is None:
            return ()
        return (self.base_spec, self.head_spec) if self.base_spec is not None else (self.head_spec,)


class _CaseRuns:
    """The worker calls of one case, on its lane: the progress stage they report under
    (``measure``, then ``remeasure``) and the first problem of the machine one of them met."""

    def __init__(
        self, slot: CaseSlot, head: Case, sides: tuple[SideSpec, ...], *, settings: MeasureSettings,
        request: CompareRequest, threshold: float, base_files: tuple[GuardedFile, ...] = (), judged: bool = False,
    ) -> None:
        self.slot = slot
        self.head = head
        self.sides = sides
        self.settings = settings
        self.timeout_s = request.case_timeout_s if request.case_timeout_s is not None else head.kernel.timeout_s
        self.accept_changed_reference = accepts(request.accept, self.head.kernel.name, self.head.case_id)
        self.stopping = _stopping_rule(settings, threshold, len(sides))
        self.stage = "measure"
        self.remeasures = 0
        self.problem: KbenchError | None = None
        self.base_files = base_files
        #: under the judge the judge guards the base's files (before each of its loads of the
        #: base); in process the parent does, before and after each worker call
        self.judged = judged
        #: every change of the base's files the parent found (the head's doing)
        self.base_changes: list[Change] = []

    def run(self, n_rounds: int) -> WorkerRun:
        """Both sides for ``n_rounds`` rounds. A problem of the machine is kept, not raised: the
        case is written before the run stops."""
        self._guard_base_files()
        job = make_job(
            self.head, self.sides, self.settings, rounds=n_rounds, stopping=self.stopping,
            accept_changed_reference=self.accept_changed_reference,
            placement_pad_bytes=REMEASURE_PLACEMENT_PAD_BYTES * self.remeasures,
            base_files=self.base_files if self.judged else (),
        )
        worker_run = run_worker(
            job,
            # More rounds and more variants take longer: the timeout grows with them, and with the
            # adaptive budget.
            timeout_s=job_timeout_s(self.timeout_s, job) * max(1.0, n_rounds / self.settings.rounds)
            + self.settings.time_budget_s,
            worker=self.slot.lane.worker,
            on_event=self.slot.listener(self.stage),
        )
        if self.problem is None:
            self.problem = worker_run.environment_error()
        self._guard_base_files()
        if self.base_changes:
            message = blame(self.base_changes, self.base_files[0].path)
            worker_run = replace(worker_run, result=replace(worker_run.result, variants=tuple(
                replace(variant, status="incorrect", message=message) if variant.label == HEAD else variant
                for variant in worker_run.result.variants
            )))
        return worker_run

    def _guard_base_files(self) -> None:
        """In process, the base's files put back as they were before any pull-request code ran
        (the in-process worker loads the base again in a re-measurement: a helper the head set
        to mode 000 failed it, and the 30x slower head read ``fixed``); what changed is kept to
        lay on the head."""
        if not self.judged and self.base_files:
            self.base_changes.extend(restore(self.base_files))

    def on_remeasure(self) -> None:
        self.stage = "remeasure"
        self.remeasures += 1  # each measurement on its own buffer layout
        self.slot.say("remeasure")


def _stopping_rule(settings: MeasureSettings, threshold: float, n_sides: int) -> StoppingRule | None:
    """Both sides timed: rounds past the minimum until the verdict at this case's threshold is
    decided or the time budget is spent (see StoppingRule). None: exactly the rounds asked for."""
    if settings.time_budget_s <= 0 or n_sides != 2:
        return None
    return StoppingRule(
        threshold=threshold, budget_s=settings.time_budget_s, max_rounds=MAX_ADAPTIVE_ROUNDS,
        batch_rounds=ADAPTIVE_BATCH_ROUNDS, batch_growth=ADAPTIVE_BATCH_GROWTH,
        check_bootstrap=ADAPTIVE_CHECK_BOOTSTRAP, confidence=CONFIDENCE, alpha=ALPHA,
    )


@dataclass(frozen=True, slots=True)
class MeasureComparison:
    """How ``compare`` measures one case (see the module docstring); one for the whole suite."""

    request: CompareRequest
    settings: MeasureSettings
    builder: SideBuilder
    head_suite: Suite
    base_suite: Suite | None
    #: head kernel name → implementation kind
    head_kinds: Mapping[str, str]
    #: base kernel name → its files as they were before any pull-request code ran
    base_files: Mapping[str, tuple[GuardedFile, ...]] = field(default_factory=dict)
    #: how the sides run (the resolved ``--isolation``): who guards the base's files
    isolation: str = "process"

    def __call__(self, slot: CaseSlot, plan: CasePlan) -> Measured[CaseComparison]:
        comparison, problem = self.compare(slot, plan)
        if comparison.verdict is Verdict.SLOWER and accepts(self.request.accept, comparison.kernel, comparison.case_id):
            comparison = replace(comparison, accepted=True)
        comparison = replace(comparison, gpu=slot.gpu)
        environment = next(
            (m.environment for m in (comparison.first, comparison.measurement) if m is not None and m.environment), None
        )
        return Measured(comparison, comparison.verdict_text, progress_detail(comparison), environment, problem)

    def compare(self, slot: CaseSlot, plan: CasePlan) -> tuple[CaseComparison, KbenchError | None]:
        """The case's comparison, and a problem of the machine to stop the run with."""
        case = plan.case
        # The base's threshold where the base has the kernel (the command line's still wins): a
        # pull request that loosened its own (0.99 would let a 1.9x slowdown read
        # `unchanged`) is named among its moved goalposts and applies once merged.
        own = plan.base.kernel.threshold if plan.base is not None else case.kernel.threshold
        threshold = self.request.threshold if self.request.threshold is not None else own
        if plan.head is None:
            assessment = assess(None, threshold=threshold, head_present=False)
            return CaseComparison(
                case_id=case.case_id, kernel=case.kernel.name, dims=dict(case.dims), verdict=assessment.verdict,
                threshold=threshold, estimate=None, message=assessment.message,
            ), None
        slot.say("build")
        built = self._build(plan.head, plan.base)
        if not built.sides:
            assessment = _judge(plan.base is not None, built, threshold, None)
            return CaseComparison(
                case_id=case.case_id, kernel=case.kernel.name, dims=dict(case.dims), verdict=assessment.verdict,
                threshold=threshold, estimate=None, message=assessment.message, base_build=built.base_build,
                head_build=built.head_build, base_kind=built.base_kind, head_kind=built.head_kind,
                phases=PhaseTimes(build_s=built.build_s),
            ), None
        return self._measure(slot, plan.head, plan.base, built, threshold)

    def _build(self, head: Case, base: Case | None) -> _BuiltSides:
        """The head's side, then (when the head has one to run) the base's, each built if compiled."""
        head_kind = self.head_kinds[head.kernel.name]
        t0 = time.perf_counter()
        head_spec, head_build = self.builder.side(head.kernel, label=HEAD, kind=head_kind, cwd=self.head_suite.root)
        base_spec, base_build, kind, unavailable = None, None, None, None
        if base is not None and head_spec is not None:
            kind, unavailable = base_kind(base.kernel, self.request.device)
            if unavailable is None and kind is not None and self.base_suite is not None:
                base_spec, base_build = self.builder.side(base.kernel, label=BASE, kind=kind, cwd=self.base_suite.root)
        return _BuiltSides(
            head_kind=head_kind, head_spec=head_spec, head_build=head_build, base_kind=kind, base_spec=base_spec,
            base_build=base_build, base_unavailable=unavailable,
            build_s=time.perf_counter() - t0 if (head_build or base_build) else 0.0,
        )

    def _measure(
        self, slot: CaseSlot, head: Case, base: Case | None, built: _BuiltSides, threshold: float
    ) -> tuple[CaseComparison, KbenchError | None]:
        """Both sides timed (the head alone when there is no base), re-measured when the first
        measurement suspects a regression; the verdict with its notes."""
        settings = replace(self.settings, device=slot.lane.device)
        guarded = self.base_files.get(base.kernel.name, ()) if base is not None and built.base_spec is not None else ()
        if built.base_spec is not None and built.base_spec.implementation in COMPILED_KINDS:
            guarded += built_library_files(self.builder.staging, Path(built.base_spec.solution).parent)
        runs = _CaseRuns(slot, head, built.sides, settings=settings, request=self.request, threshold=threshold,
                         base_files=guarded, judged=self.isolation == "judge")
        deciding, first = measure_case(
            runs.run, lambda result: _judge(base is not None, built, threshold, result), threshold=threshold,
            rounds=settings.rounds, remeasure_factor=self.request.remeasure_factor, on_remeasure=runs.on_remeasure,
        )
        phases = PhaseTimes(build_s=built.build_s) + deciding.phases + (first.phases if first is not None else PhaseTimes())
        goalposts = moved_goalposts(base.kernel if base else None, head.kernel, self.base_suite)
        comparison = CaseComparison(
            case_id=head.case_id, kernel=head.kernel.name, dims=dict(head.dims), verdict=deciding.verdict,
            threshold=threshold, estimate=deciding.estimate, message=_case_message(head, deciding, first, goalposts),
            measurement=deciding, first=first, base_build=built.base_build, head_build=built.head_build,
            base_kind=built.base_kind, head_kind=built.head_kind, phases=phases, goalposts=goalposts,
        )
        if self.request.profile and comparison.verdict in (Verdict.SLOWER, Verdict.FASTER) and runs.problem is None:
            # After the timing, never inside it: each side in a process of its own under ncu.
            slot.say("profile")
            job = make_job(head, built.sides, settings, rounds=1)
            comparison = replace(comparison, profile=profile_sides(job, [side.label for side in built.sides]))
        return comparison, runs.problem


def built_library_files(staging: Path, folder: Path) -> tuple[GuardedFile, ...]:
    """The base's built library (its staged source, ``.so`` and compiler figures, in ``folder``)
    and the folders above it in the build folder, recorded once the trusted build is done. The
    head's build command runs beside the base's and could reach them before this record: each
    is made its owner's to read and write first (:func:`kbench_ci.basefiles.reclaim`), so what
    is recorded is what the base can load."""
    folder = folder.resolve()
    staging = staging.resolve()
    reclaim([parent for parent in reversed(folder.parents) if parent == staging or staging in parent.parents], below=False)
    reclaim([folder])
    return record(staging, [folder])


def _judge(base_present: bool, built: _BuiltSides, threshold: float, result: CaseResult | None) -> Assessment:
    return assess(
        result, threshold=threshold, base_present=base_present, head_build=built.head_build,
        base_build=built.base_build, base_unavailable=built.base_unavailable,
    )


def _case_message(
    case: Case, deciding: Measurement, first: Measurement | None, goalposts: tuple[str, ...]
) -> str | None:
    """The deciding measurement's message, with the first run's verdict when it was re-measured,
    after a warning when the head moved what the kernel is checked against."""
    message = deciding.assessment.message
    if first is not None:
        note = (
            f"remeasured with {deciding.rounds} rounds: first run {first.verdict.value}"
            + (f" ({percent(first.estimate.ratio - 1.0)})" if first.estimate is not None else "")
        )
        message = f"{message}; {note}" if message else note
    if goalposts:
        warning = f"this pull request changes what `{case.kernel.name}` is checked against: {'; '.join(goalposts)}"
        message = f"{warning}. {message}" if message else warning
    return message


def accepts(accept: tuple[str, ...], kernel: str, case_id: str) -> bool:
    """Does ``--accept`` (kernel names, exact case ids, ``*``) cover this case?"""
    return any(entry in (ACCEPT_ALL, kernel, case_id) for entry in accept)


def progress_detail(case: CaseComparison) -> str | None:
    """``+2.31% [+1.90%, +2.75%] (remeasured)``, or the case's message when it has no ratio."""
    estimate = case.estimate
    if estimate is None:
        return case.message
    text = (
        f"{percent(estimate.ratio - 1.0)} "
        f"[{percent(estimate.ci_low - 1.0)}, {percent(estimate.ci_high - 1.0)}], {p_words(estimate)}"
    )
    return text + (" (remeasured)" if case.remeasured else "") + (" ⚠️ throttled" if case.throttled else "")


def moved_goalposts(base: KernelSpec | None, head: KernelSpec, base_suite: Suite | None) -> tuple[str, ...]:
    """What the head changed of what its kernel is checked and judged against: ref.py (its
    reference() or setup()), the tolerances, threshold and shapes of its kbench.toml entry. Empty
    when nothing changed, or the kernel is new. (A changed seed is one of the suite's
    [defaults], which a compare takes from the base: the report's head note names it.)"""
    if base is None or base_suite is None:
        return ()
    changes: list[str] = []
    if files_differ(base.ref, head.ref):
        changes.append(f"{Path(head.ref).name} (its reference() or setup())")
    for name in ("atol", "rtol", "threshold"):
        before, after = getattr(base, name), getattr(head, name)
        if before != after:
            applied = " (not applied: the base's holds until merged)" if name == "threshold" else ""
            changes.append(f"{name} {'default' if before is None else before} → {'default' if after is None else after}"
                           + applied)
    if [dict(s) for s in base.shapes] != [dict(s) for s in head.shapes]:
        changes.append("its shapes")
    return tuple(changes)


def base_kind(kernel: KernelSpec, device: str) -> tuple[str | None, str | None]:
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


