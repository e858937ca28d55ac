"""What ``run`` and ``compare`` produce: per-case outcomes, the gate, the revisions compared and
the whole outcome, as frozen values that the report and the JSON payloads read. They live here,
below ``gate`` and ``report``, so that the report never imports the code that measured."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from kbench_ci.results.model import (
    BaselineSpeedup,
    CaseResult,
    MeasureSettings,
    VariantResult,
    baseline_speedups,
    throttle_reasons,
)
from kbench_ci.stats import RatioEstimate, Verdict

#: the fewest timed trials a round may have (see :func:`trials_per_round`)


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
    #: the library came from the build cache (built by an earlier run from the same inputs)
    cached: bool = False

    def as_json(self) -> dict[str, Any]:
        return {
            "side": self.side, "kernel": self.kernel, "ok": self.ok, "seconds": self.duration_s,
            "command": self.command, "message": self.message, "compiler_output": self.compiler_output,
            "cached": self.cached,
        }


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
    #: the CUPTI audit of the timed variants (measure/escape.py)
    audit_s: float = 0.0

    @property
    def total_s(self) -> float:
        return self.build_s + self.load_s + self.correctness_s + self.timing_s + self.audit_s

    def __add__(self, other: PhaseTimes) -> PhaseTimes:
        return PhaseTimes(
            self.build_s + other.build_s,
            self.load_s + other.load_s,
            self.correctness_s + other.correctness_s,
            self.timing_s + other.timing_s,
            self.audit_s + other.audit_s,
        )

    def as_json(self) -> dict[str, float]:
        return {
            "build": self.build_s, "load": self.load_s, "correctness": self.correctness_s,
            "timing": self.timing_s, "audit": self.audit_s, "total": self.total_s,
        }


RunStatus = Literal["ok", "incorrect", "failed"]


@dataclass(frozen=True, slots=True)
class ShardRequest:
    """``--shard K/N`` (and ``--shard-timings``): measure only the K-th of N shares of the cases.

    The share is computed where the cases are known (for ``compare``, the union of both sides'
    case ids) by :func:`kbench_ci.suite.shards.assign_shards`."""

    index: int  # 1-based
    count: int
    #: seconds per case id (an earlier results.json's, or a {case_id: seconds} file); None: by count
    timings: Mapping[str, float] | None = None
    #: where the timings came from, for results.json
    timings_file: str | None = None

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"


@dataclass(frozen=True, slots=True)
class ShardRecord:
    """What a shard's results.json says about the shard: which one, how the cases were split, and
    every case id of all shards (so ``merge`` can tell a missing shard from a smaller suite)."""

    index: int
    count: int
    #: every case id of the whole matrix, sorted
    all_case_ids: tuple[str, ...]
    #: the case ids this shard measures, sorted
    case_ids: tuple[str, ...]
    balanced_by: Literal["count", "timings"] = "count"
    timings_file: str | None = None
    #: ``run``: the commit checked out (``compare`` has its base and head shas)
    commit: str | None = None

    @property
    def label(self) -> str:
        return f"{self.index}/{self.count}"

    def as_json(self) -> dict[str, Any]:
        return {
            "index": self.index, "count": self.count, "balanced_by": self.balanced_by,
            "timings_file": self.timings_file, "commit": self.commit,
            "case_ids": list(self.case_ids), "all_case_ids": list(self.all_case_ids),
        }


RUN_STATUSES: tuple[RunStatus, ...] = ("failed", "incorrect", "ok")


@dataclass(frozen=True, slots=True)
class GpuSlot:
    """One worker of a ``--gpus`` run: the CUDA index it is pinned to (as the parent process
    counts them; the worker sees only that GPU, as ``cuda:0``), its model, and its place in the
    ``--gpus`` list (``--gpus 0,0`` gives two slots on one GPU)."""

    index: int
    name: str
    position: int = 0

    @property
    def label(self) -> str:
        """``1 (NVIDIA H200)``: the index and the model, for the report and the progress lines."""
        return f"{self.index} ({self.name})"

    def as_json(self) -> dict[str, Any]:
        return {"index": self.index, "name": self.name, "position": self.position}


def gpus_shared(gpus: tuple[GpuSlot, ...]) -> bool:
    """Do two workers of ``gpus`` share one GPU (``--gpus 0,0``)? Their timings are not valid."""
    return len({slot.index for slot in gpus}) < len(gpus)


def gpu_labels(gpus: tuple[GpuSlot, ...], cases: tuple[Any, ...]) -> dict[str, str] | None:
    """case id → the GPU that measured it (index and model; the worker's place in ``--gpus``
    when two share a GPU), or None when the run used one GPU."""
    if len(gpus) < 2:
        return None
    shared = gpus_shared(gpus)
    return {
        case.case_id: case.gpu.label + (f" · worker {case.gpu.position + 1}" if shared else "")
        for case in cases if case.gpu is not None
    }


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
    #: ``--shard K/N``: measure only this shard's cases
    shard: ShardRequest | None = None
    #: ``--gpus`` with two or more entries: one worker per slot, cases spread over them; empty:
    #: one worker on ``device``
    gpus: tuple[GpuSlot, ...] = ()
    #: ``--seeds``: the correctness trials' seeds, given (MeasureSettings.seeds); empty: the usual ones
    seeds: tuple[int, ...] = ()


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
    #: the GPU that measured the case (``--gpus``), None with one GPU
    gpu: GpuSlot | None = None
    #: a failed case's cause when it is the user's ref.py, setup() or settings, not the kernel
    #: (one line, its fix included): such a case makes ``run`` exit 2, not 1
    user_error: str | None = None

    @property
    def throttled(self) -> bool:
        return bool(self.throttle_reasons)

    @property
    def baselines(self) -> tuple[BaselineSpeedup, ...]:
        """The suite's baselines, timed in the same rounds as the solution."""
        return baseline_speedups(self.result, "solution")

    @property
    def blames_user(self) -> bool:
        """Failed because of the user's ref.py, setup() or settings (see ``user_error``)."""
        return self.status != "ok" and self.user_error is not None


