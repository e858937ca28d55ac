"""The event-to-kernel offset under the timed conditions (measure/calibration.py): which GPU work
of a CUPTI trace belongs to which timed call, from recorded-shape synthetic traces."""

from __future__ import annotations

import pytest

from kbench_ci.measure.calibration import HOLD_NAME, CallSpan, call_spans
from kbench_ci.measure.cupti import TraceEvent
from kbench_ci.measure.escape import MARKER_NAME, TraceUnreadable

CALLER = 7  # the harness's host thread


class Trace:
    """Builds a trace as measure_raw makes it under CUPTI: per call, on the caller's thread, the
    staging copy and the flush, the hold, the call's launches, the marker after the end event."""

    def __init__(self) -> None:
        self.events: list[TraceEvent] = []
        self.correlation = 0
        self.host = 0
        self.gpu = 0

    def launch(self, name: str, gpu_ns: int, *, lane: int = CALLER, gap_ns: int = 0, host_ns: int = 1_000) -> None:
        self.correlation += 1
        self.host += host_ns
        self.events.append(TraceEvent("cudaLaunchKernel", False, lane, self.host, self.host + 500, self.correlation))
        self.gpu += gap_ns
        self.events.append(TraceEvent(name, True, 13, self.gpu, self.gpu + gpu_ns, self.correlation))
        self.gpu += gpu_ns

    def call(
        self, kernels: list[tuple[str, int, int]], *, hold: bool = True, enqueue_ns: int = 1_000, caught_up: bool = False,
    ) -> None:
        """``enqueue_ns``: the host's time per launch after the hold's (under CUPTI it grows);
        ``caught_up``: the GPU has done the staging and flush when the hold is launched."""
        self.launch("copy_kernel", 5_000)
        self.launch("FillFunctor", 40_000)
        if caught_up:  # the host waited: the hold starts on the GPU as it is launched
            self.host = max(self.host, self.gpu)
            self.gpu = self.host + 1_000
        if hold:
            self.launch(f"{HOLD_NAME}(long)", 20_000)
        for name, gap, ns in kernels:
            self.launch(name, ns, gap_ns=gap, host_ns=enqueue_ns)
        self.record_event(enqueue_ns)
        self.launch(MARKER_NAME, 1_000, gap_ns=200)

    def record_event(self, host_ns: int) -> None:
        """The end event's record: a runtime call of our thread with no GPU activity."""
        self.correlation += 1
        self.host += host_ns
        self.events.append(TraceEvent("cudaEventRecord", False, CALLER, self.host, self.host + 300, self.correlation))


def test_each_call_spans_from_its_first_kernel_to_its_last_between_its_hold_and_its_marker() -> None:
    trace = Trace()
    trace.call([("vadd_kernel", 3_200, 63_000)])
    trace.call([("gemm_a", 3_000, 100_000), ("gemm_b", 500, 20_000)])
    trace.call([("spin_kernel_user", 3_100, 640)])  # a user kernel named like the hold is still the call's
    spans = call_spans(trace.events, 3)
    assert spans == [CallSpan(63_000, 1, hold_ns=20_000), CallSpan(120_500, 2, hold_ns=20_000), CallSpan(640, 1, hold_ns=20_000)]


def test_work_launched_by_another_thread_inside_the_call_counts() -> None:
    trace = Trace()
    trace.call([("vadd_kernel", 3_200, 63_000), ("helper_kernel", 100, 10_000)])
    trace.events = [e if e.name != "cudaLaunchKernel" or e.correlation != 5 else TraceEvent(
        e.name, False, 99, e.start_ns, e.end_ns, e.correlation) for e in trace.events]
    assert call_spans(trace.events, 1) == [CallSpan(73_100, 2, hold_ns=20_000)]


def test_a_trace_without_its_markers_or_holds_is_unreadable() -> None:
    trace = Trace()
    trace.call([("vadd_kernel", 3_200, 63_000)])
    with pytest.raises(TraceUnreadable, match="1 of the 2 marker kernels"):
        call_spans(trace.events, 2)
    no_hold = Trace()
    no_hold.call([("vadd_kernel", 3_200, 63_000)], hold=False)
    with pytest.raises(TraceUnreadable, match="no hold kernel"):
        call_spans(no_hold.events, 1)


def test_a_call_enqueued_after_its_hold_ended_is_marked_late() -> None:
    """Host time in the event pair is no offset: the calibration leaves such calls out."""
    trace = Trace()
    trace.call([("vadd_kernel", 3_200, 5_000)], caught_up=True)
    # The hold lasts 20 us from its launch; this call's kernel launch takes 30 us under CUPTI.
    trace.call([("vadd_kernel", 3_200, 5_000)], enqueue_ns=30_000, caught_up=True)
    trace.call([("vadd_kernel", 3_200, 5_000)], enqueue_ns=2_000, caught_up=True)
    spans = call_spans(trace.events, 3)
    assert [span.late for span in spans] == [False, True, False]
    assert [span.span_ns for span in spans] == [5_000, 5_000, 5_000]


