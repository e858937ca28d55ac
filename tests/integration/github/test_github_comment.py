"""The sticky PR comment against a real local HTTP server that behaves like GitHub's API."""

from __future__ import annotations

import json
import logging
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from kbench_ci.errors import GitHubError, UsageError
from kbench_ci.github.client import GitHubClient, Repository
from kbench_ci.github.comment import COMMENT_LIMIT, marker, run_comment
from tests.integration.github.github_fake import FakeGitHub

TOKEN = "ghs_TopSecretToken0123456789abcdef"
REPO = "o/r"
PR = 7


def _results(passed: bool = False, **counts: int) -> dict:
    base = dict.fromkeys(
        ("slower", "faster", "unchanged", "incorrect", "failed", "inconclusive", "fixed", "added", "removed"), 0
    )
    base.update(counts)
    return {
        "schema": "kbench-ci/compare",
        "schema_version": 1,
        "gate": {"passed": passed, "summary": "test summary", "counts": base},
        "cases": [],
    }


def _report(directory: Path, markdown: str = "## kbench-ci\n\n| case | verdict |\n|---|---|\n| a | slower |\n",
            results: dict | None = None) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "benchmark.md").write_text(markdown, encoding="utf-8")
    (directory / "results.json").write_text(json.dumps(results or _results(slower=1)), encoding="utf-8")
    return directory


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


@pytest.fixture
def enterprise() -> Iterator[FakeGitHub]:
    fake = FakeGitHub(prefix="/api/v3").start()
    yield fake
    fake.stop()


def _env(fake: FakeGitHub, **extra: str) -> dict[str, str]:
    return {"GITHUB_REPOSITORY": REPO, "GITHUB_TOKEN": TOKEN, "GITHUB_API_URL": fake.api_url, **extra}


def _run(report: Path, fake: FakeGitHub, *, mode: str = "always", marker_id: str = "default", **env: str):
    return run_comment(
        report, from_artifact=None, repository=None, pr_number=PR, token=None, api_url=None,
        mode=mode, marker_id=marker_id, env=_env(fake, **env),
    )


def test_two_runs_make_one_comment(tmp_path: Path, github: FakeGitHub) -> None:
    report = _report(tmp_path / "r")
    first = _run(report, github)
    assert first.action == "created"
    assert first.url and first.url in first.reason

    _report(tmp_path / "r", "## kbench-ci\n\nsecond run\n")
    second = _run(report, github)
    assert second.action == "updated"
    assert second.url == first.url

    comments = github.comments_on(PR)
    assert len(comments) == 1
    assert comments[0]["body"].startswith(marker("default") + "\n")
    assert "second run" in comments[0]["body"]
    assert [r.method for r in github.calls() if r.method != "GET"] == ["POST", "PATCH"]


def test_headers_sent(tmp_path: Path, github: FakeGitHub) -> None:
    _run(_report(tmp_path / "r"), github)
    for call in github.calls():
        assert call.headers["authorization"] == f"Bearer {TOKEN}"
        assert call.headers["accept"] == "application/vnd.github+json"
        assert call.headers["x-github-api-version"] == "2022-11-28"
        assert call.headers["user-agent"].startswith("kbench-ci/")
    listing = github.calls("GET")[0]
    assert listing.path == f"/repos/{REPO}/issues/{PR}/comments"
    assert listing.query["per_page"] == ["100"]


def test_marker_comment_on_page_two_is_updated(tmp_path: Path, github: FakeGitHub) -> None:
    for i in range(130):
        github.add_comment(PR, f"chatter {i}")
    ours = github.add_comment(PR, marker("default") + "\nold report", login="github-actions[bot]", bot=True)
    for i in range(5):
        github.add_comment(PR, f"more chatter {i}")

    outcome = _run(_report(tmp_path / "r"), github)

    assert outcome.action == "updated"
    pages = [r.query.get("page", ["1"])[0] for r in github.calls("GET")]
    assert pages == ["1", "2"]
    assert not github.calls("POST")
    assert [r.path for r in github.calls("PATCH")] == [f"/repos/{REPO}/issues/comments/{ours}"]
    assert "old report" not in github.comments[ours]["body"]


