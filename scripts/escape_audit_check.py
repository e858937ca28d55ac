#!/usr/bin/env python3
"""Figures for the CUPTI audit (issue 10, part 1), in one process on a GPU:

- for each fixture (honest, honest multi-stream, and the three cheats that escape the timer):
  the audit's verdict, the timed median (kbench-ci's CudaEventTimer, cold L2) next to CUPTI's
  first-to-last span of the audited calls, and what escaped;
- that samples taken after an audit match those taken before it (CUPTI left running, or a
  profiler not torn down, would slow later launches): the median of 5 rounds before and 5
  after, and their ratio;
- the audit's own cost, CUPTI's start-up included (the first audit of the process pays it).

    python scripts/escape_audit_check.py [--n 4194304] [--rounds 5] [--trials 100]   # on a GPU machine
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import time
from pathlib import Path
from typing import Any

import torch

from kbench_ci.measure.escape import audit_escapes
from kbench_ci.measure.timing import CudaEventTimer

FIXTURES = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "cheats_py"
# honest twice: the first audit of the process starts CUPTI, the last shows whether that lasts
NAMES = ("honest", "multi_stream_honest", "side_stream_unjoined", "side_stream_early", "host_thread", "honest")


def load(name: str) -> Any:
    spec = importlib.util.spec_from_file_location(f"fixture_{name}", FIXTURES / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def median_of_rounds(timer: CudaEventTimer, fn: Any, rounds: int, trials: int) -> float:
    return statistics.median(s for _ in range(rounds) for s in timer.measure(fn, trials))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=1 << 22)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--trials", type=int, default=100)
    args = parser.parse_args()
    device = torch.device("cuda", 0)
    torch.manual_seed(0)
    x = torch.randn(args.n, device=device)
    y = torch.empty_like(x)
    timer = CudaEventTimer(device)
    print(f"{'fixture':<22}{'verdict':>9}{'timed us':>11}{'CUPTI us':>11}{'diff':>9}{'before us':>11}"
          f"{'after us':>11}{'after/before':>14}{'audit s':>9}  streams / escaped")
    for name in NAMES:
        module = load(name)

        def fn(module: Any = module) -> object:
            return module.run_kernel(x=x, y=y)

        timer.warm_up(fn, 10)
        before = median_of_rounds(timer, fn, args.rounds, args.trials)
        started = time.perf_counter()
        audit = audit_escapes(timer, fn)
        wall = time.perf_counter() - started
        after = median_of_rounds(timer, fn, args.rounds, args.trials)
        span = audit.cupti_median_ms
        diff = f"{(before / span - 1) * 100:+.2f}%" if span else "—"
        print(f"{name:<22}{audit.status:>9}{before * 1e3:>11.2f}{(span or 0) * 1e3:>11.2f}{diff:>9}"
              f"{before * 1e3:>11.2f}{after * 1e3:>11.2f}{after / before:>14.4f}{wall:>9.3f}  "
              f"{audit.streams} / {[round(e * 1e3, 1) for e in audit.escaped_ms]} us")
        if audit.detail:
            print(f"    {audit.detail}")
    print(f"event overhead subtracted: {timer.event_overhead_ms * 1e3 if timer.event_overhead_ms else 0:.3f} us; "
          f"{timer.describe()}")


if __name__ == "__main__":
    main()
