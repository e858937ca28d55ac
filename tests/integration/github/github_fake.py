"""A small fake of GitHub's REST API for the comment endpoints, served over real HTTP.

``http.server`` in a thread on 127.0.0.1 with a random port. It keeps comments in memory,
pages the comment list with ``Link`` headers like GitHub does, and records every request so tests
can assert on paths and headers. ``prefix`` mounts the API under a path, as GitHub Enterprise
Server does (``/api/v3``).
"""

from __future__ import annotations

import json
import re
import threading
import urllib.parse
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

_LIST = re.compile(r"^/repos/([^/]+)/([^/]+)/issues/(\d+)/comments$")
_ONE = re.compile(r"^/repos/([^/]+)/([^/]+)/issues/comments/(\d+)$")
_PULL = re.compile(r"^/repos/([^/]+)/([^/]+)/pulls/(\d+)$")


@dataclass
class Recorded:
    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]  # lower-case names
    body: Any


@dataclass
class FakeGitHub:
    prefix: str = ""
    #: answer 403 to POST and PATCH (a fork pull request's read-only token)
    forbid_writes: bool = False
    #: answer this status to every request (e.g. 500), with the token echoed in the message
    fail_status: int | None = None
    #: fail only the first N requests with ``fail_status``
    fail_times: int | None = None
    #: a Link "next" pointing at another host
    evil_next_link: bool = False
    #: head sha of each pull request, for GET /pulls/N
    pull_heads: dict[int, str] = field(default_factory=dict)
    #: answer the next N requests with a rate limit: ``rate_limit_status`` (403 or 429) with
    #: ``rate_limit_headers`` (Retry-After, x-ratelimit-*) and ``rate_limit_message``
    rate_limited_times: int = 0
    rate_limit_status: int = 403
    rate_limit_headers: dict[str, str] = field(default_factory=dict)
    rate_limit_message: str = "You have exceeded a secondary rate limit."
    #: create the comment of the next N POSTs, then answer 502 as if it had failed
    create_then_fail_times: int = 0
    #: answer POST with this status the next N times without creating anything
    post_fail_status: int | None = None
    post_fail_times: int = 0
    #: put the caller's token into the html_url of comments it returns (a careless proxy)
    echo_token_in_url: bool = False
    #: the account a POSTed comment is written as (the token's identity: an app, a PAT's user)
    post_login: str = "github-actions[bot]"
    #: answer 403 to a PATCH of a comment another account wrote
    forbid_foreign_edits: bool = False
    #: answer each distinct request (method, path and query) with the rate limit above this many
    #: times before serving it
    rate_limit_each_times: int = 0
    _limited: dict[tuple[str, str], int] = field(default_factory=dict)
    comments: dict[int, dict[str, Any]] = field(default_factory=dict)
    requests: list[Recorded] = field(default_factory=list)
    _next_id: int = 1000
    _server: ThreadingHTTPServer | None = None
    _thread: threading.Thread | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    # -- setup ---------------------------------------------------------------------------------

    def start(self) -> FakeGitHub:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                fake._handle(self, "GET")

            def do_POST(self) -> None:
                fake._handle(self, "POST")

            def do_PATCH(self) -> None:
                fake._handle(self, "PATCH")

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()

    @property
    def origin(self) -> str:
        assert self._server is not None
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    @property
    def api_url(self) -> str:
        return self.origin + self.prefix

    def add_comment(self, number: int, body: str, *, login: str = "someone", bot: bool = False) -> int:
        with self._lock:
            self._next_id += 1
            comment_id = self._next_id
            self.comments[comment_id] = {
                "id": comment_id,
                "issue": number,
                "body": body,
                "user": {"login": login, "type": "Bot" if bot else "User"},
                "html_url": f"https://github.example/o/r/pull/{number}#issuecomment-{comment_id}",
            }
        return comment_id

    def comments_on(self, number: int) -> list[dict[str, Any]]:
        return [c for c in self.comments.values() if c["issue"] == number]

    def calls(self, method: str | None = None) -> list[Recorded]:
        return [r for r in self.requests if method is None or r.method == method]

    # -- serving -------------------------------------------------------------------------------

    def _handle(self, handler: BaseHTTPRequestHandler, method: str) -> None:
        parts = urllib.parse.urlsplit(handler.path)
        length = int(handler.headers.get("Content-Length") or 0)
        raw = handler.rfile.read(length) if length else b""
        body = json.loads(raw) if raw else None
        self.requests.append(
            Recorded(
                method,
                parts.path,
                urllib.parse.parse_qs(parts.query),
                {k.lower(): v for k, v in handler.headers.items()},
                body,
            )
        )
        token = (handler.headers.get("Authorization") or "").removeprefix("Bearer ")

        key = (method, handler.path)
        limited_each = self._limited.get(key, 0) < self.rate_limit_each_times
        if limited_each:
            self._limited[key] = self._limited.get(key, 0) + 1
        if self.rate_limited_times > 0 or limited_each:
            if not limited_each:
                self.rate_limited_times -= 1
            return self._send(handler, self.rate_limit_status, {"message": self.rate_limit_message},
                              self.rate_limit_headers)
        if method == "POST" and self.post_fail_status is not None and self.post_fail_times > 0:
            self.post_fail_times -= 1
            return self._send(handler, self.post_fail_status, {"message": "Server Error"})
        if self.fail_status is not None and (self.fail_times is None or self.fail_times > 0):
            if self.fail_times is not None:
                self.fail_times -= 1
            # A careless server that echoes the credential back: kbench-ci must scrub it.
            return self._send(handler, self.fail_status, {"message": f"broken for token {token}"})
        if not parts.path.startswith(self.prefix + "/"):
            return self._send(handler, 404, {"message": "Not Found"})
        path = parts.path[len(self.prefix) :]
        if method in ("POST", "PATCH") and self.forbid_writes:
            return self._send(
                handler, 403, {"message": f"Resource not accessible by integration ({token})"}
            )

        if (m := _LIST.match(path)) and method == "GET":
            return self._list(handler, int(m.group(3)), parts.path, parts.query)
        if (m := _LIST.match(path)) and method == "POST":
            number = int(m.group(3))
            comment_id = self.add_comment(number, body["body"], login=self.post_login,
                                          bot=self.post_login.endswith("[bot]"))
            if self.create_then_fail_times > 0:
                self.create_then_fail_times -= 1
                return self._send(handler, 502, {"message": "Server Error"})
            if self.echo_token_in_url:
                self.comments[comment_id]["html_url"] += f"?token={token}"
            return self._send(handler, 201, self._public(self.comments[comment_id]))
        if (m := _ONE.match(path)) and method == "PATCH":
            comment = self.comments.get(int(m.group(3)))
            if comment is None:
                return self._send(handler, 404, {"message": "Not Found"})
            if self.forbid_foreign_edits and comment["user"]["login"] != self.post_login:
                return self._send(handler, 403, {"message": "Resource not accessible by integration"})
            comment["body"] = body["body"]
            return self._send(handler, 200, self._public(comment))
        if (m := _PULL.match(path)) and method == "GET":
            number = int(m.group(3))
            if number not in self.pull_heads:
                return self._send(handler, 404, {"message": "Not Found"})
            return self._send(
                handler, 200, {"number": number, "state": "open", "head": {"sha": self.pull_heads[number]}}
            )
        return self._send(handler, 404, {"message": "Not Found"})

    def _list(self, handler: BaseHTTPRequestHandler, number: int, path: str, query: str) -> None:
        params = urllib.parse.parse_qs(query)
        per_page = int(params.get("per_page", ["30"])[0])
        page = int(params.get("page", ["1"])[0])
        items = sorted(self.comments_on(number), key=lambda c: c["id"])
        chunk = items[(page - 1) * per_page : page * per_page]
        headers = {}
        if page * per_page < len(items):
            host = "http://evil.example" if self.evil_next_link else self.origin
            nxt = f"{host}{path}?per_page={per_page}&page={page + 1}"
            last_page = (len(items) + per_page - 1) // per_page
            last = f"{host}{path}?per_page={per_page}&page={last_page}"
            headers["Link"] = f'<{nxt}>; rel="next", <{last}>; rel="last"'
        self._send(handler, 200, [self._public(c) for c in chunk], headers)

    @staticmethod
    def _public(comment: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in comment.items() if k != "issue"}

    @staticmethod
    def _send(
        handler: BaseHTTPRequestHandler, status: int, payload: Any, headers: dict[str, str] | None = None
    ) -> None:
        data = json.dumps(payload).encode("utf-8")
        handler.send_response(status)
        handler.send_header("Content-Type", "application/json; charset=utf-8")
        handler.send_header("Content-Length", str(len(data)))
        for name, value in (headers or {}).items():
            handler.send_header(name, value)
        handler.end_headers()
        handler.wfile.write(data)
