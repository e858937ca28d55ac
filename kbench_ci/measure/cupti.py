"""CUPTI activity records through PyTorch's profiler: every kernel, memcpy and memset the GPU
ran while a trace was open, on every stream, and the runtime call (with its host thread) that
launched each.

We drive the profiler's low-level entry points (``torch.autograd._prepare_profiler`` and its
siblings, which ``torch.profiler.profile`` itself calls) with CUDA activity only. The public
context manager spends 4.0-5.8 s on its first entry in a process (measured on an H200, torch
2.11: the low-level calls took 14 ms of that), and every case runs in a fresh worker process.
Where the low-level calls are missing from a torch build, the public one is used.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import TracebackType
from typing import Any

import torch


class CuptiUnavailable(Exception):
    """The profiler could not trace CUDA activity here (no CUPTI, or another profiler holds it)."""


@dataclass(frozen=True, slots=True)
class TraceEvent:
    """One CUPTI record: GPU activity (kernel, memcpy, memset) or a CUDA runtime/driver call.

    ``correlation`` links a GPU activity to the call that launched it.
    """

    name: str
    on_gpu: bool
    #: GPU activity: the stream it ran on; runtime call: the host thread that made it
    lane: int
    start_ns: int
    end_ns: int
    correlation: int


class ActivityTrace:
    """``with ActivityTrace() as trace: ...`` then ``trace.events``: what CUPTI recorded inside."""

    def __init__(self) -> None:
        self.events: list[TraceEvent] = []
        self._public: Any = None

    def __enter__(self) -> ActivityTrace:
        try:
            self._start()
        except Exception as exc:  # the profiler's own errors: no CUPTI, a profiler already running
            raise CuptiUnavailable(first_line(exc)) from exc
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, traceback: TracebackType | None
    ) -> None:
        try:
            raw = self._stop()
        except Exception as stop_error:
            if exc_type is None:
                raise CuptiUnavailable(f"stopping the trace failed: {first_line(stop_error)}") from stop_error
            return
        self.events = [event for event in (_convert(item) for item in raw) if event is not None]

    def _start(self) -> None:
        autograd: Any = torch.autograd
        low_level = all(hasattr(autograd, name) for name in ("_prepare_profiler", "_enable_profiler", "_disable_profiler"))
        if low_level:
            from torch._C._profiler import (  # noqa: PLC0415 - torch's private profiler API, loaded only when tracing
                ProfilerActivity,
                ProfilerConfig,
                ProfilerState,
                _ExperimentalConfig,
            )

            config = ProfilerConfig(ProfilerState.KINETO, False, False, False, False, False, _ExperimentalConfig())
            activities = {ProfilerActivity.CUDA}
            autograd._prepare_profiler(config, activities)
            autograd._enable_profiler(config, activities)
            return
        from torch.profiler import ProfilerActivity as PublicActivity  # noqa: PLC0415 - see above
        from torch.profiler import profile  # noqa: PLC0415 - see above

        self._public = profile(activities=[PublicActivity.CUDA])
        self._public.__enter__()

    def _stop(self) -> list[Any]:
        if self._public is not None:
            self._public.__exit__(None, None, None)
            return list(self._public.profiler.kineto_results.events())
        autograd: Any = torch.autograd
        return list(autograd._disable_profiler().events())


def first_line(exc: BaseException) -> str:
    """``Type: first line of the message`` — profiler and NVRTC errors run to many lines."""
    lines = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {lines[0]}" if lines else type(exc).__name__


def _convert(raw: Any) -> TraceEvent | None:
    name = str(raw.name())
    on_gpu = "CUDA" in str(raw.device_type())
    correlation = int(raw.correlation_id())
    if not on_gpu and correlation == 0:  # the profiler's own bookkeeping ("Activity Buffer Request")
        return None
    return TraceEvent(
        name=name, on_gpu=on_gpu, lane=int(raw.device_resource_id()),
        start_ns=int(raw.start_ns()), end_ns=int(raw.end_ns()), correlation=correlation,
    )
