#!/usr/bin/env python3
"""Where the wall time of `kbench-ci compare` goes: warm worker vs a worker per case.

    python scripts/acceptance/gate_wall_time.py                         # on a GPU machine (~3-5 min on an H200)
    python scripts/acceptance/gate_wall_time.py --old-code 0c53e47      # also the code at that commit, same suite
    python scripts/acceptance/gate_wall_time.py --with-failures         # add a crashing and a hanging kernel
    python scripts/acceptance/gate_wall_time.py --smoke                 # on a CPU: Triton kernels only, tiny sizes
    python scripts/acceptance/gate_wall_time.py --modes warm,cached,nostaging --time-budget 0
        # the cost of staging and checks: fixed rounds, so both runs time the same number of calls

It writes a suite into a throw-away git repository (default: 3 CUDA C++ kernels and 3 Triton
kernels, one shape each = 6 cases) and runs ``kbench-ci compare --base HEAD`` on it (an A/A
comparison: base and head are the same commit; ``--with-failures`` adds, in the working tree
only, a kernel that crashes the worker and one that hangs until its timeout) in these modes,
one after the other:

* ``warm, cold cache``: one warm worker, an empty cache folder (everything is built);
* ``warm, cached``: the same again with the cache folder of the run before (nothing is built:
  every build must say cached);
* ``fresh worker``: a worker per case (``KBENCH_CI_FRESH_WORKER=1``, as ``--fresh-worker``) and
  no cache across runs (``KBENCH_CI_NO_CACHE=1``);
* ``old code`` (``--old-code REV``): kbench-ci as it was at REV (``git archive``, put on
  PYTHONPATH; the repository is only read).

Each row splits the wall time as results.json records it: setup (git, worktrees, suite), build
(waiting for builds), start-up (worker start, CUDA context, loading files: ``load`` less the
first calls), first-call JIT (first calls and compile steps of every variant), correctness,
timing, audit (CUPTI), and the rest (reports, polling, clean-up; from the process's own wall
time). The target is checked per row: wall <= 1.5 x (correctness + timing + audit +
JIT) + build.

``--gpus SPEC`` is passed on to compare (e.g. ``--gpus 0,0``: two warm workers on one GPU, to see the
distribution; their timings are not valid).
"""

from __future__ import annotations

import argparse
import io
import json
import os
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
#: sitecustomize that switches staging and output checks off (the ``nostaging`` mode only)
NO_STAGING = Path(__file__).resolve().parent / "no_staging"
CLI_SHIM = "import sys; sys.argv[0] = 'kbench-ci'; from kbench_ci.cli.app import main; main()"

CUDA_KERNEL = '''\
__global__ void k(const float* x, const float* y, float* out, int n) {{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = {expression};
}}
extern "C" void solve(const float* x, const float* y, float* out, int N) {{
    k<<<(N + 255) / 256, 256>>>(x, y, out, N);
}}
'''
CUDA_REF = '''\
def reference(x, y, out, **_):
    out.copy_({expression})
'''
TRITON_KERNEL = '''\
import torch
import triton
import triton.language as tl


@triton.jit
def _k(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask=mask)
    y = tl.load(y_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, {expression}, mask=mask)


def setup(N, **_):
    x = torch.randn(N, dtype=torch.float32)
    y = torch.randn(N, dtype=torch.float32)
    return {{"inputs": {{"x": x, "y": y, "out": torch.empty(N, dtype=torch.float32)}}, "outputs": ["out"]}}


def run_kernel(x, y, out, **_):
{prelude}    n = x.numel()
    _k[(triton.cdiv(n, 1024),)](x, y, out, n, BLOCK=1024)
'''
TRITON_REF = '''\
def reference(x, y, **_):
    return {expression}
'''
#: (name, expression): the same element-wise work in CUDA C++ and in Triton
OPERATIONS = (("add", "x + y", "x[i] + y[i]"), ("mul", "x * y", "x[i] * y[i]"), ("axpy", "2.0 * x + y", "2.0f * x[i] + y[i]"))


