#!/usr/bin/env python3
"""Where a compare's fixed start-up goes on this machine: each step timed in a fresh process.

    python3 scripts/probes/startup_probe.py [--cu scripts/probes/vadd.cu]

Prints the wall time of: the interpreter alone, importing torch, the CUDA context, importing
triton, kbench-ci's CLI import, nvcc's dependency scan (-M) and a full compile of the .cu, and in
one process the event timer's CUPTI calibration of its overhead (what the first timed case pays).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

STEPS = {
    "python -c pass": "pass",
    "import torch": "import torch",
    "import torch + CUDA context": "import torch; torch.empty(1, device='cuda'); torch.cuda.synchronize()",
    "import torch + triton + CUDA context": "import torch, triton; torch.empty(1, device='cuda'); torch.cuda.synchronize()",
    "import kbench_ci.cli.app": "import kbench_ci.cli.app",
    "CUDA context + event-overhead calibration": (
        "import time, torch; torch.empty(1, device='cuda'); torch.cuda.synchronize();"
        "from kbench_ci.measure.timing import CudaEventTimer; t = CudaEventTimer(torch.device('cuda'));"
        "s = time.perf_counter(); o = t.calibrate_overhead(); print(f'   calibrate_overhead {time.perf_counter() - s:.3f} s -> {o * 1e3:.3f} us')"
    ),
}


def timed(command: list[str]) -> float:
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - started
    if done.stdout.strip():
        print(done.stdout.rstrip())
    if done.returncode:
        print(f"   rc {done.returncode}: {done.stderr.strip()[-300:]}")
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--cu", type=Path, default=Path(__file__).with_name("vadd.cu"))
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    for name, code in STEPS.items():
        times = [timed([sys.executable, "-c", code]) for _ in range(args.repeats)]
        print(f"{name:45s} " + " ".join(f"{t:6.3f}" for t in times) + " s")
    with tempfile.TemporaryDirectory() as scratch:
        for name, command in {
            "nvcc -M (dependencies)": ["nvcc", "-M", str(args.cu)],
            "nvcc -shared (compile)": ["nvcc", "-O3", "-arch=sm_90", "-shared", "-Xcompiler", "-fPIC", str(args.cu), "-o", f"{scratch}/k.so"],
        }.items():
            times = [timed(command) for _ in range(args.repeats)]
            print(f"{name:45s} " + " ".join(f"{t:6.3f}" for t in times) + " s")


if __name__ == "__main__":
    main()
