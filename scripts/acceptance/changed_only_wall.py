#!/usr/bin/env python3
"""The cost of `compare --changed-only`, a warm cache, A/A verdicts, early stop.

    python3 scripts/acceptance/changed_only_wall.py                  # on a GPU machine (sized for <= 6 min on an H200)
    python3 scripts/acceptance/changed_only_wall.py --smoke          # on a CPU: Triton kernels only, tiny sizes, not judged
    python3 scripts/acceptance/changed_only_wall.py --out DIR        # keep the repository, cache and results under DIR

It writes a 20-case suite into a throw-away git repository (DIR/repo): a CUDA C++ vector add at
6 sizes (N = 2^20, about 6 us on an H200, up to 2^26), a Triton row sum at 5 shapes, the Triton
tutorial's autotuned fp16 matmul (``@triton.autotune`` over 3 configs) at 4 shapes and the
Triton tutorial's fused softmax at 5 shapes, each case about 10-300 us. Commit ``main`` is the
suite; branch ``pr`` changes only the vector add's ``.cu`` (one comment line). Then, one after
the other, with one cache folder (DIR/cache, emptied first; ``KBENCH_CI_CACHE_DIR``) and
``--threshold 0.01``:

a. full A/A, cold cache: ``main`` checked out, ``compare --base <main>`` (head: the working tree);
b. full A/A, warm cache: the same again;
c. changed only: ``pr`` checked out, ``compare --changed-only --base <main>``.

It prints one table (wall time measured around each compare, its split from results.json,
cases measured, verdicts; each compare's stderr is kept as DIR/<run>.stderr) and checks the
claims:

1. c measures only the vector add's cases, in <= 25% of b's wall time;
2. b spends <= 10% of its wall time autotuning (the autotuned matmul's first calls, where
   Triton tunes or reads its cached pick: ``TRITON_CACHE_AUTOTUNING``, set by kbench-ci);
3. a and b together: >= 90% ``unchanged``, no ``slower``/``faster`` (nor ``failed``/``incorrect``);
4. the 6 us case stops before the round cap and, when it stops undecided, its note says what
   change it can resolve.

The exit code is 0 only when every claim holds. ``--smoke`` runs the same three compares on the
CPU (``--device cpu``: Triton under ``TRITON_INTERPRET=1``, no CUDA C++): the Triton row sum
stands in for the vector add (the changed kernel and the small case), the matmul has one config
(the autotuner cannot benchmark without a GPU driver); figures are printed, not judged, and the
exit code is 0 when every compare ran.

Needs torch, triton, typer and gitpython; this repository is put on PYTHONPATH (no install).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SCRIPTS = Path(__file__).resolve().parent
sys.path.insert(0, str(SCRIPTS))
sys.path.insert(0, str(SCRIPTS.parents[1]))

# The wall-time split is gate_wall_time's, so the two scripts' tables read alike.
from aa_and_regression import table
from gate_wall_time import CLI_SHIM, REPO, builds_cached, first_call_jit_s, git, split

from kbench_ci.suite.settings import MAX_ADAPTIVE_ROUNDS

# -- the kernels ---------------------------------------------------------------------------------

# tests/fixtures/truth/vadd.cu: one element per thread, memory-bound.
VADD_CU = '''\
// A float32 vector add, one element per thread.
extern "C" __global__ void vadd_kernel(const float* a, const float* b, float* c, long n) {
  long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) c[i] = a[i] + b[i];
}

extern "C" void solve(const float* a, const float* b, float* c, long N) {
  vadd_kernel<<<(N + 255) / 256, 256>>>(a, b, c, N);
}
'''
VADD_REF = '''\
def reference(a, b, c, **_):
    return a + b
'''

ROWSUM = '''\
"""out[m] = sum of row m of x (float32), one program per row, BLOCK columns at a time."""
import torch
import triton
import triton.language as tl


@triton.jit
def _rowsum_kernel(x_ptr, out_ptr, n_cols, stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        acc += tl.load(x_ptr + row * stride + cols, mask=cols < n_cols, other=0.0)
    tl.store(out_ptr + row, tl.sum(acc, axis=0))


def setup(M, N, **_):
    x = torch.randn(M, N, dtype=torch.float32)
    return {"inputs": {"x": x, "out": torch.empty(M, dtype=torch.float32)}, "outputs": ["out"]}


def run_kernel(x, out, **_):
    M, N = x.shape
    _rowsum_kernel[(M,)](x, out, N, x.stride(0), BLOCK=min(1024, triton.next_power_of_2(N)), num_warps=4)
'''
# Summation order differs from torch's: a looser atol than float32's 1e-4 for sums near 0.
ROWSUM_REF = '''\
atol = 1e-3


def reference(x, **_):
    return x.sum(dim=1)
'''

# tests/fixtures/truth/matmul.py with the autotuner's configs filled in per mode.
MATMUL = '''\
"""The Triton tutorial's autotuned matmul (fp16 in, fp32 accumulate, fp16 out)."""
import torch
import triton
import triton.language as tl


