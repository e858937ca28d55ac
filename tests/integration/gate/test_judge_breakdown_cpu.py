"""Where a judged compare's time goes (``KBENCH_CI_JUDGE_BREAKDOWN``, kbench_ci/judge/breakdown.py):
one ``compare --isolation judge --device cpu`` of two cases writes, for each case, the judge's
steps by process, and ``scripts/acceptance/judge_breakdown.py`` prints them. The steps are the judge's own
clock, each without the steps inside it, so a case's steps add up to no more than the case's
wall time in results.json, and hold most of it.

    python -m pytest -s tests/integration/gate/test_judge_breakdown_cpu.py   # prints the tables
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from kbench_ci.judge.breakdown import Line
from tests.support.judge_clock import CONTROL, Judged, judge

SHAPES = ({"N": 1 << 12}, {"N": 1 << 14})
SCRIPT = Path(__file__).resolve().parents[3] / "scripts" / "acceptance" / "judge_breakdown.py"


@pytest.fixture(scope="module")
def measured(tmp_path_factory: pytest.TempPathFactory) -> tuple[Judged, Path]:
    root = tmp_path_factory.mktemp("judge-breakdown")
    steps = root / "steps.jsonl"
    result = judge(root, {f"{CONTROL}_{index}": (CONTROL, shape) for index, shape in enumerate(SHAPES)},
                   {"correctness_trials": 2, "rounds": 4}, ["--device", "cpu", "--no-fail"], cpu=True,
                   env={"KBENCH_CI_JUDGE_BREAKDOWN": str(steps)})
    assert result.completed.returncode == 0, result.completed.stderr[-3000:]
    shown = subprocess.run([sys.executable, str(SCRIPT), str(steps), "--results", str(root / "out" / "results.json")],
                           capture_output=True, text=True, timeout=120)
    print(f"\n{shown.stdout}{shown.stderr}")
    return result, steps


def test_every_case_has_its_steps_by_process(measured: tuple[Judged, Path]) -> None:
    judged, steps = measured
    lines = [Line.from_json(text) for text in steps.read_text().splitlines()]
    cases = {case["case_id"] for case in judged.cases.values()}
    assert {line.case for line in lines} == cases
    assert len({line.judge for line in lines}) == 1  # one judge served the command
    for case in cases:
        found = {(line.process, line.step) for line in lines if line.case == case}
        for side in ("base", "head"):
            assert (side, "load (imports, setup, a first call)") in found, found
            assert (side, "correctness trials") in found, found
            assert (side, "timed calls (handoffs)") in found, found
        assert ("judge", "versions (inputs, the reference's outputs)") in found, found
        assert ("judge", "turns (pause, resume, strays ended)") in found, found
    # the command's start is told once, with its first case
    assert sum(line.step == "start (imports torch)" for line in lines) == 1


def test_a_cases_steps_add_up_to_no_more_than_its_wall_time_and_most_of_it(measured: tuple[Judged, Path]) -> None:
    judged, steps = measured
    lines = [Line.from_json(text) for text in steps.read_text().splitlines()]
    start = next(line for line in lines if line.step == "start (imports torch)")
    for case in judged.cases.values():
        wall = case["seconds"]["total"]
        in_steps = sum(line.seconds for line in lines if line.case == case["case_id"] and line is not start)
        if case["case_id"] == start.case:
            # the parent waits for the judge's start in the command's first case
            assert 0.5 * wall < in_steps + start.seconds, (case["case_id"], in_steps, start.seconds, wall)
        else:
            assert 0.5 * wall < in_steps, (case["case_id"], in_steps, wall)
        # within the case's events (the judge's CaseStarted and CaseFinished), give or take the clocks' reads
        assert in_steps <= wall + 0.01, (case["case_id"], in_steps, wall)


def test_the_script_prints_a_table_a_command(measured: tuple[Judged, Path], tmp_path: Path) -> None:
    _, steps = measured
    done = subprocess.run([sys.executable, str(SCRIPT), str(steps)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "command 1 (judge pid" in done.stdout and "2 case(s)" in done.stdout, done.stdout
    header = next(line for line in done.stdout.splitlines() if line.startswith("| step (s)"))
    assert [cell.strip() for cell in header.strip("|").split("|")][:5] == ["step (s)", "times", "judge", "workers", "base"]
    assert "| all steps" in done.stdout
    missing = subprocess.run([sys.executable, str(SCRIPT), str(tmp_path / "none.jsonl")], capture_output=True, text=True,
                             timeout=120)
    assert missing.returncode == 2 and "KBENCH_CI_JUDGE_BREAKDOWN" in missing.stderr.splitlines()[-1], missing.stderr
    no_results = subprocess.run([sys.executable, str(SCRIPT), str(steps), "--results", str(tmp_path / "results.json")],
                                capture_output=True, text=True, timeout=120)
    assert no_results.returncode == 2 and "--results" in no_results.stderr.splitlines()[-1], no_results.stderr
    assert "Traceback" not in no_results.stderr
