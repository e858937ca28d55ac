"""The one module that speaks HTTP to GitHub.

Standard library only (:mod:`urllib.request`). Every request goes through
:meth:`GitHubClient._request`, which adds the headers GitHub asks for, applies a timeout, retries
idempotent requests on a 5xx answer, waits out a rate limit (``Retry-After``,
``x-ratelimit-reset``, else GitHub's advice of a minute), doubling the wait on each retry of the
same request, and turns every failure into a one-line :class:`~kbench_ci.errors.GitHubError`
(:class:`~kbench_ci.errors.GitHubRateLimited` when the limit outlasts what kbench-ci waits). A
client is one run's: it retries one request at most :data:`MAX_RETRIES` times, waits for rate
limits at most :data:`RATE_LIMIT_WAIT_S` seconds in all, and sends at most :data:`MAX_REQUESTS`
requests besides the first try of each page of a comment list. A POST is never
repeated blindly: :meth:`GitHubClient.create_issue_comment_once` looks for the comment before
trying again. The token travels only in an ``Authorization`` header
that is never forwarded on a redirect, never appears in a message, a ``repr`` or a log line, and
is scrubbed from any text the server sends back before that text is quoted in an error.

The API root is configurable (``GITHUB_API_URL``), so GitHub Enterprise Server
(``https://ghe.example/api/v3``) works; pagination follows the server's ``Link: rel="next"``
headers, and refuses to follow one to another host.
"""

from __future__ import annotations

import dataclasses
import email.utils
import http.client
import json
import logging
import math
import re
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from kbench_ci import __version__
from kbench_ci.errors import GitHubError, GitHubRateLimited, GitHubUnreachable, UsageError

