"""Contents of its own for every timed call (where the reference is cheap): the
heads that replay what they have seen, against an honest base, in one ``compare --isolation
judge --device cpu`` whose judge may spend up to 10 s making a version (so the CPU's 512^3
matmul qualifies; the default bound is 5 ms).

Without it (tests/integration/gate/test_judge_clock_cpu.py) the replaying heads are caught by
the probe in the rounds: ``incorrect``. With it no timed call meets contents twice, so their
stores never answer one: they read as the honest kernel reads, ``ok``, and not many times faster
than the base as a hit would make them. A pool version repeated into the timed calls would make
them read faster instead (a copy against a matmul), or ``incorrect`` by the probe.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from kbench_ci.judge.trials import PROBE_VERSION, fresh_each_call
from tests.support.judge_clock import CONTROL, Judged, judge, median_us, table

SHAPE = {"M": 512, "N": 512, "K": 512}
DEFAULTS = {"correctness_trials": 2, "rounds": 8}
HEADS = ("replay_seen", "replay_until_new", CONTROL)


@pytest.fixture(scope="module")
def judged(tmp_path_factory: pytest.TempPathFactory) -> Judged:
    root = tmp_path_factory.mktemp("judge-fresh")
    result = judge(root, {head: (head, SHAPE) for head in HEADS}, DEFAULTS, ["--device", "cpu", "--threshold", "0.05"],
                   cpu=True, env={"KBENCH_CI_JUDGE_FRESH_MS": "10000"})
    print(f"\ncompare exited {result.completed.returncode}\n{table(result)}")
    return result


@pytest.mark.parametrize("head", HEADS)
def test_every_timed_call_has_contents_of_its_own_and_a_replayer_reads_as_honest(judged: Judged, head: str) -> None:
    case = judged.case(head)
    for label in ("base", "head"):
        variant = case[label]
        assert variant["status"] == "ok", variant
        assert "every timed call on contents of its own" in variant["fresh_inputs"], variant["fresh_inputs"]
        versions = [version for round_ in variant["round_versions"] for version in round_]
        assert len(versions) >= DEFAULTS["rounds"] * 10 and set(versions) == {PROBE_VERSION}, variant["round_versions"]
    # A store that answered would cost a copy against a 512^3 matmul: many times faster. The
    # verdict is not asserted: an A/A at 5% on two busy cores reads `faster` now and then (each
    # round's calls here swing 1.7x between two speeds of the core), and that is the statistics'
    # business (tests/unit/test_stats.py), not this test's.
    assert case["verdict"] != "incorrect", case
    assert median_us(case["head"]) > 0.5 * median_us(case["base"]), table(judged)


def test_contents_of_their_own_need_a_cheap_version_and_memory_for_a_round_of_them() -> None:
    assert fresh_each_call(0.4, affordable=12, calls_per_round=11, max_ms=1.0)
    assert not fresh_each_call(1.5, affordable=12, calls_per_round=11, max_ms=1.0)  # too slow to make
    assert not fresh_each_call(0.4, affordable=11, calls_per_round=11, max_ms=1.0)  # no room for the warm-ups' version
    assert not fresh_each_call(0.0, affordable=100, calls_per_round=11, max_ms=0.0)  # turned off


def test_a_bad_fresh_contents_bound_is_one_line_and_exit_2_before_anything_runs(tmp_path: Path) -> None:
    fixtures = Path(__file__).resolve().parents[2] / "fixtures" / "judge_clock"
    completed = subprocess.run(
        [sys.executable, "-m", "kbench_ci", "bench", str(fixtures / "honest.py"), "--implementation=pytorch",
         f"--ref={fixtures / 'ref.py'}", "--N=64", "--device=cpu", "--isolation=judge", "--output-dir", str(tmp_path / "out")],
        env={**os.environ, "KBENCH_CI_JUDGE_FRESH_MS": "fast"}, capture_output=True, text=True, timeout=300,
    )
    assert completed.returncode == 2, completed.stderr
    lines = [line for line in completed.stderr.splitlines() if line.strip()]
    assert lines == ["kbench-ci: error: KBENCH_CI_JUDGE_FRESH_MS='fast' is not a number of milliseconds (set "
                     "KBENCH_CI_JUDGE_FRESH_MS=5 (the default), or 0 for a pool of versions and a probe a round)"], lines
    assert not (tmp_path / "out" / "results.json").exists()
