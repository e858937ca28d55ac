"""Catching GPU work that escapes the timer: the CUPTI audit of a timed variant.

The samples are CUDA-event times on the current stream. Work a solution puts on another
stream and never joins back, work it starts before the stream it was given reaches the start
event, or work it hands to another host thread, runs outside the two events and is timed as
free (measured on an H200: 2.7 ms of side-stream work read 2.5 us). Poisoned outputs catch such
work only while it is still running when the outputs are read.

After a case's timing rounds, each timed variant's call is made :data:`AUDITED_CALLS` more
times, each alone on the device, all variants under one CUPTI trace (its start, stop and settle
are paid once per case: about 14 of the 20 ms a trace per variant cost on an H200)::

    flush L2, hold the stream, begin marker | start event, call, end event | end marker, sync

The two markers are kernels of our own, named :data:`MARKER_NAME`, on the timed stream: the
begin marker ends just before the start event fires and the end marker starts just after the
end event (stream order), so they locate the events on CUPTI's clock. Every other GPU activity
the call launched, on any stream, from any thread (launches are matched to calls by the host
time of the runtime call that made them), must lie between the two; the harness's own flush and
hold are the launches our thread makes before the begin marker. Whatever lies outside by more
than :data:`ESCAPE_TOLERANCE_NS` makes the variant ``incorrect``: the decision is by timing, not
by stream identity, so blocking streams and the legacy default stream (which join implicitly)
pass.

The same calls give the truth check of every report: the event time of each audited call next
to CUPTI's span from its first GPU activity to its last. These calls are not the timed ones (a
marker kernel sits between the hold and the start event, which shortens the event-to-kernel gap
by ~0.9 us on an H200), so the samples are corrected elsewhere, on calls made exactly as timed
(:mod:`kbench_ci.measure.calibration`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import torch

from kbench_ci.measure.anatomy import launch_anatomy
from kbench_ci.measure.cupti import ActivityTrace, CuptiUnavailable, TraceEvent, first_line
from kbench_ci.measure.timing import CudaEventTimer
from kbench_ci.results.model import EscapeAudit, EscapeStatus

#: calls made under CUPTI per variant (after its timing rounds)
AUDITED_CALLS = 5
#: GPU time outside the events that is still read as clock granularity, per call
ESCAPE_TOLERANCE_NS = 2_000
#: the marker kernels' name (a substring of the name CUPTI reports)
MARKER_NAME = "kbench_ci_audit_marker"
#: the stream is held at least this long before each audited call: CUPTI slows every launch,
#: and a hold that ends before the call is enqueued would time launch latency
MIN_AUDIT_HOLD_US = 250.0
#: after the last call, wait this long and synchronise again, so work another thread launches
#: late is still in the trace (the sleep releases the GIL: a thread that is ready launches at once)
SETTLE_S = 0.003
#: the same between two variants, so a late launch is not blamed on the next variant
BETWEEN_VARIANTS_SETTLE_S = 0.002


class TraceUnreadable(Exception):
    """The trace does not show the audited calls as the harness made them."""


@dataclass(frozen=True, slots=True)
class CallActivity:
    """What CUPTI saw of one audited call."""

    #: from the call's first GPU activity to its last (0 when it launched none)
    span_ns: int
    #: GPU time before the start event, per stream
    before_ns: tuple[tuple[int, int], ...]
    #: GPU time after the end event, per stream
    after_ns: tuple[tuple[int, int], ...]
    streams: tuple[int, ...]
    #: some of the escaped work was launched by a thread other than the caller's
    other_thread: bool
    #: the call's own GPU activities (kernels, memcpys, memsets), on every stream
    activities: tuple[TraceEvent, ...] = ()

    @property
    def escaped_ns(self) -> int:
        return sum(ns for _, ns in self.before_ns) + sum(ns for _, ns in self.after_ns)


def attribute_calls(events: Sequence[TraceEvent], calls: int) -> list[CallActivity]:
    """Split a trace of ``calls`` audited calls into what each call ran, and when.

    Raises TraceUnreadable when the markers are not all there, or not where the harness put them.
    """
    gpu = [e for e in events if e.on_gpu]
    launches = {e.correlation: e for e in events if not e.on_gpu}
    markers = sorted((e for e in gpu if MARKER_NAME in e.name), key=lambda e: e.start_ns)
    if len(markers) != 2 * calls:
        raise TraceUnreadable(f"CUPTI recorded {len(markers)} of the {2 * calls} marker kernels")
    marker_launches = [launches.get(m.correlation) for m in markers]
    if any(launch is None for launch in marker_launches):
        raise TraceUnreadable("CUPTI recorded the marker kernels without the calls that launched them")
    begin_launch = [launch for launch in marker_launches[0::2] if launch is not None]
    end_launch = [launch for launch in marker_launches[1::2] if launch is not None]
    caller = begin_launch[0].lane
    if any(launch.lane != caller for launch in (*begin_launch, *end_launch)):
        raise TraceUnreadable("the marker kernels were launched from more than one thread")

    # The harness's flush and hold: our thread's launches between one call's end marker and
    # the next call's begin marker (nothing of the solution runs on our thread there).
    harness = {m.correlation for m in markers}
    for index, begin in enumerate(begin_launch):
        after_ns = end_launch[index - 1].start_ns if index else -1
        harness.update(
            launch.correlation for launch in launches.values()
            if launch.lane == caller and after_ns < launch.start_ns < begin.start_ns
        )

    per_call: list[CallActivity] = []
    for index in range(calls):
        window_start = begin_launch[index].start_ns
        window_end = begin_launch[index + 1].start_ns if index + 1 < calls else None
        timer_start = markers[2 * index].end_ns
        timer_stop = markers[2 * index + 1].start_ns
        mine: list[tuple[TraceEvent, TraceEvent | None]] = []
        for activity in gpu:
            if activity.correlation in harness:
                continue
            launch = launches.get(activity.correlation)
            # Without its runtime call (not expected), place the activity by its GPU time.
            when = launch.start_ns if launch is not None else activity.start_ns
            if when >= window_start and (window_end is None or when < window_end):
                mine.append((activity, launch))
        per_call.append(_call_activity(mine, timer_start, timer_stop, caller))
    return per_call


def _call_activity(
    mine: Sequence[tuple[TraceEvent, TraceEvent | None]], timer_start: int, timer_stop: int, caller: int
) -> CallActivity:
    before: dict[int, int] = {}
    after: dict[int, int] = {}
    other_thread = False
    for activity, launch in mine:
        early = max(0, min(activity.end_ns, timer_start) - activity.start_ns)
        late = max(0, activity.end_ns - max(activity.start_ns, timer_stop))
        if early:
            before[activity.lane] = before.get(activity.lane, 0) + early
        if late:
            after[activity.lane] = after.get(activity.lane, 0) + late
        if (early or late) and launch is not None and launch.lane != caller:
            other_thread = True
    span = max((a.end_ns for a, _ in mine), default=0) - min((a.start_ns for a, _ in mine), default=0)
    return CallActivity(
        span_ns=span,
        before_ns=tuple(sorted(before.items())),
        after_ns=tuple(sorted(after.items())),
        streams=tuple(sorted({a.lane for a, _ in mine})),
        other_thread=other_thread,
        activities=tuple(activity for activity, _ in mine),
    )


def judge(event_ms: Sequence[float], calls: Sequence[CallActivity], cost_s: float) -> EscapeAudit:
    """The audit's result: escaped when any call ran more than the tolerance outside its events."""
    audit = EscapeAudit(
        status="passed",
        event_ms=tuple(event_ms),
        cupti_span_ms=tuple(call.span_ns / 1e6 for call in calls),
        escaped_ms=tuple(call.escaped_ns / 1e6 for call in calls),
        streams=tuple(sorted({s for call in calls for s in call.streams})),
        cost_s=cost_s,
        launches=launch_anatomy([call.activities for call in calls]),
    )
    worst_index = max(range(len(calls)), key=lambda i: calls[i].escaped_ns, default=None)
    if worst_index is None or calls[worst_index].escaped_ns <= ESCAPE_TOLERANCE_NS:
        return audit
    return replace(audit, status="escaped", detail=describe_escape(calls[worst_index], worst_index, len(calls)))


