"""The launch anatomy read from the CUPTI audit's trace — kineto's kernel
metadata (both the ``metadata_json()`` fragment and a saved chrome trace) and its grouping into
kinds of launch with their share of the GPU time.

The samples are kineto's format as its ChromeTraceLogger/metadataJson write it (libkineto
CuptiActivity.cpp): this machine has no GPU to record a fresh one."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from kbench_ci.measure.anatomy import MAX_KINDS, launch_anatomy
from kbench_ci.measure.cupti import (
    ActivityTrace,
    KernelShape,
    TraceEvent,
    kernel_shape,
    metadata_fragment,
    shapes_from_chrome_trace,
)

#: kineto's metadata_json() of a Triton matmul launch (no braces: a fragment)
MATMUL_FRAGMENT = '''
      "queued": 0, "device": 0, "context": 1,
      "stream": 7, "correlation": 1234,
      "registers per thread": 207,
      "shared memory": 147456,
      "blocks per SM": 3.878788,
      "warps per SM": 31.030304,
      "grid": [512, 1, 1],
      "block": [256, 1, 1],
      "est. achieved occupancy %": 13, "graph id": 0, "graph node id": 0'''

CHROME_TRACE = {
    "schemaVersion": 1,
    "traceEvents": [
        {"ph": "X", "cat": "kernel", "name": "nvjet_sm90_hsh_256x128_64x4_1x2_h_bz_coopA_NNN", "pid": 0, "tid": 7,
         "ts": 10.0, "dur": 181.4,
         "args": {"queued": 0, "device": 0, "context": 1, "stream": 7, "correlation": 88, "registers per thread": 168,
                  "shared memory": 213188, "blocks per SM": 1.0, "warps per SM": 12.0, "grid": [2, 66, 1],
                  "block": [384, 1, 1], "est. achieved occupancy %": 19}},
        {"ph": "X", "cat": "gpu_memset", "name": "Memset (Device)", "pid": 0, "tid": 7, "ts": 5.0, "dur": 1.0,
         "args": {"device": 0, "context": 1, "stream": 7, "correlation": 87, "bytes": 4096}},
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 1.0, "dur": 3.0,
         "args": {"correlation": 88}},
    ],
}


def test_a_kernel_fragment_gives_its_launch_shape() -> None:
    shape = kernel_shape(metadata_fragment(MATMUL_FRAGMENT))
    assert shape == KernelShape(grid=(512, 1, 1), block=(256, 1, 1), registers=207, shared_bytes=147456,
                                blocks_per_sm=3.878788, occupancy_pct=13)


def test_memcpy_metadata_and_broken_fragments_give_no_shape() -> None:
    memcpy = '"device": 0, "context": 1, "stream": 7, "correlation": 5, "bytes": 4096, "memory bandwidth (GB/s)": 12.5'
    assert kernel_shape(metadata_fragment(memcpy)) is None
    assert metadata_fragment('"grid": [1, 1') == {}
    assert kernel_shape({"grid": [1, 1], "block": [1, 1, 1], "registers per thread": 8, "shared memory": 0}) is None


def test_an_infinite_blocks_per_sm_is_read_as_inf_not_a_crash() -> None:
    shape = kernel_shape(metadata_fragment(MATMUL_FRAGMENT.replace("3.878788", '"inf"')))
    assert shape is not None and math.isinf(shape.blocks_per_sm)


def test_a_saved_chrome_trace_gives_the_kernels_shapes_by_correlation() -> None:
    shapes = shapes_from_chrome_trace(CHROME_TRACE)
    assert list(shapes) == [88]
    assert shapes[88].grid == (2, 66, 1) and shapes[88].registers == 168 and shapes[88].shared_bytes == 213188


def _kernel(name: str, start: int, duration: int, shape: KernelShape | None, correlation: int = 1) -> TraceEvent:
    return TraceEvent(name=name, on_gpu=True, lane=7, start_ns=start, end_ns=start + duration,
                      correlation=correlation, shape=shape)


BIG = KernelShape(grid=(512, 1, 1), block=(256, 1, 1), registers=207, shared_bytes=147456, blocks_per_sm=3.88,
                  occupancy_pct=13)
SMALL = KernelShape(grid=(1, 1, 1), block=(32, 1, 1), registers=16, shared_bytes=0, blocks_per_sm=0.0076,
                    occupancy_pct=1)


def test_the_anatomy_groups_launches_by_kernel_and_shape_with_their_share_of_the_time() -> None:
    calls = [
        [_kernel("matmul_kernel", 0, 90_000, BIG), _kernel("reduce_tail", 90_000, 10_000, SMALL),
         TraceEvent("Memset (Device)", True, 7, 100_000, 100_000, 3)],
        [_kernel("matmul_kernel", 0, 90_000, BIG), _kernel("reduce_tail", 90_000, 5_000, SMALL),
         _kernel("reduce_tail", 95_000, 5_000, SMALL)],
    ]
    anatomy = launch_anatomy(calls)
    assert [launch.name for launch in anatomy] == ["matmul_kernel", "reduce_tail", "Memset (Device)"]
    matmul, tail, memset = anatomy
    assert matmul.per_call == 1.0 and math.isclose(matmul.share, 0.9) and math.isclose(matmul.mean_us, 90.0)
    assert matmul.registers == 207 and matmul.grid == (512, 1, 1) and matmul.shared_bytes == 147456
    assert tail.per_call == 1.5 and math.isclose(tail.share, 0.1) and math.isclose(tail.mean_us, 20_000 / 3 / 1e3)
    assert memset.grid is None and memset.registers is None and memset.share == 0.0


def test_one_kernel_launched_with_two_grids_is_two_kinds() -> None:
    other = KernelShape(grid=(256, 1, 1), block=(256, 1, 1), registers=207, shared_bytes=147456, blocks_per_sm=1.94,
                        occupancy_pct=13)
    anatomy = launch_anatomy([[_kernel("matmul_kernel", 0, 60, BIG), _kernel("matmul_kernel", 60, 40, other)]])
    assert [(launch.grid, launch.share) for launch in anatomy] == [((512, 1, 1), 0.6), ((256, 1, 1), 0.4)]


def test_no_calls_or_no_activity_is_an_empty_anatomy_and_the_tail_is_cut() -> None:
    assert launch_anatomy([]) == () and launch_anatomy([[], []]) == ()
    many = [[_kernel(f"k{index:02d}", index * 100, 100 - index, None) for index in range(MAX_KINDS + 5)]]
    anatomy = launch_anatomy(many)
    assert len(anatomy) == MAX_KINDS and anatomy[0].name == "k00"
    assert sum(launch.share for launch in anatomy) < 1.0  # shares stay of the whole, the tail included


def test_launches_whose_record_lacks_blocks_per_sm_still_group_as_one_kind() -> None:
    """Found in review: a missing field read as NaN made every launch a kind of its own."""
    fragment = MATMUL_FRAGMENT.replace('"blocks per SM": 3.878788,', "")
    shapes = [kernel_shape(metadata_fragment(fragment)) for _ in range(20)]
    assert shapes[0] is not None and shapes[0].blocks_per_sm is None
    anatomy = launch_anatomy([[_kernel("matmul_kernel", i * 10, 10, shape) for i, shape in enumerate(shapes[:10])],
                              [_kernel("matmul_kernel", i * 10, 10, shape) for i, shape in enumerate(shapes[10:])]])
    assert len(anatomy) == 1 and anatomy[0].per_call == 10.0


def test_a_non_finite_number_voids_only_itself() -> None:
    fragment = MATMUL_FRAGMENT.replace("3.878788", "inf").replace('"est. achieved occupancy %": 13', '"est. achieved occupancy %": nan')
    shape = kernel_shape(metadata_fragment(fragment))
    assert shape is not None and shape.registers == 207 and shape.blocks_per_sm is None and shape.occupancy_pct is None


class _SavedResult:
    """A profiler result whose events carry no shapes but whose saved chrome trace does."""

    def save(self, path: str) -> None:
        text = json.dumps(CHROME_TRACE).replace('"blocks per SM": 1.0', '"blocks per SM": inf')
        Path(path).write_text(text, encoding="utf-8")


class _RawEvent:
    def __init__(self, name: str, on_gpu: bool, correlation: int) -> None:
        self._name, self._gpu, self._correlation = name, on_gpu, correlation

    def name(self) -> str:
        return self._name

    def device_type(self) -> str:
        return "DeviceType.CUDA" if self._gpu else "DeviceType.CPU"

    def correlation_id(self) -> int:
        return self._correlation

    def device_resource_id(self) -> int:
        return 7

    def start_ns(self) -> int:
        return 1000

    def end_ns(self) -> int:
        return 2000

    def metadata_json(self) -> str:
        return ""  # as torch 2.11 gave on the H200: no kernel fields in the events themselves


def _traced(monkeypatch: pytest.MonkeyPatch, trace: ActivityTrace, raw: list[Any], result: Any) -> ActivityTrace:
    """``trace`` entered and left with the profiler replaced: it returns ``raw`` and leaves
    ``result`` as its kineto result."""

    def stop() -> list[Any]:
        trace._result = result
        return raw

    monkeypatch.setattr(trace, "_start", lambda: None)
    monkeypatch.setattr(trace, "_stop", stop)
    with trace:
        pass
    return trace


def test_shapes_missing_from_the_events_come_from_the_saved_trace(monkeypatch: pytest.MonkeyPatch) -> None:
    raw = [_RawEvent("nvjet_sm90_hsh_256x128_64x4_1x2_h_bz_coopA_NNN", True, 88), _RawEvent("Memset (Device)", True, 87),
           _RawEvent("cudaLaunchKernel", False, 88)]
    trace = _traced(monkeypatch, ActivityTrace(), raw, _SavedResult())
    shapes = {event.name: event.shape for event in trace.events if event.on_gpu}
    kernel = shapes["nvjet_sm90_hsh_256x128_64x4_1x2_h_bz_coopA_NNN"]
    assert kernel is not None and kernel.grid == (2, 66, 1) and kernel.registers == 168 and kernel.blocks_per_sm is None
    assert shapes["Memset (Device)"] is None


def test_a_trace_that_wants_no_shapes_does_not_save_and_read_itself_back(monkeypatch: pytest.MonkeyPatch) -> None:
    """The timing calibration's trace: its events' times are all it reads, and saving the trace
    as JSON to recover shapes would cost its share of the timing phase for nothing."""
    raw = [_RawEvent("vadd_kernel", True, 5), _RawEvent("cudaLaunchKernel", False, 5)]

    class Unsaveable:
        def save(self, path: str) -> None:
            raise AssertionError("saved although no shapes were wanted")

    trace = _traced(monkeypatch, ActivityTrace(shapes=False), raw, Unsaveable())
    assert [event.name for event in trace.events] == ["vadd_kernel", "cudaLaunchKernel"]
    assert all(event.shape is None for event in trace.events)
