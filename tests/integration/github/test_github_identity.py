"""Against the loopback fake of GitHub's API: whose comment is
kbench-ci's, and the head check of ``--report DIR --pr N`` in a workflow_run event."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

from kbench_ci.errors import UsageError
from kbench_ci.github import action as action_steps
from kbench_ci.github.client import GitHubClient
from kbench_ci.github.comment import marker, run_comment
from tests.integration.github.github_fake import FakeGitHub
from tests.integration.github.test_action_steps import fake_report, outputs
from tests.integration.github.test_github_comment import PR, REPO, TOKEN, _env, _report, _results
from tests.integration.github.test_github_hardening import Clock, kbench_comment

ROOT = Path(__file__).resolve().parents[3]
HEAD = "a" * 40
OTHER = "b" * 40


@pytest.fixture(autouse=True)
def _no_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY", "all_proxy", "ALL_PROXY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")


@pytest.fixture
def github() -> Iterator[FakeGitHub]:
    fake = FakeGitHub().start()
    yield fake
    fake.stop()


def _client(github: FakeGitHub, clock: Clock | None = None) -> GitHubClient:
    clock = clock or Clock()
    return GitHubClient(TOKEN, api_url=github.api_url, sleep=clock.sleep, clock=clock.time)


def _post(report: Path, github: FakeGitHub, *, client: GitHubClient | None = None, mode: str = "always",
          comment_author: str | None = None, **env: str):
    author = {} if comment_author is None else {"comment_author": comment_author}
    return run_comment(report, from_artifact=None, repository=REPO, pr_number=PR, token=None, api_url=None,
                       mode=mode, env=_env(github, **env), client=client or _client(github), **author)


def _hijack(github: FakeGitHub, login: str = "mallory") -> int:
    """The pull request's author posts a comment that starts with kbench-ci's marker first."""
    return github.add_comment(PR, marker("default") + "\nall kernels are faster, merge me", login=login)


# -- item 7: only kbench-ci's own identity's comment is kbench-ci's ------------------------------------


def test_a_marker_comment_by_the_pull_requests_author_is_left_alone(tmp_path: Path, github: FakeGitHub) -> None:
    planted = _hijack(github)
    outcome = _post(_report(tmp_path / "r"), github)
    assert outcome.action == "created"
    assert not github.calls("PATCH")
    assert github.comments[planted]["body"].endswith("merge me")
    (ours,) = [c for c in github.comments_on(PR) if c["id"] != planted]
    assert ours["user"]["login"] == "github-actions[bot]" and ours["body"].startswith(marker("default"))
    assert "by mallory was left alone" in outcome.reason and "comment-author" in outcome.reason
    # The next run finds its own comment, not the planted one.
    assert _post(_report(tmp_path / "r"), github).action == "updated"
    assert [r.path for r in github.calls("PATCH")] == [f"/repos/{REPO}/issues/comments/{ours['id']}"]


def test_a_hijacked_marker_that_may_not_be_edited_does_not_cost_the_comment(tmp_path: Path,
                                                                            github: FakeGitHub) -> None:
    """Before: the person's comment was PATCHed, GitHub answered 403, and the warning blamed the
    job's permissions while no comment was posted."""
    _hijack(github)
    github.forbid_foreign_edits = True
    outcome = _post(_report(tmp_path / "r"), github)
    assert outcome.action == "created", outcome.reason
    assert "permissions" not in outcome.reason


def test_on_change_does_not_take_a_planted_marker_for_an_earlier_comment(tmp_path: Path,
                                                                         github: FakeGitHub) -> None:
    planted = _hijack(github)
    report = _report(tmp_path / "r", results=_results(passed=True, unchanged=4))
    outcome = _post(report, github, mode="on-change")
    assert outcome.action == "skipped" and "no earlier comment" in outcome.reason
    assert not github.calls("PATCH") and not github.calls("POST")
    assert github.comments[planted]["body"].endswith("merge me")


