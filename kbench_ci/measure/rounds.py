"""The timing phase of a case: rounds of timed calls, each on fresh input content with its outputs
checked, then the checks that need the timed state (re-check, memoisation probe), the event
offset under the timed conditions, and the CUPTI audit.

Rounds alternate the variants' order (A B, B A, ...) so clock and thermal drift hit all alike;
past the minimum rounds a stopping rule adds batches while the verdict is undecided
(:mod:`kbench_ci.measure.schedule`). Input staging and output checks:
:mod:`kbench_ci.measure.staging`; the probe: :mod:`kbench_ci.measure.memo_probe`; the offset:
:mod:`kbench_ci.measure.calibration`.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any

import torch

from kbench_ci.errors import KbenchError, SignatureError
from kbench_ci.measure import calibration, memo_probe, speed_of_light
from kbench_ci.measure.correctness import compare_outputs
from kbench_ci.measure.escape import AuditedCallFailed, audit_together
from kbench_ci.measure.impls import Kernel
from kbench_ci.measure.impls.python_solution import SetupFailed
from kbench_ci.measure.inputs import InputSet, same_inputs
from kbench_ci.measure.schedule import RoundPlan
from kbench_ci.measure.staging import OutputCheck, StagedCalls, TimedSet
from kbench_ci.measure.stopping import VerdictWatch, undecided_note
from kbench_ci.measure.timing import CudaEventTimer, Timer, make_timer, shift_samples
from kbench_ci.measure.variant import (
    Emit,
    Variant,
    call_on_poisoned_outputs,
    describe_error,
    expected_outputs,
    fail,
    raise_if_context_lost,
    setup_failure,
    sync,
    usage_failure,
)
from kbench_ci.results.model import SpeedOfLight
from kbench_ci.stats import MemoEvidence, median, relative_spread
from kbench_ci.wire.protocol import Begin, CaseJob, Progress, StoppingRule, TimingDescription

#: a shift of the samples beyond this (ms) means the traced calls ran unlike the timed ones
MAX_SHIFT_MS = 0.005


@dataclass(slots=True)
class _Timed:
    """One variant in the timing phase: its set of tensors, its last return value, what its
    timed calls measured and how many of them were checked."""

    variant: Variant
    tset: TimedSet
    check: OutputCheck | None
    returned: list[object] = field(default_factory=lambda: [None])
    rounds: list[tuple[float, ...]] = field(default_factory=list)
    #: per round, which version of the inputs each kept sample's call was given
    round_versions: list[tuple[int, ...]] = field(default_factory=list)
    discarded: list[float] = field(default_factory=list)
    checked: int = 0

    @property
    def label(self) -> str:
        return self.variant.label

    def call(self) -> object:
        self.returned[0] = self.variant.kernel.call(self.tset.kwargs)
        return self.returned[0]

    def collect(self) -> Mapping[str, Any]:
        return _collect(self.variant.kernel, self.returned, self.tset.kwargs, self.tset.inputs.output_names)

    def hooks(self, calls: list[Any], *, checked: bool = True) -> StagedCalls:
        return StagedCalls(
            self.tset, calls, self.collect, self.check if checked else None,
            first_call=self.checked,
        )


def _collect(kernel: Kernel, returned: list[object], kwargs: dict[str, Any], names: tuple[str, ...]) -> Mapping[str, Any]:
    return kernel.collect(returned[0], kwargs, names)


def time_in_rounds(variants: list[Variant], job: CaseJob, device: torch.device, emit: Emit) -> None:
    timer: Timer = make_timer(
        job.settings.timing_method, device, flush_l2=job.settings.flush_l2, event_overhead_ms=job.event_overhead_ms  # type: ignore[arg-type]
    )
    timed = _prepare(variants, job, device, emit)
    if timed:
        _run_rounds(timed, timer, job, device, emit)
    for entry in timed:
        entry.tset.restore()
    for entry in timed:  # only variants still "ok": one that failed while timing was dropped
        _finish(entry, device, emit)
    ok = [entry for entry in timed if entry.variant.result.status == "ok"]
    _probe_memoisation([entry for entry in ok if entry.variant.role == "solution"], timer, device, emit)
    ok = [entry for entry in ok if entry.variant.result.status == "ok"]
    description = timer.describe()
    shifts: list[float] = []
    if isinstance(timer, CudaEventTimer) and ok:
        emit(Begin(ok[0].label, "timing"))  # the samples' correction: part of timing, not of the audit
        description += "; " + _shift_to_cupti(ok, timer, shifts)
        # After every round of every variant: tracing cannot slow a sample that is still to come.
        _audit_escapes([entry for entry in ok if entry.variant.result.status == "ok"], timer, device, emit)
    _speed_of_light([e for e in ok if e.variant.role == "solution" and e.variant.result.timed], job, device)
    for entry in timed:
        if entry.variant.role == "solution":
            _record_compiled(entry)
    emit(TimingDescription(description, timer.event_overhead_ms, median(shifts) if shifts else None))


def _prepare(variants: list[Variant], job: CaseJob, device: torch.device, emit: Emit) -> list[_Timed]:
    """Each variant's set of timed tensors. Variants whose inputs and reference are identical
    (base and head with the same setup and ref.py, a solution and its baselines) share one set:
    a buffer's placement in memory can change a kernel's time by a few percent (measured on an
    H200: 0.976x between two allocations at N = 2^20), which would read as a difference between
    the sides."""
    sets: list[tuple[bytes, TimedSet]] = []  # (the ref.py that says what is right, the set)
    timed: list[_Timed] = []
    for variant in variants:
        emit(Begin(variant.label, "timing"))
        try:
            inputs = variant.solution.make_inputs(job.settings.seed)
            reference = variant.problem.path.read_bytes()
            twin = next(
                (tset for owner, tset in sets if owner == reference and same_inputs(tset.inputs, inputs)), None,
            )
            if twin is None:
                twin = TimedSet.prepare(
                    inputs, inputs.fresh_copy(), variant.solution.make_inputs,
                    partial(_settled_expected, variant, device, emit), device,
                )
                sets.append((reference, twin))
        except SetupFailed as exc:
            raise_if_context_lost(exc.cause, device)
            setup_failure(variant, exc, job.dims, emit)
            continue
        except KbenchError as exc:  # the reference failed on the original inputs: ref.py's, not the kernel's
            usage_failure(variant, exc, emit)
            continue
        except Exception as exc:
            raise_if_context_lost(exc, device)
            fail(variant, "error", f"preparing the timed inputs failed: {describe_error(exc)}")
            continue
        finally:
            variant.settle()
        check = OutputCheck(variant.tolerance_for, device) if variant.role == "solution" else None
        timed.append(_Timed(variant, twin, check))
    return timed


def _settled_expected(variant: Variant, device: torch.device, emit: Emit, inputs: InputSet) -> dict[str, Any]:
    try:
        return expected_outputs(variant, inputs, device, emit=emit)
    finally:
        variant.settle()


def _run_rounds(timed: list[_Timed], timer: Timer, job: CaseJob, device: torch.device, emit: Emit) -> None:
    calls_per_round = job.settings.trials_per_round + job.settings.discard_first
    timing_started = time.perf_counter()
    plan = RoundPlan(job.settings.rounds, job.stopping)
    # The full warm-up of every variant comes before the first round, in the reverse of that
    # round's order, so that round 0 is like every later one: its first variant follows its
    # own calls, the second follows the other's, each after a short re-warm-up. (Warmed up
    # inside round 0, the head read 0.3-1% slower than the base there in A/A on an H200.)
    # One hold for every timed call of the case, the longest any variant's warm-up asks for:
    # the event-to-kernel gap grows with the hold (calibration module doc), so a hold that
    # differed between the sides, or from round to round, would move their samples apart.
    holds: list[float] = []
    for entry in reversed(timed):
        emit(Begin(entry.label, "timing"))
        try:
            timer.warm_up(entry.call, job.settings.num_warmup)
            holds.append(getattr(timer, "hold_us", 0.0))
        except Exception as exc:
            raise_if_context_lost(exc, device)
            fail(entry.variant, "error", f"failed while timing: {describe_error(exc)}")
        entry.variant.settle()
    if holds and isinstance(timer, CudaEventTimer):
        timer.hold_us = max(holds)
    live = [entry for entry in timed if entry.variant.result.status == "ok"]
    round_index = 0
    watch = VerdictWatch(job.stopping) if job.stopping is not None else None
    said = False  # the rounds ended decided, or with the early stop's note
    while batch := plan.next_batch(round_index, time.perf_counter() - timing_started):
        for _ in range(batch):
            order = list(reversed(live)) if plan.reversed_order(round_index) else live
            total = max(job.settings.rounds, round_index + 1)
            # One order of versions per set and round, the same for every variant timed on it.
            picks = {id(tset): tset.pick(calls_per_round) for tset in {id(e.tset): e.tset for e in live}.values()}
            for entry in order:
                emit(Begin(entry.label, "timing"))
                emit(Progress(entry.label, "timing", round_index, total))
                if not _time_one_round(entry, picks[id(entry.tset)], timer, job, device, round_index):
                    live = [e for e in live if e is not entry]
            round_index += 1
        if not plan.may_continue(round_index, time.perf_counter() - timing_started):
            break
        assert watch is not None  # may_continue is False without a rule
        # The host computes the interim verdict now: keep the GPU at its clocks meanwhile.
        timer.keep_busy(plan.expected_check_s(round_index))
        check_started = time.perf_counter()
        solutions = [entry for entry in live if entry.variant.role == "solution"]
        look = watch.look([entry.rounds for entry in solutions], round_index, check_started - timing_started)
        if look.stop:
            if look.note is not None:
                _note(solutions[1], look.note)
            said = True
            break
        plan.checked(round_index, time.perf_counter() - check_started)
    if job.stopping is not None and not said:
        _note_if_undecided(live, job.stopping, round_index)


def _time_one_round(
    entry: _Timed, calls: list[Any], timer: Timer, job: CaseJob, device: torch.device, round_index: int
) -> bool:
    """One round of one variant; False when the variant failed (it is then final)."""
    variant = entry.variant
    try:
        # A short re-warm-up after another variant ran (the full one came before round 0).
        timer.warm_up(entry.call, max(1, min(3, job.settings.num_warmup)), resize_hold=False)
        samples = timer.measure(entry.call, len(calls), entry.hooks(calls))
    except Exception as exc:
        raise_if_context_lost(exc, device)
        fail(variant, "error", f"failed while timing: {describe_error(exc)}")
        return False
    finally:
        variant.settle()  # after the batch's end event: outside the timed calls
    entry.rounds.append(tuple(samples[job.settings.discard_first:]))
    entry.round_versions.append(tuple(entry.tset.index_of(version) for version in calls[job.settings.discard_first:]))
    entry.discarded.extend(samples[: job.settings.discard_first])
    if entry.check is None:
        return True
    first = entry.checked
    entry.checked += len(calls)
    failures = entry.check.failures()
    if failures:
        call, name, what = failures[0]
        fail(variant, "incorrect", (
            f"timed call {call + 1} (round {round_index + 1}, call {call - first + 1}) was given new input contents "
            f"and its output '{name}' does not match the reference for them ({what}); "
            f"{len({c for c, _, _ in failures})} of the round's {len(calls)} calls failed. A kernel that remembers results "
            "instead of computing them fails here: compute from the inputs on every call"
        ))
        return False
    return True


def _note_if_undecided(live: list[_Timed], rule: StoppingRule, done: int) -> None:
    """The time budget or the round cap ended the rounds: when the verdict is still undecided,
    say on the head what this case resolves at its noise, as an early stop does."""
    sides = [entry for entry in live if entry.variant.role == "solution"]
    note = undecided_note([entry.rounds for entry in sides], rule, done)
    if note is not None:
        _note(sides[1], note)


def _finish(entry: _Timed, device: torch.device, emit: Emit) -> None:
    """The variant's samples into its result, and the re-check after timing (solutions)."""
    variant = entry.variant
    checked = ""
    if entry.check is not None:
        checked = f"; outputs of all {entry.checked} timed calls checked against the reference"
    variant.result = replace(
        variant.result,
        rounds_ms=tuple(entry.rounds),
        round_versions=tuple(entry.round_versions),
        discarded_ms=tuple(entry.discarded),
        fresh_inputs=entry.tset.describe() + checked,
    )
    if variant.result.status != "ok":
        return
    try:
        post_timing_check = _post_timing_check(variant, entry.tset, device, emit)
    except KbenchError as exc:  # the reference failed in the re-check: ref.py's, not the kernel's
        usage_failure(variant, exc, emit)
        return
    variant.result = replace(variant.result, post_timing_check=post_timing_check)
    if post_timing_check is False:
        fail(variant, "incorrect", (
            "outputs were wrong when called once more after the timing runs, on its original inputs with its outputs "
            "poisoned (right only while checked, or skipping work on inputs it has seen?)"
        ))