def describe_escape(call: CallActivity, index: int, calls: int) -> str:
    """One line: how much GPU work ran outside the timer, where, and how to fix it."""
    where = f"(audited call {index + 1} of {calls}, traced by CUPTI)"
    thread = " It was launched from another host thread: wait for that work before returning." if call.other_thread else ""
    if call.after_ns:
        stream, ns = max(call.after_ns, key=lambda item: item[1])
        return (
            f"{_duration(ns)} of GPU work on stream {stream} ended after the timer stopped {where}: the timed call "
            f"returned before its work was done; join every stream back before returning, e.g. "
            f"`torch.cuda.current_stream().wait_stream(s)`.{thread}"
        )
    stream, ns = max(call.before_ns, key=lambda item: item[1])
    return (
        f"{_duration(ns)} of GPU work on stream {stream} ran before the timer started {where}: it did not wait for "
        f"the stream it was called on; make every stream wait first, e.g. "
        f"`s.wait_stream(torch.cuda.current_stream())`.{thread}"
    )


def _duration(ns: int) -> str:
    return f"{ns / 1e6:.3g} ms" if ns >= 1_000_000 else f"{ns / 1e3:.3g} us"


class _Marker:
    """A one-thread kernel of our own name, on the current stream (compiled once per process)."""

    _kernel: Any = None

    def __init__(self, device: torch.device) -> None:
        if _Marker._kernel is None:
            _Marker._kernel = torch.cuda.jiterator._create_jit_fn(
                f"template <typename T> T {MARKER_NAME}(T x) {{ return x; }}"
            )
        self._flag = torch.zeros(1, dtype=torch.float32, device=device)

    def __call__(self) -> None:
        _Marker._kernel(self._flag)