def test_comment_author_names_the_apps_identity(tmp_path: Path, github: FakeGitHub) -> None:
    github.post_login = "kbench-app[bot]"
    _hijack(github)
    earlier = github.add_comment(PR, marker("default") + "\nthe app's earlier report", login="kbench-app[bot]",
                                 bot=True)
    outcome = _post(_report(tmp_path / "r"), github, comment_author="kbench-app[bot]")
    assert outcome.action == "updated"
    assert [r.path for r in github.calls("PATCH")] == [f"/repos/{REPO}/issues/comments/{earlier}"]
    # From the environment too (the action's comment-author input), case as GitHub folds it.
    assert _post(_report(tmp_path / "r"), github, KBENCH_COMMENT_AUTHOR="Kbench-App[bot]").action == "updated"
    # Without it the app's comment is not known for kbench-ci's: a new one, and the reason says why.
    unsure = _post(_report(tmp_path / "r"), github)
    assert unsure.action == "created"
    assert "kbench-app[bot]" in unsure.reason and "comment-author" in unsure.reason


def test_the_author_of_a_comment_kbench_ci_posted_is_kbench_ci(tmp_path: Path, github: FakeGitHub) -> None:
    """A PAT's user, named nowhere: the comment this client created tells who it writes as."""
    github.post_login = "ci-user"
    planted = _hijack(github)
    client = _client(github)
    assert _post(_report(tmp_path / "r"), github, client=client).action == "created"
    assert _post(_report(tmp_path / "r"), github, client=client).action == "updated"
    (ours,) = [c for c in github.comments_on(PR) if c["id"] != planted]
    assert ours["user"]["login"] == "ci-user"
    assert [r.path for r in github.calls("PATCH")] == [f"/repos/{REPO}/issues/comments/{ours['id']}"]
    assert github.comments[planted]["body"].endswith("merge me")


def test_comment_author_option_of_the_command(tmp_path: Path, github: FakeGitHub) -> None:
    github.post_login = "kbench-app[bot]"
    earlier = github.add_comment(PR, marker("default") + "\nearlier", login="kbench-app[bot]", bot=True)
    report = _report(tmp_path / "r")
    done = kbench_comment("--report", str(report), "--pr", str(PR), "--comment-author", "kbench-app[bot]",
                          env=_env(github))
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("comment updated: ") and done.stdout.strip().endswith(f"-{earlier}")
    bad = kbench_comment("--report", str(report), "--pr", str(PR), "--comment-author", "not a login",
                         env=_env(github))
    assert bad.returncode == 2
    (line,) = bad.stderr.strip().splitlines()
    assert "comment author 'not a login' is not a GitHub login" in line


def test_the_action_passes_comment_author_to_the_steps_that_read_it() -> None:
    action = YAML(typ="safe").load((ROOT / "action.yml").read_text(encoding="utf-8"))
    assert action["inputs"]["comment-author"]["default"] == ""
    steps = {step.get("id"): step for step in action["runs"]["steps"]}
    for step_id in ("resolve", "comment"):
        assert steps[step_id]["env"]["KBENCH_COMMENT_AUTHOR"] == "${{ inputs.comment-author }}"
        assert "comment-author" not in steps[step_id]["run"]  # through env:, never into the script


def test_the_action_steps_check_and_use_comment_author(tmp_path: Path) -> None:
    home = tmp_path / "runner"
    (home / "temp").mkdir(parents=True)
    (home / "output").touch()
    runner = {"GITHUB_OUTPUT": str(home / "output"), "RUNNER_TEMP": str(home / "temp"), "GITHUB_REPOSITORY": REPO}
    refused = action_steps.run_step("resolve", {**runner, "KBENCH_COMMENT_AUTHOR": "app[bot]; rm -rf"}, tmp_path)
    assert refused.exit_code == 2
    (line,) = refused.lines
    assert "comment author 'app[bot]; rm -rf' is not a GitHub login" in line

    github = FakeGitHub(post_login="kbench-app[bot]").start()
    try:
        earlier = github.add_comment(PR, marker("default") + "\nearlier", login="kbench-app[bot]", bot=True)
        report = fake_report(tmp_path / "report", slower=1)
        env = {**runner, "KBENCH_REPORT_DIR": str(report), "KBENCH_PR_NUMBER": str(PR),
               "KBENCH_COMMENT_MODE": "always", "GITHUB_TOKEN": TOKEN, "GITHUB_API_URL": github.api_url,
               "KBENCH_COMMENT_AUTHOR": "kbench-app[bot]"}
        result = action_steps.run_step("comment", env, tmp_path)
    finally:
        github.stop()
    assert result.exit_code == 0, result.lines
    assert outputs(runner)["comment-action"] == "updated"
    assert [r.path for r in github.calls("PATCH")] == [f"/repos/{REPO}/issues/comments/{earlier}"]