def test_enterprise_api_url_with_path_prefix(tmp_path: Path, enterprise: FakeGitHub) -> None:
    for i in range(120):
        enterprise.add_comment(PR, f"chatter {i}")
    report = _report(tmp_path / "r")
    assert _run(report, enterprise).action == "created"
    assert _run(report, enterprise).action == "updated"
    assert all(r.path.startswith("/api/v3/repos/") for r in enterprise.calls())
    # the second page was fetched through the server's own Link header, prefix included
    assert any(r.query.get("page") == ["2"] for r in enterprise.calls("GET"))
    assert len([c for c in enterprise.comments_on(PR) if c["body"].startswith("<!-- kbench-ci")]) == 1


def test_api_url_from_process_environment(
    tmp_path: Path, enterprise: FakeGitHub, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GITHUB_API_URL", enterprise.api_url)
    monkeypatch.setenv("GITHUB_REPOSITORY", REPO)
    monkeypatch.setenv("GITHUB_TOKEN", TOKEN)
    event = tmp_path / "event.json"
    event.write_text(json.dumps({"pull_request": {"number": 12}}))
    monkeypatch.setenv("GITHUB_EVENT_PATH", str(event))
    outcome = run_comment(
        _report(tmp_path / "r"), from_artifact=None, repository=None, pr_number=None, token=None, api_url=None
    )
    assert outcome.action == "created"
    assert enterprise.calls("POST")[0].path == f"/api/v3/repos/{REPO}/issues/12/comments"


def test_forbidden_is_an_outcome_not_an_exception(tmp_path: Path, github: FakeGitHub) -> None:
    github.forbid_writes = True
    outcome = _run(_report(tmp_path / "r"), github)
    assert outcome.action == "forbidden"
    assert outcome.url is None
    assert "fork" in outcome.reason
    assert "fork-pr-comment.yml" in outcome.reason
    assert "403" in outcome.reason
    assert TOKEN not in outcome.reason  # the fake echoes the token in its 403 message


def test_token_never_leaks(tmp_path: Path, github: FakeGitHub, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    github.fail_status = 500
    slept: list[float] = []
    with pytest.raises(GitHubError) as info:
        run_comment(
            _report(tmp_path / "r"), from_artifact=None, repository=REPO, pr_number=PR, token=None,
            api_url=None, env={}, client=GitHubClient(TOKEN, api_url=github.api_url, sleep=slept.append),
        )
    exc = info.value
    assert slept == [1.0, 2.0]
    assert exc.status == 500
    assert "HTTP 500" in exc.message
    assert "***" in exc.message  # the echoed token was scrubbed
    for text in (str(exc), repr(exc), exc.one_line(), exc.hint or "", caplog.text, repr(exc.args)):
        assert TOKEN not in text
    client = GitHubClient(TOKEN, api_url=github.api_url)
    assert TOKEN not in repr(client) and TOKEN not in str(vars(client).get("_api_url"))
    assert len(github.calls()) == 3  # one try and two retries of an idempotent GET


def test_retry_then_success(github: FakeGitHub) -> None:
    github.fail_status, github.fail_times = 502, 1
    slept: list[float] = []
    client = GitHubClient(TOKEN, api_url=github.api_url, sleep=slept.append)
    assert list(client.iter_issue_comments(Repository.parse(REPO), PR)) == []
    assert slept == [1.0]


def test_post_is_not_retried(github: FakeGitHub) -> None:
    github.fail_status = 503
    client = GitHubClient(TOKEN, api_url=github.api_url, sleep=lambda s: None)
    with pytest.raises(GitHubError):
        client.create_issue_comment(Repository.parse(REPO), PR, "x")
    assert len(github.calls()) == 1


def _closed_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_connection_refused_is_a_github_error(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    port = _closed_port()
    with pytest.raises(GitHubError) as info:
        run_comment(
            _report(tmp_path / "r"), from_artifact=None, repository=REPO, pr_number=PR, token=TOKEN,
            api_url=f"http://127.0.0.1:{port}/api/v3", env={},
        )
    exc = info.value
    assert f"127.0.0.1:{port}" in exc.message
    assert "\n" not in exc.one_line()
    assert exc.hint and "GITHUB_API_URL" in exc.hint
    assert TOKEN not in exc.one_line() and TOKEN not in caplog.text


def test_next_link_to_another_host_is_not_followed(tmp_path: Path, github: FakeGitHub) -> None:
    github.evil_next_link = True
    for i in range(101):
        github.add_comment(PR, f"chatter {i}")
    with pytest.raises(GitHubError, match="another host"):
        _run(_report(tmp_path / "r"), github)


def test_oversize_body_is_folded_under_the_limit(tmp_path: Path, github: FakeGitHub) -> None:
    details = "<details><summary>Raw samples</summary>\n\n" + ("| x | 1.000 ms |\n" * 8000) + "</details>\n"
    markdown = "## kbench-ci\n\n**2 slower — gate FAILED**\n\n" + details + ("| case | slower |\n" * 4000)
    assert len(markdown) > COMMENT_LIMIT
    outcome = _run(_report(tmp_path / "r", markdown), github)
    assert outcome.action == "created" and outcome.body_truncated
    body = github.calls("POST")[0].body["body"]
    assert len(body) <= COMMENT_LIMIT
    assert body.startswith(marker("default"))
    assert "gate FAILED" in body
    assert "Raw samples" in body and "| x | 1.000 ms |" not in body
    assert "job summary" in body and "artifact" in body


def test_marker_ids_keep_suites_apart(tmp_path: Path, github: FakeGitHub) -> None:
    a = _report(tmp_path / "a", "suite A v1\n")
    b = _report(tmp_path / "b", "suite B v1\n")
    assert _run(a, github, marker_id="gemm").action == "created"
    assert _run(b, github, marker_id="softmax").action == "created"
    _report(tmp_path / "a", "suite A v2\n")
    assert _run(a, github, marker_id="gemm").action == "updated"

    bodies = sorted(c["body"] for c in github.comments_on(PR))
    assert len(bodies) == 2
    assert bodies[0].startswith(marker("gemm")) and "suite A v2" in bodies[0]
    assert bodies[1].startswith(marker("softmax")) and "suite B v1" in bodies[1]


def test_on_change_skips_unchanged_without_earlier_comment(tmp_path: Path, github: FakeGitHub) -> None:
    report = _report(tmp_path / "r", results=_results(passed=True, unchanged=5))
    outcome = _run(report, github, mode="on-change")
    assert outcome.action == "skipped"
    assert "unchanged" in outcome.reason
    assert not github.calls("POST")

    # once a comment exists it follows the result, even back to "all unchanged"
    github.add_comment(PR, marker("default") + "\nwas slower", login="github-actions[bot]", bot=True)
    assert _run(report, github, mode="on-change").action == "updated"


def test_on_regression_posts_only_on_failure(tmp_path: Path, github: FakeGitHub) -> None:
    passed = _report(tmp_path / "p", results=_results(passed=True, faster=3))
    assert _run(passed, github, mode="on-regression").action == "skipped"
    failed = _report(tmp_path / "f", results=_results(passed=False, incorrect=1))
    assert _run(failed, github, mode="on-regression").action == "created"


def test_never_makes_no_request(tmp_path: Path, github: FakeGitHub) -> None:
    outcome = _run(_report(tmp_path / "r"), github, mode="never")
    assert outcome.action == "skipped"
    assert github.calls() == []


def test_prefers_the_bots_comment_over_a_persons_copy(tmp_path: Path, github: FakeGitHub) -> None:
    github.add_comment(PR, marker("default") + "\nquoted by a person")
    ours = github.add_comment(PR, marker("default") + "\nold", login="github-actions[bot]", bot=True)
    assert _run(_report(tmp_path / "r"), github).action == "updated"
    assert [r.path for r in github.calls("PATCH")] == [f"/repos/{REPO}/issues/comments/{ours}"]


def test_workflow_run_reads_pr_number_from_artifact(tmp_path: Path, github: FakeGitHub) -> None:
    artifact = _report(tmp_path / "artifact")
    (artifact / "pr-number.txt").write_text("42\n")
    event = tmp_path / "event.json"
    event.write_text(json.dumps({"workflow_run": {"id": 1, "event": "pull_request", "head_sha": "a" * 40}}))
    github.pull_heads[42] = "a" * 40
    env = _env(github, GITHUB_EVENT_PATH=str(event))
    outcome = run_comment(
        tmp_path / "unused", from_artifact=artifact, repository=None, pr_number=None, token=None,
        api_url=None, mode="on-change", env=env,
    )
    assert outcome.action == "created"
    assert github.calls("POST")[0].path == f"/repos/{REPO}/issues/42/comments"


def test_workflow_run_refuses_a_pr_whose_head_differs(tmp_path: Path, github: FakeGitHub) -> None:
    artifact = _report(tmp_path / "artifact")
    (artifact / "pr-number.txt").write_text("42")
    event = tmp_path / "event.json"
    event.write_text(json.dumps({"workflow_run": {"head_sha": "a" * 40}}))
    github.pull_heads[42] = "b" * 40  # another PR, or pushed since
    outcome = run_comment(
        tmp_path / "unused", from_artifact=artifact, repository=None, pr_number=None, token=None,
        api_url=None, env=_env(github, GITHUB_EVENT_PATH=str(event)),
    )
    assert outcome.action == "skipped"
    assert "bbbbbbbbbbbb" in outcome.reason
    assert not github.calls("POST")


@pytest.mark.parametrize("content", ["", "abc", "12; rm -rf /", "-3", "0"])
def test_bad_pr_number_file(tmp_path: Path, github: FakeGitHub, content: str) -> None:
    artifact = _report(tmp_path / "artifact")
    (artifact / "pr-number.txt").write_text(content)
    with pytest.raises(UsageError):
        run_comment(
            tmp_path, from_artifact=artifact, repository=None, pr_number=None, token=None, api_url=None,
            env=_env(github),
        )


def test_usage_errors(tmp_path: Path, github: FakeGitHub) -> None:
    with pytest.raises(UsageError, match="no report"):
        _run(tmp_path / "missing", github)
    report = _report(tmp_path / "r")
    with pytest.raises(UsageError, match="no pull request number"):
        run_comment(report, from_artifact=None, repository=None, pr_number=None, token=None, api_url=None,
                    env=_env(github))
    with pytest.raises(UsageError, match="no GitHub token"):
        run_comment(report, from_artifact=None, repository=REPO, pr_number=PR, token=None, api_url=None,
                    env={"GITHUB_API_URL": github.api_url})
    with pytest.raises(UsageError, match="owner/name"):
        run_comment(report, from_artifact=None, repository="not-a-repo", pr_number=PR, token=TOKEN,
                    api_url=github.api_url, env={})
    with pytest.raises(UsageError, match="comment mode"):
        _run(report, github, mode="sometimes")
    with pytest.raises(UsageError, match="marker id"):
        _run(report, github, marker_id="x -->")
    assert github.calls() == []


def test_dry_run_prints_the_exact_body_without_a_token_or_network(tmp_path: Path) -> None:
    """A preview of the comment, offline."""
    import os
    import subprocess
    import sys

    from kbench_ci.github.comment import compose_body

    report = _report(tmp_path / "r")
    environment = {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "GH_"))}
    environment.update({"PYTHONPATH": str(Path(__file__).resolve().parents[3]), "https_proxy": "http://127.0.0.1:9",
                        "HTTPS_PROXY": "http://127.0.0.1:9"})
    done = subprocess.run([sys.executable, "-m", "kbench_ci", "comment", "--report", str(report), "--dry-run",
                           "--marker-id", "gpu-a"], capture_output=True, text=True, env=environment, timeout=60)
    assert done.returncode == 0, done.stderr
    body, truncated, _ = compose_body(report, marker_id="gpu-a", env=environment)
    assert done.stdout == body + "\n" and not truncated
    assert "<!-- kbench-ci" in body and "gpu-a" in body