@dataclass(frozen=True, slots=True)
class CommitRecord:
    """The commit a run measured: its sha, and whether the working tree differed from it."""

    sha: str
    dirty: bool

    def as_json(self) -> dict[str, Any]:
        return {"sha": self.sha, "dirty": self.dirty}


@dataclass(frozen=True, slots=True)
class RunOutcome:
    cases: tuple[RunCase, ...]
    total_cases: int
    config_path: Path
    settings: MeasureSettings
    environment: Mapping[str, Any] | None
    results_path: Path
    report_path: Path
    wall_s: float
    #: the shard this run measured (``--shard``), or None
    shard: ShardRecord | None = None
    #: ``--gpus``: the workers the cases were spread over (empty: one GPU)
    gpus: tuple[GpuSlot, ...] = ()
    #: the commit the suite was measured at and whether the tree differed from it; None outside
    #: a git repository
    commit: CommitRecord | None = None
    #: how the cases ran: "process" (in the worker that checks and times them) or "judge"
    isolation: str = "process"

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
    def user_failures(self) -> tuple[UserFailure, ...]:
        """The cases that failed because of the user's ref.py, setup() or settings."""
        return tuple(UserFailure(c.case_id, c.user_error) for c in self.cases if c.blames_user and c.user_error)

    @property
    def kernel_failed(self) -> bool:
        """Failed for a reason of a kernel's (a case incorrect, crashed, hung, not built), or
        incomplete: anything but only the user's files (see ``user_failures``)."""
        return not self.passed and (not self.complete or any(c.status != "ok" and not c.blames_user for c in self.cases))

    @property
    def summary(self) -> str:
        counts = self.counts
        words = {"ok": "passed", "incorrect": "incorrect", "failed": "failed"}
        parts = [f"{counts[s]} {words[s]}" for s in ("incorrect", "failed", "ok") if counts[s]]
        text = ", ".join(parts) or "no cases"
        if not self.complete:
            return f"{text} — incomplete ({len(self.cases)} of {self.total_cases} cases)"
        return f"{text} — {'all correct' if self.passed else 'FAILED'}"