def _post_timing_check(variant: Variant, tset: TimedSet, device: torch.device, emit: Emit) -> bool | None:
    """Did the timed calls still compute the right outputs? Catches kernels that do the work only
    for the first calls and then skip it. A reference that fails here raises (a KbenchError):
    that is ref.py's fault, not a wrong output of the kernel's."""
    if variant.role != "solution":
        return None
    sync(device)
    try:
        expected = expected_outputs(variant, tset.inputs, device, emit=emit)
    finally:
        variant.settle()
    try:
        # The original contents again: a variant checked before on this shared set updated its
        # in-place outputs. Poisoned again, so outputs left over from earlier calls cannot pass.
        tset.restore()
        outputs = call_on_poisoned_outputs(variant, tset.kwargs, tset.inputs, device)
    except Exception as exc:
        raise_if_context_lost(exc, device)
        return False
    finally:
        variant.settle()
    checks = compare_outputs(outputs, expected, variant.tolerance_for)
    return all(check.passed for check in checks)


def _probe_memoisation(solutions: list[_Timed], timer: Timer, device: torch.device, emit: Emit) -> None:
    """Time each solution on content it never saw against content it saw (memo_probe).

    Batches of :data:`memo_probe.PROBE_PAIRS` pairs, more (up to :data:`memo_probe.MAX_PROBE_PAIRS`)
    while a variant reads faster on seen content but not yet in enough pairs to say so. A variant
    read as caching is probed again on other new contents, and is ``incorrect`` only when the
    same comparison says so again: a cache is faster every time, a burst of noise (seen on a
    shared 2-core host: an honest 10 us kernel once read 1.62x in 10 of 10 pairs) is not."""
    by_set: dict[int, list[_Timed]] = {}
    for entry in solutions:
        by_set.setdefault(id(entry.tset), []).append(entry)
    for group in by_set.values():
        tset = group[0].tset
        if tset.maker is None:
            for entry in group:
                _add_note(entry, f"memoisation probe not run: {tset.reason}")
            continue
        first = _probe_group(group, timer, device, emit)
        suspects = [entry for entry in group if entry.label in first and any(e.cached for e in first[entry.label])]
        second = _probe_group(suspects, timer, device, emit) if suspects else {}
        tset.restore()
        for entry in group:
            if entry.variant.result.status != "ok" or entry.label not in first:
                continue
            _add_note(entry, f"memoisation probe: {memo_probe.describe(first[entry.label])}")
            again = {e.seen_as: e for e in second.get(entry.label, ())}
            confirmed = next(
                (e for e in first[entry.label] if e.cached and e.seen_as in again and again[e.seen_as].cached), None
            )
            if confirmed is None:
                if entry.label in second:
                    _add_note(entry, f"not confirmed on other new contents: {memo_probe.describe(second[entry.label])}")
                continue
            repeat = again[confirmed.seen_as]
            fail(entry.variant, "incorrect", (
                f"calls on input contents it had seen ({confirmed.seen_as}) ran {confirmed.ratio:.2f}x faster than on new "
                f"contents ({confirmed.slower_pairs} of {confirmed.pairs} pairs; noise allows {confirmed.bound:.2f}x), "
                f"and {repeat.ratio:.2f}x ({repeat.slower_pairs} of {repeat.pairs}) on other new contents: results are "
                "cached; compute from the inputs on every call"
            ))


