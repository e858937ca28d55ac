"""One judged call: the judge stages the contents, flushes the cache, hands the call over to the
side's worker and takes a snapshot of its outputs, each step stamped by the judge's own clock
(kbench_ci.judge.clock says how, and why the side cannot reach it).

Every call the judge checks goes this way: correctness trials, warm-up-led first calls, timed
calls and probes alike, so nothing in the spacing, the buffers, the stream or the hold tells a
kernel which kind of call it is in.
"""

from __future__ import annotations

import contextlib
import itertools
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import torch

from kbench_ci.judge.arena import Arena
from kbench_ci.judge.clock import CallStamps, GpuClock, HostClock
from kbench_ci.judge.sides import SideFailed, end_side_strays
from kbench_ci.judge.state import Side
from kbench_ci.measure.inputs import InputSet, poison_outputs_
from kbench_ci.measure.timing import CacheFlush, shift_samples
from kbench_ci.wire.sideproto import Called, CallRequest

#: seconds a side may take to answer one call
CALL_TIMEOUT_S = 120.0
#: seconds the judge's stream may still wait for a side's end signal once the side has replied
SETTLE_TIMEOUT_S = 5.0
#: the hold before a side's first handed-over call, and its bounds (us)
FIRST_HOLD_US = 1000.0
MIN_HOLD_US = 150.0
MAX_HOLD_US = 5000.0
#: the hold covers this many times the slowest recent enqueue (the judge's, or the side's with
#: the request's way to it: the two overlap, the side being asked first)
HOLD_MARGIN = 1.5
#: the request's way from the judge to the side's worker, and the margin past it (us)
MESSAGE_US = 50.0
_RECENT = 8


@dataclass(frozen=True, slots=True)
class Judged:
    """One handed-over call: the side's own time (ms, less the judge's one event overhead), the
    judge's stamps, the outputs as the judge's snapshot holds them."""

    sample_ms: float
    stamps: CallStamps
    outputs: dict[str, torch.Tensor]
    #: the side's own span from the go to its start event (us; None where it reported none)
    lead_us: float | None = None


@dataclass(frozen=True, slots=True)
class JudgedBatch:
    """Handed-over calls under one span of the judge's clock: each call's own time (ms, as
    :class:`Judged`'s), the judge's stamps around the whole batch, each call's outputs as the
    judge's snapshot holds them."""

    samples_ms: tuple[float, ...]
    stamps: CallStamps
    outputs: tuple[dict[str, torch.Tensor], ...]
    #: the side's own span from the go to its first start event (us; None where it reported none)
    lead_us: float | None = None

    @property
    def calls(self) -> int:
        return len(self.samples_ms)


@dataclass(slots=True)
class _Pacing:
    """A side's recent enqueue times, per call of the request (us): the judge's and its own."""

    recent: list[float] = field(default_factory=list)

    def hold_us(self, calls: int = 1) -> float:
        """The hold before a request of ``calls`` calls: a batch's whole enqueue must be done
        before the go, or its later calls' start events would wait for their launches."""
        if not self.recent:
            return FIRST_HOLD_US * calls
        return min(MAX_HOLD_US * calls, max(MIN_HOLD_US, HOLD_MARGIN * max(self.recent) * calls + MESSAGE_US))

    def add(self, enqueue_us: float, calls: int = 1) -> None:
        self.recent = [*self.recent[-(_RECENT - 1):], enqueue_us / calls]


