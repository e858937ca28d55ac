"""The action's inputs for shards, merge and history, and the comment's trend links:
each input reaches the command it is meant for, and the history step records and publishes on a
push to the default branch only."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from kbench_ci.errors import UsageError
from kbench_ci.github.action import (
    chart_files,
    compare_argv,
    history_argvs,
    merge_argv,
    not_a_default_branch_push,
    publish_site,
    run_step,
)
from kbench_ci.github.comment import run_comment, trend_anchor, trend_links
from kbench_ci.history.show import Trend
from tests.integration.github.github_fake import FakeGitHub
from tests.integration.github.test_action_steps import GIT_ENV, event, fake_report, git, outputs, runner

__all__ = ["runner"]  # the fixture, re-used


# -- shards and merge ------------------------------------------------------------------------------


def test_the_shard_inputs_become_compare_options(runner: dict) -> None:
    env = {**runner, "KBENCH_BASE": "abc", "KBENCH_REPORT_DIR": "/r", "KBENCH_SHARD": "2/3",
           "KBENCH_SHARD_TIMINGS": "last/results.json"}
    argv = compare_argv(env, "kbench-ci")
    assert argv[argv.index("--shard") + 1] == "2/3"
    assert argv[argv.index("--shard-timings") + 1] == "last/results.json"
    plain = compare_argv({**env, "KBENCH_SHARD": "", "KBENCH_SHARD_TIMINGS": ""}, "kbench-ci")
    assert "--shard" not in plain and "--shard-timings" not in plain
    with pytest.raises(UsageError, match="shard-timings input needs the shard input"):
        compare_argv({**env, "KBENCH_SHARD": ""}, "kbench-ci")


def test_merge_dirs_are_globbed_without_a_shell(tmp_path: Path, runner: dict) -> None:
    for name in ("kbench-ci-shard-2", "kbench-ci-shard-1", "kbench-ci-shard-3"):
        (tmp_path / "shards" / name).mkdir(parents=True)
    (tmp_path / "shards" / "stray.txt").write_text("not a folder")
    env = {**runner, "KBENCH_REPORT_DIR": "/r", "KBENCH_MERGE_DIRS": "shards/*\n'$(touch pwned)'"}
    argv = merge_argv(env, "kbench-ci", tmp_path)
    assert argv[:5] == ["kbench-ci", "merge", "shards/kbench-ci-shard-1", "shards/kbench-ci-shard-2", "shards/kbench-ci-shard-3"]
    assert argv[5] == "$(touch pwned)"  # named outright: passed on as a name, never run
    assert argv[6:9] == ["--output-dir", "/r", "--no-fail"]
    assert not (tmp_path / "pwned").exists()
    with pytest.raises(UsageError, match="names no folder"):
        merge_argv({**env, "KBENCH_MERGE_DIRS": "nothing/*"}, "kbench-ci", tmp_path)


def test_merge_mode_resolves_without_commits_and_runs_merge(tmp_path: Path, runner: dict) -> None:
    (tmp_path / "shards" / "a").mkdir(parents=True)
    pull = {"number": 12, "head": {"sha": "c" * 40}, "base": {"sha": "d" * 40}}
    env = {**runner, **event(tmp_path, "pull_request", {"pull_request": pull}),
           "KBENCH_MODE": "merge", "KBENCH_MERGE_DIRS": "shards/*"}
    # tmp_path is no git repository: merge mode fetches nothing.
    assert run_step("resolve", env, tmp_path).exit_code == 0
    resolved = outputs(env)
    assert resolved["comparable"] == "true" and resolved["pr-number"] == "12" and resolved["base-sha"] == ""
    fake = tmp_path / "kbench-ci"
    fake.write_text(f'#!/bin/sh\necho "$@" > "{tmp_path}/argv"\nexit 4\n')
    fake.chmod(0o755)
    Path(runner["GITHUB_OUTPUT"]).write_text("")
    step_env = {**env, "KBENCH_CLI": str(fake), "KBENCH_REPORT_DIR": resolved["report-dir"]}
    assert run_step("compare", step_env, tmp_path).exit_code == 0
    assert outputs(env)["exit-code"] == "4"
    assert (tmp_path / "argv").read_text().split()[:5] == ["merge", "shards/a", "--output-dir", resolved["report-dir"], "--no-fail"]
    # The shard input belongs to the benchmark jobs, not to the merge job.
    assert run_step("resolve", {**env, "KBENCH_SHARD": "1/2"}, tmp_path).exit_code == 2


def test_an_incomplete_merge_fails_the_job_whatever_fail_on_regression_says(tmp_path: Path, runner: dict) -> None:
    report = fake_report(tmp_path / "report")
    data = json.loads((report / "results.json").read_text())
    data["gate"]["summary"] = "3 unchanged — shards incomplete: shard 2/3 is missing: no result folder for it"
    (report / "results.json").write_text(json.dumps(data))
    env = {**runner, "KBENCH_REPORT_DIR": str(report), "KBENCH_COMPARE_OUTCOME": "success",
           "KBENCH_COMPARE_EXIT_CODE": "4", "KBENCH_MODE": "merge", "KBENCH_FAIL_ON_REGRESSION": "false"}
    result = run_step("gate", env, tmp_path)
    assert result.exit_code == 4
    assert "shard 2/3 is missing" in result.lines[0] and result.lines[0].startswith("::error::")
    assert run_step("summary", env, tmp_path).exit_code == 0
    assert outputs(env)["verdict"] == "error"
    # The same exit code from compare (not merge) is no known answer.
    compare_env = {**env, "KBENCH_MODE": "compare"}
    assert "kbench-ci compare exited 4" in run_step("gate", compare_env, tmp_path).lines[0]


# -- history -------------------------------------------------------------------------------------


def _push(tmp_path: Path, ref: str = "refs/heads/main") -> dict[str, str]:
    return {**event(tmp_path, "push", {"ref": ref, "repository": {"default_branch": "main"}}), "GITHUB_REF": ref}


def test_history_is_recorded_on_a_push_to_the_default_branch_only(tmp_path: Path) -> None:
    assert not_a_default_branch_push(_push(tmp_path)) is None
    assert "pushes to main only" in str(not_a_default_branch_push(_push(tmp_path, "refs/heads/feature")))
    pr = event(tmp_path, "pull_request", {"pull_request": {"number": 1}})
    assert "'pull_request' event" in str(not_a_default_branch_push(pr))


def test_history_inputs_map_to_record_and_show(runner: dict) -> None:
    env = {**runner, "KBENCH_REPORT_DIR": "/t/report", "KBENCH_HEAD": "a" * 40, "KBENCH_THRESHOLD": "5%"}
    assert history_argvs(env, "kbench-ci") == []
    record = ["kbench-ci", "history", "record", "--report", "/t/report", "--commit", "a" * 40,
              "--branch", "kbench-history", "--push", "origin"]
    assert history_argvs({**env, "KBENCH_RECORD_HISTORY": "true"}, "kbench-ci") == [record]
    both = history_argvs({**env, "KBENCH_PUBLISH_HISTORY": "true", "KBENCH_HISTORY_BRANCH": "perf"}, "kbench-ci")
    assert both[0][both[0].index("--branch") + 1] == "perf" and both[0][2] == "record"  # publishing records first
    assert both[1] == ["kbench-ci", "history", "show", "--output-dir", "/t/history-site", "--branch", "perf",
                       "--threshold", "0.05"]


def test_history_record_is_told_the_default_branch_of_the_push(tmp_path: Path, runner: dict) -> None:
    """`history record` refuses a commit not on the main branch; actions/checkout sets
    no origin/HEAD, so the action names the branch from the push's payload."""
    env = {**runner, **_push(tmp_path), "KBENCH_REPORT_DIR": "/t/report", "KBENCH_HEAD": "a" * 40,
           "KBENCH_RECORD_HISTORY": "true"}
    (record,) = history_argvs(env, "kbench-ci")
    assert record[record.index("--main-branch") + 1] == "main"


