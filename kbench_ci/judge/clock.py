"""The judge's own clock: time a side's call from outside the process that ran it.

A side's worker times its calls with its own CUDA events (or wall clock on a CPU), and a kernel
owns that process: it can rebind the events, the timer, ``time.perf_counter``. So the judge
stamps every call itself.

On a GPU, with the driver API through ``ctypes`` (no compiler, no torch internals): a kernel of
the judge's own writes ``%globaltimer`` into a buffer only the judge maps, and the judge's stream
waits, on the GPU, for a token the side's stream writes when its call is done
(``cuStreamWaitValue32``). For each call the judge enqueues, on a stream of its own and before
it sends the request::

    hold | stamp 0 | stage, poison, flush | stamp 1 | go-event | wait for token | stamp 2 | snapshot | stamp 3

The side's stream waits for the go-event, runs the call between its own events, then writes the
token. So ``stamp 2 - stamp 1`` covers everything the side did after the judge's flush, and the
end stamp and the snapshot of the outputs follow the side's end on the GPU without a host round
trip: work a side leaves running on another stream lands after the snapshot (wrong outputs) or
inside the span. Without MPS the GPU runs one context at a time, so work of the side's context
in the judge's own segments (``stamp 0..1``, ``stamp 2..3``) lengthens them; those lengths are
judged too.

On a CPU the judge's monotonic clock around the request and the reply stands in (same
architecture, coarser: a round trip over the socket is inside every span).
"""

from __future__ import annotations

import ctypes
import time
from collections.abc import Callable
from dataclasses import dataclass

import torch

from kbench_ci.wire.streamops import StreamOps, StreamOpsUnavailable

#: the stamps one call takes (see the module's docstring)
STAMPS_PER_CALL = 4

# One thread writes the device's nanosecond clock. PTX ISA 6.0 / sm_50: any driver JITs it.
_STAMP_PTX = b"""
.version 6.0
.target sm_50
.address_size 64
.visible .entry kbench_stamp(.param .u64 kbench_stamp_out)
{
    .reg .b64 %rd<4>;
    ld.param.u64 %rd1, [kbench_stamp_out];
    cvta.to.global.u64 %rd2, %rd1;
    mov.u64 %rd3, %globaltimer;
    st.global.u64 [%rd2], %rd3;
    ret;
}
"""
ClockUnavailable = StreamOpsUnavailable


@dataclass(frozen=True, slots=True)
class CallStamps:
    """One call, as the judge's clock saw it (microseconds)."""

    #: the judge's staging, poisoning and flush (stamp 0 to 1): lengthened by foreign GPU work
    pre_us: float
    #: from the judge's go to the side's token (stamp 1 to 2): the side's call and the handoff
    span_us: float
    #: the judge's snapshot of the outputs (stamp 2 to 3)
    post_us: float


