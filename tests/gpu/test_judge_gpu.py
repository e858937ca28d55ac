"""The judge's red team on the GPU: the heads of tests/fixtures/judge against an honest fp16
matmul at 4096^3 (~180 us on an H200), in one ``compare --isolation judge --threshold 0.01``.
Each must be ``incorrect`` or neither ``faster`` nor ``fixed``; the sabotaging heads must leave
the base's median within 1% of the honest case's base (CPU: tests/integration/gate/test_judge_cpu.py).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from tests.integration.gate.test_judge_cpu import CHEATS, FIXTURES, NO_WORK, _suite  # noqa: E402

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")]


def _compare(tmp: Path, isolation: str) -> dict:
    import tests.integration.gate.test_judge_cpu as cpu

    cpu.SHAPE = {"M": 4096, "N": 4096, "K": 4096}
    repo = _suite(tmp / f"repo-{isolation}", {name: (FIXTURES / f"{name}.py").read_text() for name in CHEATS})
    out = tmp / f"out-{isolation}"
    # The lock hold_lock.py and its base share: in a folder of /dev/shm made before the sides
    # start (a side makes no file at the top of /dev/shm: kbench_ci.side.harden)
    marks = Path(tempfile.mkdtemp(prefix="kbench-judge-test-", dir="/dev/shm"))
    try:
        completed = subprocess.run(
            [sys.executable, "-m", "kbench_ci", "compare", "--base", "main", "--isolation", isolation, "--threshold", "0.01",
             "--time-budget", "5", "--output-dir", str(out), "--no-cache"],
            cwd=repo.root, env={**os.environ, "KBENCH_JUDGE_TEST_LOCK": str(marks / "lock")}, capture_output=True,
            text=True, timeout=900,
        )
    finally:
        shutil.rmtree(marks, ignore_errors=True)
    assert (out / "results.json").is_file(), completed.stderr[-4000:]
    results = json.loads((out / "results.json").read_text())
    print(f"--- isolation {isolation}: exit {completed.returncode}")
    for case in results["cases"]:
        base, head = case["base"], case["head"]
        median = lambda v: sorted(s for r in v["rounds_ms"] for s in r)[len([s for r in v["rounds_ms"] for s in r]) // 2] * 1e3 if v.get("rounds_ms") else float("nan")  # noqa: E731
        print(f"{case['kernel']:18s} {case['verdict']:12s} ratio={case['ratio']} base={base['status']} {median(base):8.1f} us "
              f"head={head['status']} {median(head):8.1f} us  {str(head.get('message'))[:160]}")
    return {case["kernel"]: case for case in results["cases"]}


def _base_median_us(case: dict) -> float:
    samples = sorted(s for r in case["base"]["rounds_ms"] for s in r)
    return samples[len(samples) // 2] * 1e3


def test_no_head_reaches_the_verdict_on_the_gpu(tmp_path: Path) -> None:
    judged = _compare(tmp_path, "judge")
    if os.environ.get("KBENCH_JUDGE_GPU_CONTROL"):
        _compare(tmp_path, "process")  # the same heads in one process, for the record
    control = _base_median_us(judged["honest"])
    for name in CHEATS:
        case = judged[name]
        assert case["verdict"] not in ("faster", "fixed"), (name, case["verdict"])
        assert case["base"]["status"] == "ok", (name, case["base"])
        if name in NO_WORK:
            assert case["head"]["status"] == "incorrect", (name, case["head"])
    for name in ("sabotage_base", "signal_base"):
        drift = _base_median_us(judged[name]) / control - 1
        print(f"{name}: base median {_base_median_us(judged[name]):.1f} us vs {control:.1f} us beside the honest head ({drift:+.2%})")
        assert abs(drift) < 0.01
