"""The composite action's steps, run against files laid out like a runner lays them out."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from kbench_ci.errors import UsageError
from kbench_ci.github import action as action_steps
from kbench_ci.github.action import STEP_SUMMARY_LIMIT, compare_argv, run_step, write_outputs
from kbench_ci.results.decide import evaluate_gate
from kbench_ci.results.outcome import CaseComparison
from kbench_ci.results.writers import case_json
from kbench_ci.stats import RatioEstimate, Verdict
from tests.integration.github.github_fake import FakeGitHub

GIT_ENV = {
    "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.invalid",
    "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.invalid",
    "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1",
}


def git(cwd: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", *args], cwd=cwd, env={**os.environ, **GIT_ENV}, capture_output=True, text=True, check=True
    )
    return done.stdout.strip()


def read_outputs(path: Path) -> dict[str, str]:
    """Parse GITHUB_OUTPUT as the runner does (``name<<DELIM`` blocks and ``name=value``)."""
    outputs: dict[str, str] = {}
    lines = path.read_text(encoding="utf-8").split("\n")
    i = 0
    while i < len(lines):
        line = lines[i]
        if "<<" in line:
            name, delimiter = line.split("<<", 1)
            end = lines.index(delimiter, i + 1)
            outputs[name] = "\n".join(lines[i + 1 : end])
            i = end + 1
        elif "=" in line:
            name, value = line.split("=", 1)
            outputs[name] = value
            i += 1
        else:
            i += 1
    return outputs


# -- fixtures ------------------------------------------------------------------------------------


class Repos:
    def __init__(self, root: Path) -> None:
        self.upstream = root / "upstream"
        self.upstream.mkdir(parents=True)
        git(self.upstream, "init", "-q", "-b", "main")
        (self.upstream / "k.cu").write_text("v1\n")
        git(self.upstream, "add", ".")
        git(self.upstream, "commit", "-q", "-m", "one")
        self.c1 = git(self.upstream, "rev-parse", "HEAD")
        (self.upstream / "k.cu").write_text("v2\n")
        git(self.upstream, "commit", "-q", "-am", "two")
        self.c2 = git(self.upstream, "rev-parse", "HEAD")
        self.origin = root / "origin.git"
        git(root, "clone", "-q", "--bare", str(self.upstream), str(self.origin))
        git(self.origin, "config", "uploadpack.allowReachableSHA1InWant", "true")
        self.root = root

    def shallow(self) -> Path:
        work = self.root / "shallow"
        git(self.root, "clone", "-q", "--depth=1", self.origin.as_uri(), str(work))
        return work

    def full(self) -> Path:
        work = self.root / "full"
        git(self.root, "clone", "-q", self.origin.as_uri(), str(work))
        return work


@pytest.fixture
def repos(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Repos:
    for name, value in GIT_ENV.items():
        monkeypatch.setenv(name, value)
    return Repos(tmp_path / "git")


@pytest.fixture
def runner(tmp_path: Path) -> dict[str, str]:
    """The files and variables a runner gives a step."""
    home = tmp_path / "runner"
    (home / "temp").mkdir(parents=True)
    (home / "output").touch()
    (home / "summary.md").touch()
    return {
        "GITHUB_OUTPUT": str(home / "output"),
        "GITHUB_STEP_SUMMARY": str(home / "summary.md"),
        "RUNNER_TEMP": str(home / "temp"),
        "GITHUB_REPOSITORY": "o/r",
    }


def event(tmp_path: Path, name: str, payload: dict) -> dict[str, str]:
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(payload))
    return {"GITHUB_EVENT_NAME": name, "GITHUB_EVENT_PATH": str(path)}


def outputs(env: dict[str, str]) -> dict[str, str]:
    return read_outputs(Path(env["GITHUB_OUTPUT"]))


# -- resolve -------------------------------------------------------------------------------------


def test_resolve_pull_request_fetches_the_missing_base(tmp_path: Path, repos: Repos, runner: dict) -> None:
    work = repos.shallow()
    missing = subprocess.run(["git", "cat-file", "-e", repos.c1], cwd=work).returncode
    assert missing != 0, "the shallow clone must lack the base commit"

    env = {**runner, **event(tmp_path, "pull_request", {
        "pull_request": {"number": 7, "base": {"sha": repos.c1}, "head": {"sha": repos.c2}},
    })}
    result = run_step("resolve", env, work)

    assert result.exit_code == 0, result.lines
    out = outputs(env)
    assert (out["base-sha"], out["head-sha"], out["pr-number"]) == (repos.c1, repos.c2, "7")
    assert out["comparable"] == "true"
    assert out["report-dir"] == str(Path(runner["RUNNER_TEMP"]) / "kbench-ci" / "default" / "report")
    assert out["artifact-name"] == "kbench-ci-report"
    assert subprocess.run(["git", "cat-file", "-e", repos.c1], cwd=work).returncode == 0


def test_resolve_push(tmp_path: Path, repos: Repos, runner: dict) -> None:
    env = {**runner, **event(tmp_path, "push", {"before": repos.c1, "after": repos.c2})}
    assert run_step("resolve", env, repos.full()).exit_code == 0
    out = outputs(env)
    assert (out["base-sha"], out["head-sha"], out["pr-number"]) == (repos.c1, repos.c2, "")


def test_resolve_push_of_new_branch_uses_parent(tmp_path: Path, repos: Repos, runner: dict) -> None:
    env = {**runner, **event(tmp_path, "push", {"before": "0" * 40, "after": repos.c2})}
    assert run_step("resolve", env, repos.full()).exit_code == 0
    assert outputs(env)["base-sha"] == repos.c1


def test_resolve_push_of_new_branch_without_parent_says_so(tmp_path: Path, repos: Repos, runner: dict) -> None:
    env = {**runner, **event(tmp_path, "push", {"before": "0" * 40, "after": repos.c2})}
    result = run_step("resolve", env, repos.shallow())
    assert result.exit_code == 0
    out = outputs(env)
    assert out["base-sha"] == "" and out["comparable"] == "false"
    assert "nothing to compare" in out["reason"]
    assert result.lines[0].startswith("::notice::")


def test_resolve_workflow_dispatch_uses_default_branch_tip(tmp_path: Path, repos: Repos, runner: dict) -> None:
    work = repos.full()
    git(work, "switch", "-q", "-c", "feature")
    (work / "k.cu").write_text("v3\n")
    git(work, "commit", "-q", "-am", "three")
    c3 = git(work, "rev-parse", "HEAD")
    env = {**runner, **event(tmp_path, "workflow_dispatch", {"repository": {"default_branch": "main"}})}
    assert run_step("resolve", env, work).exit_code == 0
    out = outputs(env)
    assert (out["base-sha"], out["head-sha"]) == (repos.c2, c3)


def test_resolve_workflow_dispatch_fetches_missing_default_branch(
    tmp_path: Path, repos: Repos, runner: dict
) -> None:
    work = repos.shallow()
    git(work, "update-ref", "-d", "refs/remotes/origin/main")
    env = {**runner, **event(tmp_path, "workflow_dispatch", {"repository": {"default_branch": "main"}})}
    assert run_step("resolve", env, work).exit_code == 0
    assert outputs(env)["base-sha"] == repos.c2


def test_explicit_base_input_wins(tmp_path: Path, repos: Repos, runner: dict) -> None:
    work = repos.full()
    env = {**runner, "INPUT_BASE": repos.c1[:12], **event(tmp_path, "pull_request", {
        "pull_request": {"number": 3, "base": {"sha": repos.c2}, "head": {"sha": repos.c2}},
    })}
    assert run_step("resolve", env, work).exit_code == 0
    out = outputs(env)
    assert out["base-sha"] == repos.c1 and out["pr-number"] == "3"
    assert "base' input" in out["reason"]


def test_explicit_base_branch_name(tmp_path: Path, repos: Repos, runner: dict) -> None:
    work = repos.full()
    git(work, "switch", "-q", "--detach", repos.c1)
    git(work, "branch", "-q", "-D", "main")  # only origin/main is left
    env = {**runner, "INPUT_BASE": "main", **event(tmp_path, "workflow_dispatch", {})}
    assert run_step("resolve", env, work).exit_code == 0
    assert outputs(env)["base-sha"] == repos.c2


@pytest.mark.parametrize("base", ["--upload-pack=touch /tmp/pwned", "a b", "main..x", "$(id)"])
def test_unsafe_base_is_refused(tmp_path: Path, repos: Repos, runner: dict, base: str) -> None:
    env = {**runner, "INPUT_BASE": base, **event(tmp_path, "workflow_dispatch", {})}
    result = run_step("resolve", env, repos.full())
    assert result.exit_code == 2
    assert result.lines[0].startswith("::error::")


@pytest.mark.parametrize(
    "bad", [{"KBENCH_COMMENT_MODE": "sometimes"}, {"KBENCH_FAIL_ON_REGRESSION": "maybe"},
            {"KBENCH_MARKER_ID": "../x"}]
)
def test_resolve_checks_inputs_early(tmp_path: Path, repos: Repos, runner: dict, bad: dict) -> None:
    env = {**runner, **bad, **event(tmp_path, "push", {"before": repos.c1, "after": repos.c2})}
    result = run_step("resolve", env, repos.full())
    assert result.exit_code == 2
    assert result.lines[0].startswith("::error::kbench-ci resolve:")


def test_unknown_base_is_a_git_error(tmp_path: Path, repos: Repos, runner: dict) -> None:
    env = {**runner, "INPUT_BASE": "f" * 40, **event(tmp_path, "workflow_dispatch", {})}
    result = run_step("resolve", env, repos.shallow())
    assert result.exit_code == 2
    assert "fetch" in result.lines[0]


def test_other_events_need_a_base(tmp_path: Path, repos: Repos, runner: dict) -> None:
    env = {**runner, "KBENCH_MARKER_ID": "gemm", **event(tmp_path, "schedule", {})}
    assert run_step("resolve", env, repos.full()).exit_code == 0
    out = outputs(env)
    assert out["comparable"] == "false" and "'base' input" in out["reason"]
    assert out["report-dir"].endswith("kbench-ci/gemm/report")
    assert out["artifact-name"] == "kbench-ci-report-gemm"


# -- compare -------------------------------------------------------------------------------------


def test_compare_argv_splits_extra_args_without_a_shell(runner: dict) -> None:
    env = {**runner, "KBENCH_BASE": "abc", "KBENCH_HEAD": "def", "KBENCH_REPORT_DIR": "/r",
           "KBENCH_THRESHOLD": "5%", "KBENCH_CONFIG": "bench/kbench.toml",
           "KBENCH_EXTRA_ARGS": "--kernel 'my gemm' $(rm -rf ~)"}
    assert compare_argv(env, "kbench-ci") == [
        "kbench-ci", "compare", "--base", "abc", "--head", "def", "--output-dir", "/r", "--threshold", "5%",
        "--config", "bench/kbench.toml", "--cache-dir", str(Path(runner["RUNNER_TEMP"]) / "kbench-ci-cache"), "--no-fail",
        "--job-note", "The job fails: the action's Gate step fails it (fail-on-regression: true).",
        "--kernel", "my gemm", "$(rm", "-rf", "~)",
    ]


def test_compare_argv_says_what_happens_to_the_job_and_passes_the_accept_label(runner: dict) -> None:
    env = {**runner, "KBENCH_BASE": "abc", "KBENCH_REPORT_DIR": "/r", "KBENCH_FAIL_ON_REGRESSION": "false",
           "KBENCH_ACCEPT_LABEL": "perf-ok", "KBENCH_ACCEPTED_BY": "perf-ok"}
    argv = compare_argv(env, "kbench-ci")
    note = argv[argv.index("--job-note") + 1]
    assert note == "The job does not fail: fail-on-regression is false, so this report is the only signal."
    assert argv[argv.index("--accept") + 1] == "*"
    assert argv[argv.index("--accept-reason") + 1] == "the pull request has the label 'perf-ok'"
    # Without the label on the pull request, the note says how to accept; nothing is accepted.
    argv = compare_argv({**env, "KBENCH_ACCEPTED_BY": ""}, "kbench-ci")
    assert "--accept" not in argv and "with the pull request label 'perf-ok'" in argv[argv.index("--job-note") + 1]


def test_resolve_reads_the_accept_label_from_the_payload(tmp_path: Path, repos: Repos, runner: dict) -> None:
    work = repos.shallow()
    pull = {"number": 7, "base": {"sha": repos.c1}, "head": {"sha": repos.c2},
            "labels": [{"name": "bug"}, {"name": "kbench-ci: accept"}]}
    env = {**runner, **event(tmp_path, "pull_request", {"pull_request": pull})}
    assert run_step("resolve", env, work).exit_code == 0
    assert outputs(env)["accept-label"] == "kbench-ci: accept"  # the input's default
    Path(runner["GITHUB_OUTPUT"]).write_text("")
    assert run_step("resolve", {**env, "KBENCH_ACCEPT_LABEL": ""}, work).exit_code == 0
    assert outputs(env)["accept-label"] == ""  # an empty input: no label accepts


@pytest.mark.parametrize("code", [0, 1, 3])
def test_compare_records_exit_code_and_never_fails(tmp_path: Path, runner: dict, code: int) -> None:
    fake = tmp_path / "kbench-ci"
    fake.write_text(f'#!/bin/sh\necho "$@" > "{tmp_path}/argv"\nexit {code}\n')
    fake.chmod(0o755)
    report = tmp_path / "report"
    env = {**runner, "KBENCH_CLI": str(fake), "KBENCH_BASE": "abc", "KBENCH_REPORT_DIR": str(report)}
    result = run_step("compare", env, tmp_path)
    assert result.exit_code == 0
    assert outputs(env)["exit-code"] == str(code)
    assert report.is_dir()
    # No threshold input: no --threshold, each kernel is judged by its own.
    assert (tmp_path / "argv").read_text().split()[:9] == [
        "compare", "--base", "abc", "--output-dir", str(report),
        "--cache-dir", str(Path(runner["RUNNER_TEMP"]) / "kbench-ci-cache"), "--no-fail", "--job-note"]


@pytest.mark.parametrize(("value", "passed"), [("", None), ("  ", None), ("5%", "5%"), ("0.03", "0.03")])
def test_compare_argv_passes_threshold_only_when_the_input_is_set(runner: dict, value: str, passed: str | None) -> None:
    """A "2%" default overrode every kernel's own threshold in kbench.toml."""
    argv = compare_argv({**runner, "KBENCH_BASE": "abc", "KBENCH_REPORT_DIR": "/r", "KBENCH_THRESHOLD": value}, "kbench-ci")
    if passed is None:
        assert "--threshold" not in argv
    else:
        assert argv[argv.index("--threshold") + 1] == passed and argv.count("--threshold") == 1
    assert "--threshold" not in compare_argv({**runner, "KBENCH_BASE": "abc", "KBENCH_REPORT_DIR": "/r"}, "kbench-ci")


