#!/usr/bin/env python3
"""Honest figures under the judge: does the judge time a kernel as an older revision's in-process
worker does, and as ncu does?

For each kernel (tests/fixtures/truth: the Triton tutorial matmul at 4096^3, the Triton softmax at
4096x4096, the CUDA vector add at 2^24), in one call, interleaved (old, process, judge, old, ...):

  old       `kbench-ci bench` of an older revision (``--old-code DIR``: a folder holding that
            revision's kbench_ci/, from ``git archive REV kbench_ci``), put first
            on PYTHONPATH; its own worker, in process
  process   `kbench-ci bench` of this checkout, ``--isolation process``
  judge     `kbench-ci bench` of this checkout, ``--isolation judge``

each run's timed median read from its results.json; printed per kernel: the median over the
repeats of each, and judge - old in us and %. Pass: within 1%.

``--ncu``: the vector add at 2^24 under ``ncu --clock-control none --cache-control none
--metrics gpu__time_duration.sum``, each call after the same staging, the same L2 fill (kbench-ci's
CacheFlush: 2x the L2, 120 MiB on an H200) and a hold, in this script's own process
(``--probe``); the median over the profiled launches, next to the judge's. Pass:
within 1.5%.

    python3 scripts/acceptance/judge_truth.py --old-code .carry/old --repeats 2 --ncu [--only vadd]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
T = ROOT / "tests" / "fixtures" / "truth"


@dataclass(frozen=True)
class Kernel:
    name: str
    solution: Path
    ref: Path
    implementation: str
    dims: dict[str, int]
    #: ncu's -k filter (the kernel's function name)
    regex: str


KERNELS = [
    Kernel("triton matmul 4096^3", T / "matmul.py", T / "matmul_ref.py", "triton", {"M": 4096, "N": 4096, "K": 4096}, "matmul_kernel"),
    Kernel("triton softmax 4096^2", T / "softmax.py", T / "softmax_ref.py", "triton", {"M": 4096, "N": 4096}, "softmax_kernel"),
    Kernel("vadd.cu 2^24", T / "vadd.cu", T / "vadd_ref.py", "cuda-cpp", {"N": 2**24}, "vadd_kernel"),
]
NCU_WARMUP = 5
NCU_CALLS = 30
HOLD_CYCLES = 200_000


def bench_median_us(kernel: Kernel, mode: str, old: Path | None, out: Path, trials: int) -> float:
    """One `kbench-ci bench` of ``kernel`` (mode: old, process or judge); its timed median."""
    output_dir = Path(tempfile.mkdtemp(prefix=f"{mode}-", dir=out))
    env = dict(os.environ)
    path = [str(old) if mode == "old" and old is not None else str(ROOT)]
    env["PYTHONPATH"] = os.pathsep.join([*path, *[p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]])
    env["KBENCH_CI_CACHE_DIR"] = str(out / f"cache-{'old' if mode == 'old' else 'new'}")
    command = [
        sys.executable, "-m", "kbench_ci", "bench", str(kernel.solution), f"--implementation={kernel.implementation}",
        f"--ref={kernel.ref}", f"--output-dir={output_dir}", f"--num-trials={trials}", "--baselines=none",
        *(f"--{k}={v}" for k, v in kernel.dims.items()), *([] if mode == "old" else [f"--isolation={mode}"]),
    ]
    completed = subprocess.run(command, cwd=out, env=env, capture_output=True, text=True, check=False)
    if completed.returncode != 0:
        raise SystemExit(f"{mode} bench of {kernel.name} failed (exit {completed.returncode}):\n"
                         f"{completed.stdout[-3000:]}\n{completed.stderr[-3000:]}")
    data = json.loads((output_dir / "results.json").read_text())
    variant = next(v for v in data["case"]["variants"] if v["label"] == "solution")
    return statistics.median(s for r in variant["rounds_ms"] for s in r) * 1e3


def build_libraries(kernels: list[Kernel], out: Path) -> None:
    """Each cuda-cpp kernel's library, once, with this code's `kbench-ci build`: bench loads a
    library and does not compile one, and the old code's bench finds the same file."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), *[p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]])
    for kernel in kernels:
        if kernel.implementation != "cuda-cpp":
            continue
        completed = subprocess.run([sys.executable, "-m", "kbench_ci", "build", str(kernel.solution)], cwd=out, env=env,
                                   capture_output=True, text=True, check=False)
        if completed.returncode != 0:
            raise SystemExit(f"build of {kernel.name} failed (exit {completed.returncode}):\n{completed.stderr[-3000:]}")