def _probe_group(
    group: list[_Timed], timer: Timer, device: torch.device, emit: Emit
) -> dict[str, tuple[MemoEvidence, ...]]:
    """One probe of the variants of ``group`` (one set of timed tensors) on new contents: each
    still-ok variant's evidence, by label."""
    tset = group[0].tset
    subjects = {
        entry.label: memo_probe.ProbeSubject(entry.label, entry.call, entry.collect, entry.check)  # type: ignore[arg-type]
        for entry in group
    }
    probe_start = {entry.label: entry.checked for entry in group}
    made, target = 0, memo_probe.PROBE_PAIRS
    while made < target:
        versions = memo_probe.new_versions(tset, min(memo_probe.chunk_size(tset, device), target - made))
        if not versions:
            break
        made += len(versions)
        for entry in group:
            if entry.variant.result.status == "ok":
                _probe_one(entry, subjects[entry.label], versions, probe_start[entry.label], timer, tset, device, emit)
        live = [entry for entry in group if entry.variant.result.status == "ok"]
        if made >= target and target < memo_probe.MAX_PROBE_PAIRS and any(
            e.suspect for entry in live for e in subjects[entry.label].evidence(_call_noise(entry, subjects[entry.label]))
        ):
            target += memo_probe.PROBE_PAIRS
    return {
        entry.label: subjects[entry.label].evidence(_call_noise(entry, subjects[entry.label]))
        for entry in group if entry.variant.result.status == "ok" and subjects[entry.label].new
    }