__all__ = [
    "DEFAULT_API_URL",
    "MAX_REQUESTS",
    "MAX_RETRIES",
    "RATE_LIMIT_WAIT_S",
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
#: GitHub's advice for a rate limit that names no time: wait at least a minute, then
#: exponentially longer while it lasts
_DEFAULT_RATE_LIMIT_WAIT_S = 60.0
#: the shortest wait for a rate limit: a server answering "Retry-After: 0" must not spin us
_MIN_RATE_LIMIT_WAIT_S = 1.0
#: retries of one request, rate limits and 5xx answers together
MAX_RETRIES = 4
#: the longest a client waits for rate limits, all requests together: GitHub's minute doubled
#: over the four retries (60 + 120 + 240 + 480 s). A comment is not worth holding a GPU runner's
#: job for longer: a limit that lasts longer skips it with a warning.
RATE_LIMIT_WAIT_S = sum(_DEFAULT_RATE_LIMIT_WAIT_S * 2**k for k in range(MAX_RETRIES))
#: requests a client sends besides the first try of each page of a comment list (which is bounded
#: by :data:`_MAX_PAGES`): a run needs three or four, and a server that keeps refusing must not
#: be asked without end
MAX_REQUESTS = 20
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
                hint="set GITHUB_REPOSITORY (kbench-ci comment: or pass --repo owner/name)",
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
        clock: Callable[[], float] = time.time,
        rate_limit_wait_s: float = RATE_LIMIT_WAIT_S,
    ) -> None:
        token = token.strip()
        if not token:
            # No token flag: a token on a command line is visible to every user of the machine (ps).
            raise UsageError("the GitHub token is empty", hint="set GITHUB_TOKEN; in a workflow, pass ${{ github.token }}")
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
        self._clock = clock
        self._rate_limit_budget_s = rate_limit_wait_s
        self._rate_limit_waited_s = 0.0
        self._requests = 0
        self._posted_authors: set[str] = set()

    def __repr__(self) -> str:  # never the token
        return f"GitHubClient(api_url={self._api_url!r})"

    @property
    def posted_authors(self) -> frozenset[str]:
        """The logins (lower case) that GitHub named as the author of a comment this client
        created: the token's own identity, whatever kind of token it is."""
        return frozenset(self._posted_authors)

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
            response = self._request("GET", url, page=True)
            page = response.json()
            if not isinstance(page, list):
                raise GitHubError(f"the GitHub API did not answer a list of comments for {repo}#{number}")
            for item in page:
                yield self._scrubbed(IssueComment.from_json(item))
            url = self._next_page(response.headers)

    def find_issue_comment(
        self, repo: Repository, number: int, predicate: Callable[[IssueComment], bool]
    ) -> IssueComment | None:
        """The oldest comment that matches ``predicate`` (which decides whose comments count:
        see :func:`kbench_ci.github.comment.run_comment`)."""
        return next((c for c in self.iter_issue_comments(repo, number) if predicate(c)), None)

    def create_issue_comment(self, repo: Repository, number: int, body: str) -> IssueComment:
        """POST one comment. Not retried on a 5xx: the comment may exist already (see
        :meth:`create_issue_comment_once`)."""
        url = self._url(f"{repo.path}/issues/{int(number)}/comments")
        created = self._scrubbed(IssueComment.from_json(self._request("POST", url, {"body": body}).json()))
        if created.author:
            self._posted_authors.add(created.author.lower())
        return created

    def create_issue_comment_once(
        self, repo: Repository, number: int, body: str, is_ours: Callable[[IssueComment], bool]
    ) -> IssueComment:
        """POST a comment, retrying a failure that leaves it unknown whether GitHub created it
        (a 5xx, a dropped connection) only after checking that it did not: the comment list is
        read first, and a comment ``is_ours`` found there is the one created (edited to
        ``body`` if it differs). So a retry never makes a second comment."""
        attempt = 0
        while True:
            try:
                return self.create_issue_comment(repo, number, body)
            except GitHubError as exc:
                unknown = exc.status in _RETRY_STATUSES or isinstance(exc, GitHubUnreachable)
                if not unknown or attempt >= self._retries:
                    raise
                delay = self._backoff_s * (2**attempt)
                _log.warning("%s (checking whether it was created, then retrying in %.1fs)", exc.one_line(), delay)
                self._sleep(delay)
                attempt += 1
            existing = self.find_issue_comment(repo, number, is_ours)
            if existing is not None:
                return existing if existing.body == body else self.update_issue_comment(repo, existing.id, body)

    def update_issue_comment(self, repo: Repository, comment_id: int, body: str) -> IssueComment:
        url = self._url(f"{repo.path}/issues/comments/{int(comment_id)}")
        return self._scrubbed(IssueComment.from_json(self._request("PATCH", url, {"body": body}).json()))

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

    def _request(
        self, method: str, url: str, payload: Mapping[str, Any] | None = None, *, page: bool = False
    ) -> _Response:
        """Send one request, retrying it at most :data:`MAX_RETRIES` times: after a rate limit
        (the wait GitHub names, else a minute, doubled on each retry of this request) and, for an
        idempotent method, after a 5xx answer. ``page``: the first try of a comment list's page,
        which :data:`MAX_REQUESTS` does not count."""
        data = None if payload is None else json.dumps(payload).encode("utf-8")
        retries = 0
        server_errors = 0
        last_wait = 0.0
        while True:
            if not (page and retries == 0):
                self._count_request(method, url)
            try:
                return self._send(method, url, data)
            except GitHubRateLimited as exc:
                # A rate-limited request was not carried out, so even a POST may be sent again.
                stated = exc.retry_after_s
                when = "GitHub names no time" if stated is None else f"it lifts in {stated:.0f} s"
                wait = max(_MIN_RATE_LIMIT_WAIT_S, _DEFAULT_RATE_LIMIT_WAIT_S if stated is None else stated,
                           2 * last_wait)
                waited = f"kbench-ci waited {self._rate_limit_waited_s:.0f} s for rate limits in this run"
                if retries >= MAX_RETRIES:
                    raise GitHubRateLimited(
                        f"{exc.message}; still limited after {retries} retries of this request, and {waited}; "
                        "it waits no more",
                        status=exc.status or 429, retry_after_s=stated, hint=exc.hint,
                    ) from None
                left = self._rate_limit_budget_s - self._rate_limit_waited_s
                if wait > left:
                    raise GitHubRateLimited(
                        f"{exc.message}; {when}: waiting {wait:.0f} s would pass the "
                        f"{self._rate_limit_budget_s:.0f} s kbench-ci waits for rate limits in a run, so it does "
                        f"not wait ({waited})",
                        status=exc.status or 429, retry_after_s=stated, hint=exc.hint,
                    ) from None
                # The message without its hint: the hint says what happens when the wait is
                # not taken ("the comment is skipped"), and here it is taken.
                _log.warning("%s; %s; retry %d of %d: waiting %.0f s, then sending it again",
                             exc.message, when, retries + 1, MAX_RETRIES, wait)
                self._rate_limit_waited_s += wait
                self._sleep(wait)
                last_wait = wait
                retries += 1
            except GitHubError as exc:
                retry = (
                    exc.status in _RETRY_STATUSES
                    and method in _IDEMPOTENT
                    and server_errors < self._retries
                    and retries < MAX_RETRIES
                )
                if not retry:
                    raise
                delay = self._backoff_s * (2**server_errors)
                _log.warning("%s (retrying in %.1fs)", exc.one_line(), delay)
                self._sleep(delay)
                server_errors += 1
                retries += 1

    def _count_request(self, method: str, url: str) -> None:
        if self._requests >= MAX_REQUESTS:
            # Reached only through retries: our own limit, reported as GitHub's would be (the
            # comment is skipped with a warning; the gate's verdict stands).
            raise GitHubRateLimited(
                f"not sending GitHub API {_describe(method, url)}: kbench-ci sends at most {MAX_REQUESTS} "
                "requests to GitHub in a run besides the pages of the comment list, and this run has sent them "
                f"all (it waited {self._rate_limit_waited_s:.0f} s for rate limits)",
                status=429, retry_after_s=None,
            )
        self._requests += 1

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
            headers = {name.lower(): value for name, value in (exc.headers or {}).items()}
            exc.close()
            limited = self._rate_limit(status, headers, detail)
            if limited is not None:
                raise GitHubRateLimited(
                    f"GitHub API {where} answered HTTP {status}: rate limited" + (f" ({detail})" if detail else ""),
                    status=status, retry_after_s=limited if math.isfinite(limited) else None,
                    hint="the comment is skipped; the gate's verdict stands (GitHub allows a token a limited "
                    "number of requests and of comments per minute)",
                ) from None
            raise GitHubError(
                f"GitHub API {where} answered HTTP {status}" + (f": {detail}" if detail else ""),
                status=status,
                hint=_hint_for(status),
            ) from None
        except (urllib.error.URLError, http.client.HTTPException, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            host = urllib.parse.urlsplit(url).netloc
            raise GitHubUnreachable(
                f"cannot reach the GitHub API at {host}: {self._scrub(_first_line(str(reason)))}",
                hint="check GITHUB_API_URL (https://HOST/api/v3 on GitHub Enterprise Server) and "
                "the runner's network or proxy settings",
            ) from None

    def _scrub(self, text: str) -> str:
        return text.replace(self._token, "***") if self._token else text

    def _scrubbed(self, comment: IssueComment) -> IssueComment:
        """The comment with the token masked in its URL: a server (or a proxy) that echoes the
        credential into ``html_url`` must not get it printed in the job log."""
        return dataclasses.replace(comment, html_url=self._scrub(comment.html_url))

    def _rate_limit(self, status: int, headers: Mapping[str, str], detail: str) -> float | None:
        """Seconds until a rate limit lifts (inf: limited, no time given); None: not a rate limit.

        A 403 is a rate limit only with GitHub's signs of one (``Retry-After``, no requests left,
        or its message says so); any other 403 is a permission problem.
        """
        if status not in (403, 429):
            return None
        retry_after = _retry_after_s(headers.get("retry-after"), self._clock())
        if retry_after is not None:
            return retry_after
        if headers.get("x-ratelimit-remaining") == "0":
            try:
                return max(0.0, float(headers.get("x-ratelimit-reset", "")) - self._clock()) + 1.0
            except ValueError:
                return math.inf
        # A limit that names no time (a secondary limit, "API rate limit exceeded" without
        # headers, a 429 without Retry-After): the caller waits GitHub's advised minute.
        if "rate limit" in detail.lower() or status == 429:
            return math.inf
        return None


def _retry_after_s(value: str | None, now: float) -> float | None:
    """``Retry-After``: seconds, or an HTTP date; None when absent or unreadable."""
    if value is None or not value.strip():
        return None
    text = value.strip()
    if text.isdigit():
        return float(text)
    try:
        moment = email.utils.parsedate_to_datetime(text)
    except (TypeError, ValueError):
        return None
    return max(0.0, moment.timestamp() - now)


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
        return "the token may not do this: give the job 'permissions: pull-requests: write'"
    if status == 404:
        return "check the repository name and pull request number, and that the token can see them"
    if status == 422:
        return "GitHub rejected the request body (a comment is limited to 65,536 characters)"
    if status == 429:
        return "too many requests: try again later"
    return None