def run_probe(name: str) -> int:
    """The kernel's calls as ncu should see them: staged (speed_of_light_truth.py's stager: another
    content copied in, outputs poisoned), L2 filled, held, called (one stream)."""
    import torch

    from kbench_ci.measure.timing import CacheFlush

    sys.path.insert(0, str(ROOT / "scripts" / "acceptance"))
    from speed_of_light_truth import _load  # the same loading and staging as speed_of_light_truth.py

    kernel = next(k for k in KERNELS if k.name == name)
    device, call, stage = _load(kernel)  # type: ignore[arg-type]  (a Kernel of the same fields)
    flush = CacheFlush(device, enabled=True)
    for index in range(NCU_WARMUP + NCU_CALLS):
        stage.before(index)
        flush()
        torch.cuda._sleep(HOLD_CYCLES)
        call()
    torch.cuda.synchronize(device)
    print(f"probe: {flush.nbytes / 2**20:.0f} MiB fill before each of {NCU_WARMUP + NCU_CALLS} calls")
    return 0


def ncu_median_us(kernel: Kernel, ncu: str) -> float:
    command = [ncu, "--clock-control", "none", "--cache-control", "none", "--metrics", "gpu__time_duration.sum",
               "-k", f"regex:{kernel.regex}", "--launch-skip", str(NCU_WARMUP), "--launch-count", str(NCU_CALLS), "--csv",
               sys.executable, str(Path(__file__).resolve()), "--probe", kernel.name]
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), *[p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]])
    completed = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, check=False)
    sys.path.insert(0, str(ROOT / "scripts" / "acceptance"))
    from speed_of_light_truth import parse_ncu_csv  # the same CSV reader as speed_of_light_truth.py

    launches = parse_ncu_csv(completed.stdout, kernel.regex)
    times = [launch.time_ns / 1e3 for launch in launches if launch.time_ns is not None]
    if completed.returncode != 0 or not times:
        raise SystemExit(f"ncu failed (exit {completed.returncode}):\n{completed.stdout[-3000:]}\n{completed.stderr[-3000:]}")
    print(f"  ncu: {len(times)} launches, {min(times):.2f}..{max(times):.2f} us", flush=True)
    return statistics.median(times)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--old-code", type=Path, help="a folder holding an older revision's kbench_ci/")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--trials", type=int, default=100, help="--num-trials of each bench")
    parser.add_argument("--only", help="a substring of the kernels' names")
    parser.add_argument("--ncu", nargs="?", const="auto", help="also the vector add under ncu (its path; default: found)")
    parser.add_argument("--out", type=Path, default=Path(tempfile.gettempdir()) / "judge_truth")
    parser.add_argument("--probe", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.probe:
        return run_probe(args.probe)
    args.out.mkdir(parents=True, exist_ok=True)
    if args.old_code is not None:
        args.old_code = args.old_code.resolve()  # each bench runs in a folder under --out
    if args.ncu == "auto":
        sys.path.insert(0, str(ROOT / "scripts" / "acceptance"))
        from speed_of_light_truth import find_ncu

        args.ncu = find_ncu(None)
        if args.ncu is None:
            raise SystemExit("no ncu found: pass --ncu PATH")
    modes = [*(["old"] if args.old_code else []), "process", "judge"]
    kernels = [k for k in KERNELS if args.only is None or args.only in k.name]
    build_libraries(kernels, args.out)
    rows = []
    for kernel in kernels:
        medians: dict[str, list[float]] = {mode: [] for mode in modes}
        for repeat in range(args.repeats):
            order = modes[repeat % len(modes):] + modes[: repeat % len(modes)]
            for mode in order:
                medians[mode].append(bench_median_us(kernel, mode, args.old_code, args.out, args.trials))
                print(f"{kernel.name} repeat {repeat + 1} {mode}: {medians[mode][-1]:.2f} us", flush=True)
        row = {mode: statistics.median(values) for mode, values in medians.items()}
        if args.ncu and "vadd" in kernel.name:
            row["ncu"] = ncu_median_us(kernel, args.ncu)
        rows.append((kernel, row))
    print("\n| kernel | " + " | ".join(modes) + " | judge - old | judge - ncu |")
    print("| --- | " + " | ".join("---" for _ in modes) + " | --- | --- |")
    for kernel, row in rows:
        cells = [f"{row[mode]:.2f}" for mode in modes]
        old = f"{row['judge'] - row['old']:+.2f} us ({(row['judge'] / row['old'] - 1) * 100:+.2f}%)" if "old" in row else "-"
        ncu = (f"{row['judge'] - row['ncu']:+.2f} us ({(row['judge'] / row['ncu'] - 1) * 100:+.2f}%; ncu {row['ncu']:.2f})"
               if "ncu" in row else "-")
        print(f"| {kernel.name} | " + " | ".join(cells) + f" | {old} | {ncu} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
