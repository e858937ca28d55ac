"""The one module that speaks HTTP to GitHub.

Standard library only (:mod:`urllib.request`). Every request goes through
:meth:`GitHubClient._request`, which adds the headers GitHub asks for, applies a timeout, retries
idempotent requests on a 5xx answer, and turns every failure into a one-line
:class:`~kbench_ci.errors.GitHubError`. The token travels only in an ``Authorization`` header
that is never forwarded on a redirect, never appears in a message, a ``repr`` or a log line, and
is scrubbed from any text the server sends back before that text is quoted in an error.

The API root is configurable (``GITHUB_API_URL``), so GitHub Enterprise Server
(``https://ghe.example/api/v3``) works; pagination follows the server's ``Link: rel="next"``
headers, and refuses to follow one to another host.
"""

from __future__ import annotations

import http.client
import json
import logging
import re
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from kbench_ci import __version__
from kbench_ci.errors import GitHubError, UsageError

__all__ = [
    "DEFAULT_API_URL",
    "GitHubClient",
    "IssueComment",
    "PullRequest",
    "Repository",
]

_log = logging.getLogger(__name__)

DEFAULT_API_URL = "https://api.github.com"
API_VERSION = "2022-11-28"
USER_AGENT = f"kbench-ci/{__version__}"

#: GitHub's page size ceiling for list endpoints.
_PER_PAGE = 100
#: A pull request with more than 10,000 comments is not one we will page through.
_MAX_PAGES = 100
#: Statuses worth one more try for a request that may safely be repeated.
_RETRY_STATUSES = frozenset({500, 502, 503, 504})
_IDEMPOTENT = frozenset({"GET", "PATCH", "PUT", "DELETE"})
_NEXT_LINK = re.compile(r'<([^>]+)>\s*;\s*rel="?next"?')
_REPO_NAME = re.compile(r"^[A-Za-z0-9_.-]+$")


@dataclass(frozen=True, slots=True)
class Repository:
    """``owner/name`` of a repository, validated."""

    owner: str
    name: str

    @classmethod
    def parse(cls, full_name: str) -> Repository:
        owner, sep, name = full_name.strip().partition("/")
        if not sep or not _REPO_NAME.match(owner) or not _REPO_NAME.match(name):
            raise UsageError(
                f"'{full_name}' is not a repository name of the form owner/name",
                hint="pass --repository owner/name or set GITHUB_REPOSITORY",
            )
        return cls(owner, name)

    def __str__(self) -> str:
        return f"{self.owner}/{self.name}"

    @property
    def path(self) -> str:
        """The URL path of the repository under the API root."""
        return f"/repos/{_quote(self.owner)}/{_quote(self.name)}"


@dataclass(frozen=True, slots=True)
class IssueComment:
    """A comment on an issue or pull request (the conversation tab)."""

    id: int
    body: str
    html_url: str
    author: str
    author_is_bot: bool

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> IssueComment:
        try:
            user = data.get("user") or {}
            return cls(
                id=int(data["id"]),
                body=str(data.get("body") or ""),
                html_url=str(data.get("html_url") or ""),
                author=str(user.get("login") or ""),
                author_is_bot=user.get("type") == "Bot",
            )
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise GitHubError(f"the GitHub API sent a comment without a usable id ({exc!r})") from None


