"""A failing case's reproduce line checks the same contents: where the judge drew the seeds of a
head's failed correctness trials (or ``--seeds`` chose them), the line gives them back with
``--seeds``; where the suite's own seeds make the same contents again, it needs none."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from kbench_ci.report.compare import failing_seeds, render_compare
from kbench_ci.report.run import render_run
from kbench_ci.results.model import CorrectnessResult, OutputCheck, TrialCheck
from kbench_ci.results.outcome import CaseComparison, CompareOutcome, RunOutcome
from kbench_ci.stats import Verdict
from tests.unit.report.comment_suite import suite_cases, suite_outcome


def _trial(seed: int, *, passed: bool) -> TrialCheck:
    check = OutputCheck(name="out", passed=passed, problem=None, max_abs_error=0.0 if passed else 1.0,
                        max_rel_error=0.0 if passed else 0.5, mismatched=0 if passed else 3, numel=16, atol=1e-5,
                        rtol=1e-5, tolerance_source="default (float32)")
    return TrialCheck(seed=seed, outputs=(check,))


def _with_trials(case: CaseComparison, trials: list[tuple[int, bool]]) -> CaseComparison:
    """``case`` whose head's correctness trials had these (seed, passed)."""
    assert case.measurement is not None and case.measurement.result is not None
    result = case.measurement.result
    correctness = CorrectnessResult(trials=tuple(_trial(seed, passed=passed) for seed, passed in trials))
    variants = tuple(replace(v, correctness=correctness) if v.label == "head" else v for v in result.variants)
    return replace(case, measurement=replace(case.measurement, result=replace(result, variants=variants)))


def _outcome(tmp_path: Path, isolation: str, seeds: tuple[int, ...] = ()) -> CompareOutcome:
    """The 12-case suite: vadd's four shapes incorrect, two of them with trials that failed at
    drawn seeds (one seed shared), one incorrect only in a timed call, one with no trials."""
    cases = suite_cases(12)
    cases[0] = _with_trials(cases[0], [(8731, True), (5550123, False), (42424242, True)])
    cases[1] = _with_trials(cases[1], [(99, False), (5550123, False), (7, True)])
    cases[2] = _with_trials(cases[2], [(1, True), (2, True), (3, True)])  # failed in a timed call
    outcome = suite_outcome(cases, tmp_path)
    trials = len(seeds) or outcome.settings.correctness_trials  # one trial a given seed (job_settings)
    return replace(outcome, isolation=isolation, settings=replace(outcome.settings, seeds=seeds, correctness_trials=trials))


def _commands(markdown: str) -> list[str]:
    section = markdown.split("## Reproduce locally")[1].split("\n## ")[0]
    return [line for line in section.splitlines() if line.startswith("kbench-ci compare")]


def test_a_judged_incorrect_kernels_line_carries_the_seeds_its_trials_failed_at(tmp_path: Path) -> None:
    commands = _commands(render_compare(_outcome(tmp_path, "judge")))
    assert commands[0] == (f"kbench-ci compare --base {'a' * 40} --kernel vadd --isolation judge --seeds 5550123,99"
                           "  # 4 incorrect")
    # a slower kernel's line asks for no seeds: its contents are not what failed
    assert all("--seeds" not in line for line in commands[1:]), commands


def test_the_suites_own_seeds_need_no_seeds_on_the_line(tmp_path: Path) -> None:
    """In one process trial k is at the suite's seed + k: the same command makes them again."""
    commands = _commands(render_compare(_outcome(tmp_path, "process")))
    assert commands[0] == f"kbench-ci compare --base {'a' * 40} --kernel vadd  # 4 incorrect"


def test_seeds_given_to_the_run_are_given_back_in_one_process_too(tmp_path: Path) -> None:
    commands = _commands(render_compare(_outcome(tmp_path, "process", seeds=(5550123, 99, 8731))))
    assert commands[0] == f"kbench-ci compare --base {'a' * 40} --kernel vadd --seeds 5550123,99  # 4 incorrect"


def test_only_an_incorrect_heads_failed_trials_count(tmp_path: Path) -> None:
    outcome = _outcome(tmp_path, "judge")
    assert failing_seeds(outcome, outcome.cases[0]) == (5550123,)
    assert failing_seeds(outcome, outcome.cases[2]) == ()  # every trial passed: a timed call failed
    assert failing_seeds(outcome, outcome.cases[3]) == ()  # no trials recorded
    slower = replace(outcome.cases[1], verdict=Verdict.SLOWER)
    assert failing_seeds(outcome, slower) == ()


def test_a_judged_report_with_chosen_seeds_says_they_were_not_drawn(tmp_path: Path) -> None:
    chosen = render_compare(_outcome(tmp_path, "judge", seeds=(5550123, 99)))
    head = chosen.split("## ")[0]
    assert "**Seeds chosen (`--seeds 5550123,99`):**" in head
    assert "not drawn by the judge from the OS's entropy: a kernel could have known them" in head
    assert "the correctness trials' at the seeds --seeds gave, 5550123, 99" in chosen
    drawn = render_compare(_outcome(tmp_path, "judge"))
    assert "Seeds chosen" not in drawn and "--seeds gave" not in drawn


def test_a_process_report_names_the_trials_seeds(tmp_path: Path) -> None:
    assert "checked first on 3 seeds (42…44) against the reference" in render_compare(_outcome(tmp_path, "process"))
    chosen = render_compare(_outcome(tmp_path, "process", seeds=(7, 3)))
    assert "checked first on 2 seeds (7, 3) against the reference" in chosen
    assert "**Seeds chosen (`--seeds 7,3`):**" in chosen and "not drawn" not in chosen


def test_a_run_report_with_chosen_seeds_says_so(tmp_path: Path) -> None:
    compare = _outcome(tmp_path, "judge")
    outcome = RunOutcome(
        cases=(), total_cases=0, settings=replace(compare.settings, seeds=(11, 12), correctness_trials=2),
        config_path=tmp_path / "kbench.toml", environment=compare.environment, results_path=tmp_path / "results.json",
        report_path=tmp_path / "benchmark.md", wall_s=1.0, isolation="judge",
    )
    text = render_run(outcome)
    assert "**Seeds chosen (`--seeds 11,12`):**" in text
    assert "checked on 2 seeds (11, 12, given by --seeds) against" in text