class GpuClock:
    """Stamps and token waits on the judge's own stream (``stream``), for ``capacity`` calls
    between reads."""

    def __init__(self, device: torch.device, *, capacity: int = 64) -> None:
        if device.index is None:  # torch.cuda.synchronize and the stream want the index
            device = torch.device(device.type, torch.cuda.current_device())
        self.device = device
        torch.cuda.set_device(device)
        torch.empty(1, device=device)  # the primary context, current on this thread
        self.ops = StreamOps()
        self.ops.lib.cuLaunchKernel.argtypes = [
            ctypes.c_void_p, ctypes.c_uint, ctypes.c_uint, ctypes.c_uint, ctypes.c_uint, ctypes.c_uint, ctypes.c_uint,
            ctypes.c_uint, ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(ctypes.c_void_p),
        ]
        module = ctypes.c_void_p()
        self.ops.check(self.ops.lib.cuModuleLoadData(ctypes.byref(module), _STAMP_PTX), "loading the stamp kernel")
        self._module = module
        function = ctypes.c_void_p()
        self.ops.check(self.ops.lib.cuModuleGetFunction(ctypes.byref(function), module, b"kbench_stamp"), "finding the stamp kernel")
        self._function = function
        self.stream = torch.cuda.Stream(device)
        self.rescue_stream = torch.cuda.Stream(device)
        self._cycles_per_us = spin_rate(device)
        self.capacity = capacity
        self._stamps = torch.zeros(capacity * STAMPS_PER_CALL, dtype=torch.int64, device=device)
        self._probe_stamp = torch.zeros(1, dtype=torch.int64, device=device)
        self._next = 0
        self._go_passed: torch.cuda.Event | None = None

    def stamp(self) -> None:
        """Enqueue the next stamp of the current call on ``stream``."""
        if self._next >= self._stamps.numel():
            raise ClockUnavailable("more calls stamped than the clock holds between reads")
        self._launch_stamp(self._stamps.data_ptr() + 8 * self._next, "launching the stamp kernel")
        self._next += 1

    def _launch_stamp(self, address: int, what: str) -> None:
        """Enqueue on ``stream`` the stamp kernel, writing ``%globaltimer`` to device ``address``."""
        pointer = ctypes.c_uint64(address)
        params = (ctypes.c_void_p * 1)(ctypes.addressof(pointer))
        self.ops.check(
            self.ops.lib.cuLaunchKernel(self._function, 1, 1, 1, 1, 1, 1, 0, ctypes.c_void_p(self.stream.cuda_stream), params, None),
            what,
        )

    def idle_latency_us(self) -> float:
        """Host time (us) for one stamp kernel on the judge's idle stream to launch and finish:
        tens of us where no other context keeps the GPU busy, up to a time slice more where one
        does (kbench_ci.judge.quiet). The judge's own work is finished first."""
        torch.cuda.synchronize(self.device)
        began = time.perf_counter()
        self._launch_stamp(self._probe_stamp.data_ptr(), "launching the probe kernel")
        self.stream.synchronize()
        return (time.perf_counter() - began) * 1e6

    def hold(self, microseconds: float) -> None:
        """Enqueue on ``stream`` a spin of about ``microseconds``: the judge's and the side's
        host enqueue the call's work while the GPU spins, so none of it waits for a launch."""
        torch.cuda._sleep(max(1, int(microseconds * self._cycles_per_us)))

    def begin(self) -> None:
        """A new call: its stamps start at the beginning of the buffer (one call between reads),
        whatever an earlier call that failed half-way left."""
        self._next = 0
        self._go_passed = None

    def went(self) -> None:
        """Enqueue on ``stream``, right after the go word: a mark the rescue waits for, so that it
        never writes the done word before the call's own reset of it (which would undo it)."""
        self._go_passed = torch.cuda.Event()
        self._go_passed.record(self.stream)

    def settle(self, address: int, token: int, *, timeout_s: float) -> bool:
        """Wait up to ``timeout_s`` for ``stream`` to finish; a stream still waiting for a side's
        token then (the side died, failed, or never signalled) is released by writing the token
        from another stream, once the stream is past the call's go. True: it finished by itself.
        Raises :class:`ClockUnavailable` when even the release does not free it."""
        deadline = time.monotonic() + timeout_s
        while not self.stream.query():
            if time.monotonic() >= deadline:
                self.release(address, token)
                return False
            time.sleep(20e-6)
        return True

    def release(self, address: int, token: int) -> None:
        """Write ``token`` to ``address`` from the rescue stream (after the go, where one was
        enqueued) and wait, boundedly, for ``stream`` to drain."""
        if self._go_passed is not None:
            _wait(self._go_passed.query, RELEASE_TIMEOUT_S, "the judge's stream to pass a call's go")
        self.ops.write(self.rescue_stream.cuda_stream, address, token)
        _wait(self.stream.query, RELEASE_TIMEOUT_S, "the judge's stream to drain after a released call")

    def wait_token(self, address: int, token: int) -> None:
        """Enqueue on ``stream``: wait until the 32-bit word at device ``address`` equals ``token``."""
        self.ops.wait_equal(self.stream.cuda_stream, address, token)

    def write_token(self, address: int, token: int) -> None:
        """Enqueue on ``stream``: write ``token`` into the 32-bit word at device ``address``."""
        self.ops.write(self.stream.cuda_stream, address, token)

    def read(self) -> list[CallStamps]:
        """The calls stamped since the last read (waits for the judge's stream), then starts over."""
        self.stream.synchronize()
        raw = self._stamps[: self._next].tolist()
        self._next = 0
        calls = []
        for start in range(0, len(raw) - STAMPS_PER_CALL + 1, STAMPS_PER_CALL):
            t0, t1, t2, t3 = raw[start : start + STAMPS_PER_CALL]
            calls.append(CallStamps(pre_us=(t1 - t0) / 1e3, span_us=(t2 - t1) / 1e3, post_us=(t3 - t2) / 1e3))
        return calls


#: seconds the judge waits for its own stream when it releases a side's call
RELEASE_TIMEOUT_S = 30.0


def _wait(done: Callable[[], bool], timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not done():
        if time.monotonic() >= deadline:
            raise ClockUnavailable(f"waited {timeout_s:.0f} s for {what}")
        time.sleep(50e-6)


def spin_rate(device: torch.device) -> float:
    """``torch.cuda._sleep`` cycles per microsecond, now."""
    torch.cuda._sleep(1_000)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    torch.cuda._sleep(1_000_000)
    end.record()
    end.synchronize()
    return float(1_000_000 / max(start.elapsed_time(end) * 1e3, 1e-3))


class HostClock:
    """The judge's monotonic clock around a CPU side's request and reply (the CPU's stand-in)."""

    def __init__(self) -> None:
        self._started: int | None = None

    def start(self) -> None:
        self._started = time.monotonic_ns()

    def stop(self) -> CallStamps:
        assert self._started is not None
        span_us = (time.monotonic_ns() - self._started) / 1e3
        self._started = None
        return CallStamps(pre_us=0.0, span_us=span_us, post_us=0.0)
