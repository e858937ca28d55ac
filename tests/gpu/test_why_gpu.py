"""What changed, on a GPU: the launch anatomy and ptxas's figures of a head that raises register
pressure, the speed of light of a CUDA vector add against this GPU's measured copy bandwidth, a
declared floor that makes a too-fast time incorrect, and the Triton autotuner's pick.
Skipped without CUDA; the figures are printed for the closing notes."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.redteam import HONEST, MATMUL_REF

pytestmark = pytest.mark.gpu

ROOT = Path(__file__).resolve().parents[2]
TRUTH = ROOT / "tests" / "fixtures" / "truth"
N = 2**24

#: a head that keeps 64 floats per thread live across a loop: more registers, fewer blocks per SM
PRESSURE = """\
extern "C" __global__ void vadd_kernel(const float* a, const float* b, float* c, long n) {
  long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float x = a[i], y = b[i], r[64];
#pragma unroll
  for (int k = 0; k < 64; k++) r[k] = x * (k + 1) + y;
  float s = 0.0f;
#pragma unroll
  for (int k = 0; k < 64; k++) s += r[k] * r[63 - k];
  c[i] = x + y + (s == 1.2345e30f ? 1.0f : 0.0f);
}

extern "C" void solve(const float* a, const float* b, float* c, long N) {
  vadd_kernel<<<(N + 255) / 256, 256>>>(a, b, c, N);
}
"""


def kbench(*args: str, cwd: Path = ROOT, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    environment = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    completed = subprocess.run([sys.executable, "-m", "kbench_ci", *args], capture_output=True, text=True,
                               timeout=timeout, cwd=cwd, env=environment)
    print(completed.stdout[-3000:])
    print(completed.stderr[-2000:], file=sys.stderr)
    return completed


def vadd_bench(tmp_path: Path, *flags: str) -> tuple[subprocess.CompletedProcess[str], dict]:
    shutil.copy(TRUTH / "vadd.cu", tmp_path / "vadd.cu")
    shutil.copy(TRUTH / "vadd_ref.py", tmp_path / "vadd_ref.py")
    assert kbench("build", str(tmp_path / "vadd.cu")).returncode == 0
    done = kbench("bench", str(tmp_path / "vadd.cu"), "--implementation=cuda-cpp", f"--ref={tmp_path / 'vadd_ref.py'}",
                  f"--N={N}", "--ptr-size=N", f"--output-dir={tmp_path / 'out'}", *flags)
    results = json.loads((tmp_path / "out" / "results.json").read_text())
    return done, results["case"]["variants"][0]


def test_a_vector_add_reads_as_a_share_of_the_measured_copy_bandwidth(tmp_path: Path) -> None:
    done, solution = vadd_bench(tmp_path, "--bytes=3*N*4")
    figures = solution["speed_of_light"]
    share = 3 * N * 4 / (figures["median_ms"] / 1e3) / figures["copy_bytes_per_s"]
    print(f"SOL vadd 2^24: median {figures['median_ms'] * 1e3:.2f} us, copy ceiling {figures['copy_bytes_per_s'] / 1e12:.3f} "
          f"TB/s, achieved {share:.1%}, floor {figures['floor_ms'] * 1e3:.2f} us")
    assert done.returncode == 0 and solution["status"] == "ok"
    assert 0.4 < share < 1.1
    (kernel,) = [k for k in solution["compiled"] if k["name"] == "vadd_kernel"]
    assert kernel["source"] == "ptxas" and 0 < kernel["registers"] < 64
    launches = solution["escape_audit"]["launches"]
    print(f"LAUNCHES vadd: {launches}")
    assert launches[0]["name"].startswith("vadd_kernel") and launches[0]["grid"][0] == N // 256


def test_a_declared_work_the_time_cannot_hold_is_incorrect(tmp_path: Path) -> None:
    done, solution = vadd_bench(tmp_path, "--bytes=3*N*4*100")
    print(f"FLOOR: {solution['message']}")
    assert done.returncode == 1 and solution["status"] == "incorrect"
    assert "below the physical floor" in solution["message"]


def test_the_triton_autotuners_pick_and_registers_are_recorded(tmp_path: Path) -> None:
    done = kbench("bench", str(HONEST / "triton_autotuned.py"), "--implementation=triton", f"--ref={MATMUL_REF}",
                  "--M=2048", "--N=2048", "--K=2048", f"--output-dir={tmp_path}")
    solution = json.loads((tmp_path / "results.json").read_text())["case"]["variants"][0]
    print(f"TRITON compiled: {solution['compiled']}")
    assert done.returncode == 0
    (kernel,) = solution["compiled"]
    assert kernel["source"] == "triton" and kernel["autotune_pick"] and kernel["versions"] >= 1
    # registers only where the pick's warps and stages single out one compiled config
    assert kernel["registers"] is None or kernel["registers"] > 0


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=True,
                          env={**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
                               "GIT_COMMITTER_EMAIL": "t@t"}).stdout.strip()


def _vadd_repo(tmp_path: Path, head_source: str, message: str) -> Path:
    """A suite of the truth vector add at N, committed as the base, and ``head_source`` as the
    head commit on top of it."""
    repo = tmp_path / "repo"
    (repo / "kernels").mkdir(parents=True)
    shutil.copy(TRUTH / "vadd.cu", repo / "kernels" / "vadd.cu")
    shutil.copy(TRUTH / "vadd_ref.py", repo / "kernels" / "vadd_ref.py")
    (repo / "kbench.toml").write_text(
        '[[kernels]]\nname = "vadd"\nsolution = "kernels/vadd.cu"\nref = "kernels/vadd_ref.py"\n'
        f'implementation = "cuda-cpp"\nptr_size = "N"\nbytes = "3*N*4"\nshapes = [{{ N = {N} }}]\n'
    )
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "base")
    (repo / "kernels" / "vadd.cu").write_text(head_source)
    git(repo, "commit", "-qam", message)
    return repo


def test_a_head_with_more_registers_says_so_in_the_compare(tmp_path: Path) -> None:
    repo = _vadd_repo(tmp_path, PRESSURE, "head: 64 live floats per thread")
    done = kbench("compare", "--base", "HEAD~1", "--changed-only", "--profile", f"--output-dir={tmp_path / 'out'}",
                  cwd=repo)
    data = json.loads((tmp_path / "out" / "results.json").read_text())
    (case,) = data["cases"]
    base_k = {k["name"]: k for k in case["base"]["compiled"]}["vadd_kernel"]
    head_k = {k["name"]: k for k in case["head"]["compiled"]}["vadd_kernel"]
    base_l, head_l = case["base"]["escape_audit"]["launches"][0], case["head"]["escape_audit"]["launches"][0]
    print(f"REGISTERS ptxas {base_k['registers']} -> {head_k['registers']}, CUPTI {base_l['registers']} -> "
          f"{head_l['registers']}, occupancy {base_l['occupancy_pct']} -> {head_l['occupancy_pct']}, verdict "
          f"{case['verdict']} {case['ratio']}")
    assert done.returncode in (0, 1)
    assert head_k["registers"] > base_k["registers"] and head_l["registers"] > base_l["registers"]
    report = (tmp_path / "out" / "benchmark.md").read_text()
    if case["verdict"] in ("slower", "faster"):
        why = report.split("## Why it changed")[1].split("##")[0]
        print(why)
        print(f"PROFILE {case['profile']}")
        assert [side["label"] for side in case["profile"]] == ["base", "head"]
        assert all(side["kernels"] or side["problem"] for side in case["profile"])
        assert f"registers {base_k['registers']} → {head_k['registers']}" in why


def test_a_head_whose_autotuner_picks_another_config_shows_both_picks(tmp_path: Path) -> None:
    """The head offers its autotuner one config that the base's list does not hold, so the two
    picks must differ; the report names both."""
    repo = tmp_path / "repo"
    (repo / "kernels").mkdir(parents=True)
    source = (HONEST / "triton_autotuned.py").read_text()
    shutil.copy(MATMUL_REF, repo / "kernels" / "ref.py")
    (repo / "kernels" / "mm.py").write_text(source)
    (repo / "kbench.toml").write_text(
        '[[kernels]]\nname = "mm"\nsolution = "kernels/mm.py"\nref = "kernels/ref.py"\n'
        'implementation = "triton"\nshapes = [{ M = 2048, N = 2048, K = 2048 }]\n'
    )
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "base")
    start = source.index("    configs=[")
    end = source.index("    ],", start) + len("    ],")
    only = ('    configs=[\n        triton.Config({"BLOCK_M": 32, "BLOCK_N": 32, "BLOCK_K": 32, "GROUP_M": 8}, '
            'num_stages=2, num_warps=2),\n    ],')
    (repo / "kernels" / "mm.py").write_text(source[:start] + only + source[end:])
    git(repo, "commit", "-qam", "head: one small config")
    done = kbench("compare", "--base", "HEAD~1", f"--output-dir={tmp_path / 'out'}", cwd=repo)
    data = json.loads((tmp_path / "out" / "results.json").read_text())
    (case,) = data["cases"]
    base_pick = case["base"]["compiled"][0]["autotune_pick"]
    head_pick = case["head"]["compiled"][0]["autotune_pick"]
    print(f"PICKS base {base_pick!r} head {head_pick!r}; verdict {case['verdict']} {case['ratio']}")
    assert done.returncode in (0, 1)
    assert base_pick and head_pick and base_pick != head_pick and "BLOCK_M: 32" in head_pick
    report = (tmp_path / "out" / "benchmark.md").read_text()
    print(report.split("## Why it changed")[1].split("## ")[0] if "## Why it changed" in report else report[:2000])
    assert f"`{base_pick}` on base" in report and f"`{head_pick}` on head" in report


#: the same kernel reshaped to load 16 floats a thread (four float4s); C++ linkage
#: gives it a new mangled name, so its launches and ptxas entry read as another kernel's by name
RESHAPED = """\
__global__ void vadd_kernel(const float4* a, const float4* b, float4* c, long n4) {
  long t = (long)blockIdx.x * blockDim.x + threadIdx.x, stride = (long)gridDim.x * blockDim.x;
  float4 x[4], y[4];
#pragma unroll
  for (int k = 0; k < 4; k++) if (t + k * stride < n4) { x[k] = a[t + k * stride]; y[k] = b[t + k * stride]; }
#pragma unroll
  for (int k = 0; k < 4; k++) if (t + k * stride < n4)
    c[t + k * stride] = make_float4(x[k].x + y[k].x, x[k].y + y[k].y, x[k].z + y[k].z, x[k].w + y[k].w);
}

