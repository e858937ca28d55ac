"""CudaEventTimer's bookkeeping on a simulated GPU clock (no CUDA needed).

The real timing is checked on the H200 by scripts/acceptance/timing_truth.py; these tests pin the control
flow that CPU CI can reach: the spin calibration, the hold sized from the enqueue time, the
overhead subtraction, and the fallbacks when CUPTI cannot run.
"""

from __future__ import annotations

import pytest
import torch

from kbench_ci.measure import timing

CYCLES_PER_US = 1500.0  # the simulated spin kernel's clock


class FakeGpu:
    """A GPU whose clock advances only when work is 'run' (everything completes at once)."""

    def __init__(self) -> None:
        self.now_us = 0.0
        self.sleeps: list[int] = []

    def sleep(self, cycles: int) -> None:
        self.sleeps.append(int(cycles))
        self.now_us += cycles / CYCLES_PER_US

    def kernel(self, duration_us: float):
        def run() -> None:
            self.now_us += duration_us

        return run


@pytest.fixture
def gpu(monkeypatch: pytest.MonkeyPatch) -> FakeGpu:
    fake = FakeGpu()

    class Event:
        def __init__(self, enable_timing: bool = False) -> None:
            self.at_us: float | None = None

        def record(self, stream: object = None) -> None:
            self.at_us = fake.now_us

        def synchronize(self) -> None:
            pass

        def elapsed_time(self, end: Event) -> float:
            assert self.at_us is not None and end.at_us is not None, "elapsed_time on an unrecorded event"
            return (end.at_us - self.at_us) / 1e3

    monkeypatch.setattr(torch.cuda, "_sleep", fake.sleep)
    monkeypatch.setattr(torch.cuda, "Event", Event)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: None)
    monkeypatch.setattr(torch.cuda, "current_stream", lambda device=None: object())
    return fake


def test_an_overhead_from_an_earlier_worker_is_subtracted_without_recalibrating(gpu: FakeGpu) -> None:
    timer = timing.make_timer("cuda_event", torch.device("cuda", 0), flush_l2=False, event_overhead_ms=0.002)
    kernel = gpu.kernel(7.0)
    timer.warm_up(kernel, 3)
    samples = timer.measure(kernel, 5)
    assert samples == pytest.approx([0.005] * 5)  # 7 us less the 2 us overhead
    assert timer.event_overhead_ms == 0.002
    assert "earlier worker" in timer.describe()


def test_the_hold_before_each_trial_is_the_hold_in_spin_cycles(gpu: FakeGpu) -> None:
    timer = timing.CudaEventTimer(torch.device("cuda", 0), flush_l2=False, event_overhead_ms=0.0)
    timer.warm_up(gpu.kernel(3.0), 2)
    hold_cycles = int(timer.hold_us * CYCLES_PER_US)
    before = len(gpu.sleeps)
    timer.measure_raw(gpu.kernel(3.0), 4)
    assert gpu.sleeps[before:] == [hold_cycles] * 4
    assert timer.hold_us >= 20.0  # never below the minimum hold


def test_measuring_without_a_warm_up_still_calibrates_the_spin(gpu: FakeGpu) -> None:
    timer = timing.CudaEventTimer(torch.device("cuda", 0), flush_l2=False, event_overhead_ms=0.0)
    assert timer.measure(gpu.kernel(4.0), 2) == pytest.approx([0.004, 0.004])
    assert gpu.sleeps[-1] == int(timer.hold_us * CYCLES_PER_US)


def test_without_cupti_nothing_is_subtracted_and_the_report_says_so(gpu: FakeGpu, monkeypatch: pytest.MonkeyPatch) -> None:
    def no_profiler(*args: object, **kwargs: object) -> None:
        raise RuntimeError("CUPTI unavailable")

    monkeypatch.setattr(torch.autograd, "_prepare_profiler", no_profiler)
    timer = timing.CudaEventTimer(torch.device("cuda", 0), flush_l2=False)
    samples = timer.measure(gpu.kernel(9.0), 3)
    assert samples == pytest.approx([0.009] * 3)
    assert timer.event_overhead_ms == 0.0
    assert "not corrected (CUPTI unavailable)" in timer.describe()


def test_host_timer_reports_no_event_overhead() -> None:
    timer = timing.make_timer("host_time", torch.device("cpu"), flush_l2=False)
    assert timer.event_overhead_ms is None