@triton.autotune(
    configs=[
{configs}
    ],
    key=["M", "N", "K"],
)
@triton.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, sam, sak, sbk, sbn, scm, scn,
                  BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GM: tl.constexpr):
    pid = tl.program_id(0)
    num_pid_m = tl.cdiv(M, BM)
    num_pid_n = tl.cdiv(N, BN)
    num_pid_in_group = GM * num_pid_n
    group_id = pid // num_pid_in_group
    first_pid_m = group_id * GM
    group_size_m = min(num_pid_m - first_pid_m, GM)
    pid_m = first_pid_m + ((pid % num_pid_in_group) % group_size_m)
    pid_n = (pid % num_pid_in_group) // group_size_m
    offs_am = (pid_m * BM + tl.arange(0, BM)) % M
    offs_bn = (pid_n * BN + tl.arange(0, BN)) % N
    offs_k = tl.arange(0, BK)
    a_ptrs = a_ptr + (offs_am[:, None] * sam + offs_k[None, :] * sak)
    b_ptrs = b_ptr + (offs_k[:, None] * sbk + offs_bn[None, :] * sbn)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BK)):
        a = tl.load(a_ptrs, mask=offs_k[None, :] < K - k * BK, other=0.0)
        b = tl.load(b_ptrs, mask=offs_k[:, None] < K - k * BK, other=0.0)
        acc = tl.dot(a, b, acc)
        a_ptrs += BK * sak
        b_ptrs += BK * sbk
    c = acc.to(tl.float16)
    offs_cm = pid_m * BM + tl.arange(0, BM)
    offs_cn = pid_n * BN + tl.arange(0, BN)
    mask = (offs_cm[:, None] < M) & (offs_cn[None, :] < N)
    tl.store(c_ptr + scm * offs_cm[:, None] + scn * offs_cn[None, :], c, mask=mask)


def setup(M, N, K, seed=0):
    g = torch.Generator(device=torch.get_default_device()).manual_seed(seed)
    a = torch.randn(M, K, generator=g, device=torch.get_default_device(), dtype=torch.float16)
    b = torch.randn(K, N, generator=g, device=torch.get_default_device(), dtype=torch.float16)
    return {{"inputs": {{"a": a, "b": b, "c": torch.empty(M, N, dtype=torch.float16)}}, "outputs": ["c"]}}


def run_kernel(a, b, c, **_):
    M, K = a.shape
    _, N = b.shape
    grid = lambda meta: (triton.cdiv(M, meta["BM"]) * triton.cdiv(N, meta["BN"]),)  # noqa: E731
    matmul_kernel[grid](a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1))
'''
MATMUL_REF = '''\
import torch

atol = 0.05
rtol = 0.01


def reference(a, b, c, **_):
    return torch.mm(a, b)
'''
GPU_MATMUL_CONFIGS = (
    'triton.Config({"BM": 128, "BN": 256, "BK": 64, "GM": 8}, num_stages=3, num_warps=8)',
    'triton.Config({"BM": 128, "BN": 128, "BK": 64, "GM": 8}, num_stages=4, num_warps=4)',
    'triton.Config({"BM": 64, "BN": 256, "BK": 32, "GM": 8}, num_stages=4, num_warps=4)',
)
# One config: with more, the autotuner benchmarks them, which needs a GPU driver.
SMOKE_MATMUL_CONFIGS = ('triton.Config({"BM": 16, "BN": 16, "BK": 16, "GM": 8}, num_stages=1, num_warps=1)',)

# tests/fixtures/truth/softmax.py (the tutorial's persistent grid sized from the device's
# occupancy); on CPU tensors, under Triton's interpreter, one program per row instead.
SOFTMAX = '''\
"""The Triton tutorial's fused softmax with its host-side launcher."""
import torch
import triton
import triton.language as tl