def test_history_show_gets_a_threshold_only_from_a_set_input(runner: dict) -> None:
    """Without the input, `history show` reads each case at the threshold it was judged by."""
    env = {**runner, "KBENCH_REPORT_DIR": "/t/report", "KBENCH_HEAD": "a" * 40, "KBENCH_PUBLISH_HISTORY": "true"}
    for unset in ({}, {"KBENCH_THRESHOLD": ""}):
        show = history_argvs({**env, **unset}, "kbench-ci")[1]
        assert show[:3] == ["kbench-ci", "history", "show"] and "--threshold" not in show


def test_history_step_skips_pull_requests_without_running_anything(tmp_path: Path, runner: dict) -> None:
    calls: list[list[str]] = []
    env = {**runner, **event(tmp_path, "pull_request", {"pull_request": {"number": 1}}), "KBENCH_RECORD_HISTORY": "true",
           "KBENCH_REPORT_DIR": str(tmp_path / "r"), "KBENCH_HEAD": "a" * 40, "KBENCH_COMPARE_EXIT_CODE": "0"}
    from kbench_ci.github.action import history  # noqa: PLC0415

    result = history(env, tmp_path, runner=lambda argv, cwd: calls.append(argv) or 0)
    assert result.exit_code == 0 and calls == [] and result.lines[0].startswith("::notice::")


