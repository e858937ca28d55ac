"""Measured results as frozen value objects (their JSON form is in ``schema``).

A result keeps every raw sample in milliseconds, per timing round, the samples discarded as the first of a
round, correctness figures per seed and output, and the environment. Nothing is rounded here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from kbench_ci.stats import median

VariantStatus = Literal["ok", "incorrect", "error", "unavailable"]
Role = Literal["solution", "baseline"]


@dataclass(frozen=True, slots=True)
class VariantResult:
    """One solution or baseline in one case: correctness, then raw timing samples."""

    label: str
    kind: str
    role: Role
    status: VariantStatus
    message: str | None = None
    correctness: CorrectnessResult | None = None
    #: raw samples (ms) per timing round, after ``discard_first`` of each round
    rounds_ms: tuple[tuple[float, ...], ...] = ()
    #: which version of the inputs each sample's call was given (an index into the timed set's
    #: versions, 0 the original contents; base and head of a compare share one set and one order
    #: per round), so a time that depends on the version can be seen in the raw data; () where not kept;
    #: -1 (``--isolation judge``) a version made for that round alone (its probe, or every call's)
    round_versions: tuple[tuple[int, ...], ...] = ()
    #: the samples dropped as the first of each round (kept, never used in statistics)
    discarded_ms: tuple[float, ...] = ()
    #: wall time of the first call (module load, JIT, torch.compile, flashinfer JIT)
    first_call_ms: float | None = None
    #: wall time of an explicit compile step (CuTe DSL ``compile_kernel``)
    compile_ms: float | None = None
    #: the solution's outputs still matched the reference after the timing runs
    post_timing_check: bool | None = None
    #: how the timed calls' inputs varied, how many of their outputs were checked, and what the
    #: memoisation probe read (measure/staging.py, measure/memo_probe.py); None where not timed
    fresh_inputs: str | None = None
    #: how far the samples were moved (ms, beyond the run's event overhead) to CUPTI's time of
    #: the variant's GPU work under the timed conditions (measure/calibration.py); None: not moved
    timing_shift_ms: float | None = None
    #: the CUPTI audit of GPU work around the timer (measure/escape.py); None where none ran
    escape_audit: EscapeAudit | None = None
    #: achieved bandwidth and FLOP/s against the GPU's ceilings; None where not known
    speed_of_light: SpeedOfLight | None = None
    #: what the compiler made of the solution's kernels (registers, spills, autotune pick)
    compiled: tuple[CompiledKernel, ...] = ()
    notes: tuple[str, ...] = ()
    #: the judge's own clock over its judged calls (``--isolation judge``); None where not judged
    outside_clock: OutsideClock | None = None
    #: why a variant that passed its checks (status ``ok``) was not timed, e.g. a compare's base
    #: when the head is incorrect: its time would be compared with nothing; None where timed
    not_timed: str | None = None

    @property
    def samples_ms(self) -> tuple[float, ...]:
        return tuple(sample for round_samples in self.rounds_ms for sample in round_samples)

    @property
    def timed(self) -> bool:
        return self.status == "ok" and bool(self.samples_ms)


EscapeStatus = Literal["passed", "escaped", "unavailable"]


@dataclass(frozen=True, slots=True)
class CompiledKernel:
    """What the compiler made of one kernel of a solution: ptxas's resource usage for a ``.cu``
    (cuda/ptxas.py), the compiled kernel's metadata and the autotuner's pick for Triton
    (measure/compiled.py)."""

    name: str
    source: Literal["ptxas", "triton"]
    registers: int | None = None
    spill_stores: int | None = None
    spill_loads: int | None = None
    stack_bytes: int | None = None
    #: static shared memory (ptxas) or the compiled kernel's shared memory (Triton), bytes
    shared_bytes: int | None = None
    num_warps: int | None = None
    num_stages: int | None = None
    #: Triton's autotuner: the config it picked, as Triton prints it; None: not autotuned
    autotune_pick: str | None = None
    #: Triton: how many compiled versions of the kernel the process holds (autotuning compiles one per config)
    versions: int | None = None
    #: ptxas: the entry's symbol (a template's instances share a name, not a symbol); what base
    #: and head are matched by
    symbol: str | None = None

    @property
    def key(self) -> str:
        return self.symbol or self.name


@dataclass(frozen=True, slots=True)
class SpeedOfLight:
    """A timed solution against this GPU's ceilings (measure/speed_of_light.py): the bytes it must
    move and the FLOPs it must do — ``declared`` by the suite's ``bytes``/``flops`` expressions or
    ``inferred`` as every input read once and every output written once — over its median time,
    next to the copy bandwidth and matmul rate measured on this GPU model."""

    source: Literal["declared", "inferred"]
    bytes: int | None
    flops: int | None
    #: the median time these figures are taken over (ms)
    median_ms: float
    #: measured ceilings (per second) of this GPU model; None where not measured
    copy_bytes_per_s: float | None
    matmul_flops_per_s: float | None
    #: the dtype the matmul ceiling is for
    matmul_dtype: str | None
    #: the least time the work can take at the ceilings with their headroom (ms)
    floor_ms: float | None

    @property
    def bytes_per_s(self) -> float | None:
        return self.bytes / (self.median_ms / 1e3) if self.bytes and self.median_ms > 0 else None

    @property
    def flops_per_s(self) -> float | None:
        return self.flops / (self.median_ms / 1e3) if self.flops and self.median_ms > 0 else None

    @property
    def bandwidth_fraction(self) -> float | None:
        rate = self.bytes_per_s
        return rate / self.copy_bytes_per_s if rate is not None and self.copy_bytes_per_s else None

    @property
    def flops_fraction(self) -> float | None:
        rate = self.flops_per_s
        return rate / self.matmul_flops_per_s if rate is not None and self.matmul_flops_per_s else None

    @property
    def below_floor(self) -> bool:
        return self.floor_ms is not None and self.median_ms < self.floor_ms


@dataclass(frozen=True, slots=True)
class KernelLaunch:
    """One kind of GPU work a variant's call launches, as CUPTI traced its audited calls: a kernel
    with one launch shape (the same name launched with two grids is two entries), or a memcpy or
    memset (no shape). measure/anatomy.py makes them; report/why.py compares base with head."""

    name: str
    #: launches of it per call (the audited calls' mean)
    per_call: float
    #: its share of the calls' GPU time (0..1)
    share: float
    #: mean GPU time of one launch (us)
    mean_us: float
    grid: tuple[int, int, int] | None = None
    block: tuple[int, int, int] | None = None
    registers: int | None = None
    #: static + dynamic shared memory per block (bytes)
    shared_bytes: int | None = None
    #: the grid's blocks over the SM count (not the blocks resident on an SM: see occupancy_pct)
    blocks_per_sm: float | None = None
    #: CUPTI's (kineto's) estimate of the achieved occupancy (%)
    occupancy_pct: int | None = None


@dataclass(frozen=True, slots=True)
class OutsideClock:
    """A side's timed calls as the judge's own clock saw them (``--isolation judge``;
    kbench_ci/judge/clock.py, docs/isolation.md), in microseconds.

    ``span_us``: from the judge's go to the side's end signal (the GPU's ``%globaltimer``, or the
    judge's monotonic clock around a CPU side's request). ``gap_us``: the median of span less the
    side's own time: the handoff between the processes (~300 us on an H200) plus anything the
    side did that its own clock left out. ``pre_us``/``post_us``: the judge's staging and flush,
    and its snapshot of the outputs, which another context's work on the GPU lengthens. Each is
    judged against the same figure of the case's trusted sides (``reference``); more than
    ``resolution_us`` beyond it makes the side ``incorrect``, and a head is ``faster`` only by
    more than its ``resolution_us``.
    """

    source: str
    calls: int
    gap_us: float
    pre_us: float
    post_us: float
    #: the trusted sides the figures are judged against; None where the case timed none
    reference: str | None = None
    reference_gap_us: float | None = None
    reference_pre_us: float | None = None
    reference_post_us: float | None = None
    #: the smallest lie about a call's time the clock resolves for this side (the gap's bound)
    resolution_us: float | None = None
    #: what the clock's checks found against this side (the message it was ``incorrect`` with),
    #: or None
    finding: str | None = None
    #: per judged call (raw): the judge's span, the side's own time, the judge's two segments
    span_us: tuple[float, ...] = ()
    reported_us: tuple[float, ...] = ()
    pre_call_us: tuple[float, ...] = ()
    post_call_us: tuple[float, ...] = ()
    #: the side's own median span from the judge's go to its start event (its page reads and
    #: spin; its own clock's account), and the trusted sides': a head can do that much work there
    #: unseen by the judge's clock, so a head's gain counts only beyond it (gate.verdicts)
    lead_us: float | None = None
    reference_lead_us: float | None = None
    #: calls under each of the judge's spans (a batch; 1: one call a span). Every per-call
    #: figure above is a span's divided by them, the lead-in included (a batch has one)
    batch_calls: int = 1
    #: us a call the judge added to the side's samples: its gap beyond the trusted sides' by more
    #: than ``resolution_us`` (and less than a finding takes), time its own clock left out
    counted_us: float = 0.0

    @property
    def unexplained_us(self) -> float | None:
        """How much more of each call the judge's clock saw than the side's own, beyond the
        trusted sides' handoff: time the side's own clock did not count."""
        return None if self.reference_gap_us is None else self.gap_us - self.reference_gap_us


@dataclass(frozen=True, slots=True)
class EscapeAudit:
    """A timed variant's calls re-run under CUPTI after its timing rounds: the GPU work each
    launched, on every stream, against the CUDA events that timed it (measure/escape.py).

    ``passed``: all of it ran between the start and the end event; ``escaped``: some ran before
    the start or after the end (``detail`` says what and where), so the samples miss it;
    ``unavailable``: CUPTI could not run or its trace could not be read (``detail`` says why).
    """

    status: EscapeStatus
    #: per audited call: the event time (ms, the run's event overhead subtracted; the samples are
    #: moved further by VariantResult.timing_shift_ms)
    event_ms: tuple[float, ...] = ()
    #: per audited call: CUPTI's span from the call's first GPU activity to its last (ms)
    cupti_span_ms: tuple[float, ...] = ()
    #: per audited call: GPU time (ms) of the call's activities outside the two events
    escaped_ms: tuple[float, ...] = ()
    #: the streams the calls' GPU work ran on (CUPTI's stream ids)
    streams: tuple[int, ...] = ()
    detail: str | None = None
    #: wall time of the audit (s), CUPTI's start-up included
    cost_s: float = 0.0
    #: what the audited calls launched, largest share first (the launch anatomy)
    launches: tuple[KernelLaunch, ...] = ()

    @property
    def event_median_ms(self) -> float | None:
        return median(self.event_ms) if self.event_ms else None

    @property
    def cupti_median_ms(self) -> float | None:
        return median(self.cupti_span_ms) if self.cupti_span_ms else None


@dataclass(frozen=True, slots=True)
class CaseResult:
    case_id: str
    dims: Mapping[str, Any]
    seed: int
    variants: tuple[VariantResult, ...]
    timing_method: str
    timing_description: str | None = None
    #: cuda_event only: the event-pair overhead (ms) subtracted from every sample, calibrated
    #: against CUPTI at start-up; the uncorrected event time of a sample is sample + this
    event_overhead_ms: float | None = None
    #: cuda_event only: the median over the case's variants of the shift applied to their samples
    #: after the event overhead (VariantResult.timing_shift_ms, measure/calibration.py); None
    #: where none was (the timing description says why)
    cupti_residual_ms: float | None = None
    #: a failure of the whole case (worker crash, timeout) that is not one variant's
    error: str | None = None
    gpu_state_before: Mapping[str, Any] | None = None
    gpu_state_after: Mapping[str, Any] | None = None

    def variant(self, label: str) -> VariantResult | None:
        return next((v for v in self.variants if v.label == label), None)


@dataclass(frozen=True, slots=True)
class Tolerance:
    atol: float
    rtol: float
    source: str  # "cli", "ref.py" or "default (float32)" — shown in the report


@dataclass(frozen=True, slots=True)
class OutputCheck:
    name: str
    passed: bool
    #: why it failed without figures: missing output, shape or dtype mismatch; None otherwise
    problem: str | None
    max_abs_error: float
    max_rel_error: float
    mismatched: int
    numel: int
    atol: float
    rtol: float
    tolerance_source: str
    #: first mismatching flat index and its two values, to make a failure debuggable (integer
    #: outputs' values exact, as integers)
    first_mismatch: tuple[int, float | int, float | int] | None = None


@dataclass(frozen=True, slots=True)
class TrialCheck:
    seed: int
    outputs: tuple[OutputCheck, ...]
    #: inputs (not outputs) the kernel modified
    modified_inputs: tuple[str, ...] = ()
    #: the call raised: its one-line description
    error: str | None = None

    @property
    def passed(self) -> bool:
        return self.error is None and not self.modified_inputs and all(o.passed for o in self.outputs)

    def describe_failure(self) -> str | None:
        if self.error:
            return self.error
        if self.modified_inputs:
            return f"modified its input(s) {', '.join(self.modified_inputs)} (seed {self.seed})"
        for output in self.outputs:
            if output.passed:
                continue
            if output.problem:
                return f"output '{output.name}': {output.problem} (seed {self.seed})"
            return (
                f"output '{output.name}': {output.mismatched} of {output.numel} elements outside "
                f"atol={output.atol:g} rtol={output.rtol:g}, max abs error {output.max_abs_error:.3g} (seed {self.seed})"
            )
        return None


@dataclass(frozen=True, slots=True)
class CorrectnessResult:
    trials: tuple[TrialCheck, ...]

    @property
    def passed(self) -> bool:
        return bool(self.trials) and all(t.passed for t in self.trials)

    @property
    def max_abs_error(self) -> float:
        return max((o.max_abs_error for t in self.trials for o in t.outputs), default=0.0)

    @property
    def max_rel_error(self) -> float:
        return max((o.max_rel_error for t in self.trials for o in t.outputs), default=0.0)

    @property
    def mismatched(self) -> int:
        return max((sum(o.mismatched for o in t.outputs) for t in self.trials), default=0)

    def first_failure(self) -> str | None:
        for trial in self.trials:
            reason = trial.describe_failure()
            if reason:
                return reason
        return None


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


@dataclass(frozen=True, slots=True)
class MeasureSettings:
    """How every variant of a case is checked and timed: the one settings object that travels
    from the suite (or ``bench``'s flags) into the worker job and back into results.json.

    Its defaults live in :mod:`kbench_ci.suite.settings`; nothing here has a default of its own.
    """

    device: str
    seed: int
    correctness_trials: int
    timing_method: str
    num_warmup: int
    #: timed trials per round per variant
    trials_per_round: int
    discard_first: int
    rounds: int
    flush_l2: bool
    #: the suite asked for cuda_event but the device is the CPU
    timing_method_changed: bool = False
    #: how trials_per_round was derived (run and compare), recorded in results.json
    trials_per_round_rule: str | None = None
    #: compare: seconds of timing a case may spend on rounds past ``rounds`` until its verdict
    #: is decided (see wire.protocol.StoppingRule); 0 = exactly ``rounds``
    time_budget_s: float = 0.0
    #: ``--seeds``: the correctness trials' seeds, one trial each, chosen on the command line
    #: (to check again the contents a report named); empty: trial k at ``seed + k`` in one
    #: process, drawn from the OS's entropy by the judge
    seeds: tuple[int, ...] = ()

    @property
    def trial_seeds(self) -> tuple[int, ...]:
        """The seed of each correctness trial where they are fixed: the given ones, else
        ``seed``, ``seed + 1``, ... (the in-process worker's; the judge draws its own unless given)."""
        return self.seeds or tuple(self.seed + trial for trial in range(self.correctness_trials))

    def as_json(self) -> dict[str, Any]:
        return {
            "device": self.device,
            "seed": self.seed,
            "correctness_trials": self.correctness_trials,
            "timing_method": self.timing_method,
            "num_warmup": self.num_warmup,
            "trials_per_round": self.trials_per_round,
            "trials_per_round_rule": self.trials_per_round_rule,
            "discard_first": self.discard_first,
            "rounds": self.rounds,
            "time_budget_s": self.time_budget_s,
            "cache_mode": "cold" if self.flush_l2 else "warm",
            "seeds": list(self.seeds),
        }


@dataclass(frozen=True, slots=True)
class BaselineSpeedup:
    """A suite baseline timed in the same rounds as the solution (the head of a compare):
    ``speedup`` is baseline median / solution median (> 1: the solution is faster), None when
    either was not timed (``status``/``message`` say why for the baseline)."""

    name: str
    status: VariantStatus
    speedup: float | None
    baseline_median_ms: float | None
    message: str | None = None

    def as_json(self) -> dict[str, Any]:
        return {
            "name": self.name, "status": self.status, "speedup": self.speedup,
            "baseline_median_ms": self.baseline_median_ms, "message": self.message,
        }


def baseline_speedups(result: CaseResult | None, solution_label: str) -> tuple[BaselineSpeedup, ...]:
    """Per baseline of ``result``, in job order, the solution's speedup over it."""
    if result is None:
        return ()
    solution = result.variant(solution_label)
    solution_ms = median(solution.samples_ms) if solution is not None and solution.timed else None
    speedups = []
    for variant in result.variants:
        if variant.role != "baseline":
            continue
        baseline_ms = median(variant.samples_ms) if variant.timed else None
        speedup = baseline_ms / solution_ms if baseline_ms is not None and solution_ms else None
        speedups.append(BaselineSpeedup(variant.label, variant.status, speedup, baseline_ms, variant.message))
    return tuple(speedups)
