"""``--seeds S,S,...`` of ``run`` and ``compare``: what it parses to, what it refuses (one line
naming the option and the fix), how it reaches every case's job and results.json, and that
``-h`` leaves it to ``--help-all`` (a local debugging aid, not what CI passes)."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from kbench_ci.cli.app import app
from kbench_ci.cli.options import UsageProblems, check_seeds
from kbench_ci.errors import UsageError
from kbench_ci.results.load import validate_results
from kbench_ci.results.read import settings_from_json
from kbench_ci.results.schema import COMPARE_SCHEMA
from kbench_ci.suite.settings import SuiteSettings, job_settings
from kbench_ci.suite.values import INT64_MAX
from kbench_ci.wire.protocol import CaseJob, SideSpec


def _seeds(text: str | None) -> tuple[int, ...]:
    problems = UsageProblems()
    seeds = check_seeds(problems, text)
    problems.raise_any()
    return seeds


def test_the_seeds_in_the_order_given() -> None:
    assert _seeds(None) == ()
    assert _seeds("1234,5678") == (1234, 5678)
    assert _seeds(" 7, 0 ,7") == (7, 0, 7)
    assert _seeds(str(INT64_MAX)) == (INT64_MAX,)


@pytest.mark.parametrize(("text", "line"), [
    ("", "--seeds must be whole numbers separated by commas, got '' (e.g. --seeds 1234,5678: the seeds a report's "
         "reproduce line names)"),
    ("12,,13", "--seeds must be whole numbers separated by commas, got '12,,13'"),
    ("0x10", "--seeds must be whole numbers separated by commas, got '0x10'"),
    ("1.5", "--seeds must be whole numbers separated by commas, got '1.5'"),
    ("3,-1", "--seeds must be >= 0, got -1"),
    (str(INT64_MAX + 1), f"--seeds must be at most {INT64_MAX} (64 bits), got {INT64_MAX + 1}"),
])
def test_what_is_not_a_list_of_seeds_is_refused_in_one_line(text: str, line: str) -> None:
    with pytest.raises(UsageError) as caught:
        _seeds(text)
    assert caught.value.one_line().startswith(line), caught.value.one_line()
    assert "\n" not in caught.value.one_line()


def test_given_seeds_are_one_correctness_trial_each() -> None:
    settings = job_settings(SuiteSettings(correctness_trials=5, seed=100), device="cpu", seeds=(9, 4))
    assert (settings.correctness_trials, settings.seeds, settings.trial_seeds) == (2, (9, 4), (9, 4))
    # without them: the suite's trials, at seed + k
    usual = job_settings(SuiteSettings(correctness_trials=3, seed=100), device="cpu")
    assert (usual.correctness_trials, usual.seeds, usual.trial_seeds) == (3, (), (100, 101, 102))


def test_given_seeds_reach_the_worker_and_results_json() -> None:
    settings = job_settings(SuiteSettings(timing_method="host_time"), device="cpu", seeds=(5550123, 99))
    job = CaseJob(case_id="k[N=1]", dims={"N": 1}, settings=settings, baselines=(),
                  sides=(SideSpec(label="head", solution="k.py", ref="ref.py", implementation="pytorch"),))
    assert CaseJob.from_json(job.to_json()).settings == settings  # a tuple again, not JSON's list
    written = settings.as_json()
    assert written["seeds"] == [5550123, 99]
    assert settings_from_json(written) == settings
    # results.json's schema knows the key (an older file without it reads as no seeds given)
    data = {"schema": COMPARE_SCHEMA, "schema_version": 1, "gate": {"passed": True}, "settings": written, "cases": [],
            "base": {"description": "b", "tree": "t"}, "head": {"description": "h", "tree": "t"}}
    validate_results(data, Path("results.json"), reader="test", strict=True)
    older = {key: value for key, value in written.items() if key != "seeds"}
    assert settings_from_json(older).seeds == ()


@pytest.mark.parametrize("command", ["run", "compare"])
def test_seeds_is_an_option_help_all_shows(command: str) -> None:
    runner = CliRunner()
    short = runner.invoke(app, [command, "-h"], terminal_width=100)
    full = runner.invoke(app, [command, "--help-all"], terminal_width=100)
    assert short.exit_code == 0 and full.exit_code == 0
    assert "--seeds" not in short.output
    assert "--seeds" in full.output
