"""End to end on the CPU with a fake device ceiling: a solution timed faster
than its declared work allows is `incorrect` (exit 1); the same solution with its true work
declared passes and its report shows the share of the ceiling; a bad expression is usage (exit 2).

The fake ceiling is 1 TFLOP/s (float32): a 768^3 matmul (9.1e8 FLOPs) then has a floor of
0.72 ms, and two CPU cores cannot beat ~2.4 ms at their peak, so the honest case cannot fall
below it, whatever else runs on the machine; declaring 1000x the work puts the floor at 0.72 s.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import torch

from kbench_ci.measure.speed_of_light import CEILINGS_DIR_ENV, Ceilings, device_key, save_ceilings
from tests.support.redteam import HONEST, MATMUL_REF

ROOT = Path(__file__).resolve().parents[3]
DIMS = ("--M=768", "--N=768", "--K=768")


def bench(output_dir: Path, ceilings: Path, *flags: str) -> subprocess.CompletedProcess[str]:
    environment = dict(os.environ, **{CEILINGS_DIR_ENV: str(ceilings)})
    environment.pop("CUDA_VISIBLE_DEVICES", None)
    return subprocess.run(
        [sys.executable, "-m", "kbench_ci", "bench", str(HONEST / "torch_mm.py"), "--implementation=pytorch",
         f"--ref={MATMUL_REF}", "--device=cpu", *DIMS, f"--output-dir={output_dir}", "--num-warmup=2",
         "--num-trials=10", *flags],
        capture_output=True, text=True, timeout=300, cwd=ROOT, env=environment,
    )


def fake_ceilings(folder: Path) -> Path:
    save_ceilings(Ceilings(device=device_key(torch.device("cpu")), copy_bytes_per_s=1e12,
                           matmul_flops_per_s={"float32": 1e12}), folder)
    return folder


def test_a_time_below_the_declared_floor_is_incorrect(tmp_path: Path) -> None:
    ceilings = fake_ceilings(tmp_path / "ceilings")
    done = bench(tmp_path / "out", ceilings, "--flops=2*M*N*K*1000")
    solution = json.loads((tmp_path / "out" / "results.json").read_text())["case"]["variants"][0]
    print(solution["message"])
    assert done.returncode == 1, done.stderr[-3000:]
    assert solution["status"] == "incorrect"
    assert "below the physical floor of 7.2" in solution["message"]  # 7.2e5 us
    assert "1 TFLOP/s measured float32 matmul rate" in solution["message"]


def test_the_true_work_passes_and_the_report_shows_the_share_of_the_ceiling(tmp_path: Path) -> None:
    ceilings = fake_ceilings(tmp_path / "ceilings")
    done = bench(tmp_path / "out", ceilings, "--flops=2*M*N*K", "--bytes=3*768*768*4")
    assert done.returncode == 0, done.stderr[-3000:]
    solution = json.loads((tmp_path / "out" / "results.json").read_text())["case"]["variants"][0]
    figures = solution["speed_of_light"]
    assert figures["source"] == "declared" and figures["flops"] == 2 * 768**3 and figures["floor_ms"] > 0.7
    report = (tmp_path / "out" / "benchmark.md").read_text()
    section = report.split("## Speed of light")[1].split("##")[0]
    print(section)
    assert "% of the measured float32 matmul rate" in section and "floor 724.8 us" in section
    assert "<1% of the measured copy bandwidth" in section


def test_a_bad_work_expression_is_usage_and_names_the_flag(tmp_path: Path) -> None:
    done = bench(tmp_path / "out", tmp_path, "--bytes=3*Q*4")
    assert done.returncode == 2
    assert "--bytes '3*Q*4'" in done.stderr and "Q" in done.stderr
    assert not (tmp_path / "out" / "results.json").exists()


def test_with_a_warm_cache_the_floor_is_not_applied(tmp_path: Path) -> None:
    """Found in review: inputs in cache run faster than any copy of memory; --no-flush-l2 keeps
    the figures and drops the floor."""
    ceilings = fake_ceilings(tmp_path / "ceilings")
    done = bench(tmp_path / "out", ceilings, "--flops=2*M*N*K*1000", "--no-flush-l2")
    solution = json.loads((tmp_path / "out" / "results.json").read_text())["case"]["variants"][0]
    assert done.returncode == 0, done.stderr[-3000:]
    assert solution["status"] == "ok" and solution["speed_of_light"]["floor_ms"] is None


def test_a_time_below_an_inferred_floor_is_a_loud_warning_not_a_verdict(tmp_path: Path) -> None:
    """With no work declared, the floor is inferred (every input read once, every
    output written once) and only warns. A fake copy bandwidth of 1 MB/s puts the floor of the
    768^2 matmul's few MB at seconds, far above its real time of milliseconds."""
    ceilings = tmp_path / "ceilings"
    save_ceilings(Ceilings(device=device_key(torch.device("cpu")), copy_bytes_per_s=1e6,
                           matmul_flops_per_s={"float32": 1e12}), ceilings)
    done = bench(tmp_path / "out", ceilings)
    assert done.returncode == 0, done.stderr[-3000:]
    solution = json.loads((tmp_path / "out" / "results.json").read_text())["case"]["variants"][0]
    assert solution["status"] == "ok"
    figures = solution["speed_of_light"]
    assert figures["source"] == "inferred" and figures["floor_ms"] > 1000
    warnings = [note for note in solution["notes"] if note.startswith("⚠️")]
    print(warnings)
    assert len(warnings) == 1 and "below the physical floor" in warnings[0]
    assert "below the physical floor" in (tmp_path / "out" / "benchmark.md").read_text()
