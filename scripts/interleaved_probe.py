#!/usr/bin/env python3
"""Independent check of the compare figures for the CUDA vector add (issue 10): the base kernel
and the one doing 2% more work, both loaded in ONE process, timed on the SAME buffers,
interleaved call by call (A B B A ...), each call after a cold-L2 flush and a stream hold.
Timed two ways that do not use kbench-ci's timer: CUDA events around each call, and CUPTI's
kernel durations (torch.profiler) for the same alternating sequence.

    python scripts/interleaved_probe.py [--extra 0.02] [--trials 400]     # on a GPU machine

Prints per N: both medians and their ratio by each method: events (stream held), CUPTI with
the flush right before each call, and CUPTI with the flush and the same hold as the events.
"""

from __future__ import annotations

import argparse
import ctypes
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile

sys.path.insert(0, str(Path(__file__).resolve().parent))
from aa_and_regression import CVADD  # the very kernel source the compare suite uses

SIZES = (1 << 20, 1 << 22, 1 << 24)
#: CUDA events count in steps of this many microseconds on an H200
EVENT_TICK_US = 0.032


def build(extra: float, folder: Path) -> ctypes.CDLL:
    source = folder / f"cvadd_{extra}.cu"
    library = folder / f"cvadd_{extra}.so"
    source.write_text(CVADD.format(extra=extra))
    subprocess.run(["nvcc", "-shared", "-std=c++17", "-arch=sm_90", "-O3", "-Xcompiler", "-fPIC", "-o", str(library),
                    str(source)], check=True)
    lib = ctypes.CDLL(str(library))
    lib.solve.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int]
    return lib


def cupti_durations(libs: list[ctypes.CDLL], ptrs: tuple[int, int, int, int], order: list[int], flush: torch.Tensor,
                    hold: bool) -> list[list[float]]:
    """CUPTI's kernel durations (us) of the same A B B A sequence, each call after a cold-L2
    flush; with ``hold``, also after the same stream hold as the event pass (kbench-ci's timer
    holds the stream too: a kernel that starts while the flush's dirty lines still drain runs
    under other conditions than one that starts 100 us later)."""
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for which in order:
            flush.zero_()
            if hold:
                torch.cuda._sleep(200_000)
            libs[which].solve(*ptrs)
        torch.cuda.synchronize()
    kernels = sorted((e for e in prof.events() if e.name.startswith("add_kernel")), key=lambda e: e.time_range.start)
    durations: list[list[float]] = [[], []]
    for which, event in zip(order, kernels, strict=True):
        durations[which].append(event.device_time_total)
    return durations


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--extra", type=float, default=0.02)
    parser.add_argument("--trials", type=int, default=400)
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="probe-"))
    libs = [build(0.0, folder), build(args.extra, folder)]
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    flush = torch.empty(2 * l2 // 4, dtype=torch.int32, device="cuda")
    print(f"{'N':>10} {'events base us':>14} {'events slow us':>14} {'ratio':>8} {'CUPTI base us':>14} {'CUPTI slow us':>14} {'ratio':>8}"
          f" {'held: base us':>14} {'held: slow us':>14} {'ratio':>8}")
    for n in SIZES:
        x, y, out = (torch.randn(n, device="cuda") for _ in range(3))
        ptrs = (x.data_ptr(), y.data_ptr(), out.data_ptr(), n)
        for lib in libs * 20:  # warm-up
            lib.solve(*ptrs)
        torch.cuda.synchronize()
        order = [i % 2 if (i // 2) % 2 == 0 else 1 - i % 2 for i in range(2 * args.trials)]  # A B B A ...
        events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in order]
        for which, (start, end) in zip(order, events, strict=True):
            flush.zero_()
            torch.cuda._sleep(200_000)  # hold the stream so the events bracket device work only
            start.record()
            libs[which].solve(*ptrs)
            end.record()
        torch.cuda.synchronize()
        times: list[list[float]] = [[], []]
        for which, (start, end) in zip(order, events, strict=True):
            times[which].append(start.elapsed_time(end) * 1e3)
        cupti = {hold: cupti_durations(libs, ptrs, order, flush, hold) for hold in (False, True)}
        # Events tick in 32 ns on an H200: their medians are interpolated within the tick
        # (statistics.median_grouped), CUPTI's nanosecond durations need no such help.
        eb, es = (statistics.median_grouped(t, EVENT_TICK_US) for t in times)
        cb, cs = (statistics.median(t) for t in cupti[False])
        hb, hs = (statistics.median(t) for t in cupti[True])
        print(f"{n:>10} {eb:>14.3f} {es:>14.3f} {es / eb:>8.4f} {cb:>14.3f} {cs:>14.3f} {cs / cb:>8.4f} "
              f"{hb:>14.3f} {hs:>14.3f} {hs / hb:>8.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
