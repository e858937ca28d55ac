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

import json
import os
import re
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, replace
from types import TracebackType
from typing import Any

import torch


class CuptiUnavailable(Exception):
    """The profiler could not trace CUDA activity here (no CUPTI, or another profiler holds it)."""


@dataclass(frozen=True, slots=True)
class KernelShape:
    """How one kernel was launched and what it holds per thread and block, as CUPTI recorded it
    (kineto's metadata of a kernel activity)."""

    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    registers: int
    #: static + dynamic shared memory per block (CUPTI gives the sum)
    shared_bytes: int
    #: blocks of the grid per SM (grid size / SM count, not the occupancy); None where not recorded
    blocks_per_sm: float | None
    #: kineto's estimate of the achieved occupancy (%), from registers, shared memory and block size
    occupancy_pct: int | None


def kernel_shape(metadata: Mapping[str, Any]) -> KernelShape | None:
    """The launch shape in one kernel activity's metadata (None for a memcpy or memset, or a
    record without the fields)."""
    try:
        grid = tuple(int(v) for v in metadata["grid"])
        block = tuple(int(v) for v in metadata["block"])
        registers = int(metadata["registers per thread"])
        shared = int(metadata["shared memory"])
    except (KeyError, TypeError, ValueError):
        return None
    if len(grid) != 3 or len(block) != 3:
        return None
    blocks_per_sm = metadata.get("blocks per SM")
    occupancy = metadata.get("est. achieved occupancy %")
    return KernelShape(
        grid=(grid[0], grid[1], grid[2]), block=(block[0], block[1], block[2]), registers=registers,
        shared_bytes=shared,
        blocks_per_sm=_number(blocks_per_sm),
        occupancy_pct=int(occupancy) if isinstance(occupancy, (int, float)) else None,
    )


def _number(value: Any) -> float | None:
    """A metadata number, or None where missing or unreadable (never NaN: the shape is a dict
    key when launches are grouped, and NaN equals nothing, not even itself)."""
    try:
        number = float(value)  # kineto writes an infinite ratio as "inf"
    except (TypeError, ValueError):
        return None
    return None if number != number else number


def metadata_fragment(fragment: str) -> dict[str, Any]:
    """kineto's ``metadata_json()`` of one activity: the inside of a JSON object (no braces)."""
    parsed = _loads_lenient("{" + fragment + "}")
    return parsed if isinstance(parsed, dict) else {}


#: what C++ formatting writes for a non-finite number (``blocks per SM`` of a zero-SM record,
#: say), which JSON has no word for: read as null, so one field cannot void the others
_NON_FINITE = re.compile(r"(?<=[:\[,\s])-?(?:inf|nan)(?=[\s,\]}])")


def _loads_lenient(text: str) -> Any:
    """JSON as kineto writes it; None when it cannot be read even with its non-finite numbers as null."""
    try:
        return json.loads(text)
    except ValueError:
        pass
    try:
        return json.loads(_NON_FINITE.sub("null", text))
    except ValueError:
        return None


def shapes_from_chrome_trace(trace: Mapping[str, Any]) -> dict[int, KernelShape]:
    """Kernel shapes by correlation id, from a saved chrome trace (torch builds whose events
    lack ``metadata_json``)."""
    found: dict[int, KernelShape] = {}
    events = trace.get("traceEvents")
    for event in events if isinstance(events, list) else ():
        args = event.get("args") if isinstance(event, dict) else None
        if not isinstance(args, dict) or "correlation" not in args:
            continue
        shape = kernel_shape(args)
        if shape is not None:
            found[int(args["correlation"])] = shape
    return found


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
    #: a kernel's launch shape (None: not a kernel, or CUPTI's metadata could not be read)
    shape: KernelShape | None = None


class ActivityTrace:
    """``with ActivityTrace() as trace: ...`` then ``trace.events``: what CUPTI recorded inside."""

    def __init__(self, *, shapes: bool = True) -> None:
        """``shapes=False``: the launch shapes are not wanted (a timing calibration), so the
        trace is not saved and read back for them where the events lack them."""
        self.events: list[TraceEvent] = []
        self._public: Any = None
        self._result: Any = None
        self._shapes = shapes

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
        # Where the events do not carry the launch shapes (no metadata_json, or, as with torch
        # 2.11 on the H200, one without the kernel fields), the saved chrome trace does.
        if self._shapes and self._result is not None and any(_kernel_without_shape(event) for event in self.events):
            self.events = _with_saved_shapes(self._result, self.events)

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
            self._result = self._public.profiler.kineto_results
        else:
            autograd: Any = torch.autograd
            self._result = autograd._disable_profiler()
        return list(self._result.events())


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
    shape = kernel_shape(metadata_fragment(str(raw.metadata_json()))) if on_gpu and hasattr(raw, "metadata_json") else None
    return TraceEvent(
        name=name, on_gpu=on_gpu, lane=int(raw.device_resource_id()),
        start_ns=int(raw.start_ns()), end_ns=int(raw.end_ns()), correlation=correlation, shape=shape,
    )


def _kernel_without_shape(event: TraceEvent) -> bool:
    return event.on_gpu and event.shape is None and not event.name.startswith(("Memcpy", "Memset"))


def _with_saved_shapes(result: Any, events: list[TraceEvent]) -> list[TraceEvent]:
    """The launch shapes read back from the trace saved as chrome JSON (the one place kineto
    writes them where a torch build's events do not expose ``metadata_json``)."""
    handle, path = tempfile.mkstemp(prefix="kbench-ci-trace-", suffix=".json")
    os.close(handle)
    try:
        result.save(path)
        with open(path, encoding="utf-8") as saved:
            trace = _loads_lenient(saved.read())
    except (OSError, ValueError, RuntimeError):
        return events  # the shapes are a report's extra: the audit stands without them
    finally:
        os.unlink(path)
    shapes = shapes_from_chrome_trace(trace) if isinstance(trace, dict) else {}
    return [replace(e, shape=shapes.get(e.correlation, e.shape)) if e.on_gpu else e for e in events]
