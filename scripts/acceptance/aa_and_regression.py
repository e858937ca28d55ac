#!/usr/bin/env python3
"""GPU acceptance test of `kbench-ci compare`: no false alarms, and a 2% regression caught.

    python scripts/acceptance/aa_and_regression.py --runs 10          # on a GPU machine (~12-13 min on an H200)
    python scripts/acceptance/aa_and_regression.py --runs 10 --parts aa           # ~7.5 min: one part per
    python scripts/acceptance/aa_and_regression.py --runs 10 --parts regression   # ~5.5 min  10-minute slot
    python scripts/acceptance/aa_and_regression.py --smoke            # on a CPU: 1 run, tiny sizes, not judged

It builds a throw-away git repository with a suite of Triton kernels (vector add, softmax,
layernorm; 2 shapes each = 6 cases, each 20-200 us on an H200), then:

1. A/A: base and head are the same commit. ``compare`` runs ``--runs`` times over all 6 cases;
   the count of ``slower`` verdicts must be 0.
2. Regression: at head the vector add launches 2% more programs, which redo the first 2% of the
   blocks (identical results, 2% more memory traffic: ~2% slower for this bandwidth-bound kernel).
   ``compare --threshold 0.01 --kernel cvadd`` runs ``--runs`` times; each case at N >= 2^22
   must be ``slower`` in at least 9 of 10 runs (``--min-detections``). N = 2^20 is shown, not
   judged: there the kernel is launch-bound and 2% more programs are not 2% more time.
3. The wall time of that compare and its split (setup/git, build, load, correctness, timing),
   read from results.json.

A table at the end says what passed; the exit code is 0 only when everything did (always 0 in
``--smoke`` mode, where only a clean run is required: a CPU cannot time a 2% change).

Needs torch, triton, typer, tabulate and gitpython, and kbench_ci (this repository is put on
PYTHONPATH, so an install is not needed).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]

# The console script's entry point, without needing kbench-ci installed (REPO is on PYTHONPATH).
CLI_SHIM = "import sys; sys.argv[0] = 'kbench-ci'; from kbench_ci.cli.app import main; main()"

VADD = '''\
"""out = x + y. EXTRA_WORK > 0 launches that fraction of extra programs, which redo the first
blocks (same values written again): more memory traffic, same result."""
import torch
import triton
import triton.language as tl

EXTRA_WORK = {extra!r}
BLOCK = 1024


@triton.jit
def _add_kernel(x_ptr, y_ptr, out_ptr, n, n_blocks, BLOCK: tl.constexpr):
    block = tl.program_id(0) % n_blocks
    offsets = block * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask=mask)
    y = tl.load(y_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, x + y, mask=mask)


def setup(N, **_):
    x = torch.randn(N, dtype=torch.float32)
    y = torch.randn(N, dtype=torch.float32)
    out = torch.empty(N, dtype=torch.float32)
    return {{"inputs": {{"x": x, "y": y, "out": out}}, "outputs": ["out"]}}


def run_kernel(x, y, out, **_):
    n = x.numel()
    n_blocks = triton.cdiv(n, BLOCK)
    grid = n_blocks + int(round(n_blocks * EXTRA_WORK))
    _add_kernel[(grid,)](x, y, out, n, n_blocks, BLOCK=BLOCK)
'''

VADD_REF = '''\
def reference(x, y, **_):
    return x + y
'''

SOFTMAX = '''\
import torch
import triton
import triton.language as tl


@triton.jit
def _softmax_kernel(x_ptr, y_ptr, n_cols, stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * stride + cols, mask=mask, other=-float("inf"))
    x = x - tl.max(x, axis=0)
    numerator = tl.exp(x)
    y = numerator / tl.sum(numerator, axis=0)
    tl.store(y_ptr + row * stride + cols, y, mask=mask)


def setup(M, N, **_):
    x = torch.randn(M, N, dtype=torch.float32)
    y = torch.empty(M, N, dtype=torch.float32)
    return {"inputs": {"x": x, "y": y}, "outputs": ["y"]}


def run_kernel(x, y, **_):
    M, N = x.shape
    BLOCK = triton.next_power_of_2(N)
    num_warps = 8 if BLOCK >= 2048 else 4
    _softmax_kernel[(M,)](x, y, N, x.stride(0), BLOCK=BLOCK, num_warps=num_warps)
'''

SOFTMAX_REF = '''\
import torch


def reference(x, **_):
    return torch.softmax(x, dim=-1)
'''

LAYERNORM = '''\
import torch
import triton
import triton.language as tl


@triton.jit
def _layernorm_kernel(x_ptr, w_ptr, b_ptr, y_ptr, N, stride, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < N
    x = tl.load(x_ptr + row * stride + cols, mask=mask, other=0.0).to(tl.float32)
    mean = tl.sum(x, axis=0) / N
    centered = tl.where(mask, x - mean, 0.0)
    variance = tl.sum(centered * centered, axis=0) / N
    rstd = 1.0 / tl.sqrt(variance + eps)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    b = tl.load(b_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    tl.store(y_ptr + row * stride + cols, (centered * rstd * w + b).to(y_ptr.dtype.element_ty), mask=mask)


def setup(M, N, **_):
    x = torch.randn(M, N, dtype=torch.float32)
    weight = torch.randn(N, dtype=torch.float32)
    bias = torch.randn(N, dtype=torch.float32)
    y = torch.empty(M, N, dtype=torch.float32)
    return {"inputs": {"x": x, "weight": weight, "bias": bias, "y": y, "eps": 1e-5}, "outputs": ["y"]}


def run_kernel(x, weight, bias, y, eps, **_):
    M, N = x.shape
    BLOCK = triton.next_power_of_2(N)
    num_warps = min(max(BLOCK // 256, 1), 16)
    _layernorm_kernel[(M,)](x, weight, bias, y, N, x.stride(0), eps, BLOCK=BLOCK, num_warps=num_warps)
'''

# CUDA C++: out = x + y, a grid-stride loop over blocks; EXTRA > 0 launches that fraction of
# extra blocks, which redo the first blocks (same values written again): more memory traffic,
# same result. Built by compare with nvcc, launched by solve() on the default stream.
CVADD = '''\
#include <cuda_runtime.h>

__global__ void add_kernel(const float* x, const float* y, float* out, int n, int n_blocks) {{
    int block = blockIdx.x % n_blocks;
    int i = block * blockDim.x + threadIdx.x;
    if (i < n) out[i] = x[i] + y[i];
}}

extern "C" void solve(const float* x, const float* y, float* out, int N) {{
    const int threads = 256;
    int n_blocks = (N + threads - 1) / threads;
    int extra = (int)(n_blocks * {extra!r});
    add_kernel<<<n_blocks + extra, threads>>>(x, y, out, N, n_blocks);
}}
'''

# CUDA C++: the same add rewritten as a grid-stride loop over float4s in 8 blocks an SM (a real
# speed-up of this bandwidth-bound kernel at 2^22 and 2^24: the `faster` part's head)
CVADD_FAST = '''\
#include <cuda_runtime.h>

__global__ void add_kernel(const float4* x, const float4* y, float4* out, const float* xs, const float* ys, float* outs,
                           int n4, int n) {
    int stride = gridDim.x * blockDim.x;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n4; i += stride) {
        float4 a = x[i], b = y[i];
        out[i] = make_float4(a.x + b.x, a.y + b.y, a.z + b.z, a.w + b.w);
    }
    for (int i = n4 * 4 + blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) outs[i] = xs[i] + ys[i];
}

extern "C" void solve(const float* x, const float* y, float* out, int N) {
    int device = 0, sms = 0;
    cudaGetDevice(&device);
    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
    add_kernel<<<sms * 8, 256>>>((const float4*)x, (const float4*)y, (float4*)out, x, y, out, N / 4, N);
}
'''

CVADD_REF = '''\
def reference(x, y, out, **_):
    out.copy_(x + y)
'''

LAYERNORM_REF = '''\
import torch


def reference(x, weight, bias, eps, **_):
    return torch.nn.functional.layer_norm(x, (x.shape[-1],), weight, bias, eps)
'''

# H200 (about 4 TB/s): vadd moves 12 bytes per element, softmax and layernorm 8 per element.
GPU_SHAPES = {
    "cvadd": [{"N": 1 << 20}, {"N": 1 << 22}, {"N": 1 << 24}],  # 12 MB .. 200 MB: ~5 us .. ~55 us
    "vadd": [{"N": 1 << 24}, {"N": 1 << 25}],  # 200 MB, 400 MB: ~55 us, ~105 us
    "softmax": [{"M": 4096, "N": 4096}, {"M": 16384, "N": 4096}],  # 134 MB, 537 MB: ~40 us, ~150 us
    "layernorm": [{"M": 8192, "N": 2048}, {"M": 16384, "N": 4096}],  # 134 MB, 537 MB
}
# No CUDA C++ on the CPU: the smoke suite is the Triton kernels alone.
SMOKE_SHAPES = {
    "vadd": [{"N": 2048}],
    "softmax": [{"M": 8, "N": 64}],
    "layernorm": [{"M": 8, "N": 64}],
}
GPU_DEFAULTS = {"num_warmup": 10, "num_trials": 100, "discard_first": 1, "correctness_trials": 3, "rounds": 10}
SMOKE_DEFAULTS = {"num_warmup": 1, "num_trials": 10, "discard_first": 1, "correctness_trials": 1, "rounds": 2, "time_budget": 1}

#: --time-budget for every compare (None: the suite's default); set from the command line
TIME_BUDGET: list[str | None] = [None]

#: the regression part judges detection at these sizes and above (N >= 2^22)
MIN_JUDGED_N = 1 << 22
SLOWED = "cvadd"  # the regression part's kernel (the Triton vadd on the CPU smoke run)


def _toml_value(value: Any) -> str:
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k} = {v}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    return str(value)


def suite_toml(shapes: dict[str, list[dict[str, int]]], defaults: dict[str, int]) -> str:
    lines = ["[defaults]", *(f"{k} = {v}" for k, v in defaults.items()), 'threshold = "2%"']
    for name in shapes:
        cuda = name == "cvadd"
        lines += ["", "[[kernels]]", f'name = "{name}"', f'solution = "kernels/{name}.{"cu" if cuda else "py"}"',
                  f'ref = "kernels/{name}_ref.py"', f'implementation = "{"cuda-cpp" if cuda else "triton"}"', "timeout = 300",
                  f"shapes = {_toml_value(shapes[name])}"]
    return "\n".join(lines) + "\n"


def git(cwd: Path, *args: str) -> str:
    env = {**os.environ, "GIT_CONFIG_NOSYSTEM": "1", "GIT_AUTHOR_NAME": "kbench", "GIT_AUTHOR_EMAIL": "k@example.invalid",
           "GIT_COMMITTER_NAME": "kbench", "GIT_COMMITTER_EMAIL": "k@example.invalid"}
    return subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True, text=True).stdout.strip()


def make_repo(root: Path, *, smoke: bool, slowdown: float) -> None:
    """main: the suite. slower: vadd does `slowdown` more work."""
    root.mkdir(parents=True)
    git(root, "init", "-q", "-b", "main")
    git(root, "config", "commit.gpgsign", "false")
    files = {
        "kbench.toml": suite_toml(SMOKE_SHAPES if smoke else GPU_SHAPES, SMOKE_DEFAULTS if smoke else GPU_DEFAULTS),
        "kernels/cvadd.cu": CVADD.format(extra=0.0), "kernels/cvadd_ref.py": CVADD_REF,
        "kernels/vadd.py": VADD.format(extra=0.0), "kernels/vadd_ref.py": VADD_REF,
        "kernels/softmax.py": SOFTMAX, "kernels/softmax_ref.py": SOFTMAX_REF,
        "kernels/layernorm.py": LAYERNORM, "kernels/layernorm_ref.py": LAYERNORM_REF,
        ".gitignore": "__pycache__/\n*.so\n",
    }
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "suite")
    git(root, "branch", "slower")
    git(root, "checkout", "-q", "slower")
    (root / "kernels/cvadd.cu").write_text(CVADD.format(extra=slowdown))
    (root / "kernels/vadd.py").write_text(VADD.format(extra=slowdown))
    git(root, "commit", "-q", "-am", f"cvadd and vadd: {slowdown:.0%} more work")
    git(root, "checkout", "-q", "main")
    git(root, "branch", "faster")
    git(root, "checkout", "-q", "faster")
    (root / "kernels/cvadd.cu").write_text(CVADD_FAST)
    git(root, "commit", "-q", "-am", "cvadd: a grid-stride loop over float4s")
    git(root, "checkout", "-q", "main")


def compare(repo: Path, out: Path, *args: str, device: str) -> tuple[int, dict[str, Any], float, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    env.setdefault("PYTHONUNBUFFERED", "1")
    if TIME_BUDGET[0] is not None:
        args = (*args, "--time-budget", TIME_BUDGET[0])
    started = time.perf_counter()
    completed = subprocess.run(
        [sys.executable, "-c", CLI_SHIM, "compare", "--device", device, "--output-dir", str(out), *args],
        cwd=repo, env=env, capture_output=True, text=True,
    )
    wall = time.perf_counter() - started
    if completed.returncode not in (0, 1):
        raise SystemExit(
            f"compare exited {completed.returncode}:\n{completed.stdout[-4000:]}\n{completed.stderr[-4000:]}"
        )
    data = json.loads((out / "results.json").read_text())
    return completed.returncode, data, wall, completed.stderr


def medians_ratio(case: dict[str, Any]) -> float | None:
    """head/base of the two sides' medians over all their timed calls, for a case whose verdict
    gave no ratio (under the judge, a gain held `unchanged` by the clock's resolution drops its
    estimate): without it, the mean head/base over runs would leave out the very runs where the
    head read faster, and a side's bias would hide in the count."""
    base, head = side_median(case, "base"), side_median(case, "head")
    if base is None or head is None:
        return None
    return head / base if base > 0 else None