@pytest.fixture
def clone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Path, Path]]:
    """A bare origin with one commit on main and a clone of it (like actions/checkout)."""
    for name, value in GIT_ENV.items():
        monkeypatch.setenv(name, value)
    work = tmp_path / "src"
    work.mkdir()
    git(work, "init", "-q", "-b", "main")
    (work / "kbench.toml").write_text("# suite\n")
    git(work, "add", ".")
    git(work, "commit", "-q", "-m", "one")
    origin = tmp_path / "origin.git"
    git(tmp_path, "clone", "-q", "--bare", str(work), str(origin))
    checkout = tmp_path / "checkout"
    git(tmp_path, "clone", "-q", origin.as_uri(), str(checkout))
    yield origin, checkout


def _head_run(sha: str, samples: list[float]) -> dict:
    head = {"label": "head", "kind": "pytorch", "role": "solution", "status": "ok", "rounds_ms": [samples]}
    return {"schema": "kbench-ci/compare", "schema_version": 1, "head": {"sha": sha}, "environment": {"gpu_name": "NVIDIA H200"},
            "gate": {"passed": True, "summary": "ok", "counts": {}},
            "cases": [{"case_id": "vadd[N=1024]", "verdict": "unchanged", "head": head}]}


def test_publish_commits_the_site_with_its_charts_as_binary_files(clone: tuple[Path, Path], tmp_path: Path) -> None:
    origin, checkout = clone
    site = tmp_path / "site"
    site.mkdir()
    png = bytes(range(256)) * 4  # binary, not text: every byte value, CR and LF included
    (site / "NVIDIA_H200__vadd_N_1024_.png").write_bytes(png)
    (site / "unused.png").write_bytes(b"not shown on the page")
    page = "<h2 id='NVIDIA_H200__vadd_N_1024_.png'>x</h2>\n<img src='NVIDIA_H200__vadd_N_1024_.png' alt='x'>\n"
    (site / "index.html").write_text(page)
    (site / "history.md").write_text("# kbench-ci history\n")
    tip = publish_site(site, "kbench-history", checkout)
    assert git(origin, "rev-parse", "kbench-history") == tip
    assert git(origin, "show", "kbench-history:index.html") == page.strip()
    committed = subprocess.run(["git", "show", "kbench-history:NVIDIA_H200__vadd_N_1024_.png"], cwd=origin,
                               capture_output=True, check=True).stdout
    assert committed == png  # byte for byte
    assert "unused.png" not in git(origin, "ls-tree", "--name-only", "kbench-history")
    assert git(origin, "show", "kbench-history:history.md") == "# kbench-ci history"
    assert git(checkout, "status", "--porcelain") == ""  # the work tree is untouched
    assert chart_files("<img src='../../etc/passwd.png'>", site) == {}


def test_history_step_records_and_publishes_on_main(clone: tuple[Path, Path], tmp_path: Path, runner: dict) -> None:
    """The real commands: `kbench-ci history record --push origin`, `history show`, then the site
    committed beside the entries on the pushed branch."""
    origin, checkout = clone
    sha = git(checkout, "rev-parse", "HEAD")
    report = Path(runner["RUNNER_TEMP"]) / "kbench-ci" / "default" / "report"
    report.mkdir(parents=True)
    (report / "results.json").write_text(json.dumps(_head_run(sha, [1.0, 1.1, 0.9])))
    env = {**os.environ, **runner, **_push(tmp_path), "KBENCH_REPORT_DIR": str(report), "KBENCH_HEAD": sha,
           "KBENCH_COMPARE_EXIT_CODE": "0", "KBENCH_PUBLISH_HISTORY": "true", "KBENCH_THRESHOLD": "2%"}
    result = run_step("history", env, checkout)
    assert result.exit_code == 0, result.lines
    assert not any(line.startswith("::warning::") for line in result.lines), result.lines
    files = git(origin, "ls-tree", "-r", "--name-only", "kbench-history").splitlines()
    assert f"entries/NVIDIA-H200/{sha}.json" in files and "index.html" in files and "history.md" in files
    page = git(origin, "show", "kbench-history:index.html")
    anchor = trend_anchor("NVIDIA H200", "vadd[N=1024]")
    assert f"id='{anchor}'" in page and f"<img src='{anchor}'" in page
    assert anchor in files  # the chart itself, a real PNG beside the page
    chart = subprocess.run(["git", "show", f"kbench-history:{anchor}"], cwd=origin, capture_output=True, check=True).stdout
    assert chart.startswith(b"\x89PNG\r\n\x1a\n")
    assert git(checkout, "status", "--porcelain") == ""