def write_suite(root: Path, *, cuda: bool, n: int, with_failures: bool, hang_timeout: float) -> int:
    """kbench.toml and the kernels; the number of cases. The failing kernels exist at the head
    only, as in a pull request that adds them: each fails once, not on both sides."""
    (root / "k").mkdir(parents=True, exist_ok=True)
    toml = ["[defaults]"]
    kernels: list[str] = []
    for name, python_expression, cuda_expression in OPERATIONS:
        if cuda:
            (root / "k" / f"cu_{name}.cu").write_text(CUDA_KERNEL.format(expression=cuda_expression))
            (root / "k" / f"cu_{name}_ref.py").write_text(CUDA_REF.format(expression=python_expression))
            kernels.append(_entry(f"cu_{name}", f"k/cu_{name}.cu", f"k/cu_{name}_ref.py", n))
        (root / "k" / f"tr_{name}.py").write_text(TRITON_KERNEL.format(expression=python_expression, prelude=""))
        (root / "k" / f"tr_{name}_ref.py").write_text(TRITON_REF.format(expression=python_expression))
        kernels.append(_entry(f"tr_{name}", f"k/tr_{name}.py", f"k/tr_{name}_ref.py", n))
    if with_failures:
        for name, prelude, extra in (
            ("crash", "    import os; os.abort()\n", ""),
            ("hang", "    import time; time.sleep(3600)\n", f"timeout = {hang_timeout:g}\n"),
        ):
            (root / "k" / f"{name}.py").write_text(TRITON_KERNEL.format(expression="x + y", prelude=prelude))
            (root / "k" / f"{name}_ref.py").write_text(TRITON_REF.format(expression="x + y"))
            kernels.append(_entry(name, f"k/{name}.py", f"k/{name}_ref.py", n) + extra)
    (root / "kbench.toml").write_text("\n".join(toml) + "\n\n" + "\n".join(kernels))
    return len(kernels)


def _entry(name: str, solution: str, ref: str, n: int) -> str:
    return f'[[kernels]]\nname = "{name}"\nsolution = "{solution}"\nref = "{ref}"\nshapes = [{{N = {n}}}]\n'


def git(root: Path, *args: str) -> str:
    environment = {**os.environ, "GIT_CONFIG_NOSYSTEM": "1"}
    done = subprocess.run(["git", *args], cwd=root, env=environment, check=True, capture_output=True, text=True)
    return done.stdout.strip()


def make_repository(root: Path, **suite: Any) -> int:
    """The suite committed (the base); with failures, the head (the working tree) adds them."""
    cases = write_suite(root, **{**suite, "with_failures": False})
    git(root, "init", "-q", "-b", "main")
    git(root, "-c", "user.name=kbench", "-c", "user.email=kbench@example.invalid", "add", "-A")
    git(root, "-c", "user.name=kbench", "-c", "user.email=kbench@example.invalid", "-c", "commit.gpgsign=false",
        "commit", "-q", "-m", "suite")
    if suite.get("with_failures"):
        cases = write_suite(root, **suite)
    return cases


def old_code(revision: str, into: Path) -> Path:
    """kbench_ci as it was at ``revision``, unpacked from ``git archive`` (the repository is only read).
    A folder that holds kbench_ci/ is taken as it is (a machine without the git history)."""
    if (Path(revision) / "kbench_ci").is_dir():
        return Path(revision).resolve()
    archive = subprocess.run(["git", "archive", revision, "kbench_ci"], cwd=REPO, check=True, capture_output=True).stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(into, filter="data")
    return into


