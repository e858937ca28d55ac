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


@dataclass(frozen=True, slots=True)
class TimedOffset:
    """One variant's event-to-CUPTI offset under the timed conditions."""

    #: median of (event time - CUPTI span) over the calls (ms)
    offset_ms: float
    calls: int
    #: GPU activities per call (median): variants launching alike share one offset in a compare
    activities: int


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
    """Each subject's offset, all under one trace; or why none could be measured."""
    try:
        marker = make_marker(timer.device)
    except RuntimeError as exc:
        return f"the marker kernel failed: {first_line(exc)}"
    raw: dict[str, list[float]] = {}
    timed_hold_us = timer.hold_us
    try:
        with ActivityTrace() as trace:
            for label, subject in subjects.items():
                # The timed calls' hold, unless the traced host needs longer to enqueue a call
                # (CUPTI slows every launch): a start event that fires before the call is
                # enqueued would count host time as the offset.
                timer.warm_up(subject.fn, 2)
                timer.hold_us = max(timer.hold_us, timed_hold_us)
                raw[label] = timer.measure_raw(subject.fn, calls, _MarkAfter(subject.hooks(calls), marker))
                between(label)
            torch.cuda.synchronize(timer.device)
        spans = call_spans(trace.events, calls * len(subjects))
    except (CuptiUnavailable, TraceUnreadable) as exc:
        return str(exc)
    finally:
        timer.hold_us = timed_hold_us
    offsets: dict[str, TimedOffset] = {}
    for index, (label, events) in enumerate(raw.items()):
        mine = spans[index * calls:(index + 1) * calls]
        differences = [event - span_ns / 1e6 for event, (span_ns, _) in zip(events, mine, strict=True) if span_ns > 0]
        if len(differences) >= MIN_CALLS:
            activities = int(median([float(count) for _, count in mine]))
            offsets[label] = TimedOffset(median(differences), len(differences), activities)
    return offsets


def call_spans(events: Sequence[TraceEvent], calls: int) -> list[tuple[int, int]]:
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
        (launches[e.correlation].start_ns, e.correlation) for e in gpu
        if HOLD_NAME in e.name and e.correlation in launches and launches[e.correlation].lane == caller
    )
    marker_ids = {m.correlation for m in markers}
    spans: list[tuple[int, int]] = []
    previous = -1
    for launch in marker_launch:
        assert launch is not None
        hold = next(((t, c) for t, c in holds if previous < t < launch.start_ns), None)
        if hold is None:
            raise TraceUnreadable("a traced call has no hold kernel before it")
        mine = [
            e for e in gpu
            if e.correlation not in marker_ids and e.correlation != hold[1] and e.correlation in launches
            and hold[0] < launches[e.correlation].start_ns < launch.start_ns
        ]
        span = max((e.end_ns for e in mine), default=0) - min((e.start_ns for e in mine), default=0)
        spans.append((span, len(mine)))
        previous = launch.start_ns
    return spans
