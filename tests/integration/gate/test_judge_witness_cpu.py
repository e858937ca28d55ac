"""``bench --isolation judge`` with no baseline: nothing trusted is timed beside the solution, so
the judge times ref.py's reference (trusted in ``bench`` and ``run``) in a worker of its own as
the clock's witness. Without it a head that halves its own clock read fine: the gap it left
had nothing to be judged against. The witness is not reported as a baseline.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.integration.gate.test_compare_cpu import kbench

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "judge_clock"


def _bench(tmp_path: Path, solution: str) -> dict:  # type: ignore[type-arg]
    folder = tmp_path / "kernel"
    folder.mkdir(exist_ok=True)
    for name in ("honest.py", "ref.py", solution):
        shutil.copy(FIXTURES / name, folder / name)
    out = tmp_path / f"out-{solution}"
    completed = kbench(folder, "bench", str(folder / solution), "--implementation=pytorch", f"--ref={folder / 'ref.py'}",
                       f"--output-dir={out}", "--device=cpu", "--isolation=judge", "--num-trials=12", "--M=768", "--N=768",
                       "--K=768", env={"KBENCH_JUDGE_CLOCK_MARKS": str(tmp_path / "marks")}, timeout=600)
    assert (out / "results.json").is_file(), completed.stdout + completed.stderr
    return {"completed": completed, "results": json.loads((out / "results.json").read_text())}


@pytest.mark.parametrize("solution", ["honest.py", "rebind_timer.py"])
def test_a_bench_with_no_baseline_is_held_to_the_judges_clock_by_a_witness(tmp_path: Path, solution: str) -> None:
    ran = _bench(tmp_path, solution)
    variants = ran["results"]["case"]["variants"]
    assert [variant["label"] for variant in variants] == ["solution"]  # the witness is not reported
    (variant,) = variants
    clock = variant["outside_clock"]
    assert clock is not None and clock["reference"] == "clock-witness" and clock["reference_gap_us"] is not None
    if solution == "honest.py":
        assert variant["status"] == "ok", variant["message"]
    else:
        assert variant["status"] == "incorrect", variant
        assert variant["message"].startswith("its process reported less time than the judge's clock measured")
        assert ran["completed"].returncode == 1