def _probe_one(
    entry: _Timed, subject: memo_probe.ProbeSubject, versions: list[Any], probe_start: int, timer: Timer, tset: TimedSet,
    device: torch.device, emit: Emit,
) -> None:
    emit(Begin(entry.label, "timing"))
    try:
        memo_probe.run_probe(timer, tset, subject, versions, first_call=entry.checked)
    except Exception as exc:
        raise_if_context_lost(exc, device)
        fail(entry.variant, "error", f"failed while probed on new inputs: {describe_error(exc)}")
        return
    finally:
        entry.variant.settle()
    entry.checked += 3 * len(versions)
    failures = entry.check.failures() if entry.check is not None else []
    if failures:
        call, name, what = failures[0]
        given = memo_probe.TRIPLE_ROLES[(call - probe_start) % 3]
        fail(entry.variant, "incorrect", (
            f"a call of the memoisation probe (call {call + 1}) was given {given} and its output '{name}' does not "
            f"match the reference for them ({what}); compute from the inputs on every call"
        ))


def _call_noise(entry: _Timed, subject: memo_probe.ProbeSubject) -> float:
    """The noise of one call: the median of three estimates, so that a cache's own two-speed
    samples (hits and misses in one set) cannot widen the bound it is judged by."""
    spreads = [relative_spread(s) for s in (entry.variant.result.samples_ms, subject.seen, subject.repeat) if s]
    return median(spreads) if spreads else 0.0


