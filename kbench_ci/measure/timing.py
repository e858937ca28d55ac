"""Timers: CUDA events with a cold L2 and a held stream, or host wall clock.

Both return raw samples in milliseconds; statistics live in ``stats.py``.

Why the stream is held: with a naive event timer the GPU is idle when the start event is
recorded, so the event fires at once and then waits for the host to finish launching the kernel;
host launch latency is counted as kernel time (measured on an H200: a 3.6 us kernel read 14.5 us).
Before each trial we enqueue a spin kernel (``torch.cuda._sleep``) long enough that the host
has enqueued the start event, the kernel(s) and the end event before the GPU reaches them; the
events then bracket device work only.

Why the L2 flush: a kernel timed repeatedly on the same buffers finds them in L2 (60 MB on an
H200) and reads faster than it would in a real model. Before every trial we write a buffer of at
least twice the L2 size, outside the timed region.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

import torch

from kbench_ci.measure.cupti import ActivityTrace, CuptiUnavailable

TimingMethod = Literal["cuda_event", "host_time"]

# The CPU has no L2 to query from torch; 64 MiB exceeds the last-level cache of common hosts.
_CPU_FLUSH_BYTES = 64 * 1024 * 1024
_MIN_GPU_FLUSH_BYTES = 8 * 1024 * 1024
# The held-stream spin must outlast the host's enqueue of one trial; these bound the spin.
_MIN_HOLD_US = 20.0
_MAX_HOLD_US = 20_000.0
# keep_busy never spins longer than this, whatever a check is expected to take
_MAX_KEEP_BUSY_S = 5.0
# A corrected sample never reaches zero (statistics take ratios and logs of samples).
_MIN_SAMPLE_MS = 1e-6


def shift_samples(samples: Sequence[float], by_ms: float) -> tuple[float, ...]:
    """``samples`` less ``by_ms`` each, never below the smallest sample a statistic can take."""
    return tuple(max(sample - by_ms, _MIN_SAMPLE_MS) for sample in samples)


def _no_flush() -> None:
    """One handed-over call: the judge flushed before its go."""


class CacheFlush:
    """A buffer whose write evicts the cache: at least twice the GPU's L2, or 64 MiB on a CPU.

    Calling it enqueues the write on the current stream (GPU) or does it (CPU); disabled, it
    does nothing. Both timers flush through this, outside their timed regions.
    """

    def __init__(self, device: torch.device, *, enabled: bool) -> None:
        if not enabled:
            self.nbytes = 0
            self._buffer = None
            return
        if device.type == "cuda":
            l2_bytes = int(getattr(torch.cuda.get_device_properties(device), "L2_cache_size", 0) or 0)
            self.nbytes = max(2 * l2_bytes, _MIN_GPU_FLUSH_BYTES)
        else:
            self.nbytes = _CPU_FLUSH_BYTES
        self._buffer = torch.empty(self.nbytes // 4, dtype=torch.int32, device=device)

    @property
    def enabled(self) -> bool:
        return self._buffer is not None

    def __call__(self) -> None:
        if self._buffer is not None:
            self._buffer.zero_()


class CallHooks(Protocol):
    """Work done around timed call ``index`` but outside its timed region (e.g. swapping in other
    input contents before it and snapshotting its outputs after it). On a GPU both are enqueued
    on the current stream: ``before`` ahead of the cache flush, ``after`` behind the end event."""

    def before(self, index: int) -> None: ...

    def after(self, index: int) -> None: ...


class Timer(Protocol):
    method: TimingMethod
    #: the event-pair cost subtracted from every sample (cuda_event); None where nothing is
    event_overhead_ms: float | None

    def warm_up(self, fn: Callable[[], object], count: int, *, resize_hold: bool = True) -> None: ...

    def measure(self, fn: Callable[[], object], count: int, hooks: CallHooks | None = None) -> list[float]: ...

    def keep_busy(self, seconds: float) -> None: ...

    def ready(self) -> None:
        """Do now any calibration the first timed call would otherwise start with."""

    def measure_gated(
        self, fn: Callable[[], object], *, before: Callable[[int], None], after: Callable[[int], None],
        lead_in: Callable[[], None] | None = None, settle_us: float = 0.0,
    ) -> GatedSample:
        """One call between ``before(stream)`` and ``after(stream)`` (a stream's handle), with
        ``lead_in`` and a spin of ``settle_us`` between ``before`` and the start (GPU only)."""
        ...

    def measure_batch(
        self, calls: Sequence[Callable[[], object]], *, before: Callable[[int], None], after: Callable[[int], None],
        flush: Callable[[], None], lead_in: Callable[[], None] | None = None, settle_us: float = 0.0,
    ) -> GatedBatch:
        """``calls`` back to back between ``before(stream)`` and ``after(stream)``, each between
        events of its own, ``flush`` between one and the next (a CPU: each timed by the host
        clock, ``before`` and ``after`` unused)."""
        ...

    def describe(self) -> str: ...


@dataclass(frozen=True, slots=True)
class GatedBatch:
    """A batch of handed-over calls as its side's timer saw them."""

    #: each call's time (ms), in the batch's order
    samples_ms: tuple[float, ...]
    #: how long the batch's enqueue took (us; None where nothing is enqueued)
    enqueue_us: float | None = None
    #: from the go to the first start event (ms; None where there is nothing between)
    lead_ms: float | None = None


@dataclass(frozen=True, slots=True)
class GatedSample:
    """One handed-over call as its side's timer saw it."""

    #: its time (ms)
    sample_ms: float
    #: how long its enqueue took (us; None where nothing is enqueued)
    enqueue_us: float | None = None
    #: from the go to the start event: the lead-in and the spin (ms; None where there is none)
    lead_ms: float | None = None


class CudaEventTimer:
    """Device time between CUDA events on the current stream, with L2 flush and held stream."""

    method: TimingMethod = "cuda_event"

    def __init__(
        self, device: torch.device, *, flush_l2: bool = True, event_overhead_ms: float | None = None
    ) -> None:
        """``event_overhead_ms``: an overhead already calibrated on this device in this run, so
        this timer skips the (profiler-based, ~1-2 s) calibration."""
        self.device = device
        self._flush = CacheFlush(device, enabled=flush_l2)
        # Calibrated after the first warm-up, once the GPU has left its idle clocks.
        self._cycles_per_us: float | None = None
        self.hold_us = _MIN_HOLD_US
        self.event_overhead_ms = event_overhead_ms
        self.overhead_source = (
            "not measured" if event_overhead_ms is None else "calibrated against CUPTI by an earlier worker of this run"
        )

    def _calibrate_sleep(self) -> float:
        """Spin-kernel cycles per microsecond at the clock the GPU runs now."""
        torch.cuda._sleep(1_000)  # load the kernel's module outside the measurement
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        cycles = 2_000_000
        start.record()
        torch.cuda._sleep(cycles)
        end.record()
        end.synchronize()
        elapsed_us = start.elapsed_time(end) * 1000.0
        return float(cycles / max(elapsed_us, 1e-3))

    def _hold(self, cycles_per_us: float) -> None:
        torch.cuda._sleep(int(self.hold_us * cycles_per_us))

    def warm_up(self, fn: Callable[[], object], count: int, *, resize_hold: bool = True) -> None:
        """Run ``fn`` ``count`` times and (``resize_hold``) size the hold from how long the host
        takes to enqueue. The event-to-kernel gap grows with the hold, so every timed call of a
        case, and the calibration of its offset, must share one hold: size it once."""
        enqueue_us: list[float] = []
        for _ in range(count):
            self._flush()
            torch.cuda.synchronize(self.device)
            t0 = time.perf_counter()
            fn()
            enqueue_us.append((time.perf_counter() - t0) * 1e6)
        torch.cuda.synchronize(self.device)
        # Now, not at construction: the warm-up has brought the GPU out of its idle clocks.
        self._spin_rate()
        if enqueue_us and resize_hold:
            # Twice the slowest enqueue seen (plus event records), so a hiccup is still covered.
            worst = max(enqueue_us)
            self.hold_us = min(max(2.0 * worst + 10.0, _MIN_HOLD_US), _MAX_HOLD_US)

    def keep_busy(self, seconds: float) -> None:
        """Enqueue a spin of about ``seconds`` and return at once, while the host does other
        work (an interim verdict): an idle GPU drops its clocks, and the next timed call would
        pay for it (kbench_ci.measure.schedule)."""
        spin_us = min(max(seconds, 0.0), _MAX_KEEP_BUSY_S) * 1e6
        if spin_us > 0:
            torch.cuda._sleep(int(spin_us * self._spin_rate()))

    def ready(self) -> None:
        self._spin_rate()
        self._overhead_ms()

    def measure_gated(
        self, fn: Callable[[], object], *, before: Callable[[int], None], after: Callable[[int], None],
        lead_in: Callable[[], None] | None = None, settle_us: float = 0.0,
    ) -> GatedSample:
        """One call handed over by another process (kbench_ci.judge.clock): no flush of its own;
        ``before`` makes the stream wait for the other's go, ``after`` signals its end. The
        sample is corrected as in :meth:`measure`.

        ``lead_in`` (the side's page reads) and a spin of ``settle_us`` run after ``before`` and
        ahead of the start event, and their span is returned (an event after the go). The go
        comes with a switch of the GPU from the judge's context to this one; with nothing
        running ahead of the start event, the GPU's front end would fetch the launch's commands
        (this process's memory) after that event, inside the timed interval, and how long that
        takes is this process's own. A held stream in one process has them fetched during its
        hold. The judge counts the lead's span as time a side could fill with work its clock
        cannot tell from the lead (gate.verdicts)."""
        timed = self.measure_batch([fn], before=before, after=after, flush=_no_flush, lead_in=lead_in, settle_us=settle_us)
        return GatedSample(sample_ms=timed.samples_ms[0], enqueue_us=timed.enqueue_us, lead_ms=timed.lead_ms)

    def measure_batch(
        self, calls: Sequence[Callable[[], object]], *, before: Callable[[int], None], after: Callable[[int], None],
        flush: Callable[[], None], lead_in: Callable[[], None] | None = None, settle_us: float = 0.0,
    ) -> GatedBatch:
        """A batch handed over by another process: as :meth:`measure_gated`, the calls one after
        the other behind the one go, ``flush`` between them (the judge flushed before the go),
        each between events of its own. The whole batch is enqueued before the go comes (the
        judge's hold is sized by this enqueue), so no call waits for its launch; only the first
        starts just after the GPU switched to this context."""
        overhead = self._overhead_ms()
        settle_cycles = max(1, int(settle_us * self._spin_rate())) if settle_us > 0 else 0
        stream = torch.cuda.current_stream(self.device)
        starts = [torch.cuda.Event(enable_timing=True) for _ in calls]
        ends = [torch.cuda.Event(enable_timing=True) for _ in calls]
        led = torch.cuda.Event(enable_timing=True) if lead_in is not None or settle_cycles else None
        began = time.perf_counter()
        before(stream.cuda_stream)
        if led is not None:
            led.record(stream)
            if lead_in is not None:
                lead_in()
            if settle_cycles:
                torch.cuda._sleep(settle_cycles)
        for index, (call, start, end) in enumerate(zip(calls, starts, ends, strict=True)):
            if index:
                flush()
            start.record(stream)
            call()
            end.record(stream)
        after(stream.cuda_stream)
        enqueue_us = (time.perf_counter() - began) * 1e6
        ends[-1].synchronize()
        return GatedBatch(
            samples_ms=shift_samples([start.elapsed_time(end) for start, end in zip(starts, ends, strict=True)], overhead),
            enqueue_us=enqueue_us, lead_ms=None if led is None else led.elapsed_time(starts[0]),
        )

    def measure(self, fn: Callable[[], object], count: int, hooks: CallHooks | None = None) -> list[float]:
        """Device time of each call, less the calibrated event overhead (see calibrate_overhead)."""
        overhead = self._overhead_ms()
        return list(shift_samples(self.measure_raw(fn, count, hooks), overhead))

    def _overhead_ms(self) -> float:
        """The event overhead to subtract, calibrated on first use."""
        if self.event_overhead_ms is None:
            self.event_overhead_ms = self.calibrate_overhead()
        return self.event_overhead_ms

    def _spin_rate(self) -> float:
        """Spin-kernel cycles per microsecond, calibrated on first use (normally by the warm-up)."""
        if self._cycles_per_us is None:
            self._cycles_per_us = self._calibrate_sleep()
        return self._cycles_per_us

    def calibrate_overhead(self, count: int = 200) -> float:
        """The GPU's own cost of an event pair around a launch, in ms.

        Even with the stream held, the start event's timestamp is taken before the GPU front
        end processes the kernel launch, and the end event after the kernel's completion flush:
        about 3 us on an H200 that CUPTI does not count as kernel time. We time an empty kernel
        both ways (events as in ``measure_raw``; CUPTI through torch.profiler) and subtract the
        difference from every sample. Where the profiler cannot run, nothing is subtracted
        and ``describe()`` says so.
        """

        def empty() -> None:
            torch.cuda._sleep(0)

        hold_for_caller = self.hold_us
        self.warm_up(empty, 5)
        self.hold_us = max(self.hold_us, hold_for_caller)
        with_events = sorted(self.measure_raw(empty, count))[count // 2]
        try:
            with ActivityTrace(shapes=False) as trace:
                for _ in range(count):
                    self._flush()
                    empty()
                torch.cuda.synchronize(self.device)
        except CuptiUnavailable:  # no CUPTI here: report uncorrected event times
            self.overhead_source = "not corrected (CUPTI unavailable)"
            return 0.0
        durations_us = sorted((e.end_ns - e.start_ns) / 1e3 for e in trace.events if e.on_gpu and "spin_kernel" in e.name)
        if len(durations_us) < count // 2:
            self.overhead_source = "not corrected (CUPTI saw no kernels)"
            return 0.0
        kernel_ms = durations_us[len(durations_us) // 2] / 1e3
        self.overhead_source = "calibrated against CUPTI"
        return float(max(with_events - kernel_ms, 0.0))

    def measure_raw(self, fn: Callable[[], object], count: int, hooks: CallHooks | None = None) -> list[float]:
        starts = [torch.cuda.Event(enable_timing=True) for _ in range(count)]
        ends = [torch.cuda.Event(enable_timing=True) for _ in range(count)]
        stream = torch.cuda.current_stream(self.device)
        cycles_per_us = self._spin_rate()
        for index, (start, end) in enumerate(zip(starts, ends, strict=True)):
            if hooks is not None:
                hooks.before(index)
            self._flush()
            self._hold(cycles_per_us)
            start.record(stream)
            fn()
            end.record(stream)
            if hooks is not None:
                hooks.after(index)
        torch.cuda.synchronize(self.device)
        return [start.elapsed_time(end) for start, end in zip(starts, ends, strict=True)]

    def measure_isolated(
        self,
        fn: Callable[[], object],
        count: int,
        *,
        before_start: Callable[[], object],
        after_end: Callable[[], object],
        hold_us: float,
    ) -> list[float]:
        """Time ``count`` calls, each alone on the device: flush, hold ``hold_us``, then
        ``before_start()`` just before the start event and ``after_end()`` just after the end
        event (both on the current stream), then a full device synchronisation, so no call's GPU
        work overlaps the next one's. Samples are corrected as in :meth:`measure`."""
        overhead = self._overhead_ms()
        hold_cycles = int(hold_us * self._spin_rate())
        stream = torch.cuda.current_stream(self.device)
        raw = []
        for _ in range(count):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            torch.cuda.synchronize(self.device)
            self._flush()
            torch.cuda._sleep(hold_cycles)
            before_start()
            start.record(stream)
            fn()
            end.record(stream)
            after_end()
            torch.cuda.synchronize(self.device)
            raw.append(start.elapsed_time(end))
        return list(shift_samples(raw, overhead))

    def describe(self) -> str:
        flush = f"L2 flushed ({self._flush.nbytes / 2**20:.0f} MiB write) before every trial" if self._flush.enabled else "warm L2"
        overhead = (
            f"event overhead {self.event_overhead_ms * 1e3:.2f} us subtracted ({self.overhead_source})"
            if self.event_overhead_ms is not None
            else "event overhead not measured"
        )
        return (
            f"CUDA events on the current stream; {flush}; stream held {self.hold_us:.0f} us before each start event; "
            f"{overhead}"
        )


class HostTimer:
    """Wall clock around one call, synchronised before the clock starts and after the call."""

    method: TimingMethod = "host_time"
    event_overhead_ms: float | None = None  # nothing is subtracted from wall-clock samples

    def __init__(self, device: torch.device, *, flush_l2: bool = True) -> None:
        self.device = device
        self._is_cuda = device.type == "cuda"
        self._flush = CacheFlush(device, enabled=flush_l2)

    def _sync(self) -> None:
        if self._is_cuda:
            torch.cuda.synchronize(self.device)

    def warm_up(self, fn: Callable[[], object], count: int, *, resize_hold: bool = True) -> None:
        """``resize_hold`` is the event timer's; a wall clock holds no stream."""
        for _ in range(count):
            fn()
        self._sync()

    def measure(self, fn: Callable[[], object], count: int, hooks: CallHooks | None = None) -> list[float]:
        samples = []
        for index in range(count):
            if hooks is not None:
                hooks.before(index)
            self._flush()
            self._sync()  # the flush must finish before the clock starts
            t0 = time.perf_counter()
            fn()
            self._sync()
            samples.append((time.perf_counter() - t0) * 1e3)
            if hooks is not None:
                hooks.after(index)
        return samples

    def keep_busy(self, seconds: float) -> None:
        """Nothing to keep busy: a host clock has no idle state to fall into between rounds."""

    def ready(self) -> None:
        """Nothing to calibrate."""

    def measure_gated(
        self, fn: Callable[[], object], *, before: Callable[[int], None], after: Callable[[int], None],
        lead_in: Callable[[], None] | None = None, settle_us: float = 0.0,
    ) -> GatedSample:
        """One call as :meth:`measure` times it (no lead-in: the host waits for the GPU); on a GPU, after the stream has waited for the
        other process's go (``before``) and with its end signalled (``after``). On a CPU the
        judge times the request itself (its monotonic clock)."""
        if not self._is_cuda:
            return GatedSample(self.measure(fn, 1)[0])
        stream = torch.cuda.current_stream().cuda_stream
        before(stream)
        self._sync()
        began = time.perf_counter()
        fn()
        self._sync()
        sample_ms = (time.perf_counter() - began) * 1e3
        after(stream)
        return GatedSample(sample_ms)

    def measure_batch(
        self, calls: Sequence[Callable[[], object]], *, before: Callable[[int], None], after: Callable[[int], None],
        flush: Callable[[], None], lead_in: Callable[[], None] | None = None, settle_us: float = 0.0,
    ) -> GatedBatch:
        """A CPU side's batch: each call timed as :meth:`measure` times one, ``flush`` between
        them (the judge flushed before the request; its monotonic clock is around the request)."""
        samples = []
        for index, call in enumerate(calls):
            if index:
                flush()
            self._sync()
            began = time.perf_counter()
            call()
            self._sync()
            samples.append((time.perf_counter() - began) * 1e3)
        return GatedBatch(tuple(samples))

    def describe(self) -> str:
        where = "device synchronised before and after" if self._is_cuda else f"CPU, {torch.get_num_threads()} intra-op thread(s)"
        flush = f"cache flushed ({self._flush.nbytes / 2**20:.0f} MiB write) before every trial" if self._flush.enabled else "warm cache"
        return f"host wall clock (perf_counter), {where}; {flush}"


def make_timer(
    method: TimingMethod, device: torch.device, *, flush_l2: bool = True, event_overhead_ms: float | None = None
) -> Timer:
    """``event_overhead_ms`` (cuda_event only): reuse an overhead calibrated earlier in this run."""
    if method == "cuda_event":
        if device.type != "cuda":
            raise ValueError("cuda_event timing needs a CUDA device")
        return CudaEventTimer(device, flush_l2=flush_l2, event_overhead_ms=event_overhead_ms)
    return HostTimer(device, flush_l2=flush_l2)