def test_the_threshold_input_defaults_to_empty_in_action_yml() -> None:
    """The input's default is what reaches compare_argv on a runner: it must be empty."""
    from ruamel.yaml import YAML  # noqa: PLC0415

    spec = YAML(typ="base").load((Path(__file__).resolve().parents[3] / "action.yml").read_text())
    assert spec["inputs"]["threshold"]["default"] == ""


def test_compare_argv_cache_input(runner: dict) -> None:
    env = {**runner, "KBENCH_BASE": "abc", "KBENCH_REPORT_DIR": "/r"}
    argv = compare_argv({**env, "KBENCH_CACHE": "false"}, "kbench-ci")
    assert "--no-cache" in argv and "--cache-dir" not in argv
    argv = compare_argv({**env, "KBENCH_CACHE": "true"}, "kbench-ci")
    assert argv[argv.index("--cache-dir") + 1] == str(Path(runner["RUNNER_TEMP"]) / "kbench-ci-cache")
    with pytest.raises(UsageError, match="KBENCH_CACHE"):
        compare_argv({**env, "KBENCH_CACHE": "sometimes"}, "kbench-ci")


def test_compare_that_cannot_start_records_environment_code(tmp_path: Path, runner: dict) -> None:
    env = {**runner, "KBENCH_CLI": str(tmp_path / "missing"), "KBENCH_BASE": "abc",
           "KBENCH_REPORT_DIR": str(tmp_path / "r")}
    result = run_step("compare", env, tmp_path)
    assert result.exit_code == 0
    assert outputs(env)["exit-code"] == "3"
    assert result.lines[0].startswith("::error::")