def make_marker(device: torch.device) -> Callable[[], None]:
    """A marker kernel on ``device`` (RuntimeError where NVRTC cannot compile it)."""
    return _Marker(device)


@dataclass(frozen=True, slots=True)
class AuditedCallFailed:
    """A variant's call raised while audited: the audit of the others must be made again."""

    label: str
    error: Exception


def audit_escapes(timer: CudaEventTimer, fn: Callable[[], object], calls: int = AUDITED_CALLS) -> EscapeAudit:
    """Make ``fn`` ``calls`` times under CUPTI and judge where its GPU work ran (module doc)."""
    outcome = audit_together(timer, {"call": fn}, calls)
    if isinstance(outcome, AuditedCallFailed):
        raise outcome.error
    return outcome["call"]


def audit_together(
    timer: CudaEventTimer,
    calls_by_label: Mapping[str, Callable[[], object]],
    calls: int = AUDITED_CALLS,
    *,
    before: Callable[[str], object] = lambda label: None,
    after: Callable[[str], object] = lambda label: None,
) -> dict[str, EscapeAudit] | AuditedCallFailed:
    """Audit every variant of a case under one CUPTI trace: each label's call ``calls`` times, in
    turn, ``before(label)`` just ahead of its calls (the worker's Begin event: a crash there is
    that variant's) and ``after(label)`` once they are made or failed (putting back the torch
    settings its code changed, so the next variant's calls do not run under them). Returns each
    label's audit (its ``cost_s`` an equal share of the whole), or the first label whose call
    raised (the trace is then out of step: audit the others again without it). A trace that
    cannot be read is read again one label at a time, so one variant cannot make every other
    variant's audit "unavailable"."""
    started = time.perf_counter()
    labels = list(calls_by_label)

    def everyone(status: EscapeStatus, detail: str) -> dict[str, EscapeAudit]:
        share = (time.perf_counter() - started) / max(len(labels), 1)
        return {label: EscapeAudit(status=status, detail=detail, cost_s=share) for label in labels}

    try:
        marker = _Marker(timer.device)
    except RuntimeError as exc:  # no NVRTC to compile the marker kernel, say
        return everyone("unavailable", f"the marker kernel failed: {first_line(exc)}")
    hold_us = max(4 * timer.hold_us, MIN_AUDIT_HOLD_US)
    event_ms: dict[str, list[float]] = {}
    try:
        with ActivityTrace() as trace:
            for index, label in enumerate(labels):
                if index:
                    time.sleep(BETWEEN_VARIANTS_SETTLE_S)
                    torch.cuda.synchronize(timer.device)
                before(label)
                try:
                    event_ms[label] = timer.measure_isolated(
                        calls_by_label[label], calls, before_start=marker, after_end=marker, hold_us=hold_us
                    )
                except Exception as exc:  # the user's call: blamed on its variant by the caller
                    return AuditedCallFailed(label, exc)
                finally:
                    after(label)
            time.sleep(SETTLE_S)
            torch.cuda.synchronize(timer.device)
        activity = attribute_calls(trace.events, calls * len(labels))
        return judge_each(event_ms, activity, time.perf_counter() - started)
    except TraceUnreadable as exc:
        if len(labels) == 1:
            return everyone("unavailable", str(exc))
    except CuptiUnavailable as exc:
        return everyone("unavailable", str(exc))
    audits: dict[str, EscapeAudit] = {}
    for label in labels:
        alone = audit_together(timer, {label: calls_by_label[label]}, calls, before=before, after=after)
        if isinstance(alone, AuditedCallFailed):
            return alone
        audits.update(alone)
    return audits


def judge_each(event_ms: Mapping[str, Sequence[float]], activity: Sequence[CallActivity], cost_s: float) -> dict[str, EscapeAudit]:
    """Judge each label of a trace shared in turn (``event_ms`` in the order the labels were
    audited, one sample per call): label k owns the k-th run of its calls; each audit's cost is
    an equal share of ``cost_s``."""
    if sum(len(samples) for samples in event_ms.values()) != len(activity):
        raise TraceUnreadable(f"{len(activity)} audited calls in the trace, {sum(map(len, event_ms.values()))} made")
    audits: dict[str, EscapeAudit] = {}
    first = 0
    for label, samples in event_ms.items():
        audits[label] = judge(samples, activity[first:first + len(samples)], cost_s / len(event_ms))
        first += len(samples)
    return audits
