"""The CUPTI audit's reading of a trace (measure/escape.py), on traces built the way CUPTI
reports them: GPU activities with their streams, runtime calls with their host threads, linked by
correlation ids. What the GPU does is tested under tests/gpu."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any

import pytest

from kbench_ci.measure import escape
from kbench_ci.measure.cupti import TraceEvent
from kbench_ci.measure.escape import (
    ESCAPE_TOLERANCE_NS,
    MARKER_NAME,
    TraceUnreadable,
    attribute_calls,
    judge,
    judge_each,
)

CALLER = 101  # our thread
OTHER_THREAD = 202
TIMED_STREAM = 7
CALL_SPACING_NS = 10_000_000


@dataclass(frozen=True)
class Work:
    """One GPU activity of the solution, in ns relative to the start event of its call."""

    start: int
    end: int
    stream: int = TIMED_STREAM
    thread: int = CALLER


@dataclass
class TraceBuilder:
    events: list[TraceEvent] = field(default_factory=list)
    ids: itertools.count = field(default_factory=lambda: itertools.count(1))

    def launch(self, name: str, host_ns: int, gpu_start: int, gpu_end: int, stream: int, thread: int) -> None:
        correlation = next(self.ids)
        self.events.append(TraceEvent("cudaLaunchKernel", False, thread, host_ns, host_ns + 5_000, correlation))
        self.events.append(TraceEvent(name, True, stream, gpu_start, gpu_end, correlation))

    def call(self, index: int, work: list[Work], timed_ns: int, *, flush: bool = True) -> None:
        """One audited call as the harness makes it: flush, hold, begin marker, the call, end marker."""
        t = index * CALL_SPACING_NS
        if flush:
            self.launch("vectorized_elementwise_kernel<FillFunctor>", t, t + 1_000, t + 30_000, TIMED_STREAM, CALLER)
        self.launch("spin_kernel", t + 10_000, t + 30_000, t + 1_030_000, TIMED_STREAM, CALLER)
        timer_start = t + 1_032_000
        self.launch(f"{MARKER_NAME}_vectorized8_kernel", t + 20_000, timer_start - 2_000, timer_start, TIMED_STREAM, CALLER)
        for offset, item in enumerate(work):
            self.launch("user_kernel", t + 30_000 + offset * 1_000, timer_start + item.start, timer_start + item.end,
                        item.stream, item.thread)
        self.launch(f"{MARKER_NAME}_vectorized8_kernel", t + 900_000, timer_start + timed_ns + 2_500,
                    timer_start + timed_ns + 4_500, TIMED_STREAM, CALLER)


def trace_of(calls: list[list[Work]], timed_ns: int = 100_000, **kwargs: bool) -> list[TraceEvent]:
    builder = TraceBuilder()
    for index, work in enumerate(calls):
        builder.call(index, work, timed_ns, **kwargs)
    return builder.events


def test_work_on_the_timed_stream_is_inside_the_timer_and_spans_its_activities() -> None:
    calls = attribute_calls(trace_of([[Work(3_000, 50_000), Work(50_500, 99_000)]] * 3), 3)
    assert [c.escaped_ns for c in calls] == [0, 0, 0]
    assert [c.span_ns for c in calls] == [96_000] * 3
    assert calls[0].streams == (TIMED_STREAM,)
    assert judge([0.1] * 3, calls, 0.5).status == "passed"


def test_the_harness_flush_and_hold_are_not_counted_as_the_solutions_work() -> None:
    # Flush and hold run long before the start event: were they the solution's, it would escape.
    calls = attribute_calls(trace_of([[Work(3_000, 50_000)]]), 1)
    assert calls[0].escaped_ns == 0 and calls[0].span_ns == 47_000


def test_without_a_flush_the_hold_alone_is_the_harness() -> None:
    calls = attribute_calls(trace_of([[Work(3_000, 50_000)]] * 2, flush=False), 2)
    assert [c.escaped_ns for c in calls] == [0, 0]


def test_joined_side_streams_pass_whatever_their_ids() -> None:
    work = [Work(3_000, 60_000, stream=13), Work(3_500, 70_000, stream=14), Work(71_000, 99_000)]
    calls = attribute_calls(trace_of([work] * 2), 2)
    assert [c.escaped_ns for c in calls] == [0, 0]
    assert calls[0].streams == (TIMED_STREAM, 13, 14)
    assert judge([0.1, 0.1], calls, 0.5).status == "passed"


def test_unjoined_side_stream_work_after_the_end_event_escapes_and_the_message_names_stream_and_fix() -> None:
    # 20 passes of ~136 us on stream 13, still running long after the end event (timer 5 us).
    work = [Work(3_000 + k * 136_000, 3_000 + (k + 1) * 136_000, stream=13) for k in range(20)]
    calls = attribute_calls(trace_of([work] * 3, timed_ns=5_000), 3)
    end_marker_start = 5_000 + 2_500
    assert calls[0].escaped_ns == 3_000 + 20 * 136_000 - end_marker_start
    audit = judge([0.005] * 3, calls, 0.4)
    assert audit.status == "escaped"
    assert audit.detail is not None
    assert audit.detail.startswith("2.72 ms of GPU work on stream 13 ended after the timer stopped")
    assert "torch.cuda.current_stream().wait_stream(s)" in audit.detail
    assert "another host thread" not in audit.detail
    assert audit.escaped_ms[0] == pytest.approx(calls[0].escaped_ns / 1e6)


def test_work_that_ran_before_the_start_event_escapes() -> None:
    # A side stream that never waited for the caller's stream: done during the hold.
    calls = attribute_calls(trace_of([[Work(-400_000, -100_000, stream=13)]], timed_ns=3_000), 1)
    assert calls[0].before_ns == ((13, 300_000),) and calls[0].after_ns == ()
    audit = judge([0.003], calls, 0.4)
    assert audit.status == "escaped" and audit.detail is not None
    assert "300 us of GPU work on stream 13 ran before the timer started" in audit.detail
    assert "s.wait_stream(torch.cuda.current_stream())" in audit.detail


def test_work_launched_by_another_thread_after_the_call_returned_is_its_calls_and_escapes() -> None:
    work = [Work(20_000, 420_000, stream=17, thread=OTHER_THREAD)]
    calls = attribute_calls(trace_of([work] * 2, timed_ns=4_000), 2)
    assert calls[1].other_thread and calls[1].after_ns[0][0] == 17
    audit = judge([0.004] * 2, calls, 0.4)
    assert audit.status == "escaped" and audit.detail is not None and "another host thread" in audit.detail


def test_escape_within_the_clock_tolerance_is_not_an_escape() -> None:
    end_marker_start = 100_000 + 2_500
    within = attribute_calls(trace_of([[Work(3_000, end_marker_start + ESCAPE_TOLERANCE_NS)]]), 1)
    beyond = attribute_calls(trace_of([[Work(3_000, end_marker_start + ESCAPE_TOLERANCE_NS + 1)]]), 1)
    assert judge([0.1], within, 0.1).status == "passed"
    assert judge([0.1], beyond, 0.1).status == "escaped"


def test_one_escaping_call_of_five_is_enough() -> None:
    work = [[Work(3_000, 90_000)]] * 4 + [[Work(3_000, 90_000), Work(5_000, 300_000, stream=13)]]
    audit = judge([0.1] * 5, attribute_calls(trace_of(work), 5), 0.4)
    assert audit.status == "escaped" and audit.detail is not None and "(audited call 5 of 5" in audit.detail


def test_a_trace_without_all_markers_is_unreadable_not_passed() -> None:
    events = trace_of([[Work(3_000, 50_000)]] * 2)
    last_marker = max((e for e in events if e.on_gpu and MARKER_NAME in e.name), key=lambda e: e.start_ns)
    events.remove(last_marker)
    with pytest.raises(TraceUnreadable, match="3 of the 4 marker kernels"):
        attribute_calls(events, 2)


def test_markers_without_their_launches_are_unreadable() -> None:
    events = [e for e in trace_of([[Work(3_000, 50_000)]]) if e.on_gpu]
    with pytest.raises(TraceUnreadable, match="without the calls that launched them"):
        attribute_calls(events, 1)


def test_a_call_that_launches_nothing_has_no_span_and_passes() -> None:
    calls = attribute_calls(trace_of([[]]), 1)
    assert calls[0].span_ns == 0 and calls[0].streams == ()
    assert judge([0.001], calls, 0.1).status == "passed"


def test_variants_audited_in_one_trace_are_judged_each_on_its_own_calls() -> None:
    """A case's variants share one trace, one after the other: the head's escape is the head's
    alone, and the base, audited first in the same trace, passes."""
    honest = [[Work(3_000, 90_000)]] * 3
    escaping = [[Work(3_000, 90_000), Work(5_000, 400_000, stream=13)]] * 3
    activity = attribute_calls(trace_of(honest + escaping), 6)
    audits = judge_each({"base": [0.1] * 3, "head": [0.1] * 3}, activity, 0.06)
    assert audits["base"].status == "passed" and audits["base"].escaped_ms == (0.0, 0.0, 0.0)
    assert audits["head"].status == "escaped"
    assert audits["head"].detail is not None and "stream 13" in audits["head"].detail and "of 3," in audits["head"].detail
    assert audits["base"].cost_s == pytest.approx(0.03) and audits["head"].cost_s == pytest.approx(0.03)
    assert audits["head"].cupti_span_ms == pytest.approx((0.397,) * 3)


def test_a_trace_with_other_call_counts_than_made_is_unreadable() -> None:
    activity = attribute_calls(trace_of([[Work(3_000, 90_000)]] * 4), 4)
    with pytest.raises(TraceUnreadable, match="4 audited calls in the trace, 5 made"):
        judge_each({"base": [0.1] * 3, "head": [0.1] * 2}, activity, 0.0)


class FakeTimer:
    """measure_isolated as the worker's timer calls it, without a GPU: the call, then a sample."""

    hold_us = 20.0
    device = "cuda:0"

    def __init__(self, log: list[str]) -> None:
        self.log = log

    def measure_isolated(self, fn: Any, count: int, **_: Any) -> list[float]:
        for _ in range(count):
            fn()
        return [0.1] * count