extern "C" void solve(const float* a, const float* b, float* c, long N) {
  long n4 = N / 4;  // N is a multiple of 4 in this test
  vadd_kernel<<<(n4 + 1023) / 1024, 256>>>(reinterpret_cast<const float4*>(a), reinterpret_cast<const float4*>(b),
                                           reinterpret_cast<float4*>(c), n4);
}
"""


def test_a_head_that_reshapes_its_kernel_says_grid_registers_and_time_not_a_new_kernel(tmp_path: Path) -> None:
    """The H200 read "`vadd_kernel` no longer launched (was 100% of the time); a new kernel
    `vadd_kernel` (100% of the time)" for this head; the line must name the reshape."""
    repo = _vadd_repo(tmp_path, RESHAPED, "head: 16 floats per thread")
    done = kbench("compare", "--base", "HEAD~1", f"--output-dir={tmp_path / 'out'}", cwd=repo)
    assert done.returncode in (0, 1)
    data = json.loads((tmp_path / "out" / "results.json").read_text())
    (case,) = data["cases"]
    base_l, head_l = case["base"]["escape_audit"]["launches"][0], case["head"]["escape_audit"]["launches"][0]
    print(f"LAUNCHES base {base_l}\nhead {head_l}\nverdict {case['verdict']} {case['ratio']}")
    assert base_l["grid"][0] == N // 256 and head_l["grid"][0] == N // 4096
    report = (tmp_path / "out" / "benchmark.md").read_text()
    (changed,) = [line for line in report.splitlines() if line.startswith("Changed: ")]
    print(changed)
    assert "no longer launched" not in changed and "a new kernel" not in changed
    assert "`vadd_kernel` reshaped (the same kernel):" in changed
    assert f"grid {N // 256} → {N // 4096}" in changed and "us per call" in changed
    assert "grid ÷ SMs" in report and "blocks/SM" not in report
    if case["verdict"] in ("slower", "faster"):
        why = report.split("## Why it changed")[1].split("##")[0]
        print(why)
        assert "reshaped (the same kernel)" in why and f"grid {N // 256} → {N // 4096}" in why
        assert "us per call" in why and "registers" in why