@dataclass(frozen=True, slots=True)
class UserFailure:
    """A case that failed because of the user's ref.py, setup() or settings, and why (one line)."""

    case_id: str
    message: str


#: labels of the two sides in the worker job and in results.json
BASE = "base"


HEAD = "head"


#: significance level of the paired test and confidence of the ratio's interval
ALPHA = 0.05


CONFIDENCE = 0.95


#: a suspected regression is measured again with this many times the rounds
REMEASURE_FACTOR = 2


#: verdicts that carry a head/base ratio (the others are about correctness or presence)
TIMED_VERDICTS = frozenset({Verdict.SLOWER, Verdict.FASTER, Verdict.UNCHANGED, Verdict.INCONCLUSIVE})


@dataclass(frozen=True, slots=True)
class CompareRequest:
    """What the user asked for. ``start`` is the directory the command ran in."""

    start: Path
    base: str
    device: str
    head: str | None = None
    base_mode: str = "merge-base"
    config: Path | None = None
    output_dir: Path = Path("bench_out")
    #: overrides every kernel's threshold when set
    threshold: float | None = None
    #: overrides the suite's ``max_geomean_slowdown`` when set
    max_geomean_slowdown: float | None = None
    rounds: int | None = None
    #: overrides the suite's ``time_budget`` (seconds of adaptive rounds per case) when set
    time_budget_s: float | None = None
    #: overrides every kernel's ``timeout`` when set
    case_timeout_s: float | None = None
    kernels: tuple[str, ...] = ()
    remeasure_factor: int = REMEASURE_FACTOR
    no_fail: bool = False
    command_line: tuple[str, ...] = ()
    #: ``--gpus`` with two or more entries: one worker per slot (see :class:`RunRequest`)
    gpus: tuple[GpuSlot, ...] = ()
    #: ``--accept``: kernel names or exact case ids whose ``slower`` verdict is accepted
    #: (``*``: every case; the action passes it for its PR label)
    accept: tuple[str, ...] = ()
    #: why the regressions in ``accept`` are accepted, for the report (the action: its label)
    accept_reason: str | None = None
    #: what happens to the job when the gate fails, as the caller knows it (the action runs
    #: ``--no-fail`` and fails the job in a later step); None: this command's own exit code
    job_note: str | None = None
    #: ``--shard K/N``: compare only this shard of the union of both sides' cases
    shard: ShardRequest | None = None
    #: ``--changed-only``: measure only the kernels whose files or entry differ between the sides
    changed_only: bool = False
    #: ``--profile``: ncu on each side of every slower or faster case, after its timing
    profile: bool = False
    #: ``--seeds``: the correctness trials' seeds, given (MeasureSettings.seeds); empty: the usual ones
    seeds: tuple[int, ...] = ()


#: ``--accept *``: every slower case
ACCEPT_ALL = "*"


@dataclass(frozen=True, slots=True)
class Assessment:
    """The verdict of one measurement of one case, with its ratio when both sides were timed."""

    verdict: Verdict
    estimate: RatioEstimate | None
    message: str | None


@dataclass(frozen=True, slots=True)
class Measurement:
    """One worker run of a case: both sides' results and what they add up to."""

    result: CaseResult
    assessment: Assessment
    rounds: int
    phases: PhaseTimes
    environment: Mapping[str, Any] | None = None
    #: the head failed because of the user's ref.py, setup() or settings, not its kernel: why
    #: (one line, the worker's LoadError); None otherwise
    user_error: str | None = None

    @property
    def verdict(self) -> Verdict:
        return self.assessment.verdict

    @property
    def estimate(self) -> RatioEstimate | None:
        return self.assessment.estimate


@dataclass(frozen=True, slots=True)
class ProfiledKernel:
    """ncu's figures of one kernel of one profiled call (``compare --profile``)."""

    name: str
    duration_ns: float | None = None
    dram_read_bytes: float | None = None
    dram_write_bytes: float | None = None
    #: achieved occupancy: active warps over the SM's maximum (%)
    occupancy_pct: float | None = None
    #: SM and memory throughput, % of the GPU's peak over the kernel's time
    sm_throughput_pct: float | None = None
    memory_throughput_pct: float | None = None


