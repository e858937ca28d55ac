"""Against the loopback fake of GitHub's API: the bounds on waiting out rate
limits (a fake clock: nothing really sleeps)."""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from kbench_ci.github.client import GitHubClient
from kbench_ci.github.comment import run_comment
from tests.integration.github.github_fake import FakeGitHub
from tests.integration.github.test_github_comment import PR, REPO, TOKEN, _env, _report
from tests.integration.github.test_github_hardening import Clock

HEAD = "a" * 40


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


def _client(github: FakeGitHub, clock: Clock) -> GitHubClient:
    return GitHubClient(TOKEN, api_url=github.api_url, sleep=clock.sleep, clock=clock.time)


def _post(report: Path, github: FakeGitHub, clock: Clock):
    return run_comment(report, from_artifact=None, repository=REPO, pr_number=PR, token=None, api_url=None,
                       mode="always", env=_env(github), client=_client(github, clock))


def _workflow_run_env(tmp_path: Path, github: FakeGitHub) -> dict[str, str]:
    event = tmp_path / "event.json"
    event.write_text(json.dumps({"workflow_run": {"id": 5, "event": "pull_request", "head_sha": HEAD}}))
    return _env(github, GITHUB_EVENT_NAME="workflow_run", GITHUB_EVENT_PATH=str(event))


def _waits_logged(caplog: pytest.LogCaptureFixture) -> list[float]:
    return [float(m.group(1)) for r in caplog.records
            if (m := re.search(r"waiting (\d+) s, then sending it again$", r.getMessage()))]


def test_api_rate_limit_exceeded_without_headers_is_waited_a_minute(tmp_path: Path, github: FakeGitHub,
                                                                    caplog: pytest.LogCaptureFixture) -> None:
    """Before: skipped at once, while the message said kbench-ci waits 60 s."""
    github.rate_limited_times, github.rate_limit_message = 1, "API rate limit exceeded for installation ID 1."
    clock = Clock()
    with caplog.at_level(logging.WARNING):
        outcome = _post(_report(tmp_path / "r"), github, clock)
    assert outcome.action == "created", outcome.reason
    assert clock.slept == [60.0] == _waits_logged(caplog)
    assert "GitHub names no time; retry 1 of 4" in caplog.text


def test_a_second_secondary_limit_is_waited_out_too(tmp_path: Path, github: FakeGitHub,
                                                    caplog: pytest.LogCaptureFixture) -> None:
    """Before: the second said "it lifts in 60 s, and kbench-ci waits no time" and skipped the comment."""
    github.rate_limit_each_times = 1  # the list and the POST: each a secondary limit naming no time
    clock = Clock()
    with caplog.at_level(logging.WARNING):
        outcome = _post(_report(tmp_path / "r"), github, clock)
    assert outcome.action == "created", outcome.reason
    assert clock.slept == [60.0, 60.0] == _waits_logged(caplog)
    assert len(github.comments_on(PR)) == 1


def test_retry_after_zero_is_retried_four_times_with_doubling_waits(tmp_path: Path, github: FakeGitHub,
                                                                    caplog: pytest.LogCaptureFixture) -> None:
    """Before: 61 requests in 61 s."""
    github.rate_limited_times, github.rate_limit_headers = 100, {"Retry-After": "0"}
    clock = Clock()
    with caplog.at_level(logging.WARNING):
        outcome = _post(_report(tmp_path / "r"), github, clock)
    assert outcome.action == "rate-limited"
    assert clock.slept == [1.0, 2.0, 4.0, 8.0] == _waits_logged(caplog)
    assert len(github.calls()) == 5
    assert "still limited after 4 retries of this request" in outcome.reason
    assert "kbench-ci waited 15 s for rate limits in this run" in outcome.reason


@pytest.mark.parametrize(("headers", "times", "waits"), [
    ({"Retry-After": "7"}, 3, [7.0, 14.0, 28.0]),
    ({}, 4, [60.0, 120.0, 240.0, 480.0]),  # no time named: from GitHub's advised minute
])
def test_waits_double_from_the_stated_time(tmp_path: Path, github: FakeGitHub, caplog: pytest.LogCaptureFixture,
                                           headers: dict[str, str], times: int, waits: list[float]) -> None:
    github.rate_limited_times, github.rate_limit_headers = times, headers
    clock = Clock()
    with caplog.at_level(logging.WARNING):
        outcome = _post(_report(tmp_path / "r"), github, clock)
    assert outcome.action == "created", outcome.reason
    assert clock.slept == waits == _waits_logged(caplog)


def test_at_most_20_requests_a_run_beyond_the_comment_lists_pages(tmp_path: Path, github: FakeGitHub) -> None:
    """Every request is limited four times before it is served ("Retry-After: 0"): the head check,
    three pages of comments and the POST would take 28 requests."""
    for n in range(250):
        github.add_comment(PR, f"chatter {n}")
    github.rate_limit_each_times, github.rate_limit_headers = 4, {"Retry-After": "0"}
    github.pull_heads[PR] = HEAD
    artifact = _report(tmp_path / "artifact")
    (artifact / "pr-number.txt").write_text(str(PR))
    clock = Clock()
    outcome = run_comment(tmp_path, from_artifact=artifact, repository=None, pr_number=None, token=None,
                          api_url=None, env=_workflow_run_env(tmp_path, github), client=_client(github, clock))
    assert outcome.action == "rate-limited"
    assert "kbench-ci sends at most 20 requests to GitHub in a run besides the pages of the comment list" in (
        outcome.reason)
    pages = {r.query.get("page", ["1"])[0] for r in github.calls("GET") if r.path.endswith("/comments")}
    assert pages == {"1", "2", "3"}
    assert len(github.calls()) == 20 + len(pages)
    assert not github.comments_on(PR)[250:]