class Handoff:
    """Judged calls on one device: a GPU clock where the device has one, else the host's."""

    def __init__(
        self, device: torch.device, flush: CacheFlush, clock: GpuClock | None, *, event_overhead_ms: float = 0.0,
    ) -> None:
        """``event_overhead_ms``: the GPU's own cost of an event pair, calibrated once by the judge
        and subtracted here from every side's reported time. A side reports its raw event time:
        were each side to calibrate its own, each would subtract another draw of that noise (its
        own hold, its own warm-up), and two processes of one kernel would read apart by it."""
        self.device = device
        self.flush = flush
        self.clock = clock
        self.event_overhead_ms = event_overhead_ms
        self.source = "gpu-globaltimer" if clock is not None else "host-monotonic"
        self._tokens = itertools.count(1)
        self._pacing: dict[str, _Pacing] = {}
        self._snapshots: dict[tuple[str, int, str], torch.Tensor] = {}

    def warm_up(self, side: Side, arena: Arena, count: int) -> None:
        """``count`` untimed calls on what ``arena`` holds, before a round's first judged call."""
        if count:
            _checked(side.worker.ask(CallRequest(slot=arena.slot, count=0, warm_up=count), Called, timeout_s=CALL_TIMEOUT_S))

    def call(self, side: Side, arena: Arena, inputs: InputSet) -> Judged:
        """Stage ``inputs`` into ``arena``, flush, hand one call over, snapshot its outputs.
        Raises :class:`SideFailed` where the side fails the call or never signals its end."""
        judged = self.batch(side, [arena], [inputs])
        return Judged(judged.samples_ms[0], judged.stamps, judged.outputs[0], judged.lead_us)

    def batch(self, side: Side, arenas: Sequence[Arena], inputs: Sequence[InputSet]) -> JudgedBatch:
        """Stage each of ``inputs`` into the arena beside it (each arena a placement of its
        own), flush, hand the calls over as one batch under one span of the clock, snapshot
        every call's outputs. The side runs them back to back, flushing between them; one call
        is one handed over as before. Raises :class:`SideFailed` where the side fails a call,
        returns another number of times, or never signals its end."""
        if len(arenas) != len(inputs) or not arenas or len({arena.slot for arena in arenas}) != len(arenas):
            raise ValueError(f"a batch takes one placement of its own for each call (placements "
                             f"{[arena.slot for arena in arenas]} for {len(inputs)} call(s))")
        token = next(self._tokens) & 0x7FFFFFFF or next(self._tokens)
        request = CallRequest(slot=arenas[0].slot, count=len(arenas), token=token,
                              batch=tuple(arena.slot for arena in arenas) if len(arenas) > 1 else ())
        if self.clock is None:
            return self._host_batch(side, arenas, inputs, request)
        return self._gpu_batch(side, arenas, inputs, request)

    def _host_batch(self, side: Side, arenas: Sequence[Arena], inputs: Sequence[InputSet], request: CallRequest) -> JudgedBatch:
        """A CPU side's calls (or a GPU's where the driver refused the clock, or the timing
        method is the host's: then the side's worker holds and times the call as it would in a
        process of its own, token 0)."""
        # On a CPU the side's process is stopped while the judge stages and flushes: a thread of
        # its own must not start on the staged inputs before the request (and the clock) does.
        # Nor may a process it double-forked away in its last call (re-parented to the judge,
        # so not under the worker the pause stops): every such stray is ended first. A daemon
        # of the red team's watched the lent outputs for the poison (the staging's last write)
        # and computed the answer during the flush; the head read `faster` -83%.
        stopped = self.device.type == "cpu" and not side.worker.paused
        if stopped:
            side.worker.pause()
        if self.device.type == "cpu":
            end_side_strays()
            # and stopped again: a stray may have continued the worker (SIGCONT) before it
            # was ended, as daemon_burn does whenever it finds its worker stopped
            side.worker.pause()
        try:
            for arena, staged in zip(arenas, inputs, strict=True):
                stage(arena, staged)
            self.flush()
        finally:
            if stopped:
                side.worker.resume()
        if self.device.type == "cuda":
            if len(arenas) > 1:
                raise ValueError("a batch needs the judge's GPU clock on a GPU")
            request = replace(request, token=0)
            torch.cuda.synchronize(self.device)
        clock = HostClock()
        clock.start()
        reply = _calls(side.worker.ask(request, Called, timeout_s=CALL_TIMEOUT_S), len(arenas))
        stamps = clock.stop()
        outputs = tuple({name: arena.views[name].clone() for name in staged.output_names}
                        for arena, staged in zip(arenas, inputs, strict=True))
        return JudgedBatch(self._corrected(reply), stamps, outputs)

    def _gpu_batch(self, side: Side, arenas: Sequence[Arena], inputs: Sequence[InputSet], request: CallRequest) -> JudgedBatch:
        clock = self.clock
        assert clock is not None
        token, first = request.token, arenas[0]
        pacing = self._pacing.setdefault(side.label, _Pacing())
        outputs = tuple({name: self._snapshot(side, arena.slot, name, arena.views[name]) for name in staged.output_names}
                        for arena, staged in zip(arenas, inputs, strict=True))
        clock.begin()
        began = time.perf_counter()
        # Asked first: the side's stream waits for the go word, so its enqueue overlaps ours.
        side.worker.send(request)
        try:
            with torch.cuda.stream(clock.stream):
                clock.hold(pacing.hold_us(len(arenas)))
                clock.stamp()
                clock.write_token(first.done_address, 0)
                for arena, staged in zip(arenas, inputs, strict=True):
                    stage(arena, staged)
                self.flush()
                clock.stamp()
                clock.write_token(first.go_address, token)
                clock.went()
                clock.wait_token(first.done_address, token)
                clock.stamp()
                for arena, snapshots in zip(arenas, outputs, strict=True):
                    for name, snapshot in snapshots.items():
                        snapshot.copy_(arena.views[name])
                clock.stamp()
        except BaseException:
            # The judge's own enqueue failed half-way: the side's stream must not wait for a go
            # that never comes (its worker would hang on its next request).
            clock.ops.write(clock.rescue_stream.cuda_stream, first.go_address, token)
            clock.release(first.done_address, token)
            with contextlib.suppress(SideFailed):  # its reply to this call, so the next is in step
                side.worker.receive(Called, timeout_s=CALL_TIMEOUT_S)
            raise
        judge_enqueue_us = (time.perf_counter() - began) * 1e6
        try:
            reply = side.worker.receive(Called, timeout_s=CALL_TIMEOUT_S)
        except SideFailed:
            clock.release(first.done_address, token)
            raise
        settled = clock.settle(first.done_address, token, timeout_s=SETTLE_TIMEOUT_S)
        (stamps,) = clock.read()
        reply = _calls(reply, len(arenas))
        if not settled:
            raise SideFailed("its call never signalled its end to the judge's clock (its stream did not write the done word)")
        pacing.add(max(judge_enqueue_us, MESSAGE_US + (reply.enqueue_us or 0.0)), len(arenas))
        return JudgedBatch(self._corrected(reply), stamps, outputs, reply.lead_us)

    def _corrected(self, reply: Called) -> tuple[float, ...]:
        """The side's times, less the judge's event overhead."""
        return shift_samples(reply.samples_ms, self.event_overhead_ms)

    def _snapshot(self, side: Side, slot: int, name: str, view: torch.Tensor) -> torch.Tensor:
        """The judge's own copy of an output (memory no side maps), one per side, placement and
        output."""
        key = (side.label, slot, name)
        snapshot = self._snapshots.get(key)
        if snapshot is None or snapshot.shape != view.shape or snapshot.dtype != view.dtype:
            snapshot = self._snapshots[key] = torch.empty(view.shape, dtype=view.dtype, device=view.device)
        return snapshot


def stage(arena: Arena, inputs: InputSet) -> None:
    """The contents into the lent inputs and in-place outputs; every other output poisoned."""
    for name, view in arena.views.items():
        if name not in inputs.poisoned_names:
            view.copy_(inputs.kwargs[name])
    poison_outputs_(arena.views, inputs.poisoned_names)


def _checked(reply: object) -> Called:
    assert isinstance(reply, Called)
    if reply.error is not None:
        raise SideFailed(reply.error)
    return reply


def _calls(reply: object, count: int) -> Called:
    called = _checked(reply)
    if len(called.samples_ms) != count:
        raise SideFailed(f"its worker returned {len(called.samples_ms)} times for {count} call(s)")
    return called