# -- summary -------------------------------------------------------------------------------------

REPORT_MD = """## kbench-ci: 2 slower, 1 faster, 14 unchanged — gate FAILED

| kernel | shape | base | head | change | verdict |
|---|---|---|---|---|---|
| gemm | 4096² | 1.00 ms | 1.10 ms | +10.0% | slower |
"""


def fake_report(directory: Path, *, passed: bool | None = None, write_md: bool = True, **counts: int) -> Path:
    """A report folder whose results.json holds a case of each verdict counted (as compare writes
    them: the action judges the cases, not the ``gate`` object); ``passed`` overrides the
    recorded ``gate.passed`` (as a process left running could)."""
    directory.mkdir(parents=True, exist_ok=True)
    if write_md:
        (directory / "benchmark.md").write_text(REPORT_MD, encoding="utf-8")
    cases = [fake_case(f"k{verdict}{i}[N=1]", Verdict(verdict)) for verdict, n in counts.items() for i in range(n)]
    gate = evaluate_gate(cases).as_json()
    if passed is not None:
        gate["passed"] = passed
    (directory / "results.json").write_text(json.dumps({
        "schema": "kbench-ci/compare", "schema_version": 1, "gate": gate, "cases": [case_json(c) for c in cases],
    }), encoding="utf-8")
    return directory