def _note(entry: _Timed, note: str) -> None:
    """A line in the variant's notes (the report shows them under the case)."""
    entry.variant.result = replace(entry.variant.result, notes=(*entry.variant.result.notes, note))


def _add_note(entry: _Timed, note: str) -> None:
    result = entry.variant.result
    text = f"{result.fresh_inputs}; {note}" if result.fresh_inputs else note
    entry.variant.result = replace(result, fresh_inputs=text)


def _record_compiled(entry: _Timed) -> None:
    """What the compiler made of the solution's kernels, after its calls compiled them all."""
    try:
        kernels = entry.variant.solution.compiled()
    except Exception as exc:  # a report's extra, read from the user's objects: never a failure
        _note(entry, f"compiled kernels not read: {describe_error(exc)}")
        return
    entry.variant.result = replace(entry.variant.result, compiled=kernels)


def _speed_of_light(solutions: list[_Timed], job: CaseJob, device: torch.device) -> None:
    """Each timed solution against the GPU's ceilings; below the floor of its declared work it is
    incorrect (speed_of_light module doc). With a warm L2 (``flush_l2`` off) inputs come from L2,
    faster than any copy of DRAM: the figures are kept, the floor is not applied."""
    if not solutions:
        return
    try:
        ceilings = speed_of_light.ceilings_for(device)
    except Exception as exc:  # out of memory after a large case, say: the figures are an extra
        raise_if_context_lost(exc, device)
        for entry in solutions:
            _note(entry, f"speed of light not assessed: measuring this GPU's ceilings failed: {describe_error(exc)}")
        return
    for entry in solutions:
        try:
            _assess_speed_of_light(entry, job, device, ceilings)
        except Exception as exc:  # never turn an honest kernel's measured samples into an error
            raise_if_context_lost(exc, device)
            _note(entry, f"speed of light not assessed: {describe_error(exc)}")