def fake_cupti(monkeypatch: pytest.MonkeyPatch, traces: list[list[TraceEvent]]) -> None:
    """Each ActivityTrace opened gets the next of ``traces`` as its events."""

    class Trace:
        def __enter__(self) -> Trace:
            return self

        def __exit__(self, *_: object) -> None:
            self.events = traces.pop(0)

    monkeypatch.setattr(escape, "ActivityTrace", Trace)
    monkeypatch.setattr(escape, "_Marker", lambda device: (lambda: None))
    monkeypatch.setattr(escape.torch.cuda, "synchronize", lambda device=None: None)
    monkeypatch.setattr(escape.time, "sleep", lambda seconds: None)


def test_each_variant_is_begun_and_settled_around_its_own_calls(monkeypatch: pytest.MonkeyPatch) -> None:
    """The worker's Begin for a variant comes just before its calls (a crash there is that
    variant's, not the last one's), and its torch settings are put back before the next
    variant's calls run."""
    log: list[str] = []
    fake_cupti(monkeypatch, [trace_of([[Work(3_000, 90_000)]] * 4)])
    audits = escape.audit_together(
        FakeTimer(log), {"base": lambda: log.append("base call"), "head": lambda: log.append("head call")}, 2,  # type: ignore[arg-type]
        before=lambda label: log.append(f"begin {label}"), after=lambda label: log.append(f"settle {label}"),
    )
    assert log == ["begin base", "base call", "base call", "settle base", "begin head", "head call", "head call", "settle head"]
    assert isinstance(audits, dict) and {a.status for a in audits.values()} == {"passed"}