def run_compare(repo: Path, out: Path, args: argparse.Namespace, *, environment: dict[str, str], code: Path) -> dict[str, Any]:
    command = [sys.executable, "-c", CLI_SHIM, "compare", "--base", "HEAD", "--output-dir", str(out),
               "--device", args.device, "--threshold", args.threshold, "--time-budget", str(args.time_budget), "--no-fail"]
    if args.gpus:
        command += ["--gpus", args.gpus]
    probe = [str(NO_STAGING)] if environment.get("KBENCH_CI_PROBE_NO_STAGING") == "1" else []
    env = {**os.environ, **environment,
           "PYTHONPATH": os.pathsep.join(filter(None, [*probe, str(code), os.environ.get("PYTHONPATH")]))}
    if args.log_dir:
        env["KBENCH_CI_LOG"] = "debug"
    started = time.perf_counter()
    done = subprocess.run(command, cwd=repo, env=env, capture_output=True, text=True, timeout=args.timeout)
    process_wall = time.perf_counter() - started
    if args.log_dir:
        args.log_dir.mkdir(parents=True, exist_ok=True)
        (args.log_dir / f"{out.name}.stderr").write_text(f"wall {process_wall:.3f} s\n" + done.stderr)
    if done.returncode != 0 or not (out / "results.json").is_file():
        sys.stderr.write(done.stderr[-4000:])
        raise SystemExit(f"compare failed (exit {done.returncode}) in {out}")
    data = json.loads((out / "results.json").read_text())
    data["process_wall"] = process_wall
    return data


def bare_worker_start(device: str, *, triton: bool) -> float:
    """Seconds for a fresh python to import torch (and triton) and make a context on ``device``:
    the least any run that measures in a new process pays before its first case."""
    code = "import torch\n" + ("import triton\n" if triton else "") + f"torch.empty(1, device={device!r})\n"
    started = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], check=True)
    return time.perf_counter() - started


def first_call_jit_s(data: dict[str, Any]) -> float:
    """First calls and compile steps of every variant of every measurement, in seconds."""
    total = 0.0
    for case in data["cases"]:
        for measurement in (case, case.get("first_measurement") or {}):
            variants = [measurement.get("base"), measurement.get("head")]
            variants += [b.get("result") for b in measurement.get("baselines") or []]
            for variant in variants:
                if isinstance(variant, dict):
                    total += ((variant.get("first_call_ms") or 0.0) + (variant.get("compile_ms") or 0.0)) / 1e3
    return total


def split(data: dict[str, Any]) -> dict[str, float]:
    seconds = data["seconds"]
    jit = first_call_jit_s(data)
    row = {
        "wall": data["process_wall"],
        "setup": seconds.get("setup", 0.0),
        "build": seconds.get("build", 0.0),
        "start-up": max(0.0, seconds.get("load", 0.0) - jit),
        "JIT": jit,
        "correctness": seconds.get("correctness", 0.0),
        "timing": seconds.get("timing", 0.0),
        "audit": seconds.get("audit", 0.0),
    }
    row["report/other"] = row["wall"] - sum(v for k, v in row.items() if k != "wall")
    return row


