#!/usr/bin/env python3
"""Where the CUPTI escape audit's time goes (issue 10: at most 10% of a case's wall time).

    python scripts/audit_cost_probe.py          # on a GPU machine, ~15 s

Audits a vector add (torch, 2^22 floats) the way the worker does a case of two variants (one
trace for both, measure/escape.audit_together), ``--repeats`` times in one process, and prints
the median milliseconds of each step: starting the trace, the audited calls of both variants
(with the short settle between them), the final settle, stopping the trace (reading its events),
attributing the calls, and the whole audit of the case, next to the whole audit of one variant.
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
    timer.warm_up(call, 3)  # as before each round: the hold is sized from steady-state enqueues
    calls = {"base": call, "head": call}
    escape.audit_together(timer, calls)  # the first audit pays for CUPTI's start-up
    names = ("start trace", "calls", "settle", "stop trace", "attribute", "case (2 variants)", "one variant")
    steps: dict[str, list[float]] = {k: [] for k in names}
    hold_us = max(4 * timer.hold_us, escape.MIN_AUDIT_HOLD_US)
    for _ in range(args.repeats):
        marker = escape._Marker(device)
        t0 = time.perf_counter()
        trace = ActivityTrace()
        trace.__enter__()
        t1 = time.perf_counter()
        for index, fn in enumerate(calls.values()):
            if index:
                time.sleep(escape.BETWEEN_VARIANTS_SETTLE_S)
            timer.measure_isolated(fn, escape.AUDITED_CALLS, before_start=marker, after_end=marker, hold_us=hold_us)
        t2 = time.perf_counter()
        time.sleep(escape.SETTLE_S)
        torch.cuda.synchronize(device)
        t3 = time.perf_counter()
        trace.__exit__(None, None, None)
        t4 = time.perf_counter()
        escape.attribute_calls(trace.events, escape.AUDITED_CALLS * len(calls))
        t5 = time.perf_counter()
        for key, seconds in zip(names, (t1 - t0, t2 - t1, t3 - t2, t4 - t3, t5 - t4), strict=False):
            steps[key].append(seconds)
        started = time.perf_counter()
        escape.audit_together(timer, calls)
        steps["case (2 variants)"].append(time.perf_counter() - started)
        started = time.perf_counter()
        escape.audit_escapes(timer, call)
        steps["one variant"].append(time.perf_counter() - started)
    print(f"stream hold in the audit: {hold_us:.0f} us per call")
    for key, values in steps.items():
        print(f"{key:>18}: median {statistics.median(values) * 1e3:7.2f} ms  max {max(values) * 1e3:7.2f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
