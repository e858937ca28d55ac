"""Is kbench-ci's cuda_event median the kernel's real device time?

For each example and size: run `kbench-ci bench` (the product, end to end) and read the
solution's median from results.json; then, independently, run the same kernel on the same
inputs under torch.profiler (CUPTI kernel records, L2 flushed between calls by the same CacheFlush) and
take the median device duration of the kernel's own launches. Also shows what a naive event
timer (no held stream) would have reported.

Pass: |kbench - profiler| <= 3% of the profiler time, or <= 0.5 us when the kernel is under 10 us.

Usage (GPU machine, repo root):  python scripts/acceptance/timing_truth.py [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from kbench_ci.measure.impls.cuda_solution import load_cuda_solution
from kbench_ci.measure.impls.python_solution import load_python_solution
from kbench_ci.measure.timing import CacheFlush, CudaEventTimer
from kbench_ci.measure.usercode import load_problem

CASES = [
    # name, solution, ref, implementation, dims, kernel-name substring in the profiler
    ("softmax.cu small", "examples/softmax_cuda/softmax.cu", "examples/softmax_cuda/ref.py", "cuda-cpp", {"M": 512, "N": 1024}, "softmax"),
    ("softmax.cu large", "examples/softmax_cuda/softmax.cu", "examples/softmax_cuda/ref.py", "cuda-cpp", {"M": 16384, "N": 4096}, "softmax"),
    ("layernorm.py small", "examples/layernorm_triton/layernorm.py", "examples/layernorm_triton/ref.py", "triton", {"M": 256, "N": 1024}, "layernorm"),
    ("layernorm.py large", "examples/layernorm_triton/layernorm.py", "examples/layernorm_triton/ref.py", "triton", {"M": 16384, "N": 4096}, "layernorm"),
]
KINDS = [
    ("gemm.cu (CUTLASS)", "examples/gemm_cutlass/gemm.cu", "examples/gemm_cutlass/ref.py", "cutlass", {"M": 4096, "N": 4096, "K": 4096}, "device_kernel"),
    ("rmsnorm.py (Triton)", "examples/rmsnorm_triton/rmsnorm.py", "examples/rmsnorm_triton/ref.py", "triton", {"M": 8192, "N": 4096}, "rmsnorm"),
    ("add.py (CuTe DSL)", "examples/cute_dsl/add.py", "examples/cute_dsl/ref.py", "cute-dsl", {"M": 8192, "N": 8192}, "add_kernel"),
]
SUITES = {"engine": CASES, "kinds": KINDS}
TRIALS = 200


def kbench_median_us(name: str, solution: str, ref: str, implementation: str, dims: dict, out: Path) -> float:
    output_dir = out / name.replace(" ", "_").replace(".", "_")
    command = [
        sys.executable, "-m", "kbench_ci", "bench", solution, f"--implementation={implementation}",
        f"--ref={ref}", f"--output-dir={output_dir}", f"--num-trials={TRIALS}", "--num-warmup=20",
        *(f"--{k}={v}" for k, v in dims.items()),
    ]
    completed = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=False)
    if completed.returncode != 0:
        raise SystemExit(f"kbench-ci bench failed for {name}:\n{completed.stdout}\n{completed.stderr}")
    data = json.loads((output_dir / "results.json").read_text())
    samples = [s for r in data["case"]["variants"][0]["rounds_ms"] for s in r]
    return statistics.median(samples) * 1e3


def load_kernel(solution: str, ref: str, implementation: str, dims: dict):
    device = torch.device("cuda:0")
    problem = load_problem(ROOT / ref)
    if implementation in ("cuda-cpp", "cutlass"):
        loaded = load_cuda_solution(ROOT / solution, kind=implementation, label="solution", problem=problem,
                                    dims=dims, device=device, ptr_sizes={}, ptr_size=None)
    else:
        loaded = load_python_solution(ROOT / solution, kind=implementation, label="solution", dims=dims, device=device)
    kwargs = loaded.make_inputs(42).fresh_copy()
    if loaded.kernel.compile is not None:
        loaded.kernel.compile(kwargs)
    return lambda: loaded.kernel.call(kwargs)


def kernel_durations_us(profile, kernel_substring: str) -> list[float]:
    """CUPTI device durations of the recorded kernels whose name contains ``kernel_substring``."""
    return [
        event.device_time_total if hasattr(event, "device_time_total") else event.cuda_time_total
        for event in profile.events()
        if kernel_substring in event.name and getattr(event, "device_type", None) == torch.autograd.DeviceType.CUDA
    ]


def profiler_median_us(fn, kernel_substring: str) -> float:
    flush = CacheFlush(torch.device("cuda:0"), enabled=True)
    for _ in range(20):
        fn()
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as profile:
        for _ in range(TRIALS):
            flush()
            fn()
        torch.cuda.synchronize()
    durations = kernel_durations_us(profile, kernel_substring)
    if len(durations) < TRIALS // 2:
        names = sorted({e.name for e in profile.events()})[:20]
        raise SystemExit(f"profiler saw {len(durations)} '{kernel_substring}' kernels; names: {names}")
    return statistics.median(durations)


def same_launch_us(fn, kernel_substring: str, hold_us: float | None) -> tuple[float, float, float]:
    """kbench's own timer and CUPTI on the very same launches (no run-to-run clock drift).

    Returns (event median less the calibrated overhead, CUPTI median of those launches, hold us).
    ``hold_us`` None keeps the hold the timer sized itself from the enqueue time.
    """
    timer = CudaEventTimer(torch.device("cuda:0"))
    timer.warm_up(fn, 20)
    overhead_ms = timer.calibrate_overhead()
    if hold_us is not None:
        timer.hold_us = hold_us
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as profile:
        raw_ms = timer.measure_raw(fn, TRIALS)
    durations = kernel_durations_us(profile, kernel_substring)
    corrected = statistics.median(raw_ms) * 1e3 - overhead_ms * 1e3
    return corrected, statistics.median(durations) if durations else float("nan"), timer.hold_us


def naive_event_median_us(fn) -> float:
    flush = CacheFlush(torch.device("cuda:0"), enabled=True)
    samples = []
    for _ in range(TRIALS):
        flush()
        torch.cuda.synchronize()  # GPU idle at the start event: the naive mistake
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        samples.append(start.elapsed_time(end) * 1e3)
    return statistics.median(samples)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, default=Path("timing_truth_out"))
    parser.add_argument("--suite", choices=sorted(SUITES), default="engine")
    parser.add_argument("--only", default=None, help="run only cases whose name contains this")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    rows = []
    diagnostics: list[str] = []
    failures = 0
    for name, solution, ref, implementation, dims, substring in SUITES[args.suite]:
        if args.only and args.only not in name:
            continue
        ours = kbench_median_us(name, solution, ref, implementation, dims, args.out)
        fn = load_kernel(solution, ref, implementation, dims)
        truth = profiler_median_us(fn, substring)
        naive = naive_event_median_us(fn)
        for hold in (None, 100.0):
            events_us, cupti_us, used_hold = same_launch_us(fn, substring, hold)
            diagnostics.append(f"{name:<20} hold {used_hold:7.0f} us: events-overhead {events_us:9.3f} us, "
                               f"CUPTI same launches {cupti_us:9.3f} us, diff {events_us - cupti_us:+7.3f} us")
        error_us = ours - truth
        allowed = 0.5 if truth < 10 else 0.03 * truth
        ok = abs(error_us) <= allowed
        failures += not ok
        rows.append((name, ", ".join(f"{k}={v}" for k, v in dims.items()), ours, truth, error_us, 100 * error_us / truth, naive, "PASS" if ok else "FAIL"))
    header = f"{'case':<20} {'dims':<16} {'kbench us':>10} {'profiler us':>12} {'diff us':>8} {'diff %':>7} {'naive us':>9}  result"
    print(header)
    print("-" * len(header))
    for row in rows:
        print(f"{row[0]:<20} {row[1]:<16} {row[2]:>10.3f} {row[3]:>12.3f} {row[4]:>8.3f} {row[5]:>7.2f} {row[6]:>9.3f}  {row[7]}")
    print("\nsame launches timed both ways (kbench's timer under torch.profiler):")
    print("\n".join(diagnostics))
    (args.out / f"timing_truth_{args.suite}.json").write_text(json.dumps(rows, indent=1))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