def _assess_speed_of_light(entry: _Timed, job: CaseJob, device: torch.device, ceilings: speed_of_light.Ceilings | None) -> None:
    variant = entry.variant
    inputs = entry.tset.kwargs
    try:
        work = speed_of_light.declared_work(variant.side.bytes_expr, variant.side.flops_expr, job.dims)
    except SignatureError as exc:
        _note(entry, f"speed of light not assessed: {exc}")
        return
    work = work or speed_of_light.inferred_work(inputs)

    def judged(limits: speed_of_light.Ceilings | None) -> SpeedOfLight:
        return speed_of_light.assess(
            work, median(variant.result.samples_ms), limits, speed_of_light.main_float_dtype(inputs),
            eight_bit=speed_of_light.has_eight_bit_inputs(inputs),
        )

    figures = judged(ceilings)
    if figures.below_floor and ceilings is not None and device.type == "cuda":
        figures = judged(speed_of_light.remeasured(device, ceilings))  # a low cached ceiling must not convict
    if not job.settings.flush_l2:
        figures = replace(figures, floor_ms=None)
    variant.result = replace(variant.result, speed_of_light=figures)
    if not figures.below_floor:
        return
    if figures.source == "declared":
        fail(variant, "incorrect", speed_of_light.floor_message(figures))
    else:
        _note(entry, "⚠️ " + speed_of_light.floor_message(figures))


def _shift_to_cupti(ok: list[_Timed], timer: CudaEventTimer, shifts: list[float]) -> str:
    """Move each variant's samples to CUPTI's time of its own GPU work, by the offset measured
    on calls made as the timed ones (calibration module doc). Returns the report's words."""
    subjects = {entry.label: calibration.Subject(entry.call, partial(_unchecked_hooks, entry)) for entry in ok}
    offsets = calibration.measure_offsets(timer, subjects, between=lambda label: _settle(ok, label))
    for entry in ok:
        entry.tset.restore()
    if isinstance(offsets, str):
        return f"samples not moved to CUPTI's time ({offsets})"
    subtracted = timer.event_overhead_ms or 0.0
    pooled = _pooled_offsets(ok, offsets)
    words = []
    for entry in ok:
        offset = pooled.get(entry.label)
        if offset is None:
            words.append(f"{entry.label}: not moved ({_why_no_offset(entry, offsets)})")
            continue
        shift = offset - subtracted
        if abs(shift) > MAX_SHIFT_MS:
            words.append(f"{entry.label}: not moved ({shift * 1e3:+.2f} us is beyond ±{MAX_SHIFT_MS * 1e3:g} us)")
            continue
        result = entry.variant.result
        entry.variant.result = replace(
            result,
            rounds_ms=tuple(shift_samples(samples, shift) for samples in result.rounds_ms),
            discarded_ms=shift_samples(result.discarded_ms, shift),
            timing_shift_ms=shift,
        )
        shifts.append(shift)
        reading = offsets[entry.label]
        late = f", {reading.late} traced calls enqueued after their hold left out" if reading.late else ""
        late += f", {reading.slow} at a lower clock left out" if reading.slow else ""
        words.append(f"{entry.label} {-(offset * 1e3):+.2f} us (CUPTI {reading.span_ms * 1e3:.2f} us, "
                     f"events {reading.event_ms * 1e3:.2f} us{late})")
    return ("event time less the start-event-to-kernel offset CUPTI measured on "
            f"{calibration.CALIBRATION_CALLS} calls made as timed (same staging, flush, hold and events): " + ", ".join(words))


