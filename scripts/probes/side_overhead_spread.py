"""How far apart would the event overhead read if each side's worker calibrated its own?

Until the fourteenth session's change, every side's worker under ``--isolation judge``
calibrated the event overhead itself (kbench_ci.side.serve made its timer with no overhead
given), after a warm-up of its own call had sized its hold: one more draw of the calibration's
noise per side and per case, subtracted from that side's samples only. The judge now calibrates
once and takes the same figure off every side (kbench_ci.judge.case.Judge.event_overhead_ms).

This probe starts ``--processes`` fresh processes that each do what a side's worker did: warm up
a 2^20-float vector add (sizing the hold from its enqueue times), then calibrate. Printed: each
process's hold and overhead, and the spread of the overheads as a share of the vector add's
~5.3 us, which is the A/A bias the old way could put between two sides.

    python3 scripts/probes/side_overhead_spread.py --processes 8
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

import torch
import torch.multiprocessing as mp

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from kbench_ci.measure.timing import CudaEventTimer  # noqa: E402

VADD_US = 5.3


def one_process(queue, flush_l2: bool) -> None:  # type: ignore[no-untyped-def]
    device = torch.device("cuda")
    a, b, c = (torch.rand(1 << 20, device=device) for _ in range(3))
    timer = CudaEventTimer(device, flush_l2=flush_l2)
    timer.warm_up(lambda: torch.add(a, b, out=c), 10)
    hold_us = timer.hold_us
    overhead_ms = timer.calibrate_overhead()
    queue.put((hold_us, overhead_ms * 1e3, timer.overhead_source))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--processes", type=int, default=8)
    parser.add_argument("--flush", action="store_true", help="flush L2 as the in-process worker does (a side did not)")
    args = parser.parse_args()
    context = mp.get_context("spawn")
    overheads = []
    for index in range(args.processes):
        queue = context.Queue()
        process = context.Process(target=one_process, args=(queue, args.flush))
        process.start()
        hold_us, overhead_us, source = queue.get(timeout=300)
        process.join()
        overheads.append(overhead_us)
        print(f"process {index}: hold {hold_us:7.1f} us, event overhead {overhead_us:.3f} us ({source})", flush=True)
    spread = max(overheads) - min(overheads)
    print(f"overheads: median {statistics.median(overheads):.3f} us, min {min(overheads):.3f}, max {max(overheads):.3f}, "
          f"spread {spread:.3f} us = {100 * spread / VADD_US:.1f}% of a {VADD_US} us vector add")


if __name__ == "__main__":
    main()
