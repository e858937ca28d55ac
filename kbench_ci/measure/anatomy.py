"""Launch anatomy: what one call of a variant launches on the GPU, from the CUPTI audit's trace.

The audit already traces every GPU activity of a few calls made alone on the device
(measure/escape.py); each kernel record carries its grid, block, registers per thread, shared
memory and blocks per SM. Grouped here by kernel and launch shape, with each group's launches
per call and share of the calls' GPU time, so a report can say what changed between base and
head ("registers 168 → 207") rather than only that the time did.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from kbench_ci.measure.cupti import KernelShape, TraceEvent
from kbench_ci.results.model import KernelLaunch

#: kinds of launch kept per variant (the rest are a long tail of tiny helpers; their share is
#: still in the total the kept ones' shares are taken of)
MAX_KINDS = 12


@dataclass(slots=True)
class _Group:
    name: str
    shape: KernelShape | None
    launches: int = 0
    gpu_ns: int = 0


def launch_anatomy(calls: Sequence[Sequence[TraceEvent]]) -> tuple[KernelLaunch, ...]:
    """The kinds of GPU work in ``calls`` (each the GPU activities of one audited call), largest
    share of GPU time first."""
    groups: dict[tuple[str, KernelShape | None], _Group] = {}
    total_ns = 0
    for activities in calls:
        for activity in activities:
            key = (activity.name, activity.shape)
            group = groups.setdefault(key, _Group(activity.name, activity.shape))
            group.launches += 1
            duration = max(0, activity.end_ns - activity.start_ns)
            group.gpu_ns += duration
            total_ns += duration
    if not calls or not groups:
        return ()
    ordered = sorted(groups.values(), key=lambda g: (-g.gpu_ns, g.name))[:MAX_KINDS]
    return tuple(_launch(group, len(calls), total_ns) for group in ordered)


def _launch(group: _Group, calls: int, total_ns: int) -> KernelLaunch:
    shape = group.shape
    return KernelLaunch(
        name=group.name,
        per_call=group.launches / calls,
        share=group.gpu_ns / total_ns if total_ns else 0.0,
        mean_us=group.gpu_ns / group.launches / 1e3,
        grid=shape.grid if shape else None,
        block=shape.block if shape else None,
        registers=shape.registers if shape else None,
        shared_bytes=shape.shared_bytes if shape else None,
        blocks_per_sm=shape.blocks_per_sm if shape else None,
        occupancy_pct=shape.occupancy_pct if shape else None,
    )