def fake_case(case_id: str, verdict: Verdict) -> CaseComparison:
    timed = {Verdict.SLOWER: 1.1, Verdict.FASTER: 0.9, Verdict.UNCHANGED: 1.0, Verdict.INCONCLUSIVE: 1.01}
    ratio = timed.get(verdict)
    estimate = None if ratio is None else RatioEstimate(
        ratio=ratio, ci_low=ratio * 0.99, ci_high=ratio * 1.01, p_value=0.01, n_rounds=10, confidence=0.95,
        round_ratios=(ratio,) * 10)
    return CaseComparison(case_id=case_id, kernel=case_id.split("[")[0], dims={"N": 1}, verdict=verdict,
                          threshold=0.02, estimate=estimate, message=None)


def test_summary_of_a_failed_gate(tmp_path: Path, runner: dict) -> None:
    report = fake_report(tmp_path / "report", slower=2, faster=1, unchanged=14, incorrect=1)
    env = {**runner, "KBENCH_REPORT_DIR": str(report), "KBENCH_COMPARE_EXIT_CODE": "0",
           "KBENCH_COMPARE_OUTCOME": "success", "KBENCH_PR_NUMBER": "7"}
    result = run_step("summary", env, tmp_path)
    assert result.exit_code == 0
    out = outputs(env)
    assert out["verdict"] == "failed"
    assert out["regressions"] == "3"
    assert out["report-path"] == str(report / "benchmark.md")
    assert out["results-path"] == str(report / "results.json")
    assert out["has-report"] == "true"
    assert out["summary"] == "1 incorrect, 2 slower, 1 faster, 14 unchanged — gate FAILED"
    assert Path(runner["GITHUB_STEP_SUMMARY"]).read_text(encoding="utf-8") == REPORT_MD
    assert (report / "pr-number.txt").read_text() == "7\n"
    assert result.lines[-1].startswith("::warning::kbench-ci: 1 incorrect")  # after each case's annotation