def test_a_raising_call_is_named_and_its_variant_still_settled(monkeypatch: pytest.MonkeyPatch) -> None:
    log: list[str] = []
    fake_cupti(monkeypatch, [trace_of([[Work(3_000, 90_000)]] * 2)])

    def boom() -> None:
        raise RuntimeError("illegal memory access")

    outcome = escape.audit_together(FakeTimer(log), {"base": lambda: None, "head": boom}, 2,  # type: ignore[arg-type]
                                    after=lambda label: log.append(f"settle {label}"))
    assert isinstance(outcome, escape.AuditedCallFailed) and outcome.label == "head"
    assert log == ["settle base", "settle head"]


def test_a_shared_trace_that_cannot_be_read_is_read_again_one_variant_at_a_time(monkeypatch: pytest.MonkeyPatch) -> None:
    """One variant must not make every other variant's audit "unavailable"."""
    broken = trace_of([[Work(3_000, 90_000)]] * 4)
    broken.remove(max((e for e in broken if e.on_gpu and MARKER_NAME in e.name), key=lambda e: e.start_ns))
    escaping = [[Work(3_000, 90_000), Work(5_000, 400_000, stream=13)]] * 2
    fake_cupti(monkeypatch, [broken, trace_of([[Work(3_000, 90_000)]] * 2), trace_of(escaping)])
    audits = escape.audit_together(FakeTimer([]), {"base": lambda: None, "head": lambda: None}, 2)  # type: ignore[arg-type]
    assert isinstance(audits, dict)
    assert (audits["base"].status, audits["head"].status) == ("passed", "escaped")


def test_the_audit_records_what_the_call_launched_not_the_harness_flush_hold_or_markers() -> None:
    calls = attribute_calls(trace_of([[Work(3_000, 60_000), Work(61_000, 81_000, stream=13)]] * 2), 2)
    audit = judge([0.1, 0.1], calls, 0.5)
    assert [launch.name for launch in audit.launches] == ["user_kernel"]
    (launch,) = audit.launches
    assert launch.per_call == 2.0 and launch.share == 1.0 and launch.mean_us == (57_000 + 20_000) / 2 / 1e3