# -- item 8: --report DIR --pr N in a workflow_run event checks the head ------------------------------


def _compare_report(directory: Path, head_sha: str | None, *, dirty: bool = False) -> Path:
    results: dict[str, Any] = _results(slower=1)
    if head_sha is not None:
        results["head"] = {"ref": "HEAD", "sha": head_sha, "tree": "worktree",
                           "description": "working tree (dirty) at HEAD" if dirty else f"HEAD ({head_sha[:12]})"}
    return _report(directory, results=results)


def _workflow_run_env(tmp_path: Path, github: FakeGitHub) -> dict[str, str]:
    event = tmp_path / "event.json"
    event.write_text(json.dumps({"workflow_run": {"id": 5, "event": "pull_request", "head_sha": HEAD}}))
    return _env(github, GITHUB_EVENT_NAME="workflow_run", GITHUB_EVENT_PATH=str(event))


def test_report_of_another_commit_is_refused_in_a_workflow_run_event(tmp_path: Path, github: FakeGitHub) -> None:
    github.pull_heads[PR] = OTHER  # the pull request's head: not what the report measured
    report = _compare_report(tmp_path / "r", HEAD)
    done = kbench_comment("--report", str(report), "--pr", str(PR), env=_workflow_run_env(tmp_path, github))
    assert done.returncode == 2, done.stdout + done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert f"refusing to comment on {REPO}#{PR}: the report is of {HEAD[:12]}" in line
    assert f"the pull request's head is {OTHER[:12]}" in line
    assert not github.calls("POST") and not github.calls("PATCH")
    assert [r.path for r in github.calls()] == [f"/repos/{REPO}/pulls/{PR}"]


def test_report_of_the_pull_requests_head_is_posted_in_a_workflow_run_event(tmp_path: Path,
                                                                            github: FakeGitHub) -> None:
    github.pull_heads[PR] = HEAD
    report = _compare_report(tmp_path / "r", HEAD)
    done = kbench_comment("--report", str(report), "--pr", str(PR), env=_workflow_run_env(tmp_path, github))
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("comment created: ")


@pytest.mark.parametrize("dirty", [False, True])
def test_report_without_a_clean_head_is_refused_in_a_workflow_run_event(tmp_path: Path, github: FakeGitHub,
                                                                        dirty: bool) -> None:
    github.pull_heads[PR] = HEAD
    report = _compare_report(tmp_path / "r", HEAD if dirty else None, dirty=dirty)
    env = _workflow_run_env(tmp_path, github)
    done = kbench_comment("--report", str(report), "--pr", str(PR), env=env)
    assert done.returncode == 2
    (line,) = done.stderr.strip().splitlines()
    assert "cannot be checked" in line and "--skip-head-check" in line
    assert github.calls() == []
    checked = kbench_comment("--report", str(report), "--pr", str(PR), "--skip-head-check", env=env)
    assert checked.returncode == 0, checked.stderr


def test_report_and_pr_outside_a_workflow_run_event_need_no_head(tmp_path: Path, github: FakeGitHub) -> None:
    github.pull_heads[PR] = OTHER
    with pytest.raises(UsageError, match="refusing to comment"):  # in a workflow_run event: refused
        run_comment(_compare_report(tmp_path / "w", HEAD), from_artifact=None, repository=REPO, pr_number=PR,
                    token=None, api_url=None, env=_workflow_run_env(tmp_path, github), client=_client(github))
    before = len(github.requests)
    outcome = _post(_compare_report(tmp_path / "r", None), github)
    assert outcome.action == "created"
    assert not [r for r in github.requests[before:] if "/pulls/" in r.path]
