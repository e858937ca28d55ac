#!/usr/bin/env python3
"""Where the CUPTI escape audit's time goes (issue 10: at most 10% of a case's wall time).

    python scripts/audit_cost_probe.py          # on a GPU machine, ~15 s

Audits a vector add (torch, 2^22 floats) the way the worker does, ``--repeats`` times in one
process, and prints the median seconds of each step: starting the trace, the audited calls,
the settle, stopping the trace (with reading its events), attributing the calls, and the whole.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from kbench_ci.measure import escape  # noqa: E402
from kbench_ci.measure.cupti import ActivityTrace  # noqa: E402
from kbench_ci.measure.timing import CudaEventTimer  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--n", type=int, default=1 << 22)
    args = parser.parse_args()
    device = torch.device("cuda")
    x, y, out = (torch.randn(args.n, device=device) for _ in range(3))

    def call() -> None:
        torch.add(x, y, out=out)

    timer = CudaEventTimer(device)
    timer.warm_up(call, 10)
    escape.audit_escapes(timer, call)  # the first audit pays for CUPTI's start-up
    steps: dict[str, list[float]] = {k: [] for k in ("start trace", "calls", "settle", "stop trace", "attribute", "whole audit")}
    for _ in range(args.repeats):
        marker = escape._Marker(device)
        t0 = time.perf_counter()
        trace = ActivityTrace()
        trace.__enter__()
        t1 = time.perf_counter()
        timer.measure_isolated(call, escape.AUDITED_CALLS, before_start=marker, after_end=marker,
                               hold_us=max(4 * timer.hold_us, escape.MIN_AUDIT_HOLD_US))
        t2 = time.perf_counter()
        time.sleep(escape.SETTLE_S)
        torch.cuda.synchronize(device)
        t3 = time.perf_counter()
        trace.__exit__(None, None, None)
        t4 = time.perf_counter()
        escape.attribute_calls(trace.events, escape.AUDITED_CALLS)
        t5 = time.perf_counter()
        for key, seconds in zip(steps, (t1 - t0, t2 - t1, t3 - t2, t4 - t3, t5 - t4), strict=False):
            steps[key].append(seconds)
        started = time.perf_counter()
        escape.audit_escapes(timer, call)
        steps["whole audit"].append(time.perf_counter() - started)
    for key, values in steps.items():
        print(f"{key:>12}: median {statistics.median(values) * 1e3:7.2f} ms  max {max(values) * 1e3:7.2f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
