#!/usr/bin/env python3
"""Where does a fixed head/base bias of identical code come from? (issue 10, part 2)

A/A on the H200 read the CUDA vector add at N = 2^20 (~5.8 us) 0.28% faster at head than at base
over 10 runs, on shared buffers. This probe times the same kernel in one process with kbench-ci's
own CudaEventTimer, varying one thing at a time:

* ``hold``: one library, the stream held for different times before the start event;
* ``copies-fixed-hold``: two copies of the library (as base and head are two builds), loaded in
  the order given, timed A B B A ... with one fixed hold for both;
* ``copies-own-hold``: the same, but each side's warm-up re-sizes the hold, as the worker did;
* ``same-own-hold``: one library timed as both sides under the worker's schedule.

    python scripts/side_bias_probe.py [--n 1048576] [--rounds 60] [--order 12|21]   # on a GPU

Prints medians (and a 25%-trimmed mean, which is not stuck to the event clock's 32 ns steps)
and the second/first ratio of each part.
"""

from __future__ import annotations

import argparse
import ctypes
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from aa_and_regression import CVADD  # the very kernel source the compare suite uses

from kbench_ci.measure.timing import CudaEventTimer


def build(folder: Path) -> Path:
    source = folder / "cvadd.cu"
    library = folder / "cvadd_a.so"
    source.write_text(CVADD.format(extra=0.0))
    subprocess.run(["nvcc", "-shared", "-std=c++17", "-arch=sm_90", "-O3", "-Xcompiler", "-fPIC", "-o", str(library),
                    str(source)], check=True)
    shutil.copy(library, folder / "cvadd_b.so")
    return folder


def load(path: Path) -> ctypes.CDLL:
    lib = ctypes.CDLL(str(path))
    lib.solve.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int]
    return lib


def trimmed(samples: np.ndarray) -> float:
    low, high = np.percentile(samples, [25, 75])
    return float(samples[(samples >= low) & (samples <= high)].mean())


def interleave(timer: CudaEventTimer, fns: list, rounds: int, trials: int, hold_us: float | None) -> tuple[list, list]:
    """A B, B A, ... rounds; hold fixed (hold_us) or re-sized by each side's warm-up (None)."""
    samples: list[list[float]] = [[] for _ in fns]
    holds: list[list[float]] = [[] for _ in fns]
    for round_index in range(rounds):
        order = range(len(fns)) if round_index % 2 == 0 else reversed(range(len(fns)))
        for which in order:
            timer.warm_up(fns[which], 10 if round_index == 0 else 3)
            if hold_us is not None:
                timer.hold_us = hold_us
            holds[which].append(timer.hold_us)
            samples[which].extend(timer.measure_raw(fns[which], trials)[1:])
    return samples, holds


def report(name: str, samples: list[list[float]], holds: list[list[float]] | None = None) -> None:
    a, b = (np.array(s) * 1e3 for s in samples)
    line = (f"{name:<22} first: median {np.median(a):.3f} trimmed {trimmed(a):.4f} us | second: median {np.median(b):.3f} "
            f"trimmed {trimmed(b):.4f} us | second/first median {np.median(b) / np.median(a):.4f} "
            f"trimmed {trimmed(b) / trimmed(a):.4f}")
    if holds:
        line += f" | mean hold {np.mean(holds[0]):.1f} / {np.mean(holds[1]):.1f} us"
    print(line, flush=True)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=1 << 20)
    parser.add_argument("--rounds", type=int, default=60)
    parser.add_argument("--trials", type=int, default=101)
    parser.add_argument("--order", choices=("12", "21"), default="12", help="load copy a then b (12) or b then a (21)")
    args = parser.parse_args()
    folder = build(Path(tempfile.mkdtemp(prefix="bias-")))
    names = ["cvadd_a.so", "cvadd_b.so"] if args.order == "12" else ["cvadd_b.so", "cvadd_a.so"]
    libs = [load(folder / name) for name in names]
    device = torch.device("cuda")
    timer = CudaEventTimer(device)
    x, y, out = (torch.randn(args.n, device=device) for _ in range(3))
    ptrs = (x.data_ptr(), y.data_ptr(), out.data_ptr(), args.n)
    fns = [lambda lib=lib: lib.solve(*ptrs) for lib in libs]
    timer.warm_up(fns[0], 50)
    print(f"N = {args.n}, {args.rounds} rounds x {args.trials} calls, loaded {names[0]} then {names[1]}", flush=True)

    holds_us = (20.0, 40.0, 80.0, 160.0, 320.0)
    by_hold: list[list[float]] = [[] for _ in holds_us]
    for round_index in range(args.rounds // 2):
        for k in range(len(holds_us)) if round_index % 2 == 0 else reversed(range(len(holds_us))):
            timer.hold_us = holds_us[k]
            by_hold[k].extend(timer.measure_raw(fns[0], args.trials)[1:])
    base = np.array(by_hold[0]) * 1e3
    print("hold us:  " + "  ".join(
        f"{hold:.0f}: median {np.median(np.array(s) * 1e3):.3f} trimmed {trimmed(np.array(s) * 1e3) / trimmed(base):.4f}x"
        for hold, s in zip(holds_us, by_hold, strict=True)), flush=True)

    report("copies-fixed-hold", *interleave(timer, fns, args.rounds, args.trials, 50.0))
    report("copies-own-hold", *interleave(timer, fns, args.rounds, args.trials, None))
    report("same-own-hold", *interleave(timer, [fns[0], fns[0]], args.rounds, args.trials, None))
    report("copies-fixed-hold (2)", *interleave(timer, fns, args.rounds, args.trials, 50.0))
    return 0


if __name__ == "__main__":
    sys.exit(main())
