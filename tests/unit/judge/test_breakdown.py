"""Where a judged case's time goes (kbench_ci.judge.breakdown): steps nest, each keeps its own
time, and what a side says of its load is moved out of the judge's wait for it."""

from __future__ import annotations

import time
from pathlib import Path

from kbench_ci.judge.breakdown import Breakdown, Line


def _spin(seconds: float) -> None:
    until = time.perf_counter() + seconds
    while time.perf_counter() < until:
        pass


def test_a_step_keeps_its_own_time_and_the_steps_inside_it_theirs(tmp_path: Path) -> None:
    record = Breakdown(str(tmp_path / "steps.jsonl"))
    began = time.perf_counter()
    with record.step("judge", "rounds"):
        _spin(0.02)
        for _ in range(3):
            with record.step("head", "timed calls"):
                _spin(0.01)
    total = time.perf_counter() - began
    lines = {(line.process, line.step): line for line in record.lines("case")}
    calls, rounds = lines[("head", "timed calls")], lines[("judge", "rounds")]
    assert calls.count == 3 and rounds.count == 1
    assert calls.seconds >= 0.03 and rounds.seconds >= 0.02
    # nothing counted twice: the lines add up to the outer step's time, within the clock's reads
    assert calls.seconds + rounds.seconds <= total


def test_a_sides_own_figure_is_moved_out_of_the_step_it_was_part_of(tmp_path: Path) -> None:
    record = Breakdown(str(tmp_path / "steps.jsonl"))
    with record.step("head", "load"):
        _spin(0.03)
        record.split("head", "load: first call", 0.02)
        record.split("head", "load: compile", None)  # a side that has none
    lines = {line.step: line.seconds for line in record.lines("case")}
    assert set(lines) == {"load", "load: first call"}
    assert lines["load: first call"] == 0.02
    assert lines["load"] >= 0.01


def test_the_lines_are_written_a_case_at_a_time_and_read_back(tmp_path: Path) -> None:
    path = tmp_path / "steps.jsonl"
    record = Breakdown(str(path))
    record.add("judge", "start", 1.5)
    with record.step("base", "load"):
        pass
    record.write("add[N=1]")
    with record.step("base", "load"):
        pass
    record.write("add[N=2]")
    lines = [Line.from_json(text) for text in path.read_text().splitlines()]
    assert [(line.case, line.process, line.step) for line in lines] == [
        ("add[N=1]", "judge", "start"), ("add[N=1]", "base", "load"), ("add[N=2]", "base", "load")]
    assert lines[0].seconds == 1.5


def test_off_it_records_nothing(tmp_path: Path) -> None:
    record = Breakdown(None)
    with record.step("judge", "rounds"):
        record.split("head", "load", 1.0)
    record.add("judge", "start", 1.0)
    record.write("case")
    assert record.lines("case") == [] and not record.on
    assert list(tmp_path.iterdir()) == []