@triton.jit
def softmax_kernel(out_ptr, in_ptr, in_row_stride, out_row_stride, n_rows, n_cols,
                   BLOCK_SIZE: tl.constexpr, num_stages: tl.constexpr):
    row_start = tl.program_id(0)
    row_step = tl.num_programs(0)
    for row_idx in tl.range(row_start, n_rows, row_step, num_stages=num_stages):
        row_start_ptr = in_ptr + row_idx * in_row_stride
        col_offsets = tl.arange(0, BLOCK_SIZE)
        mask = col_offsets < n_cols
        row = tl.load(row_start_ptr + col_offsets, mask=mask, other=-float("inf"))
        row_minus_max = row - tl.max(row, axis=0)
        numerator = tl.exp(row_minus_max)
        denominator = tl.sum(numerator, axis=0)
        tl.store(out_ptr + row_idx * out_row_stride + col_offsets, numerator / denominator, mask=mask)


def setup(M, N, seed=0):
    g = torch.Generator(device=torch.get_default_device()).manual_seed(seed)
    x = torch.randn(M, N, generator=g, device=torch.get_default_device())
    return {"inputs": {"x": x, "y": torch.empty_like(x)}, "outputs": ["y"]}


def run_kernel(x, y, **_):
    n_rows, n_cols = x.shape
    block = triton.next_power_of_2(n_cols)
    if not x.is_cuda:
        softmax_kernel[(n_rows,)](y, x, x.stride(0), y.stride(0), n_rows, n_cols, block, 1)
        return
    num_warps = 8
    kernel = softmax_kernel.warmup(y, x, x.stride(0), y.stride(0), n_rows, n_cols, BLOCK_SIZE=block,
                                   num_stages=4, num_warps=num_warps, grid=(1,))
    kernel._init_handles()
    properties = torch.cuda.get_device_properties(x.device)
    occupancy = properties.regs_per_multiprocessor // max(kernel.n_regs * properties.warp_size * num_warps, 1)
    occupancy = max(1, min(occupancy, properties.shared_memory_per_multiprocessor // max(kernel.metadata.shared, 1)))
    grid = min(properties.multi_processor_count * occupancy, n_rows)
    kernel[(grid, 1, 1)](y, x, x.stride(0), y.stride(0), n_rows, n_cols, block, 4)
'''
SOFTMAX_REF = '''\
import torch


def reference(x, y, **_):
    return torch.softmax(x, dim=-1)
'''

#: a comment line per solution kind: the pull request's whole change
COMMENT_PREFIX = {".cu": "//", ".py": "#"}


# -- the suite -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Kernel:
    name: str
    solution: str  # file name under kernels/
    source: str
    ref: str
    implementation: str
    shapes: tuple[dict[str, int], ...]


@dataclass(frozen=True)
class Suite:
    kernels: tuple[Kernel, ...]
    #: kbench.toml's [defaults]
    defaults: dict[str, Any]
    #: the kernel whose solution file the pull request changes
    changed: str
    #: the small case whose early stop claim 4 is about: (kernel, dims)
    small: tuple[str, dict[str, int]]
    #: the autotuned kernel (claim 2)
    autotuned: str

    def case_ids(self, kernel: str | None = None) -> set[str]:
        """Case ids as kbench-ci writes them: name[dim=value,...] in the file's order."""
        return {case_id(k.name, dims) for k in self.kernels if kernel in (None, k.name) for dims in k.shapes}

    def kernel(self, name: str) -> Kernel:
        return next(k for k in self.kernels if k.name == name)


def case_id(kernel: str, dims: dict[str, int]) -> str:
    return f"{kernel}[{','.join(f'{k}={v}' for k, v in dims.items())}]"


def gpu_suite() -> Suite:
    """20 cases, each about 10-300 us on an H200 (~4 TB/s; fp16 matmul several hundred TFLOP/s)
    except the 6 us vector add at 2^20, the case claim 4 is about."""
    vadd_sizes = (20, 21, 22, 23, 24, 26)  # 12 MB .. 805 MB moved: ~6 us .. ~200 us
    return Suite(
        kernels=(
            Kernel("vadd", "vadd.cu", VADD_CU, VADD_REF, "cuda-cpp", tuple({"N": 1 << p} for p in vadd_sizes)),
            # 64 MB .. 512 MB read: ~17 us .. ~130 us
            Kernel("rowsum", "rowsum.py", ROWSUM, ROWSUM_REF, "triton",
                   ({"M": 4096, "N": 4096}, {"M": 8192, "N": 4096}, {"M": 4096, "N": 16384},
                    {"M": 16384, "N": 4096}, {"M": 32768, "N": 4096})),
            # 8.6 .. 69 GFLOP: ~20 us .. ~150 us
            Kernel("matmul", "matmul.py", MATMUL.format(configs=_configs(GPU_MATMUL_CONFIGS)), MATMUL_REF, "triton",
                   ({"M": 2048, "N": 2048, "K": 1024}, {"M": 2048, "N": 2048, "K": 2048},
                    {"M": 4096, "N": 2048, "K": 2048}, {"M": 4096, "N": 4096, "K": 2048})),
            # 64 MB .. 256 MB read and as much written: ~30 us .. ~130 us
            Kernel("softmax", "softmax.py", SOFTMAX, SOFTMAX_REF, "triton",
                   ({"M": 4096, "N": 2048}, {"M": 4096, "N": 4096}, {"M": 8192, "N": 4096},
                    {"M": 16384, "N": 2048}, {"M": 4096, "N": 8192})),
        ),
        defaults={"timeout": 300},
        changed="vadd",
        small=("vadd", {"N": 1 << 20}),
        autotuned="matmul",
    )


def smoke_suite() -> Suite:
    """The CPU's stand-in: no CUDA C++ (the row sum is the changed kernel and the small case),
    tiny shapes, few trials, so three compares take a few minutes on two cores."""
    return Suite(
        kernels=(
            Kernel("rowsum", "rowsum.py", ROWSUM, ROWSUM_REF, "triton", ({"M": 4, "N": 64}, {"M": 8, "N": 128})),
            Kernel("matmul", "matmul.py", MATMUL.format(configs=_configs(SMOKE_MATMUL_CONFIGS)), MATMUL_REF, "triton",
                   ({"M": 16, "N": 16, "K": 16}, {"M": 32, "N": 32, "K": 32})),
            Kernel("softmax", "softmax.py", SOFTMAX, SOFTMAX_REF, "triton", ({"M": 4, "N": 64}, {"M": 8, "N": 128})),
        ),
        defaults={"num_warmup": 1, "num_trials": 10, "discard_first": 1, "correctness_trials": 1, "rounds": 2, "timeout": 300},
        changed="rowsum",
        small=("rowsum", {"M": 4, "N": 64}),
        autotuned="matmul",
    )


def _configs(configs: tuple[str, ...]) -> str:
    return "\n".join(f"        {config}," for config in configs)


def suite_toml(suite: Suite) -> str:
    lines = ["[defaults]", *(f"{key} = {value}" for key, value in suite.defaults.items())]
    for kernel in suite.kernels:
        shapes = ", ".join("{" + ", ".join(f"{k} = {v}" for k, v in dims.items()) + "}" for dims in kernel.shapes)
        stem = Path(kernel.solution).stem
        lines += ["", "[[kernels]]", f'name = "{kernel.name}"', f'solution = "kernels/{kernel.solution}"',
                  f'ref = "kernels/{stem}_ref.py"', f'implementation = "{kernel.implementation}"', f"shapes = [{shapes}]"]
    return "\n".join(lines) + "\n"


# -- the repository ------------------------------------------------------------------------------

#: git's identity for the throw-away commits (gate_wall_time.git passes no user)
IDENTITY = ("-c", "user.name=kbench", "-c", "user.email=kbench@example.invalid", "-c", "commit.gpgsign=false")


def commit_all(repo: Path, message: str) -> str:
    git(repo, "add", "-A")
    git(repo, *IDENTITY, "commit", "-q", "-m", message)
    return git(repo, "rev-parse", "HEAD")


def make_repository(repo: Path, suite: Suite) -> str:
    """``main``: the suite; branch ``pr``: one comment line added to the changed kernel's
    solution, nothing else. Leaves ``main`` checked out; returns its sha (every compare's base)."""
    # All kernels share one folder, as in aa_and_regression.py: --changed-only must tell a
    # kernel's own files from its neighbours' there (docs/compare.md).
    (repo / "kernels").mkdir(parents=True)
    git(repo, "init", "-q", "-b", "main")
    (repo / ".gitignore").write_text("__pycache__/\n*.so\n")
    (repo / "kbench.toml").write_text(suite_toml(suite))
    for kernel in suite.kernels:
        (repo / "kernels" / kernel.solution).write_text(kernel.source)
        (repo / "kernels" / f"{Path(kernel.solution).stem}_ref.py").write_text(kernel.ref)
    base = commit_all(repo, "suite")
    git(repo, "checkout", "-q", "-b", "pr")
    changed = repo / "kernels" / suite.kernel(suite.changed).solution
    with changed.open("a") as file:
        file.write(f"{COMMENT_PREFIX[changed.suffix]} a pull request that changes a comment only\n")
    commit_all(repo, f"{suite.changed}: a comment")
    git(repo, "checkout", "-q", "main")
    return base


# -- one compare ---------------------------------------------------------------------------------

#: set by the caller's shell, they would override what the cache folder decides (kbench-ci lets a
#: folder the person set win), so a "cold" run would not be cold: removed for every compare
CACHE_VARIABLES = ("TRITON_CACHE_DIR", "TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_AUTOTUNING", "KBENCH_CI_CEILINGS_DIR",
                   "KBENCH_CI_NO_CACHE", "KBENCH_CI_FRESH_WORKER", "KBENCH_CI_CACHE_DIR")


@dataclass(frozen=True)
class Run:
    label: str
    #: the branch checked out as the head (the working tree)
    checkout: str
    extra_args: tuple[str, ...]
    output: Path


def compare_environment(cache: Path, code: Path | None = None) -> dict[str, str]:
    """``code``: a folder holding another kbench_ci/ (``--code``), imported instead of this checkout's."""
    env = {key: value for key, value in os.environ.items() if key not in CACHE_VARIABLES}
    env["KBENCH_CI_CACHE_DIR"] = str(cache)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(code or REPO), os.environ.get("PYTHONPATH")]))
    env.setdefault("PYTHONUNBUFFERED", "1")
    return env


def run_compare(repo: Path, run: Run, base: str, cache: Path, args: argparse.Namespace) -> dict[str, Any]:
    """One ``kbench-ci compare`` with ``run.checkout`` as the working tree; its results.json,
    with ``process_wall`` (seconds around the subprocess) added as gate_wall_time.split reads it."""
    git(repo, "checkout", "-q", run.checkout)
    shutil.rmtree(run.output, ignore_errors=True)
    command = [sys.executable, "-c", CLI_SHIM, "compare", "--base", base, "--output-dir", str(run.output),
               "--device", args.device, "--threshold", args.threshold, "--time-budget", str(args.time_budget),
               "--no-fail", *run.extra_args]
    started = time.perf_counter()
    done = subprocess.run(command, cwd=repo, env=compare_environment(cache, args.code), capture_output=True, text=True,
                          timeout=args.timeout)
    wall = time.perf_counter() - started
    (run.output.parent / f"{run.output.name}.stderr").write_text(done.stderr)
    if done.returncode != 0 or not (run.output / "results.json").is_file():
        sys.stderr.write(done.stdout[-3000:] + done.stderr[-4000:])
        raise SystemExit(f"{run.label}: compare failed (exit {done.returncode}); output in {run.output}")
    data = json.loads((run.output / "results.json").read_text())
    data["process_wall"] = wall
    return data


# -- reading results.json ------------------------------------------------------------------------


def verdict_counts(data: dict[str, Any]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for case in data["cases"]:
        counts[case["verdict"]] = counts.get(case["verdict"], 0) + 1
    return counts


def measured_ids(data: dict[str, Any]) -> set[str]:
    """The cases this compare measured: those with a verdict, less the ones --changed-only left out."""
    left_out = set((data.get("changed_only") or {}).get("not_affected") or ())
    return {case["case_id"] for case in data["cases"] if case["kernel"] not in left_out}


def autotune_s(data: dict[str, Any], kernel: str) -> float:
    """Seconds in the first calls of the autotuned kernel's variants (gate_wall_time's JIT, for
    that kernel alone): where Triton tunes, or reads its cached pick, and loads the kernel. An
    upper bound on autotuning; results.json has no phase of autotuning alone."""
    return first_call_jit_s({"cases": [case for case in data["cases"] if case["kernel"] == kernel]})


def find_case(data: dict[str, Any], kernel: str, dims: dict[str, int]) -> dict[str, Any] | None:
    return next((case for case in data["cases"] if case["kernel"] == kernel and case["dims"] == dims), None)


@dataclass(frozen=True)
class EarlyStop:
    """What one run recorded about the small case's rounds (claim 4)."""

    verdict: str
    rounds: int | None
    remeasured: bool
    timing_s: float
    #: the head's notes that say the rounds stopped undecided (measure/rounds.py _note_early_stop),
    #: of the first measurement too when the case was remeasured
    notes: tuple[str, ...]

    @property
    def resolvable(self) -> str | None:
        """The smallest change the case can resolve, as its note writes it ("±1.8%")."""
        found = [m.group(1) for note in self.notes if (m := re.search(r"can resolve (±[0-9.]+%)", note))]
        return found[-1] if found else None

    @property
    def decided(self) -> bool:
        return self.verdict in ("unchanged", "slower", "faster")

    def how(self) -> str:
        """Why the rounds ended, in words."""
        if self.resolvable is not None:
            return f"early stop: stopped undecided, the case can resolve {self.resolvable}"
        if self.decided:
            return "decided before the cap (the early stop was not needed, so no resolution is reported)"
        if self.rounds is not None and self.rounds >= MAX_ADAPTIVE_ROUNDS:
            return "undecided at the round cap"
        return "undecided without an early-stop note: the time budget ended the rounds"

    @property
    def holds(self) -> bool:
        """Stopped before the cap, and said why: decided, or stopped undecided with its resolution."""
        before_cap = self.rounds is not None and self.rounds < MAX_ADAPTIVE_ROUNDS
        return before_cap and (self.decided or self.resolvable is not None)


def early_stop(case: dict[str, Any]) -> EarlyStop:
    notes: list[str] = []
    for measurement in (case.get("first_measurement") or {}, case):
        head = measurement.get("head") or {}
        notes += [note for note in head.get("notes") or () if note.startswith("stopped after")]
    return EarlyStop(verdict=case["verdict"], rounds=case.get("n_rounds"), remeasured=bool(case.get("remeasured")),
                     timing_s=(case.get("seconds") or {}).get("timing", 0.0), notes=tuple(notes))


# -- the report ----------------------------------------------------------------------------------

SPLIT_COLUMNS = ("wall", "setup", "build", "start-up", "JIT", "correctness", "timing", "audit", "report/other")


def run_row(label: str, data: dict[str, Any], suite: Suite) -> list[str]:
    row = split(data)
    measured = len(measured_ids(data))
    counts = verdict_counts(data)
    return [label, *(f"{row[column]:.1f}" for column in SPLIT_COLUMNS[:5]),
            f"{autotune_s(data, suite.autotuned):.1f}", *(f"{row[column]:.1f}" for column in SPLIT_COLUMNS[5:]),
            builds_cached(data), f"{measured} / {len(suite.case_ids()) - measured}",
            ", ".join(f"{n} {v}" for v, n in sorted(counts.items()))]


def check_changed_only(changed: dict[str, Any], warm: dict[str, Any], suite: Suite) -> list[tuple[str, str, bool]]:
    """Claim 1: only the changed kernel's cases, in <= 25% of the warm full compare's wall time."""
    measured = measured_ids(changed)
    wanted = suite.case_ids(suite.changed)
    selection = changed.get("changed_only") or {}
    why = f"; measured everything because: {selection['everything_reason']}" if selection.get("everything_reason") else ""
    ratio = changed["process_wall"] / warm["process_wall"]
    return [
        (f"1. c measures only `{suite.changed}`'s {len(wanted)} cases",
         f"measured {len(measured)}: {', '.join(sorted(measured)) or 'none'}; not affected: "
         f"{', '.join(selection.get('not_affected') or ()) or 'none'}{why}", measured == wanted),
        ("1. wall(c) / wall(b) <= 0.25",
         f"{changed['process_wall']:.1f} s / {warm['process_wall']:.1f} s = {ratio:.3f}; {floor_of_ratio(changed, warm, wanted)}",
         ratio <= 0.25),
    ]


def measured_s(data: dict[str, Any], wanted: set[str]) -> float:
    """Seconds the ``wanted`` cases spent in correctness, timing and audit (not build or load)."""
    return sum(sum(v for k, v in (case.get("seconds") or {}).items() if k not in ("total", "build", "load"))
               for case in data["cases"] if case["case_id"] in wanted)


def floor_of_ratio(changed: dict[str, Any], warm: dict[str, Any], wanted: set[str]) -> str:
    """How low c/b could go: the changed kernel's cases' own measurement in b (load, correctness,
    timing, audit) over b's wall is the ratio of a compare with no start-up, no build and no
    report, that measures those cases as b did; c's costs outside its cases follow."""
    own = measured_s(warm, wanted)
    outside = changed["process_wall"] - measured_s(changed, wanted)
    return (f"floor: the changed cases' correctness, timing and audit took {own:.1f} s of b's {warm['process_wall']:.1f} s "
            f"({own / warm['process_wall']:.3f}); c spent {outside:.1f} s outside them (process start, worker start-up, "
            "build, report)")


def check_autotune(warm: dict[str, Any], suite: Suite) -> list[tuple[str, str, bool]]:
    """Claim 2: the warm run's autotuning share of its wall time."""
    tuned = autotune_s(warm, suite.autotuned)
    jit = first_call_jit_s(warm)
    share = tuned / warm["process_wall"]
    return [(f"2. autotune share of b (`{suite.autotuned}` first calls) <= 0.10",
             f"{tuned:.2f} s of {warm['process_wall']:.1f} s = {share:.3f} (all first calls: {jit:.2f} s = "
             f"{jit / warm['process_wall']:.3f}; compiled versions held: {compiled_versions(warm, suite.autotuned)})",
             share <= 0.10)]


def compiled_versions(data: dict[str, Any], kernel: str) -> str:
    """How many compiled versions each autotuned side held (1 per config when it tuned, fewer when
    the pick came from the cache), as 'min-max' over the kernel's variants."""
    versions = [k.get("versions") for case in data["cases"] if case["kernel"] == kernel
                for side in ("base", "head") for k in ((case.get(side) or {}).get("compiled") or ())
                if k.get("versions") is not None]
    return f"{min(versions)}-{max(versions)}" if versions else "not recorded"


def check_verdicts(runs: list[tuple[str, dict[str, Any]]]) -> list[tuple[str, str, bool]]:
    """Claim 3: the full A/A runs together, >= 90% unchanged, no slower/faster/failed/incorrect."""
    total: dict[str, int] = {}
    for _, data in runs:
        for verdict, n in verdict_counts(data).items():
            total[verdict] = total.get(verdict, 0) + n
    cases = sum(total.values())
    unchanged = total.get("unchanged", 0)
    wrong = sum(total.get(v, 0) for v in ("slower", "faster", "failed", "incorrect"))
    per_run = "; ".join(f"{label}: " + ", ".join(f"{n} {v}" for v, n in sorted(verdict_counts(data).items())) for label, data in runs)
    return [
        ("3. A/A (a + b) `unchanged` >= 90%", f"{unchanged} of {cases} ({unchanged / max(cases, 1):.1%}); {per_run}",
         cases > 0 and unchanged >= 0.9 * cases),
        ("3. A/A (a + b): 0 slower, faster, failed, incorrect",
         ", ".join(f"{total.get(v, 0)} {v}" for v in ("slower", "faster", "failed", "incorrect", "inconclusive")), wrong == 0),
    ]


def check_early_stop(runs: list[tuple[str, dict[str, Any]]], suite: Suite) -> list[tuple[str, str, bool]]:
    """Claim 4: the small case in every run that measured it."""
    kernel, dims = suite.small
    rows: list[tuple[str, str, bool]] = []
    for label, data in runs:
        case = find_case(data, kernel, dims)
        if case is None:
            continue
        stop = early_stop(case)
        rows.append((f"4. {case_id(kernel, dims)} in {label}: stops before the cap",
                     f"{stop.verdict}{' (remeasured)' if stop.remeasured else ''}, {stop.rounds} of at most "
                     f"{MAX_ADAPTIVE_ROUNDS} rounds, timing {stop.timing_s:.1f} s; {stop.how()}"
                     + "".join(f'\n  note: "{note}"' for note in stop.notes), stop.holds))
    return rows or [(f"4. {case_id(kernel, dims)}", "not measured in any run", False)]


# -- main ----------------------------------------------------------------------------------------


def print_checks(checks: list[tuple[str, str, bool]], *, judged: bool) -> None:
    """PASS/FAIL per claim, the figure under it (indented, line by line)."""
    print()
    for what, figure, passed in checks:
        verdict = ("PASS" if passed else "FAIL") + ("" if judged else " (smoke: not judged)")
        print(f"{verdict:<26} {what}")
        for line in figure.splitlines():
            print(f"{'':<26} {line}")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--smoke", action="store_true", help="CPU: Triton kernels only, tiny sizes, not judged")
    parser.add_argument("--out", type=Path, default=Path("/tmp/changed_only"),
                        help="folder for the repository, the cache and each run's results (default /tmp/changed_only)")
    parser.add_argument("--threshold", default="0.01", help="every compare's --threshold (default 0.01)")
    parser.add_argument("--time-budget", type=float, default=None, help="every compare's --time-budget (default 3; smoke 1)")
    parser.add_argument("--device", default=None, help="every compare's --device (default cuda; smoke cpu)")
    parser.add_argument("--code", type=Path, default=None,
                        help="a folder holding kbench_ci/ as it was at another revision (git archive REV kbench_ci), "
                             "run instead of this checkout's: an older revision's cost, on the same machine")
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds per compare before it is killed (default 900)")
    args = parser.parse_args(argv)
    args.device = args.device or ("cpu" if args.smoke else "cuda")
    if args.time_budget is None:
        args.time_budget = 1.0 if args.smoke else 3.0
    return args


def prepare(out: Path, suite: Suite) -> tuple[Path, Path, str]:
    """A fresh repository and an empty cache folder under ``out`` (only what this script writes
    there is removed); the repository, the cache and the base sha."""
    repo, cache = out / "repo", out / "cache"
    for path in (repo, cache):
        shutil.rmtree(path, ignore_errors=True)
    out.mkdir(parents=True, exist_ok=True)
    cache.mkdir()
    return repo, cache, make_repository(repo, suite)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.code is not None:
        args.code = args.code.resolve()  # the compares run in the suite's repository
    suite = smoke_suite() if args.smoke else gpu_suite()
    out = args.out.resolve()
    repo, cache, base = prepare(out, suite)
    runs = [
        Run("a. full A/A, cold cache", "main", (), out / "a-cold"),
        Run("b. full A/A, warm cache", "main", (), out / "b-warm"),
        Run(f"c. changed only ({suite.changed})", "pr", ("--changed-only",), out / "c-changed-only"),
    ]
    print(f"suite: {len(suite.case_ids())} cases, device {args.device}, threshold {args.threshold}, time budget "
          f"{args.time_budget:g} s; base {base[:12]}; folder {out}", flush=True)
    results: list[tuple[str, dict[str, Any]]] = []
    for run in runs:
        data = run_compare(repo, run, base, cache, args)
        results.append((run.label, data))
        print(f"  {run.label}: {data['process_wall']:.1f} s, {data['gate']['summary']}", flush=True)

    headers = ["run", *SPLIT_COLUMNS[:5], "of which autotune", *SPLIT_COLUMNS[5:], "builds cached",
               "measured / not", "verdicts"]
    print("\nseconds (wall: around the compare process; the rest from its results.json)\n")
    print(table(headers, [run_row(label, data, suite) for label, data in results]))

    warm, changed = results[1][1], results[2][1]
    checks = [*check_changed_only(changed, warm, suite), *check_autotune(warm, suite),
              *check_verdicts(results[:2]), *check_early_stop(results, suite)]
    print_checks(checks, judged=not args.smoke)
    if args.smoke:
        return 0  # every compare ran (run_compare stops the script otherwise): all a CPU can show
    passed = all(passed for _, _, passed in checks)
    print(f"\nacceptance: {'PASSED' if passed else 'FAILED'}")
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())
