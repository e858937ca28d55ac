"""The fork recipe fails closed: the artifact is untrusted data, its
pr-number.txt is believed only against workflow_run.head_sha, no link in it is followed, and the
comment workflow, which holds a write token, installs nothing and pins what it runs."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from ruamel.yaml import YAML

from kbench_ci.errors import UsageError
from kbench_ci.github import action as action_steps
from kbench_ci.github.comment import run_comment
from tests.integration.github.github_fake import FakeGitHub
from tests.integration.github.test_github_comment import REPO, TOKEN, _env, _report

ROOT = Path(__file__).resolve().parents[3]
COMMENT_WORKFLOW = ROOT / "examples" / "workflows" / "fork-pr-comment.yml"
HEAD = "a" * 40
SECRET = "root:x:0:0:the runner's secret line\n"


@pytest.fixture(autouse=True)
def _no_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY", "all_proxy", "ALL_PROXY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")


@pytest.fixture
def github() -> Iterator[FakeGitHub]:
    fake = FakeGitHub(pull_heads={42: HEAD}).start()
    yield fake
    fake.stop()


def artifact(tmp_path: Path, number: str = "42") -> Path:
    directory = _report(tmp_path / "artifact")
    (directory / "pr-number.txt").write_text(number + "\n")
    return directory


def workflow_run_event(tmp_path: Path, **run: object) -> str:
    path = tmp_path / "event.json"
    path.write_text(json.dumps({"workflow_run": {"id": 1, "event": "pull_request", **run}}))
    return str(path)


def from_artifact(directory: Path, github: FakeGitHub, **env: str):
    return run_comment(directory, from_artifact=directory, repository=None, pr_number=None, token=None,
                       api_url=None, env=_env(github, **env))


# -- pr-number.txt needs the head sha to be checked against ----------------------------------------


@pytest.mark.parametrize("event", ["none", "no head_sha", "bad head_sha"])
def test_pr_number_without_a_head_sha_to_check_is_refused(tmp_path: Path, github: FakeGitHub, event: str) -> None:
    env = {} if event == "none" else {
        "GITHUB_EVENT_PATH": workflow_run_event(tmp_path, **({} if event == "no head_sha" else {"head_sha": "HEAD"}))
    }
    with pytest.raises(UsageError) as info:
        from_artifact(artifact(tmp_path), github, **env)
    assert "cannot be checked: the event has no workflow_run.head_sha" in info.value.message
    assert "--pr N --skip-head-check" in (info.value.hint or "")
    assert github.calls() == []  # nothing read, nothing posted


def with_pr(directory: Path, github: FakeGitHub, number: int, *, skip: bool = False, **env: str):
    return run_comment(directory, from_artifact=directory, repository=None, pr_number=number, token=None,
                       api_url=None, env=_env(github, **env), skip_head_check=skip)


def test_an_explicit_pr_with_an_artifact_is_checked_against_the_head_too(tmp_path: Path, github: FakeGitHub) -> None:
    """--pr N did skip the head-commit check."""
    with pytest.raises(UsageError) as info:
        with_pr(artifact(tmp_path), github, 42)
    assert info.value.message.startswith("--pr 42 with --from-artifact cannot be checked: the event has no workflow_run.head_sha")
    assert "--skip-head-check" in (info.value.hint or "")
    assert github.calls() == []
    other = "b" * 40
    outcome = with_pr(artifact(tmp_path), github, 42, GITHUB_EVENT_PATH=workflow_run_event(tmp_path, head_sha=other))
    assert outcome.action != "created" and github.calls("POST") == []
    assert "its head is aaaaaaaaaaaa" in outcome.reason
    outcome = with_pr(artifact(tmp_path), github, 42, GITHUB_EVENT_PATH=workflow_run_event(tmp_path, head_sha=HEAD))
    assert outcome.action == "created"


def test_the_head_check_is_skipped_only_when_asked(tmp_path: Path, github: FakeGitHub) -> None:
    outcome = with_pr(artifact(tmp_path), github, 42, skip=True)
    assert outcome.action == "created"
    assert github.calls("POST")[0].path == f"/repos/{REPO}/issues/42/comments"


def test_a_report_that_is_a_directory_is_one_line_and_exit_2(tmp_path: Path, github: FakeGitHub) -> None:
    """A traceback before."""
    directory = artifact(tmp_path)
    (directory / "benchmark.md").unlink()
    (directory / "benchmark.md").mkdir()
    environment = {**os.environ, **_env(github), "GITHUB_EVENT_PATH": workflow_run_event(tmp_path, head_sha=HEAD)}
    environment["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), environment.get("PYTHONPATH")]))
    done = subprocess.run([sys.executable, "-m", "kbench_ci", "comment", "--from-artifact", str(directory)],
                          capture_output=True, text=True, env=environment, timeout=60)
    assert done.returncode == 2, done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith(f"kbench-ci: error: {directory / 'benchmark.md'} is not a regular file")
    assert github.calls("POST") == []


def test_the_command_line_fails_closed_with_exit_2(tmp_path: Path, github: FakeGitHub) -> None:
    environment = {**os.environ, **_env(github)}
    environment.pop("GITHUB_EVENT_PATH", None)
    environment["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), environment.get("PYTHONPATH")]))
    done = subprocess.run([sys.executable, "-m", "kbench_ci", "comment", "--from-artifact", str(artifact(tmp_path))],
                          capture_output=True, text=True, env=environment, timeout=60)
    assert done.returncode == 2
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("kbench-ci: error: pr-number.txt in ") and "workflow_run.head_sha" in line
    assert github.calls() == []


def test_a_checked_pr_number_is_commented_on(tmp_path: Path, github: FakeGitHub) -> None:
    outcome = from_artifact(artifact(tmp_path), github, GITHUB_EVENT_PATH=workflow_run_event(tmp_path, head_sha=HEAD))
    assert outcome.action == "created"
    assert github.calls("POST")[0].path == f"/repos/{REPO}/issues/42/comments"


# -- no link out of the artifact folder -------------------------------------------------------------


@pytest.mark.parametrize("name", ["benchmark.md", "results.json", "pr-number.txt"])
def test_a_link_in_the_artifact_is_never_followed(tmp_path: Path, github: FakeGitHub, name: str) -> None:
    secret = tmp_path / "outside" / "passwd"
    secret.parent.mkdir()
    secret.write_text(SECRET if name != "pr-number.txt" else "42\n")
    directory = artifact(tmp_path)
    (directory / name).unlink()
    (directory / name).symlink_to(secret)
    with pytest.raises(UsageError) as info:
        from_artifact(directory, github, GITHUB_EVENT_PATH=workflow_run_event(tmp_path, head_sha=HEAD))
    assert info.value.message == f"{name} in {directory} is a symbolic link; refusing to follow it out of the folder"
    assert github.calls("POST") == [] and github.calls("PATCH") == []
    assert all(SECRET not in json.dumps(call.body) for call in github.calls())


def test_a_fifo_in_the_artifact_does_not_hang_the_job(tmp_path: Path, github: FakeGitHub) -> None:
    directory = artifact(tmp_path)
    (directory / "benchmark.md").unlink()
    os.mkfifo(directory / "benchmark.md")
    with pytest.raises(UsageError, match="is not a regular file"):
        from_artifact(directory, github, GITHUB_EVENT_PATH=workflow_run_event(tmp_path, head_sha=HEAD))


def test_the_summary_step_neither_shows_nor_writes_through_a_planted_link(tmp_path: Path) -> None:
    """On the benchmark runner a kernel could plant links in the report folder."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "passwd").write_text(SECRET)
    (outside / "victim").write_text("keep me\n")
    report = tmp_path / "report"
    report.mkdir()
    (report / "benchmark.md").symlink_to(outside / "passwd")
    (report / "pr-number.txt").symlink_to(outside / "victim")
    home = tmp_path / "runner"
    home.mkdir()
    env = {"GITHUB_OUTPUT": str(home / "output"), "GITHUB_STEP_SUMMARY": str(home / "summary.md"),
           "KBENCH_REPORT_DIR": str(report), "KBENCH_PR_NUMBER": "9", "KBENCH_COMPARE_OUTCOME": "success",
           "KBENCH_COMPARE_EXIT_CODE": "0"}
    result = action_steps.run_step("summary", env, tmp_path)
    assert result.exit_code == 0
    assert any("benchmark.md is not a plain file" in line for line in result.lines)
    assert SECRET not in (home / "summary.md").read_text()
    assert (outside / "victim").read_text() == "keep me\n"
    assert not (report / "pr-number.txt").is_symlink() and (report / "pr-number.txt").read_text() == "9\n"


