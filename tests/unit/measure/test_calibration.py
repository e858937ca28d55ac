"""The event-to-kernel offset under the timed conditions (measure/calibration.py): which GPU work
of a CUPTI trace belongs to which timed call, from recorded-shape synthetic traces."""

from __future__ import annotations

import pytest

from kbench_ci.measure.calibration import HOLD_NAME, call_spans
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

    def launch(self, name: str, gpu_ns: int, *, lane: int = CALLER, gap_ns: int = 0) -> None:
        self.correlation += 1
        self.host += 1_000
        self.events.append(TraceEvent("cudaLaunchKernel", False, lane, self.host, self.host + 500, self.correlation))
        self.gpu += gap_ns
        self.events.append(TraceEvent(name, True, 13, self.gpu, self.gpu + gpu_ns, self.correlation))
        self.gpu += gpu_ns

    def call(self, kernels: list[tuple[str, int, int]], *, hold: bool = True) -> None:
        self.launch("copy_kernel", 5_000)
        self.launch("FillFunctor", 40_000)
        if hold:
            self.launch(f"{HOLD_NAME}(long)", 20_000)
        for name, gap, ns in kernels:
            self.launch(name, ns, gap_ns=gap)
        self.launch(MARKER_NAME, 1_000, gap_ns=200)


def test_each_call_spans_from_its_first_kernel_to_its_last_between_its_hold_and_its_marker() -> None:
    trace = Trace()
    trace.call([("vadd_kernel", 3_200, 63_000)])
    trace.call([("gemm_a", 3_000, 100_000), ("gemm_b", 500, 20_000)])
    trace.call([("spin_kernel_user", 3_100, 640)])  # a user kernel named like the hold is still the call's
    spans = call_spans(trace.events, 3)
    assert spans == [(63_000, 1), (120_500, 2), (640, 1)]


def test_work_launched_by_another_thread_inside_the_call_counts() -> None:
    trace = Trace()
    trace.call([("vadd_kernel", 3_200, 63_000), ("helper_kernel", 100, 10_000)])
    trace.events = [e if e.name != "cudaLaunchKernel" or e.correlation != 5 else TraceEvent(
        e.name, False, 99, e.start_ns, e.end_ns, e.correlation) for e in trace.events]
    assert call_spans(trace.events, 1) == [(73_100, 2)]


def test_a_trace_without_its_markers_or_holds_is_unreadable() -> None:
    trace = Trace()
    trace.call([("vadd_kernel", 3_200, 63_000)])
    with pytest.raises(TraceUnreadable, match="1 of the 2 marker kernels"):
        call_spans(trace.events, 2)
    no_hold = Trace()
    no_hold.call([("vadd_kernel", 3_200, 63_000)], hold=False)
    with pytest.raises(TraceUnreadable, match="no hold kernel"):
        call_spans(no_hold.events, 1)