def builds_cached(data: dict[str, Any]) -> str:
    builds = [b for case in data["cases"] for b in (case.get("builds") or {}).values() if b]
    if not builds:
        return "-"
    return f"{sum(1 for b in builds if b.get('cached'))}/{len(builds)}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--n", type=int, default=1 << 22, help="elements per kernel (default 2^22)")
    parser.add_argument("--threshold", default="0.02")
    parser.add_argument("--time-budget", type=float, default=10.0)
    parser.add_argument("--with-failures", action="store_true", help="add a crashing and a hanging kernel")
    parser.add_argument("--hang-timeout", type=float, default=30.0, help="the hanging kernel's timeout (s)")
    parser.add_argument("--old-code", metavar="REV", help="also run kbench-ci as it was at REV")
    parser.add_argument("--modes", default="warm,cached,fresh",
                        help="comma list of warm, cached, nostaging (cached, staging and output checks off), fresh")
    parser.add_argument("--gpus", help="passed on to compare, e.g. all or 0,1")
    parser.add_argument("--timeout", type=float, default=1800.0, help="seconds per compare run")
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder and print it")
    parser.add_argument("--log-dir", type=Path, help="run compare with KBENCH_CI_LOG=debug; its stderr to DIR/out-N.stderr")
    parser.add_argument("--smoke", action="store_true", help="CPU: Triton kernels only, N=4096, device cpu")
    args = parser.parse_args()
    if args.smoke:
        args.device, args.n = "cpu", 4096

    work = Path(tempfile.mkdtemp(prefix="kbench-wall-"))
    repo = work / "repo"
    cases = make_repository(repo, cuda=not args.smoke, n=args.n, with_failures=args.with_failures,
                            hang_timeout=args.hang_timeout)
    cache = work / "cache"
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    runs: list[tuple[str, dict[str, str], Path]] = []
    if "warm" in modes:
        runs.append(("warm, cold cache", {"KBENCH_CI_CACHE_DIR": str(cache), "KBENCH_CI_FRESH_WORKER": "0"}, REPO))
    if "cached" in modes:
        runs.append(("warm, cached", {"KBENCH_CI_CACHE_DIR": str(cache), "KBENCH_CI_FRESH_WORKER": "0"}, REPO))
    if "nostaging" in modes:
        runs.append(("cached, no staging", {"KBENCH_CI_CACHE_DIR": str(cache), "KBENCH_CI_FRESH_WORKER": "0",
                                            "KBENCH_CI_PROBE_NO_STAGING": "1",
                                            "KBENCH_CI_PROBE_NO_STAGING_LOG": str(work / "nostaging.log")}, REPO))
    if "fresh" in modes:
        runs.append(("fresh worker", {"KBENCH_CI_FRESH_WORKER": "1", "KBENCH_CI_NO_CACHE": "1"}, REPO))
    if args.old_code:
        runs.append((f"old code {args.old_code}", {}, old_code(args.old_code, work / "old")))

    print(f"suite: {cases} cases, N = {args.n}, device {args.device}, threshold {args.threshold}, "
          f"time budget {args.time_budget:g} s; folder {work}", flush=True)
    rows: list[tuple[str, dict[str, float], dict[str, Any]]] = []
    for index, (label, environment, code) in enumerate(runs):
        data = run_compare(repo, work / f"out-{index}", args, environment=environment, code=code)
        rows.append((label, split(data), data))
        print(f"  {label}: {rows[-1][1]['wall']:.1f} s", flush=True)

    columns = ["wall", "setup", "build", "start-up", "JIT", "correctness", "timing", "audit", "report/other"]
    header = f"{'mode':<22}" + "".join(f"{c:>13}" for c in columns) + f"{'cached':>9}{'target':>9}  verdicts"
    print("\n" + header)
    for label, row, data in rows:
        target = 1.5 * (row["correctness"] + row["timing"] + row["audit"] + row["JIT"]) + row["build"]
        verdicts: dict[str, int] = {}
        for case in data["cases"]:
            verdicts[case["verdict"]] = verdicts.get(case["verdict"], 0) + 1
        print(f"{label:<22}" + "".join(f"{row[c]:>12.1f}s" for c in columns)
              + f"{builds_cached(data):>9}{('met' if row['wall'] <= target else 'missed'):>9}  "
              + ", ".join(f"{n} {v}" for v, n in sorted(verdicts.items())))
    by_label = {label: row for label, row, _ in rows}
    baseline = next((by_label[label] for label in by_label if label.startswith("old code")), by_label.get("fresh worker"))
    if baseline is not None and "warm, cold cache" in by_label:
        print(f"\nspeed-up of the warm worker (cold cache) over {'the old code' if args.old_code else 'a fresh worker'}: "
              f"{baseline['wall'] / by_label['warm, cold cache']['wall']:.2f}x")
    print("target: wall <= 1.5 x (correctness + timing + audit + JIT) + build")
    if "warm, cached" in by_label and "cached, no staging" in by_label:
        with_staging, without = by_label["warm, cached"]["timing"], by_label["cached, no staging"]["timing"]
        reached = (work / "nostaging.log").read_text().splitlines() if (work / "nostaging.log").exists() else []
        workers = sum("measure/worker" in line or "measure.worker" in line for line in reached)
        print(f"the no-staging run switched staging and checks off in {len(reached)} process(es), {workers} of them workers")
        print(f"staging and output checks: timing phase {with_staging:.2f} s with, {without:.2f} s without: "
              f"{with_staging / max(without, 1e-9):.2f}x (asked: <= 1.5x)")
    floor = bare_worker_start(args.device, triton=True)
    print(f"a bare process that does what a worker must before its first case (python, import torch and "
          f"triton, a CUDA context on {args.device}): {floor:.2f} s")
    if not args.keep:
        subprocess.run(["rm", "-rf", str(work)], check=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
