"""A head that fills the disk in its own turn fails there (docs/isolation.md):
the judge's next write of its own (its events file, on the same disk) came in the base's turn,
and the judge failed there with no side blamed. Needs a small file system of its own for the
run's temporary folder: a tmpfs it mounts (root); elsewhere it is skipped, saying so."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.gate.test_judge_worker_channels_cpu import FIXTURES
from tests.support.suite_repo import FAST_DEFAULTS, TempRepo, suite_toml


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    mount = tmp_path / "small-disk"
    mount.mkdir()
    made = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=200m", "tmpfs", str(mount)], capture_output=True, text=True)
    if made.returncode != 0:
        pytest.skip(f"cannot mount a 200 MiB tmpfs for the run's temporary folder (needs root): {made.stderr.strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def test_a_head_that_fills_the_disk_in_its_turn_fails_there(tmp_path: Path, small_disk: Path) -> None:
    repo = TempRepo(tmp_path / "repo")
    toml = suite_toml([{"name": "mm", "kind": "pytorch", "shapes": [{"M": 96, "N": 96, "K": 96}]}],
                      {**FAST_DEFAULTS, "correctness_trials": 2, "rounds": 4})
    repo.commit({"kbench.toml": toml, "kernels/mm_ref.py": (FIXTURES / "ref.py").read_text(),
                 "kernels/mm.py": (FIXTURES / "honest.py").read_text()}, "an honest matmul")
    repo.git("checkout", "-q", "-b", "pr")
    repo.commit({"kernels/mm.py": (FIXTURES / "fill_disk_turn.py").read_text()}, "fills the disk")
    marks = Path(tempfile.mkdtemp(prefix="kbench-fill_disk_turn-", dir="/dev/shm" if Path("/dev/shm").is_dir() else None))
    environment = {key: value for key, value in os.environ.items() if key != "CUDA_VISIBLE_DEVICES"}
    environment.update(KBENCH_JUDGE_TEST_MARKS=str(marks), TMPDIR=str(small_disk))
    out = tmp_path / "out"
    completed = subprocess.run(
        [sys.executable, "-m", "kbench_ci", "compare", "--base", "main", "--device", "cpu", "--isolation", "judge",
         "--threshold", "0.05", "--output-dir", str(out), "--no-cache"],
        cwd=repo.root, env=environment, capture_output=True, text=True, timeout=600,
    )
    log = (marks / "fill_disk_turn.log").read_text() if (marks / "fill_disk_turn.log").is_file() else ""
    print(log, completed.stderr[-2500:])
    assert "filled" in log, "the head never filled the disk: this test would prove nothing"
    results = json.loads((out / "results.json").read_text())
    (case,) = results["cases"]
    print(case["verdict"], case.get("message"), case["base"], case["head"])
    assert case["base"]["status"] == "ok", case["base"]
    assert case["head"]["status"] == "error", case["head"]
    assert "filled" in (case["head"].get("message") or ""), case["head"]
    assert case["verdict"] not in ("fixed", "faster", "unchanged", "inconclusive"), case
    assert completed.returncode == 1