def test_summary_of_a_passed_gate(tmp_path: Path, runner: dict) -> None:
    report = fake_report(tmp_path / "report", passed=True, unchanged=3)
    env = {**runner, "KBENCH_REPORT_DIR": str(report), "KBENCH_COMPARE_EXIT_CODE": "0",
           "KBENCH_COMPARE_OUTCOME": "success"}
    run_step("summary", env, tmp_path)
    out = outputs(env)
    assert (out["verdict"], out["regressions"]) == ("passed", "0")
    assert not (report / "pr-number.txt").exists()


def test_the_job_summary_and_the_steps_lines_show_a_heads_controls_as_escapes(
    tmp_path: Path, runner: dict, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A benchmark.md with a bidi override and an ESC sequence in it (one a
    process of the head's rewrote after compare, or a fork's artifact) reaches the job summary
    with both shown as escapes; so does a line the step writes to the log."""
    report = fake_report(tmp_path / "report", slower=1)
    (report / "benchmark.md").write_text("| boom | \u202etxt.exe \x1b[2J |\n", encoding="utf-8")
    env = {**runner, "KBENCH_REPORT_DIR": str(report), "KBENCH_COMPARE_EXIT_CODE": "0",
           "KBENCH_COMPARE_OUTCOME": "success"}
    run_step("summary", env, tmp_path)
    assert Path(runner["GITHUB_STEP_SUMMARY"]).read_text(encoding="utf-8") == "| boom | \\u202etxt.exe \\x1b[2J |\n"
    bad = {**env, "KBENCH_COMPARE_EXIT_CODE": "", "KBENCH_COMPARE_OUTCOME": "fail\u202e\x1b[2J"}
    for name, value in bad.items():
        monkeypatch.setenv(name, value)  # main() reads the process's environment, as the runner gives it
    action_steps.main(["gate"])
    printed = capsys.readouterr().out
    assert "outcome: fail\\u202e\\x1b[2J" in printed and "\x1b" not in printed and "\u202e" not in printed


def test_summary_when_compare_failed_to_run(tmp_path: Path, runner: dict) -> None:
    env = {**runner, "KBENCH_REPORT_DIR": str(tmp_path / "none"), "KBENCH_COMPARE_EXIT_CODE": "3",
           "KBENCH_COMPARE_OUTCOME": "success"}
    result = run_step("summary", env, tmp_path)
    assert result.exit_code == 0
    out = outputs(env)
    assert out["verdict"] == "error"
    assert out["report-path"] == "" and out["has-report"] == "false"
    assert "exited 3: an environment problem" in Path(runner["GITHUB_STEP_SUMMARY"]).read_text()
    assert result.lines[0].startswith("::error::")


def test_summary_when_nothing_was_compared(tmp_path: Path, runner: dict) -> None:
    env = {**runner, "KBENCH_REPORT_DIR": str(tmp_path / "none"), "KBENCH_COMPARE_EXIT_CODE": "",
           "KBENCH_COMPARE_OUTCOME": "skipped", "KBENCH_SKIP_REASON": "push of a new branch"}
    run_step("summary", env, tmp_path)
    assert outputs(env)["verdict"] == "skipped"
    assert "push of a new branch" in Path(runner["GITHUB_STEP_SUMMARY"]).read_text()


def test_summary_folds_a_huge_report_to_one_mebibyte(tmp_path: Path, runner: dict) -> None:
    report = fake_report(tmp_path / "report", slower=1)
    rows = "".join(f"| kernel-{i} | ±0.1% — unchanged |\n" for i in range(60000))
    (report / "benchmark.md").write_text("## big\n\n<details><summary>all</summary>\n\n" + rows
                                         + "</details>\n\n" + rows, encoding="utf-8")
    env = {**runner, "KBENCH_REPORT_DIR": str(report), "KBENCH_COMPARE_EXIT_CODE": "0",
           "KBENCH_COMPARE_OUTCOME": "success"}
    run_step("summary", env, tmp_path)
    written = Path(runner["GITHUB_STEP_SUMMARY"]).read_bytes()
    assert len(written) <= STEP_SUMMARY_LIMIT
    text = written.decode("utf-8")
    assert "details of 'all' left out" in text
    assert "`kbench-ci-report` artifact" in text


def test_outputs_are_multiline_safe(tmp_path: Path) -> None:
    path = tmp_path / "out"
    write_outputs(path, {"a": "one\ntwo\nEOF\n", "b": "x=y"})
    assert read_outputs(path) == {"a": "one\ntwo\nEOF\n", "b": "x=y"}


# -- gate ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("counts", "passed", "fail_on_regression", "expected"),
    [
        ({"unchanged": 3}, True, "true", 0),
        ({"slower": 2}, False, "true", 1),
        ({"slower": 2}, False, "false", 0),
        ({"incorrect": 1}, False, "true", 1),
        ({"incorrect": 1}, False, "false", 0),
        ({"failed": 1}, False, "", 1),  # fail-on-regression defaults to true
    ],
)
def test_gate(tmp_path: Path, runner: dict, counts: dict, passed: bool, fail_on_regression: str,
              expected: int) -> None:
    report = fake_report(tmp_path / "report", passed=passed, **counts)
    env = {**runner, "KBENCH_REPORT_DIR": str(report), "KBENCH_COMPARE_EXIT_CODE": "0",
           "KBENCH_COMPARE_OUTCOME": "success", "KBENCH_FAIL_ON_REGRESSION": fail_on_regression}
    result = run_step("gate", env, tmp_path)
    assert result.exit_code == expected
    if expected:
        assert result.lines[0].startswith("::error::")


@pytest.mark.parametrize("code", [2, 3, 137])
@pytest.mark.parametrize("fail_on_regression", ["true", "false"])
def test_gate_passes_through_usage_and_environment_codes(
    tmp_path: Path, runner: dict, code: int, fail_on_regression: str
) -> None:
    report = fake_report(tmp_path / "report", passed=True)  # even a stale passing result is ignored
    env = {**runner, "KBENCH_REPORT_DIR": str(report), "KBENCH_COMPARE_EXIT_CODE": str(code),
           "KBENCH_COMPARE_OUTCOME": "success", "KBENCH_FAIL_ON_REGRESSION": fail_on_regression}
    assert run_step("gate", env, tmp_path).exit_code == code


@pytest.mark.parametrize("fail_on_regression", ["true", "false"])
def test_gate_and_summary_when_compare_exited_2_on_a_users_reference(
    tmp_path: Path, runner: dict, fail_on_regression: str
) -> None:
    """compare exits 2 (after writing every case) when its failing cases failed because of their
    ref.py, setup() or settings: an error whatever fail-on-regression says, as
    any usage problem, and the step says what the report says (it said only "bad usage")."""
    report = fake_report(tmp_path / "report", failed=1)
    env = {**runner, "KBENCH_REPORT_DIR": str(report), "KBENCH_COMPARE_EXIT_CODE": "2",
           "KBENCH_COMPARE_OUTCOME": "success", "KBENCH_FAIL_ON_REGRESSION": fail_on_regression}
    gate = run_step("gate", env, tmp_path)
    assert gate.exit_code == 2
    (line,) = gate.lines
    assert line.startswith("::error::kbench-ci: kbench-ci compare exited 2: a case failed because of its ref.py")
    assert line.endswith("— gate FAILED")
    summary = run_step("summary", env, tmp_path)
    out = outputs(env)
    assert out["verdict"] == "error" and out["regressions"] == "1"
    assert "a case failed because of its ref.py, setup() or settings" in out["summary"]
    assert summary.lines[-1].startswith("::error::")


@pytest.mark.parametrize("flip", ["passed", "gate"])
@pytest.mark.parametrize("fail_on_regression", ["true", "false"])
def test_a_gate_object_flipped_after_compare_wrote_it_fails_the_job(
    tmp_path: Path, runner: dict, flip: str, fail_on_regression: str
) -> None:
    """Under the default isolation a head's daemon rewrites results.json after
    compare wrote it: ``gate.passed`` alone, or the whole gate object (counts, summary) of a
    passing run. The gate step, the summary and the outputs judge the cases, as merge does; a
    recorded gate that disagrees with them is tampering and fails the job whatever
    fail-on-regression says."""
    report = fake_report(tmp_path / "report", slower=1, unchanged=2)
    data = json.loads((report / "results.json").read_text())
    data["gate"]["passed"] = True
    if flip == "gate":
        data["gate"].update(summary="3 unchanged — gate passed", counts={"unchanged": 3}, failing_cases=[])
    (report / "results.json").write_text(json.dumps(data))
    env = {**runner, "KBENCH_REPORT_DIR": str(report), "KBENCH_COMPARE_EXIT_CODE": "0",
           "KBENCH_COMPARE_OUTCOME": "success", "KBENCH_FAIL_ON_REGRESSION": fail_on_regression}
    gate = run_step("gate", env, tmp_path)
    assert gate.exit_code == 1
    (line,) = gate.lines
    assert line.startswith("::error::kbench-ci: results.json says the gate passed, but its cases fail it")
    summary = run_step("summary", env, tmp_path)
    out = outputs(env)
    assert (out["verdict"], out["regressions"]) == ("failed", "1")
    assert out["summary"].startswith("results.json says the gate passed, but its cases fail it (1 slower, 2 unchanged")
    assert summary.lines[-1].startswith("::error::kbench-ci: results.json says the gate passed")
    shown = Path(runner["GITHUB_STEP_SUMMARY"]).read_text(encoding="utf-8")
    assert shown.startswith("### kbench-ci: results.json says the gate passed, but its cases fail it")


def test_a_gate_that_says_failed_over_passing_cases_is_tampering_too(tmp_path: Path, runner: dict) -> None:
    """The cases decide either way: compare writes the gate evaluate_gate gives its cases, so a
    recorded verdict that disagrees was written by something else, and the job fails."""
    report = fake_report(tmp_path / "report", passed=False, unchanged=3)
    env = {**runner, "KBENCH_REPORT_DIR": str(report), "KBENCH_COMPARE_EXIT_CODE": "0",
           "KBENCH_COMPARE_OUTCOME": "success", "KBENCH_FAIL_ON_REGRESSION": "false"}
    gate = run_step("gate", env, tmp_path)
    assert gate.exit_code == 1
    assert gate.lines[0].startswith("::error::kbench-ci: results.json says the gate failed, but its cases pass it (3 unchanged")


def test_gate_without_results_is_an_error(tmp_path: Path, runner: dict) -> None:
    env = {**runner, "KBENCH_REPORT_DIR": str(tmp_path / "none"), "KBENCH_COMPARE_EXIT_CODE": "0",
           "KBENCH_COMPARE_OUTCOME": "success"}
    assert run_step("gate", env, tmp_path).exit_code == 3
    env["KBENCH_COMPARE_OUTCOME"], env["KBENCH_COMPARE_EXIT_CODE"] = "failure", ""
    assert run_step("gate", env, tmp_path).exit_code == 3


def test_gate_when_nothing_was_compared(tmp_path: Path, runner: dict) -> None:
    env = {**runner, "KBENCH_REPORT_DIR": str(tmp_path / "none"), "KBENCH_COMPARE_EXIT_CODE": "",
           "KBENCH_COMPARE_OUTCOME": "skipped"}
    result = run_step("gate", env, tmp_path)
    assert result.exit_code == 0
    assert result.lines[0].startswith("::notice::")


def test_gate_rejects_a_bad_flag(tmp_path: Path, runner: dict) -> None:
    env = {**runner, "KBENCH_REPORT_DIR": str(tmp_path), "KBENCH_COMPARE_EXIT_CODE": "0",
           "KBENCH_FAIL_ON_REGRESSION": "maybe"}
    assert run_step("gate", env, tmp_path).exit_code == 2


def test_module_entry_point(tmp_path: Path, runner: dict) -> None:
    report = fake_report(tmp_path / "report", slower=1)
    env = {**os.environ, **runner, "KBENCH_REPORT_DIR": str(report), "KBENCH_COMPARE_EXIT_CODE": "0",
           "KBENCH_COMPARE_OUTCOME": "success", "KBENCH_FAIL_ON_REGRESSION": "true"}
    done = subprocess.run([sys.executable, "-m", "kbench_ci.github.action", "gate"], env=env,
                          capture_output=True, text=True, cwd=Path(action_steps.__file__).parents[2])
    assert done.returncode == 1
    assert done.stdout.startswith("::error::kbench-ci: 1 slower — gate FAILED")
    bad = subprocess.run([sys.executable, "-m", "kbench_ci.github.action", "nope"], env=env,
                         capture_output=True, text=True, cwd=Path(action_steps.__file__).parents[2])
    assert bad.returncode == 2


# -- comment -------------------------------------------------------------------------------------


@pytest.fixture
def github(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeGitHub]:
    for name in ("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY", "all_proxy", "ALL_PROXY"):
        monkeypatch.delenv(name, raising=False)
    fake = FakeGitHub().start()
    yield fake
    fake.stop()


def test_comment_step_writes_url_output(tmp_path: Path, runner: dict, github: FakeGitHub) -> None:
    report = fake_report(tmp_path / "report", slower=1)
    env = {**runner, "KBENCH_REPORT_DIR": str(report), "KBENCH_PR_NUMBER": "7",
           "KBENCH_COMMENT_MODE": "on-change", "GITHUB_TOKEN": "t0ken", "GITHUB_API_URL": github.api_url}
    result = run_step("comment", env, tmp_path)
    assert result.exit_code == 0, result.lines
    out = outputs(env)
    assert out["comment-action"] == "created"
    assert out["comment-url"].endswith(f"#issuecomment-{github.comments_on(7)[0]['id']}")


def test_comment_step_forbidden_is_a_warning(tmp_path: Path, runner: dict, github: FakeGitHub) -> None:
    github.forbid_writes = True
    report = fake_report(tmp_path / "report", slower=1)
    env = {**runner, "KBENCH_REPORT_DIR": str(report), "KBENCH_PR_NUMBER": "7",
           "KBENCH_COMMENT_MODE": "always", "GITHUB_TOKEN": "t0ken", "GITHUB_API_URL": github.api_url}
    result = run_step("comment", env, tmp_path)
    assert result.exit_code == 0
    assert result.lines[0].startswith("::warning::") and "fork" in result.lines[0]
    assert "t0ken" not in "".join(result.lines)
    assert outputs(env) == {"comment-url": "", "comment-action": "forbidden"}


def test_comment_step_other_http_errors_fail(tmp_path: Path, runner: dict, github: FakeGitHub) -> None:
    github.fail_status = 404
    report = fake_report(tmp_path / "report", slower=1)
    env = {**runner, "KBENCH_REPORT_DIR": str(report), "KBENCH_PR_NUMBER": "7",
           "GITHUB_TOKEN": "t0ken", "GITHUB_API_URL": github.api_url}
    result = run_step("comment", env, tmp_path)
    assert result.exit_code == 3
    assert result.lines[0].startswith("::error::kbench-ci comment: GitHub API GET")
    assert "t0ken" not in result.lines[0]


# -- the steps in sequence, as action.yml wires them ---------------------------------------------


def test_steps_in_sequence(tmp_path: Path, repos: Repos, runner: dict) -> None:
    """resolve → compare (a stand-in kbench-ci) → summary → gate, each reading the last's outputs."""
    work = repos.shallow()
    fake_cli = tmp_path / "kbench-ci"
    fake_cli.write_text(
        "#!/bin/sh\n"
        'while [ "$1" != "--output-dir" ]; do shift; done\n'
        f'cp "{tmp_path}/canned/benchmark.md" "{tmp_path}/canned/results.json" "$2"/\n'
        "exit 0\n"
    )
    fake_cli.chmod(0o755)
    fake_report(tmp_path / "canned", slower=2, faster=1, unchanged=14)
    pr = event(tmp_path, "pull_request", {
        "pull_request": {"number": 9, "base": {"sha": repos.c1}, "head": {"sha": repos.c2}},
    })

    assert run_step("resolve", {**runner, **pr}, work).exit_code == 0
    resolved = outputs(runner)
    Path(runner["GITHUB_OUTPUT"]).write_text("")

    assert run_step("compare", {**runner, "KBENCH_CLI": str(fake_cli), "KBENCH_BASE": resolved["base-sha"],
                                "KBENCH_HEAD": resolved["head-sha"],
                                "KBENCH_REPORT_DIR": resolved["report-dir"]}, work).exit_code == 0
    compared = outputs(runner)
    Path(runner["GITHUB_OUTPUT"]).write_text("")

    after = {**runner, "KBENCH_REPORT_DIR": resolved["report-dir"], "KBENCH_PR_NUMBER": resolved["pr-number"],
             "KBENCH_COMPARE_OUTCOME": "success", "KBENCH_COMPARE_EXIT_CODE": compared["exit-code"]}
    assert run_step("summary", after, work).exit_code == 0
    summarized = outputs(runner)
    assert (summarized["verdict"], summarized["regressions"]) == ("failed", "2")
    assert (Path(resolved["report-dir"]) / "pr-number.txt").read_text() == "9\n"
    assert run_step("gate", {**after, "KBENCH_FAIL_ON_REGRESSION": "true"}, work).exit_code == 1
    assert run_step("gate", {**after, "KBENCH_FAIL_ON_REGRESSION": "false"}, work).exit_code == 0