def side_median(case: dict[str, Any], side: str) -> float | None:
    """The median of one side's timed calls over all its rounds (ms), None where it has none."""
    samples = [sample for round_ms in (case.get(side) or {}).get("rounds_ms") or [] for sample in round_ms]
    return statistics.median(samples) if samples else None


def dump_case(case: dict[str, Any]) -> dict[str, Any]:
    """What a later look at one case-run needs: its verdicts and both sides' raw rounds (ms)."""
    first = case.get("first_measurement") or {}
    return {
        **{key: case.get(key) for key in ("case_id", "verdict", "ratio", "ci_low", "ci_high", "p_value", "n_rounds", "remeasured")},
        "first_verdict": first.get("verdict"),
        "first_rounds": (first.get("estimate") or {}).get("n_rounds"),
        "first_ratio": (first.get("estimate") or {}).get("ratio"),
        "fresh_inputs": {side: (case.get(side) or {}).get("fresh_inputs") for side in ("base", "head")},
        "base_rounds_ms": (case.get("base") or {}).get("rounds_ms"),
        "head_rounds_ms": (case.get("head") or {}).get("rounds_ms"),
        "escape_audit": {side: (case.get(side) or {}).get("escape_audit") for side in ("base", "head")},
        "outside_clock": {side: {key: value for key, value in ((case.get(side) or {}).get("outside_clock") or {}).items()
                                 if not isinstance(value, list)} for side in ("base", "head")},
        "messages": {side: (case.get(side) or {}).get("message") for side in ("base", "head")},
        "seconds": case.get("seconds"),
    }


