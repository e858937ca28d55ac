"""The event-to-kernel offset, measured on calls made exactly as the timed calls are.

A CUDA event pair around a call on a held stream reads more than the call's GPU work: the start
event fires when the hold kernel ends, and the call's first kernel starts about 3 us later (the
front end processing the launch); the end event follows the last kernel at once. Measured on an
H200 under the timed conditions (flush, hold, events): 2.7-3.4 us for CUDA C++, Triton and
cuBLAS kernels alike, the largest part being that launch gap. The empty-kernel calibration of the
run (``CudaEventTimer.calibrate_overhead``) comes close (2.9-3.1 us), but the CUPTI audit's calls,
which have a marker kernel between the hold and the start event, read only 2.1-2.5 us: a
correction taken from them moved every sample up by ~0.9 us (a 36 us softmax read +3.8%).

So after its timing rounds each timed variant makes :data:`CALIBRATION_CALLS` more calls through
the very same path (input staging, flush, hold, events) under CUPTI, with one marker kernel of
ours enqueued just *after* each end event; each call's CUPTI span runs from the first GPU activity
launched after its hold kernel to the last one launched before its marker. The median of
(event time - span) is the variant's offset, and its samples are moved by what the run's
calibration did not already subtract.

The traced calls keep the timed calls' hold. The gap from the start event to the kernel grows
with the hold: on an H200 a 5 us vector add's event pair read 8.06 us at the timed hold of 63 us
and 8.56-8.98 us at the hold its traced warm-up asked for, with the same CUPTI span (5.7 us), so
an offset taken at the longer hold moved its samples 0.5-0.9 us too low (4.80 us reported,
5.5-5.7 us true). Under CUPTI the host enqueues more slowly, so a traced call may be enqueued
after its hold ends, which would put host time into its event pair: such calls (the first
launch returned after the hold kernel's end, or the end event recorded after the last kernel's)
are left out, and a variant with too few calls left gets no offset (its samples keep the
empty-kernel correction alone).

CUPTI itself slows kernels of very many blocks (a one-element-per-thread vector add of 2^24
floats, 65,536 blocks: 60.9 us back to back untraced, 64.5 us traced; a grid-stride add of
1,056 blocks: 58.6 us both ways). The offset is unaffected (the event pair and the span grow
together), so the corrected samples read the kernel's untraced time.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import torch

from kbench_ci.measure.cupti import ActivityTrace, CuptiUnavailable, TraceEvent, first_line
from kbench_ci.measure.escape import MARKER_NAME, TraceUnreadable, make_marker
from kbench_ci.measure.timing import CallHooks, CudaEventTimer
from kbench_ci.stats import median

#: calls traced per variant
CALIBRATION_CALLS = 20
#: the name CUPTI gives the hold kernel (torch.cuda._sleep)
HOLD_NAME = "spin_kernel"
#: fewer calls with GPU work than this give no offset
MIN_CALLS = 5
#: traced calls per subject made first and left out, while the clock comes back after the profiler's start
SETTLE_CALLS = 10
#: GPU time (s) enqueued before the profiler starts, so the GPU is not idle while it does
PROFILER_START_BUSY_S = 0.05
#: a traced call whose hold kernel ran longer than this times the median of the subject's met a lower
#: clock (against the median, not the fastest: a power-limited kernel's clock varies from call to
#: call, and at least half the calls must stay)
SLOW_HOLD = 1.02


@dataclass(frozen=True, slots=True)
class TimedOffset:
    """One variant's event-to-CUPTI offset under the timed conditions."""

    #: median of (event time - CUPTI span) over the calls (ms)
    offset_ms: float
    calls: int
    #: GPU activities per call (median): variants launching alike share one offset in a compare
    activities: int
    #: median CUPTI span of the traced calls (ms): what CUPTI read for them
    span_ms: float = 0.0
    #: median event time of the traced calls (ms)
    event_ms: float = 0.0
    #: traced calls left out: enqueued after their hold had ended
    late: int = 0
    #: traced calls left out: their hold ran slower than the median's (a lower clock)
    slow: int = 0


@dataclass(frozen=True, slots=True)
class Subject:
    fn: Callable[[], object]
    hooks: Callable[[int], CallHooks]


class _MarkAfter:
    def __init__(self, inner: CallHooks, marker: Callable[[], None]) -> None:
        self._inner, self._marker = inner, marker

    def before(self, index: int) -> None:
        self._inner.before(index)

    def after(self, index: int) -> None:
        self._marker()
        self._inner.after(index)


def measure_offsets(
    timer: CudaEventTimer, subjects: Mapping[str, Subject], calls: int = CALIBRATION_CALLS,
    *, between: Callable[[str], object] = lambda label: None,
) -> dict[str, TimedOffset] | str:
    """Each subject's offset, all under one trace, at the timed calls' hold (a subject whose
    traced calls were mostly enqueued after their hold ended gets none: an offset taken at a
    longer hold would not fit its samples). Or why none could be measured."""
    try:
        marker = make_marker(timer.device)
    except RuntimeError as exc:
        return f"the marker kernel failed: {first_line(exc)}"
    try:
        return _offsets_at_hold(timer, subjects, calls, marker, between)
    except (CuptiUnavailable, TraceUnreadable) as exc:
        return str(exc)