@dataclass(frozen=True, slots=True)
class SideProfile:
    """One side's call under ncu: its kernels' figures, or why there are none."""

    label: str
    kernels: tuple[ProfiledKernel, ...] = ()
    problem: str | None = None

    def as_json(self) -> dict[str, Any]:
        return {"label": self.label, "problem": self.problem,
                "kernels": [{f: getattr(k, f) for f in ProfiledKernel.__slots__} for k in self.kernels]}


@dataclass(frozen=True, slots=True)
class CaseComparison:
    """The outcome of one case (kernel × shape) of a comparison."""

    case_id: str
    kernel: str
    dims: Mapping[str, int]
    verdict: Verdict
    threshold: float
    estimate: RatioEstimate | None
    message: str | None
    #: the measurement that decided (the re-measurement when there was one); None if not run
    measurement: Measurement | None = None
    #: the first measurement, when a suspected regression was measured again
    first: Measurement | None = None
    base_build: BuildOutcome | None = None
    head_build: BuildOutcome | None = None
    base_kind: str | None = None
    head_kind: str | None = None
    phases: PhaseTimes = field(default_factory=PhaseTimes)
    #: a ``slower`` verdict accepted by ``--accept`` or the PR label: shown, but it neither fails
    #: the gate nor enters the geometric mean. Never set on any other verdict.
    accepted: bool = False
    #: the GPU that measured both sides (``--gpus``), None with one GPU
    gpu: GpuSlot | None = None
    #: what the head changed of what this kernel is checked against (ref.py, tolerances,
    #: threshold, shapes, seed): said at the top of the case in the report
    goalposts: tuple[str, ...] = ()
    #: ``--profile``: each side's call under ncu (slower and faster cases only)
    profile: tuple[SideProfile, ...] = ()

    @property
    def fails_gate(self) -> bool:
        return self.verdict.fails_gate and not self.accepted

    @property
    def user_error(self) -> str | None:
        """Why the case failed when the user's ref.py, setup() or settings are to blame, not the
        head's kernel (``compare`` then exits 2 for it, not 1); None otherwise."""
        if self.verdict is not Verdict.FAILED or self.measurement is None:
            return None
        return self.measurement.user_error

    @property
    def verdict_text(self) -> str:
        """``slower (accepted)`` for an accepted regression, else the verdict's name."""
        return f"{self.verdict.value} (accepted)" if self.accepted else self.verdict.value

    @property
    def remeasured(self) -> bool:
        return self.first is not None

    @property
    def result(self) -> CaseResult | None:
        return self.measurement.result if self.measurement is not None else None

    @property
    def base(self) -> VariantResult | None:
        return self.result.variant(BASE) if self.result is not None else None

    @property
    def head(self) -> VariantResult | None:
        return self.result.variant(HEAD) if self.result is not None else None

    @property
    def baselines(self) -> tuple[BaselineSpeedup, ...]:
        """The suite's baselines, timed in the same rounds as the head: the head's speedup over each."""
        return baseline_speedups(self.result, HEAD)

    @property
    def throttle_reasons(self) -> tuple[str, ...]:
        reasons: list[str] = []
        for measurement in (self.first, self.measurement):
            for reason in throttle_reasons(measurement.result if measurement else None):
                if reason not in reasons:
                    reasons.append(reason)
        return tuple(reasons)

    @property
    def throttled(self) -> bool:
        return bool(self.throttle_reasons)


@dataclass(frozen=True, slots=True)
class Gate:
    """Whether the comparison lets the change through, and the one-line verdict saying so."""

    passed: bool
    complete: bool
    counts: Mapping[str, int]
    summary: str
    geomean_ratio: float | None
    max_geomean_slowdown: float | None
    geomean_failed: bool
    failing: tuple[str, ...]
    #: slower cases accepted (``--accept``, the PR label); not in ``counts["slower"]``
    accepted: tuple[str, ...] = ()

    def as_json(self) -> dict[str, Any]:
        return {
            "passed": self.passed,
            "complete": self.complete,
            "summary": self.summary,
            "counts": dict(self.counts),
            "failing_cases": list(self.failing),
            "accepted_cases": list(self.accepted),
            "geomean_ratio": self.geomean_ratio,
            "max_geomean_slowdown": self.max_geomean_slowdown,
            "geomean_failed": self.geomean_failed,
        }