# -- the comment's trend links -------------------------------------------------------------------


@pytest.mark.parametrize("gpu, case_id", [("NVIDIA H200", "vadd[N=1024]"), ("cpu", "gemm[M=64, N=8]"), ("A/B x", "k")])
def test_trend_anchor_is_the_history_sites_chart_id(gpu: str, case_id: str) -> None:
    assert trend_anchor(gpu, case_id) == Trend(gpu, case_id, (), (), ()).chart_name


def test_trend_links_name_every_slower_case_and_only_those() -> None:
    results = {"environment": {"gpu_name": "NVIDIA H200"}, "cases": [
        {"case_id": "a[N=1]", "verdict": "slower"}, {"case_id": "b[N=2]", "verdict": "unchanged"},
        {"case_id": "c[N=3]", "verdict": "slower", "gpu": "NVIDIA A100"},  # a merged report's own GPU
    ]}
    line = trend_links(results, "https://octo.github.io/kernels")
    assert line is not None
    assert "(https://octo.github.io/kernels/#NVIDIA_H200__a_N_1.png)" in line
    assert "(https://octo.github.io/kernels/#NVIDIA_A100__c_N_3.png)" in line
    assert "b\\[N=2\\]" not in line and line.count("](") == 2
    assert trend_links({"cases": [{"case_id": "x", "verdict": "faster"}]}, "https://o.github.io/r/") is None
    with pytest.raises(UsageError, match="pages-url"):
        trend_links(results, "javascript:alert(1)")


@pytest.fixture
def github(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeGitHub]:
    for name in ("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY", "all_proxy", "ALL_PROXY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    fake = FakeGitHub().start()
    yield fake
    fake.stop()


def test_the_comment_links_slower_cases_when_a_pages_url_is_given(tmp_path: Path, github: FakeGitHub) -> None:
    report = fake_report(tmp_path / "report", slower=1)
    data = json.loads((report / "results.json").read_text())
    data["cases"] = [{"case_id": "gemm[M=4096]", "verdict": "slower"}, {"case_id": "add[N=8]", "verdict": "unchanged"}]
    (report / "results.json").write_text(json.dumps(data))
    env = {"GITHUB_REPOSITORY": "octo/kernels", "GITHUB_TOKEN": "t0ken", "GITHUB_API_URL": github.api_url}

    def post(**extra: str) -> str:
        run_comment(report, from_artifact=None, repository=None, pr_number=7, token=None, api_url=None,
                    mode="always", env={**env, **extra})
        return str(github.comments_on(7)[-1]["body"])

    assert "Trend on the main branch" not in post()
    body = post(KBENCH_PAGES_URL="https://octo.github.io/kernels/")
    assert "[`gemm\\[M=4096\\]`](https://octo.github.io/kernels/#cpu__gemm_M_4096.png)" in body
    assert "add" not in body.split("Trend on the main branch", 1)[1].split("\n", 1)[0]


def test_every_new_input_reaches_a_step(tmp_path: Path) -> None:
    from ruamel.yaml import YAML  # noqa: PLC0415

    action = YAML(typ="safe").load((Path(__file__).resolve().parents[3] / "action.yml").read_text())
    used = json.dumps(action["runs"]["steps"])
    for name, variable in (("mode", "KBENCH_MODE"), ("shard", "KBENCH_SHARD"), ("shard-timings", "KBENCH_SHARD_TIMINGS"),
                           ("merge-dirs", "KBENCH_MERGE_DIRS"), ("record-history", "KBENCH_RECORD_HISTORY"),
                           ("publish-history", "KBENCH_PUBLISH_HISTORY"), ("history-branch", "KBENCH_HISTORY_BRANCH"),
                           ("pages-url", "KBENCH_PAGES_URL")):
        assert name in action["inputs"]
        assert f'"{variable}": "${{{{ inputs.{name} }}}}"' in used, name
    steps = {step.get("id"): step for step in action["runs"]["steps"]}
    assert "KBENCH_PAGES_URL" in steps["comment"]["env"]
    assert steps["history"]["run"].endswith("kbench-ci-action\" history")