# -- the comment workflow holds a write token: it pins what it runs and installs nothing -------------


def _workflow() -> dict:
    return YAML(typ="safe").load(COMMENT_WORKFLOW.read_text())


def test_the_comment_workflow_installs_nothing_and_pins_everything() -> None:
    steps = _workflow()["jobs"]["comment"]["steps"]
    for step in steps:
        if "uses" in step:
            assert re.fullmatch(r"[\w.-]+/[\w.-]+@[0-9a-f]{40}", step["uses"]), step["uses"]
        assert "pip" not in step.get("run", ""), step
    (checkout,) = [s for s in steps if s.get("uses", "").startswith("actions/checkout@")]
    assert re.fullmatch(r"[0-9a-f]{40}", str(checkout["with"]["ref"])), "a tag or branch can be moved"
    assert checkout["with"]["persist-credentials"] is False


def test_the_comment_workflow_step_runs_on_the_standard_library_alone(tmp_path: Path, github: FakeGitHub) -> None:
    """Play the workflow's comment step: its env, its command, under `python -S` (no site-packages:
    nothing but kbench-ci's source, as in the pinned checkout)."""
    (step,) = [s for s in _workflow()["jobs"]["comment"]["steps"] if s.get("name") == "Comment on the pull request"]
    directory = artifact(tmp_path)
    rendered = {
        "GITHUB_TOKEN": TOKEN, "KBENCH_ARTIFACT_DIR": str(directory), "PYTHONPATH": str(ROOT),
    }
    assert set(step["env"]) == {*rendered, "KBENCH_COMMENT_MODE"}
    env = {"PATH": os.environ["PATH"], **rendered, "KBENCH_COMMENT_MODE": step["env"]["KBENCH_COMMENT_MODE"],
           "GITHUB_REPOSITORY": REPO, "GITHUB_API_URL": github.api_url,
           "GITHUB_EVENT_PATH": workflow_run_event(tmp_path, head_sha=HEAD), "NO_PROXY": "127.0.0.1"}
    argv = step["run"].split()
    assert argv[:3] == ["python", "-m", "kbench_ci.github.action"]
    done = subprocess.run([sys.executable, "-S", *argv[1:]], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"created a kbench-ci comment on {REPO}#42" in done.stdout
    assert len(github.comments_on(42)) == 1