@dataclass(frozen=True, slots=True)
class PullRequest:
    """The few fields of a pull request that kbench-ci reads."""

    number: int
    head_sha: str
    state: str

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> PullRequest:
        try:
            return cls(
                number=int(data["number"]),
                head_sha=str(data["head"]["sha"]),
                state=str(data.get("state") or ""),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise GitHubError(f"the GitHub API sent a pull request without {exc}") from None


@dataclass(frozen=True, slots=True)
class _Response:
    status: int
    headers: Mapping[str, str]
    body: bytes

    def json(self) -> Any:
        try:
            return json.loads(self.body.decode("utf-8")) if self.body else None
        except (UnicodeDecodeError, json.JSONDecodeError):
            raise GitHubError(
                f"the GitHub API answered HTTP {self.status} with a body that is not JSON"
            ) from None


class GitHubClient:
    """A small client for the REST endpoints kbench-ci needs.

    ``opener`` and ``sleep`` are injectable for tests; production code uses the defaults (an
    opener that honours the usual proxy variables, and :func:`time.sleep`).
    """

    def __init__(
        self,
        token: str,
        *,
        api_url: str = DEFAULT_API_URL,
        timeout: float = 30.0,
        retries: int = 2,
        backoff_s: float = 1.0,
        opener: urllib.request.OpenerDirector | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        token = token.strip()
        if not token:
            raise UsageError("the GitHub token is empty", hint="set GITHUB_TOKEN or pass --token")
        api_url = (api_url or DEFAULT_API_URL).strip().rstrip("/")
        parts = urllib.parse.urlsplit(api_url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise UsageError(
                f"'{api_url}' is not an http(s) URL for the GitHub API",
                hint="GITHUB_API_URL is https://api.github.com, or https://HOST/api/v3 on "
                "GitHub Enterprise Server",
            )
        self._token = token
        self._api_url = api_url
        self._origin = (parts.scheme, parts.netloc.lower())
        self._timeout = timeout
        self._retries = max(0, retries)
        self._backoff_s = backoff_s
        self._opener = opener or urllib.request.build_opener()
        self._sleep = sleep

    def __repr__(self) -> str:  # never the token
        return f"GitHubClient(api_url={self._api_url!r})"

    # -- endpoints ---------------------------------------------------------------------------

    def iter_issue_comments(self, repo: Repository, number: int) -> Iterator[IssueComment]:
        """Every comment of issue / pull request ``number``, following all pages."""
        url: str | None = self._url(f"{repo.path}/issues/{int(number)}/comments?per_page={_PER_PAGE}")
        seen: set[str] = set()
        while url is not None:
            if url in seen or len(seen) >= _MAX_PAGES:
                raise GitHubError(
                    f"stopped paging through the comments of {repo}#{number} after {len(seen)} pages"
                )
            seen.add(url)
            response = self._request("GET", url)
            page = response.json()
            if not isinstance(page, list):
                raise GitHubError(f"the GitHub API did not answer a list of comments for {repo}#{number}")
            for item in page:
                yield IssueComment.from_json(item)
            url = self._next_page(response.headers)

    def find_issue_comment(
        self, repo: Repository, number: int, predicate: Callable[[IssueComment], bool]
    ) -> IssueComment | None:
        """The comment that matches ``predicate``; a bot's comment before a person's, then oldest.

        A comment written by a person that happens to carry the same marker cannot be edited with
        the workflow's token, so a bot's comment is preferred when there is one.
        """
        matches = [c for c in self.iter_issue_comments(repo, number) if predicate(c)]
        if not matches:
            return None
        bots = [c for c in matches if c.author_is_bot]
        return (bots or matches)[0]

    def create_issue_comment(self, repo: Repository, number: int, body: str) -> IssueComment:
        url = self._url(f"{repo.path}/issues/{int(number)}/comments")
        return IssueComment.from_json(self._request("POST", url, {"body": body}).json())

    def update_issue_comment(self, repo: Repository, comment_id: int, body: str) -> IssueComment:
        url = self._url(f"{repo.path}/issues/comments/{int(comment_id)}")
        return IssueComment.from_json(self._request("PATCH", url, {"body": body}).json())

    def get_pull_request(self, repo: Repository, number: int) -> PullRequest:
        url = self._url(f"{repo.path}/pulls/{int(number)}")
        return PullRequest.from_json(self._request("GET", url).json())

    # -- plumbing ----------------------------------------------------------------------------

    def _url(self, path: str) -> str:
        return self._api_url + path

    def _next_page(self, headers: Mapping[str, str]) -> str | None:
        link = headers.get("Link") or headers.get("link") or ""
        match = _NEXT_LINK.search(link)
        if match is None:
            return None
        url = urllib.parse.urljoin(self._api_url + "/", str(match.group(1)))
        parts = urllib.parse.urlsplit(url)
        if (parts.scheme, parts.netloc.lower()) != self._origin:
            # Following it would send the token to another host.
            raise GitHubError(
                f"the GitHub API pointed the next page at another host ({parts.netloc}); "
                "not following it"
            )
        return url

    def _request(self, method: str, url: str, payload: Mapping[str, Any] | None = None) -> _Response:
        data = None if payload is None else json.dumps(payload).encode("utf-8")
        attempt = 0
        while True:
            try:
                return self._send(method, url, data)
            except GitHubError as exc:
                retry = (
                    exc.status in _RETRY_STATUSES
                    and method in _IDEMPOTENT
                    and attempt < self._retries
                )
                if not retry:
                    raise
                delay = self._backoff_s * (2**attempt)
                _log.warning("%s (retrying in %.1fs)", exc.one_line(), delay)
                self._sleep(delay)
                attempt += 1

    def _send(self, method: str, url: str, data: bytes | None) -> _Response:
        request = urllib.request.Request(url, data=data, method=method)
        request.add_header("Accept", "application/vnd.github+json")
        request.add_header("X-GitHub-Api-Version", API_VERSION)
        request.add_header("User-Agent", USER_AGENT)
        if data is not None:
            request.add_header("Content-Type", "application/json; charset=utf-8")
        # Unredirected: urllib copies ordinary headers onto a redirect, possibly to another host.
        request.add_unredirected_header("Authorization", f"Bearer {self._token}")
        where = _describe(method, url)
        _log.debug("GitHub API: %s", where)
        try:
            with self._opener.open(request, timeout=self._timeout) as response:
                return _Response(response.status, dict(response.headers.items()), response.read())
        except urllib.error.HTTPError as exc:
            status = exc.code
            detail = self._scrub(_error_detail(exc))
            exc.close()
            raise GitHubError(
                f"GitHub API {where} answered HTTP {status}" + (f": {detail}" if detail else ""),
                status=status,
                hint=_hint_for(status),
            ) from None
        except (urllib.error.URLError, http.client.HTTPException, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            host = urllib.parse.urlsplit(url).netloc
            raise GitHubError(
                f"cannot reach the GitHub API at {host}: {self._scrub(_first_line(str(reason)))}",
                hint="check GITHUB_API_URL (https://HOST/api/v3 on GitHub Enterprise Server) and "
                "the runner's network or proxy settings",
            ) from None

    def _scrub(self, text: str) -> str:
        return text.replace(self._token, "***") if self._token else text


def _quote(segment: str) -> str:
    return urllib.parse.quote(segment, safe="")


def _describe(method: str, url: str) -> str:
    """``METHOD /path`` with no query string (which never holds a secret, but is noise)."""
    return f"{method} {urllib.parse.urlsplit(url).path}"


def _first_line(text: str) -> str:
    lines = text.strip().splitlines()
    return lines[0] if lines else ""


def _error_detail(exc: urllib.error.HTTPError) -> str:
    """GitHub's ``message`` field from an error body, else a short reason phrase."""
    try:
        body = exc.read(4096).decode("utf-8", errors="replace")
    except OSError:
        body = ""
    try:
        message = json.loads(body).get("message")
    except (json.JSONDecodeError, AttributeError):
        message = None
    if isinstance(message, str) and message.strip():
        return _first_line(message)[:300]
    return _first_line(str(exc.reason or ""))[:300]


def _hint_for(status: int) -> str | None:
    if status == 401:
        return "the token is invalid or expired"
    if status == 403:
        return (
            "the token may not write here: give the job 'permissions: pull-requests: write'; a pull "
            "request from a fork gets a read-only token (see docs/action.md)"
        )
    if status == 404:
        return "check the repository name and pull request number, and that the token can see them"
    if status == 422:
        return "GitHub rejected the request body (a comment is limited to 65,536 characters)"
    return None