def write_dump(path: Path | None, dumped: list[dict[str, Any]]) -> None:
    if path is not None:  # rewritten after every compare, so a run cut short keeps what it measured
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(dumped))


def audit_share(case: dict[str, Any]) -> list[float]:
    """The CUPTI audit's share of one case's wall time (at most 10%); none when untimed."""
    seconds = case["seconds"]
    return [seconds.get("audit", 0.0) / seconds["total"]] if seconds.get("total") else []


def table(headers: list[str], rows: list[list[Any]]) -> str:
    try:
        from tabulate import tabulate

        return tabulate(rows, headers=headers, tablefmt="github", disable_numparse=True)
    except ImportError:  # pragma: no cover
        return "\n".join(" | ".join(str(c) for c in row) for row in [headers, *rows])


def pct(ratio: float | None) -> str:
    return "—" if ratio is None else f"{(ratio - 1) * 100:+.2f}%"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=10, help="compares per part (default 10)")
    parser.add_argument("--smoke", action="store_true", help="CPU, tiny sizes, 1 run, not judged")
    parser.add_argument("--slowdown", type=float, default=0.02, help="extra work at head (default 0.02)")
    parser.add_argument("--threshold", default="0.01", help="threshold of the regression compares (default 0.01)")
    parser.add_argument("--time-budget", default=None, help="passed to compare as --time-budget (default: the suite's, 10 s)")
    parser.add_argument("--aa-threshold", default="0.01", help="threshold of the A/A compares (default 0.01)")
    parser.add_argument("--min-detections", type=int, default=None, help="slower runs needed per case (default: runs - 1)")
    parser.add_argument("--device", default=None, help="passed to compare (default: auto; cpu with --smoke)")
    parser.add_argument("--workdir", type=Path, default=None, help="where the repository and outputs go (default: a temp dir)")
    parser.add_argument("--keep", action="store_true", help="keep the work directory")
    parser.add_argument("--dump", type=Path, default=None,
                        help="write every compare's cases (verdict, estimate, raw rounds of both sides) to this JSON file")
    parser.add_argument("--parts", default="aa,regression",
                        help="which parts to run: aa, regression, faster (the grid-stride rewrite of cvadd), comma-separated "
                             "(default aa,regression); one part fits a 10-minute slot")
    args = parser.parse_args(argv)
    TIME_BUDGET[0] = args.time_budget
    parts = {part.strip() for part in args.parts.split(",") if part.strip()}
    if not parts or parts - {"aa", "regression", "faster"}:
        parser.error("--parts takes aa, regression and faster, comma-separated")
    runs = 1 if args.smoke else args.runs
    device = args.device or ("cpu" if args.smoke else "auto")
    min_detections = args.min_detections if args.min_detections is not None else max(1, runs - 1)

    workdir = Path(args.workdir) if args.workdir else Path(tempfile.mkdtemp(prefix="kbench-aa-"))
    repo = workdir / "repo"
    if repo.exists():
        shutil.rmtree(repo)
    make_repo(repo, smoke=args.smoke, slowdown=args.slowdown)
    total_started = time.perf_counter()
    print(f"work directory: {workdir}  (runs={runs}, device={device}, smoke={args.smoke})", flush=True)

    # 1. A/A -------------------------------------------------------------------------------
    aa_verdicts: dict[str, list[str]] = {}
    aa_ratios: list[float] = []
    aa_case_ratios: dict[str, list[float]] = {}
    #: per case, the runs whose ratio is the sides' medians' (the verdict gave none)
    aa_from_medians: dict[str, int] = {}
    #: per case, the base's median a call (us) in each run: the spread over runs in ns
    aa_base_us: dict[str, list[float]] = {}
    aa_rounds: list[int] = []
    aa_remeasured = 0
    aa_errors: list[str] = []
    # The CUPTI audit's share of each case's wall time (at most 10%).
    audit_shares: list[float] = []
    aa_started = time.perf_counter()
    dumped: list[dict[str, Any]] = []
    for run in range(runs if "aa" in parts else 0):
        code, data, wall, _ = compare(repo, workdir / f"aa-{run}", "--base", "main", "--head", "main",
                                     "--threshold", args.aa_threshold, device=device)
        for case in data["cases"]:
            aa_verdicts.setdefault(case["case_id"], []).append(case["verdict"])
            if case["ratio"] is not None:
                aa_ratios.append(case["ratio"])
            ratio = case["ratio"] if case["ratio"] is not None else medians_ratio(case)
            if ratio is not None:
                aa_case_ratios.setdefault(case["case_id"], []).append(ratio)
                aa_from_medians[case["case_id"]] = aa_from_medians.get(case["case_id"], 0) + (case["ratio"] is None)
            if (base_ms := side_median(case, "base")) is not None:
                aa_base_us.setdefault(case["case_id"], []).append(base_ms * 1e3)
            aa_remeasured += bool(case["remeasured"])
            aa_rounds.append(case["n_rounds"] or 0)
            audit_shares.extend(audit_share(case))
            if case["verdict"] in ("failed", "incorrect"):
                aa_errors.append(f"{case['case_id']}: {case['verdict']} — {case['message']}")
        dumped.append({"part": "aa", "run": run, "wall_s": wall, "cases": [dump_case(c) for c in data["cases"]]})
        write_dump(args.dump, dumped)
        print(f"A/A run {run + 1}/{runs}: {data['gate']['summary']}  ({wall:.1f} s)", flush=True)
    aa_wall = time.perf_counter() - aa_started
    aa_slower = sum(v.count("slower") for v in aa_verdicts.values())
    aa_cases = sum(len(v) for v in aa_verdicts.values())

    # 2. regression ------------------------------------------------------------------------
    reg_verdicts: dict[str, list[str]] = {}
    reg_sizes: dict[str, int] = {}
    reg_ratios: dict[str, list[float]] = {}
    reg_walls: list[float] = []
    reg_seconds: list[dict[str, float]] = []
    reg_remeasured = 0
    reg_started = time.perf_counter()
    for run in range(runs if "regression" in parts else 0):
        code, data, wall, _ = compare(
            repo, workdir / f"reg-{run}", "--base", "main", "--head", "slower", "--threshold", args.threshold,
            "--kernel", "vadd" if args.smoke else SLOWED, device=device,
        )
        reg_walls.append(wall)
        reg_seconds.append(data["seconds"])
        for case in data["cases"]:
            reg_verdicts.setdefault(case["case_id"], []).append(case["verdict"])
            reg_sizes[case["case_id"]] = int(case["dims"].get("N", 0))
            if case["ratio"] is not None:
                reg_ratios.setdefault(case["case_id"], []).append(case["ratio"])
            reg_remeasured += bool(case["remeasured"])
            audit_shares.extend(audit_share(case))
        dumped.append({"part": "regression", "run": run, "wall_s": wall, "cases": [dump_case(c) for c in data["cases"]]})
        write_dump(args.dump, dumped)
        print(f"regression run {run + 1}/{runs}: {data['gate']['summary']}  (exit {code}, {wall:.1f} s)", flush=True)
    reg_wall = time.perf_counter() - reg_started

    # 2b. a real speed-up (the grid-stride rewrite of cvadd) --------------------------------
    fast_verdicts: dict[str, list[str]] = {}
    fast_ratios: dict[str, list[float]] = {}
    for run in range(runs if "faster" in parts and not args.smoke else 0):
        code, data, wall, _ = compare(repo, workdir / f"fast-{run}", "--base", "main", "--head", "faster", "--threshold",
                                      args.threshold, "--kernel", SLOWED, device=device)
        for case in data["cases"]:
            fast_verdicts.setdefault(case["case_id"], []).append(case["verdict"])
            ratio = case["ratio"] if case["ratio"] is not None else medians_ratio(case)
            if ratio is not None:
                fast_ratios.setdefault(case["case_id"], []).append(ratio)
        dumped.append({"part": "faster", "run": run, "wall_s": wall, "cases": [dump_case(c) for c in data["cases"]]})
        write_dump(args.dump, dumped)
        print(f"faster run {run + 1}/{runs}: {data['gate']['summary']}  (exit {code}, {wall:.1f} s)", flush=True)

    # 3. report ----------------------------------------------------------------------------
    def mean_of(key: str) -> float:
        return statistics.fmean(s.get(key, 0.0) for s in reg_seconds) if reg_seconds else 0.0

    judged = not args.smoke
    rows: list[list[Any]] = []
    aa_faster = sum(v.count("faster") for v in aa_verdicts.values())
    aa_unchanged = sum(v.count("unchanged") for v in aa_verdicts.values())
    enough_unchanged = aa_cases > 0 and aa_unchanged >= 0.9 * aa_cases
    aa_ok = (aa_slower == 0 and aa_faster == 0 and not aa_errors and enough_unchanged) or "aa" not in parts
    counts: dict[str, int] = {}
    for verdicts in aa_verdicts.values():
        for verdict in verdicts:
            counts[verdict] = counts.get(verdict, 0) + 1
    if "aa" in parts:
        rows.append(["A/A: `slower` verdicts (must be 0)", f"{aa_slower} of {aa_cases} case-runs "
                     f"({len(aa_verdicts)} cases × {runs} runs)", "yes" if aa_slower == 0 else "NO"])
        rows.append(["A/A: `faster` verdicts (must be 0)", f"{aa_faster}", "yes" if aa_faster == 0 else "NO"])
        if aa_rounds:
            rows.append(["A/A: rounds used per case-run", f"min {min(aa_rounds)}, median {statistics.median(aa_rounds):g}, "
                         f"max {max(aa_rounds)}", ""])
        rows.append([f"A/A: all verdicts @ threshold {args.aa_threshold} (`unchanged` must be >= 90%)",
                     ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))
                     + (f" ({aa_unchanged / aa_cases:.1%} unchanged)" if aa_cases else ""),
                     "yes" if enough_unchanged else "NO"])
        for case_id, ratios in aa_case_ratios.items():
            # The mean head/base ratio over runs: a fixed side bias shows here even when every
            # single verdict is `unchanged`. Must be within +-0.3% of 1 with 1 inside its 95% CI.
            mean = statistics.fmean(ratios)
            se = statistics.stdev(ratios) / len(ratios) ** 0.5 if len(ratios) > 1 else float("nan")
            low, high = mean - 1.96 * se, mean + 1.96 * se
            ok = abs(mean - 1) <= 0.003 and low <= 1 <= high
            medians = aa_from_medians.get(case_id, 0)
            # The spread over runs, in ns a call: under the judge each run is a new pair of
            # processes, and stats.PROCESS_SPREAD_US is this figure (docs/statistics.md)
            spread = (f", SD over runs {statistics.stdev(ratios):.2%} = "
                      f"{statistics.stdev(ratios) * statistics.fmean(aa_base_us[case_id]) * 1e3:.0f} ns a call"
                      if len(ratios) > 1 and aa_base_us.get(case_id) else "")
            rows.append([f"A/A mean head/base `{case_id}`", f"{mean:.5f} (SE {se:.5f}, n {len(ratios)}"
                         + (f", {medians} from the sides' medians" if medians else "") + spread
                         + f", 95% CI [{low:.5f}, {high:.5f}])", "yes" if ok else "NO"])
            aa_ok &= ok or "aa" not in parts
    if aa_ratios:
        rows.append(["A/A: head/base ratios", f"min {pct(min(aa_ratios))}, max {pct(max(aa_ratios))}, "
                     f"remeasured {aa_remeasured}", ""])
    for error in aa_errors[:5]:
        rows.append(["A/A: error", error[:150], "NO"])
    reg_ok = True
    for case_id, verdicts in reg_verdicts.items():
        detected = verdicts.count("slower")
        # The bar is N >= 2^22: below it the vector add is launch-bound (~6 us), and 2%
        # more programs do not make it 2% slower (CUPTI, interleaved: 1.0000x at N = 2^20).
        judged_case = args.smoke or reg_sizes.get(case_id, 0) >= MIN_JUDGED_N
        ok = detected >= min_detections or not judged_case
        reg_ok &= ok
        ratios = reg_ratios.get(case_id, [])
        ratio_text = f", median change {pct(statistics.median(ratios))}" if ratios else ""
        rows.append([f"regression ({args.slowdown:.0%} more work) `{case_id}` @ threshold {args.threshold}",
                     f"slower in {detected} of {len(verdicts)} runs (need {min_detections}){ratio_text}; "
                     f"others: {', '.join(v for v in verdicts if v != 'slower') or 'none'}",
                     ("yes" if ok else "NO") if judged_case else f"not judged (N < 2^{MIN_JUDGED_N.bit_length() - 1})"])
    for case_id, verdicts in fast_verdicts.items():
        ratios = fast_ratios.get(case_id, [])
        rows.append([f"grid-stride rewrite `{case_id}` @ threshold {args.threshold}",
                     ", ".join(f"{v} {verdicts.count(v)}" for v in sorted(set(verdicts)))
                     + (f"; median change {pct(statistics.median(ratios))}, per run "
                        + " ".join(pct(r) for r in ratios) if ratios else ""), ""])
    if not reg_verdicts and "regression" in parts:
        reg_ok = False
        rows.append(["regression", "no case was compared", "NO"])
    if reg_walls:
        rows.append(["regression compare: wall time (mean of runs)",
                     f"{statistics.fmean(reg_walls):.1f} s = setup/git {mean_of('setup'):.1f} + build {mean_of('build'):.1f} + "
                     f"load {mean_of('load'):.1f} + correctness {mean_of('correctness'):.1f} + timing {mean_of('timing'):.1f} + "
                     f"audit {mean_of('audit'):.1f} s "
                     f"(+ CLI start/report: {statistics.fmean(reg_walls) - mean_of('wall'):.1f} s); "
                     f"remeasured {reg_remeasured} case-runs", ""])
    audit_ok = bool(audit_shares) and max(audit_shares) <= 0.10
    if audit_shares:
        rows.append(["CUPTI audit: share of a case's wall time (must be <= 10%)",
                     f"min {min(audit_shares):.1%}, median {statistics.median(audit_shares):.1%}, max {max(audit_shares):.1%} "
                     f"over {len(audit_shares)} case-runs", "yes" if audit_ok else "NO"])
    rows.append(["total time", f"A/A {aa_wall:.0f} s, regression {reg_wall:.0f} s, all {time.perf_counter() - total_started:.0f} s", ""])
    if not judged:
        rows = [[what, result, "(smoke: not judged)" if passed else passed] for what, result, passed in rows]
    print()
    print(table(["check", "result", "pass"], rows))
    passed = aa_ok and reg_ok and audit_ok
    if not args.keep and not args.workdir:
        shutil.rmtree(workdir, ignore_errors=True)
    if args.smoke:
        # A clean run is all the CPU can show: every case got a verdict, none crashed.
        return 0 if not aa_errors and (reg_verdicts or "regression" not in parts) else 1
    print(f"\nacceptance: {'PASSED' if passed else 'FAILED'}")
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())