def _offsets_at_hold(
    timer: CudaEventTimer, subjects: Mapping[str, Subject], calls: int, marker: Callable[[], None],
    between: Callable[[str], object],
) -> dict[str, TimedOffset]:
    raw: dict[str, list[float]] = {}
    # The profiler's start takes host time in which an idle GPU lowers its clocks, and a lower
    # clock lengthens the launch gap: keep the GPU busy meanwhile, and let the first calls of
    # each subject bring the clock back (they are left out, as are calls whose hold ran slow).
    timer.keep_busy(PROFILER_START_BUSY_S)
    with ActivityTrace(shapes=False) as trace:
        for label, subject in subjects.items():
            # The hold stays the timed calls' own: the event-to-kernel gap grows with the hold
            # (a 5 us vector add on an H200: +0.5-0.9 us at a hold sized for the traced host),
            # so a longer hold would measure another offset than the samples carry.
            timer.warm_up(subject.fn, 2, resize_hold=False)
            raw[label] = timer.measure_raw(subject.fn, SETTLE_CALLS + calls, _MarkAfter(subject.hooks(SETTLE_CALLS + calls), marker))
            between(label)
        torch.cuda.synchronize(timer.device)
    per_subject = SETTLE_CALLS + calls
    spans = call_spans(trace.events, per_subject * len(subjects))
    offsets: dict[str, TimedOffset] = {}
    for index, (label, all_events) in enumerate(raw.items()):
        mine = spans[index * per_subject + SETTLE_CALLS:(index + 1) * per_subject]
        reading = offset_of(all_events[SETTLE_CALLS:], mine)
        if reading is not None:
            offsets[label] = reading
    return offsets


def offset_of(events_ms: Sequence[float], spans: Sequence[CallSpan]) -> TimedOffset | None:
    """One subject's offset from its traced calls' event times and CUPTI spans, or None when
    fewer than :data:`MIN_CALLS` calls give one."""
    holds = [float(span.hold_ns) for span in spans if span.hold_ns > 0]
    typical_hold = median(holds) if holds else 0.0
    # A call enqueued after its hold ended has host time in its event pair, and one whose hold
    # ran slow met a lower clock than the timed calls: neither gives the offset.
    pairs = [
        (event, span.span_ns / 1e6) for event, span in zip(events_ms, spans, strict=True)
        if span.span_ns > 0 and not span.late and span.hold_ns <= SLOW_HOLD * typical_hold
    ]
    if len(pairs) < MIN_CALLS:
        return None
    return TimedOffset(
        median([event - span for event, span in pairs]), len(pairs), int(median([float(span.activities) for span in spans])),
        span_ms=median([span for _, span in pairs]), event_ms=median([event for event, _ in pairs]),
        late=sum(span.late for span in spans),
        slow=sum(span.hold_ns > SLOW_HOLD * typical_hold for span in spans),
    )


@dataclass(frozen=True, slots=True)
class CallSpan:
    """One traced call: CUPTI's span of its GPU work (ns), how many activities that was, and
    whether host time reached its event pair (its first launch returned after its hold kernel
    had ended, or its end event was recorded after its last kernel had ended)."""

    span_ns: int
    activities: int
    late: bool = False
    #: how long its hold kernel ran on the GPU (ns): a fixed spin in cycles, so longer means a lower clock
    hold_ns: int = 0


def call_spans(events: Sequence[TraceEvent], calls: int) -> list[CallSpan]:
    """Per call: CUPTI's span (ns) from the first GPU activity launched after the call's hold
    kernel to the last launched before its marker, and how many activities that was."""
    launches = {e.correlation: e for e in events if not e.on_gpu}
    gpu = [e for e in events if e.on_gpu]
    markers = sorted((e for e in gpu if MARKER_NAME in e.name), key=lambda e: e.start_ns)
    if len(markers) != calls:
        raise TraceUnreadable(f"CUPTI recorded {len(markers)} of the {calls} marker kernels")
    marker_launch = [launches.get(m.correlation) for m in markers]
    if any(launch is None for launch in marker_launch):
        raise TraceUnreadable("CUPTI recorded the marker kernels without the calls that launched them")
    caller = marker_launch[0].lane  # type: ignore[union-attr]
    holds = sorted(
        ((launches[e.correlation].start_ns, e) for e in gpu
         if HOLD_NAME in e.name and e.correlation in launches and launches[e.correlation].lane == caller),
        key=lambda launched_hold: launched_hold[0],
    )
    host_calls = sorted((e.start_ns, e.end_ns) for e in launches.values() if e.lane == caller)
    marker_ids = {m.correlation for m in markers}
    spans: list[CallSpan] = []
    previous = -1
    for launch in marker_launch:
        assert launch is not None
        hold_launched, hold = next(((t, e) for t, e in holds if previous < t < launch.start_ns), (0, None))
        if hold is None:
            raise TraceUnreadable("a traced call has no hold kernel before it")
        mine = [
            e for e in gpu
            if e.correlation not in marker_ids and e.correlation != hold.correlation and e.correlation in launches
            and hold_launched < launches[e.correlation].start_ns < launch.start_ns
        ]
        first = min(mine, key=lambda e: e.start_ns, default=None)
        last_end = max((e.end_ns for e in mine), default=0)
        span = last_end - (first.start_ns if first is not None else 0)
        # Host time enters the event pair only at its ends: the call's first launch returned after
        # the hold had ended (the GPU waited for it after the start event), or the end event was
        # recorded after the call's last kernel had ended. A gap between kernels is in both.
        before_marker = [end for start, end in host_calls if hold_launched < start < launch.start_ns]
        late = first is not None and (
            launches[first.correlation].end_ns > hold.end_ns
            or (bool(before_marker) and before_marker[-1] > last_end)
        )
        spans.append(CallSpan(span, len(mine), late, hold.end_ns - hold.start_ns))
        previous = launch.start_ns
    return spans