def held_from_zero() -> Trace:
    """A trace from time 0: the staging and the flush launched, the GPU caught up with the
    host, then a hold that runs on the GPU from 2 to 22 us."""
    trace = Trace()
    trace.gpu = trace.host = 0
    trace.launch("copy_kernel", 5_000)
    trace.launch("FillFunctor", 40_000)
    trace.gpu = trace.host
    trace.launch(f"{HOLD_NAME}(long)", 20_000)
    return trace


def test_an_end_event_recorded_after_the_last_kernel_ended_makes_the_call_late() -> None:
    trace = held_from_zero()
    trace.launch("vadd_kernel", 5_000, gap_ns=3_000, host_ns=1_000)  # launched at 4 us, runs 25-30 us
    trace.record_event(30_000)  # the kernel was enqueued in time, its end event only at 34 us
    trace.launch(MARKER_NAME, 1_000, gap_ns=200)
    assert call_spans(trace.events, 1) == [CallSpan(5_000, 1, late=True, hold_ns=20_000)]


def test_a_late_launch_between_two_kernels_does_not_make_the_call_late() -> None:
    """A gap between the call's kernels is inside CUPTI's span as well as the event pair: only
    host time at the pair's ends would bias the offset."""
    trace = held_from_zero()
    trace.launch("gemm_a", 5_000, gap_ns=3_000, host_ns=1_000)  # launched at 4 us: in time
    trace.gpu += 20_000  # the GPU waits for the second launch
    trace.launch("gemm_b", 5_000, gap_ns=0, host_ns=40_000)  # returned at 44.5 us, after the hold's end
    trace.record_event(1_000)
    trace.launch(MARKER_NAME, 1_000, gap_ns=200)
    (span,) = call_spans(trace.events, 1)
    assert span.late is False and span.activities == 2


def test_each_call_says_how_long_its_hold_ran_on_the_gpu() -> None:
    """The hold is a fixed number of cycles: a longer run means the GPU met it at a lower clock."""
    trace = Trace()
    trace.call([("vadd_kernel", 3_200, 5_000)])
    trace.launch("copy_kernel", 5_000)
    trace.launch("FillFunctor", 40_000)
    trace.launch(f"{HOLD_NAME}(long)", 23_000)  # the same spin at a 13% lower clock
    trace.launch("vadd_kernel", 5_000, gap_ns=3_600)
    trace.record_event(1_000)
    trace.launch(MARKER_NAME, 1_000, gap_ns=200)
    assert [span.hold_ns for span in call_spans(trace.events, 2)] == [20_000, 23_000]


def test_the_offset_leaves_out_late_calls_and_calls_at_a_lower_clock() -> None:
    from kbench_ci.measure.calibration import MIN_CALLS, offset_of

    # 8 calls at the timed clock: events 8.0 ms over spans of 5.0 ms; one late (host time in its
    # pair), one whose hold ran 10% long (the clock was still coming back): both read 9.0 ms.
    spans = [CallSpan(5_000_000, 1, hold_ns=67_000) for _ in range(8)]
    spans += [CallSpan(5_000_000, 1, late=True, hold_ns=67_000), CallSpan(5_000_000, 1, hold_ns=73_700)]
    events = [8.0] * 8 + [9.0, 9.0]
    reading = offset_of(events, spans)
    assert reading is not None
    assert (reading.offset_ms, reading.calls, reading.late, reading.slow) == (3.0, 8, 1, 1)
    assert (reading.span_ms, reading.event_ms) == (5.0, 8.0)
    too_few = offset_of(events[:MIN_CALLS - 1], spans[:MIN_CALLS - 1])
    assert too_few is None


def test_a_clock_that_varies_from_call_to_call_keeps_at_least_half_the_calls() -> None:
    """A power-limited matmul's clock moves a few % between calls: judged against the fastest
    hold, most calls would be 'slow' and the variant would get no offset at all."""
    from kbench_ci.measure.calibration import offset_of

    spans = [CallSpan(190_000_000, 1, hold_ns=67_000 + 400 * index) for index in range(20)]  # 0-11% longer
    reading = offset_of([193.0] * 20, spans)
    assert reading is not None and reading.calls >= 10 and reading.offset_ms == 3.0


def test_one_side_of_a_compare_is_not_moved_alone() -> None:
    """The correction is ~3 us: applied to one side only it would tilt a short kernel's ratio."""
    from types import SimpleNamespace

    from kbench_ci.measure.calibration import TimedOffset
    from kbench_ci.measure.rounds import _pooled_offsets

    def entry(label: str, role: str = "solution") -> SimpleNamespace:
        return SimpleNamespace(label=label, variant=SimpleNamespace(role=role, kind="cuda-cpp"))

    ok = [entry("base"), entry("head"), entry("pytorch-eager", "baseline")]
    reading = TimedOffset(0.003, 20, 1)
    only_base = _pooled_offsets(ok, {"base": reading, "pytorch-eager": reading})  # type: ignore[arg-type]
    assert "base" not in only_base and "head" not in only_base and only_base["pytorch-eager"] == 0.003
    both = _pooled_offsets(ok, {"base": reading, "head": TimedOffset(0.001, 20, 1)})  # type: ignore[arg-type]
    assert both["base"] == both["head"] == 0.002