def _unchecked_hooks(entry: _Timed, calls: int) -> StagedCalls:
    return entry.hooks(entry.tset.pick(calls), checked=False)


def _pooled_offsets(ok: list[_Timed], offsets: Mapping[str, calibration.TimedOffset]) -> dict[str, float]:
    """Each variant's offset; the two sides of a compare that launch alike (same kind, same GPU
    activities per call) share the median of both, so an A/A ratio carries no calibration noise."""
    chosen = {label: reading.offset_ms for label, reading in offsets.items()}
    solutions = [entry for entry in ok if entry.variant.role == "solution"]
    sides = [entry for entry in solutions if entry.label in offsets]
    if len(solutions) == 2 and len(sides) == 1:
        # One side moved and the other not would tilt their ratio by the whole correction.
        chosen.pop(sides[0].label)
    if len(sides) == 2:
        first, second = (offsets[entry.label] for entry in sides)
        if sides[0].variant.kind == sides[1].variant.kind and first.activities == second.activities:
            shared = (first.offset_ms * first.calls + second.offset_ms * second.calls) / (first.calls + second.calls)
            for entry in sides:
                chosen[entry.label] = shared
    return chosen


def _why_no_offset(entry: _Timed, offsets: Mapping[str, calibration.TimedOffset]) -> str:
    if entry.label in offsets:
        return "the other side got no offset, and one side moved alone would tilt the ratio"
    return (f"fewer than {calibration.MIN_CALLS} of its {calibration.CALIBRATION_CALLS} traced calls were on time "
            "at the timed hold and clock")


def _settle(ok: list[_Timed], label: str) -> None:
    for entry in ok:
        if entry.label == label:
            entry.variant.settle()


def _audit_escapes(ok: list[_Timed], timer: CudaEventTimer, device: torch.device, emit: Emit) -> None:
    """Trace the variants' timed calls under CUPTI, all in one trace: GPU work outside the
    timer makes a variant incorrect. A call that raises fails its variant, and the others are
    audited again without it."""
    by_label = {entry.label: entry for entry in ok}

    def begin(label: str) -> None:
        emit(Begin(label, "audit"))  # a crash from here on is this variant's

    def settle(label: str) -> None:
        by_label[label].variant.settle()  # its torch settings put back before the next variant's calls

    pending = list(ok)
    while pending:
        calls = {entry.label: entry.call for entry in pending}
        outcome = audit_together(timer, calls, before=begin, after=settle)
        if isinstance(outcome, AuditedCallFailed):
            failed = by_label[outcome.label]
            raise_if_context_lost(outcome.error, device)
            fail(failed.variant, "error", f"failed while audited under CUPTI: {describe_error(outcome.error)}")
            pending.remove(failed)
            continue
        for entry in pending:
            audit = outcome[entry.label]
            entry.variant.result = replace(entry.variant.result, escape_audit=audit)
            if audit.status == "escaped":
                fail(entry.variant, "incorrect", f"GPU work escaped the timer: {audit.detail}")
        return