@dataclass(frozen=True, slots=True)
class RevisionInfo:
    """One side of the comparison as the report names it."""

    label: str
    ref: str | None
    sha: str | None
    description: str
    tree: str  # "worktree" (a temporary checkout) or "working tree" (the user's, as it is)
    mode: str | None = None
    merge_base_of: str | None = None
    config: str | None = None
    note: str | None = None

    def as_json(self) -> dict[str, Any]:
        return {
            "ref": self.ref, "sha": self.sha, "description": self.description, "tree": self.tree,
            "mode": self.mode, "merge_base_of": self.merge_base_of, "config": self.config, "note": self.note,
        }


@dataclass(frozen=True, slots=True)
class ChangedSelection:
    """``compare --changed-only``: the kernels no change between the sides reaches (not
    measured), each measured kernel's reasons, and why everything was measured when it was."""

    not_affected: tuple[str, ...]
    #: kernel name → the sentences saying which of its files or entry keys changed
    reasons: Mapping[str, tuple[str, ...]]
    everything_reason: str | None = None
    notes: tuple[str, ...] = ()

    def as_json(self) -> dict[str, Any]:
        return {"not_affected": list(self.not_affected), "reasons": {k: list(v) for k, v in self.reasons.items()},
                "everything_reason": self.everything_reason, "notes": list(self.notes)}


@dataclass(frozen=True, slots=True)
class CompareOutcome:
    cases: tuple[CaseComparison, ...]
    total_cases: int
    gate: Gate
    base: RevisionInfo
    head: RevisionInfo
    settings: MeasureSettings
    request: CompareRequest
    environment: Mapping[str, Any] | None
    results_path: Path
    report_path: Path
    wall_s: float
    setup_s: float
    max_geomean_slowdown: float | None
    #: the shard this comparison measured (``--shard``), or None
    shard: ShardRecord | None = None
    #: ``--changed-only``: what was left out and why the rest was measured; None: everything asked for
    selection: ChangedSelection | None = None
    #: how the sides ran: "process" (one worker for both) or "judge" (docs/isolation.md)
    isolation: str = "process"

    @property
    def gpus(self) -> tuple[GpuSlot, ...]:
        """``--gpus``: the workers the cases were spread over (empty: one GPU)."""
        return self.request.gpus if len(self.request.gpus) > 1 else ()

    @property
    def phases(self) -> PhaseTimes:
        total = PhaseTimes()
        for case in self.cases:
            total = total + case.phases
        return total

    @property
    def user_failures(self) -> tuple[UserFailure, ...]:
        """The cases that fail the gate because of the user's ref.py, setup() or settings."""
        return tuple(
            UserFailure(case.case_id, case.user_error) for case in self.cases
            if case.fails_gate and case.user_error is not None
        )

    @property
    def kernel_failed(self) -> bool:
        """The gate failed for a reason of a kernel's (a case incorrect, failed, slower; the
        geometric mean), or is incomplete: anything but only the user's files."""
        gate = self.gate
        return not gate.passed and (
            not gate.complete or gate.geomean_failed
            or any(case.fails_gate and case.user_error is None for case in self.cases)
        )

    def settings_json(self) -> dict[str, Any]:
        return {
            **self.settings.as_json(),
            "remeasure_rounds": self.settings.rounds * self.request.remeasure_factor,
            "remeasure_rule": "stats.needs_remeasure: classify says slower, or inconclusive with ratio > 1 + threshold",
            "threshold_override": self.request.threshold,
            "max_geomean_slowdown": self.max_geomean_slowdown,
            "alpha": ALPHA,
            "confidence": CONFIDENCE,
            "base_mode": self.request.base_mode,
            "case_timeout_s": self.request.case_timeout_s,
            "kernels": list(self.request.kernels),
            "no_fail": self.request.no_fail,
            "accept": list(self.request.accept),
            "accept_reason": self.request.accept_reason,
            "isolation": self.isolation,
        }
