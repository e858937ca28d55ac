"""The pull request comment: its body, whether to post it, and posting it.

Pure parts first (marker, :func:`fit_body`, :func:`load_gate`, :func:`decide`), then
:func:`run_comment`, which the ``kbench-ci comment`` command and the action call. All HTTP goes
through :mod:`kbench_ci.github.client`. Nothing here prints: the outcome carries a ``reason`` for the
caller to show.

One sticky comment per pull request and suite: the body starts with a hidden marker
``<!-- kbench-ci:comment id=<marker_id> -->``; a later run finds the comment that starts with it
(on any page of the comment list) and edits it instead of adding another. Anyone can write the
marker, so only a comment by kbench-ci's own identity is kbench-ci's: ``github-actions[bot]``
(the workflow's token), the login named by ``comment-author`` (an app's or a PAT's), or the
author GitHub named for a comment this run created. Any other is left alone, and when none is
kbench-ci's a new one is created.
"""

from __future__ import annotations

import json
import os
import re
import stat
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, get_args

from kbench_ci.errors import GitHubError, GitHubRateLimited, UsageError
from kbench_ci.github.client import DEFAULT_API_URL, GitHubClient, IssueComment, Repository
from kbench_ci.results.controls import show_controls
from kbench_ci.results.load import load_results

__all__ = [
    "COMMENT_LIMIT",
    "PR_NUMBER_FILE",
    "REPORT_FILE",
    "RESULTS_FILE",
    "CommentAction",
    "CommentMode",
    "DEFAULT_COMMENT_AUTHOR",
    "CommentOutcome",
    "Decision",
    "Gate",
    "build_body",
    "decide",
    "fit_body",
    "has_marker",
    "load_event_payload",
    "load_gate",
    "marker",
    "parse_mode",
    "read_pr_number_file",
    "read_report_file",
    "report_file_present",
    "run_comment",
    "trend_anchor",
    "trend_links",
    "validate_comment_author",
    "validate_marker_id",
    "validate_pages_url",
]

#: GitHub rejects an issue comment body longer than this.
COMMENT_LIMIT = 65_536
REPORT_FILE = "benchmark.md"
RESULTS_FILE = "results.json"
PR_NUMBER_FILE = "pr-number.txt"
RESULTS_SCHEMA = "kbench-ci/compare"

CommentMode = Literal["always", "on-change", "on-regression", "never"]
COMMENT_MODES: tuple[CommentMode, ...] = get_args(CommentMode)
#: ``forbidden``: the token may not write (403); ``rate-limited``: GitHub's rate limit outlasted
#: the client's wait. Both are warnings, not failures: the gate's verdict stands.
CommentAction = Literal["created", "updated", "skipped", "forbidden", "rate-limited"]

#: Verdict counts that mean "something is different from the base": a verdict the gate acts on
#: or a reviewer must see. ``inconclusive`` is not one: it says that no change beyond the
#: threshold could be shown either way, and on a noisy runner it would make ``on-change``
#: comment on most pull requests (it stays in the job summary and the uploaded report).
CHANGE_KINDS = ("slower", "faster", "incorrect", "failed", "fixed", "added", "removed")
#: Verdict counts that make a regression.
REGRESSION_KINDS = ("slower", "incorrect", "failed")

#: the login of the workflow's GITHUB_TOKEN, the author of the comments it writes
DEFAULT_COMMENT_AUTHOR = "github-actions[bot]"
#: a GitHub login (1-39 letters, digits and '-'), or an app's bot account (``name[bot]``)
_LOGIN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9-]{0,38}(\[bot\])?$")

_MARKER_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
_DETAILS = re.compile(r"<details\b[^>]*>(.*?)</details\s*>", re.DOTALL | re.IGNORECASE)
_SUMMARY = re.compile(r"<summary\b[^>]*>(.*?)</summary\s*>", re.DOTALL | re.IGNORECASE)
_FENCE = re.compile(r"^\s{0,3}(```|~~~)")
_TAG = re.compile(r"<[^>]+>")
_PR_NUMBER = re.compile(r"^[1-9][0-9]{0,9}$")
_SHA = re.compile(r"^[0-9a-f]{40}([0-9a-f]{24})?$")

DEFAULT_TRUNCATION_NOTE = (
    "_This report was shortened to fit GitHub's size limit; the full report is in the job "
    "summary and in the `kbench-ci-report` artifact (`benchmark.md`)._"
)
FORK_RECIPE = "examples/workflows/fork-pr-comment.yml (see docs/action.md, 'Pull requests from forks')"


# -- reading a report folder --------------------------------------------------------------------

#: more than any benchmark.md or results.json kbench-ci writes; a bigger file is not ours
_MAX_FILE_BYTES = 64 * 1024 * 1024


def read_report_file(path: Path) -> str:
    """The text of the regular file ``path``, never following a symbolic link.

    A report folder may hold files written by the code under test: a downloaded artifact in the
    fork recipe, or a folder a kernel could reach on the benchmark runner. A link there
    (``benchmark.md -> /etc/passwd``) must not carry a file from outside the folder into a public
    comment, and a FIFO must not hang the job. FileNotFoundError when there is no such file;
    :class:`UsageError` for a link, anything but a regular file, or an unreadable one.
    """
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        raise
    except OSError as exc:
        if os.path.islink(path):
            raise UsageError(
                f"{path.name} in {path.parent} is a symbolic link; refusing to follow it out of the folder",
                hint="a report folder holds benchmark.md, results.json and pr-number.txt as plain files; "
                "the artifact is untrusted, so regenerate it with kbench-ci",
            ) from None
        raise UsageError(f"cannot read {path}: {exc.strerror or exc}") from None
    # Checked on the descriptor before wrapping it: io refuses a directory's with a traceback.
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise UsageError(f"{path} is not a regular file", hint="regenerate the report with kbench-ci")
    with os.fdopen(fd, "rb") as handle:
        data = handle.read(_MAX_FILE_BYTES + 1)
    if len(data) > _MAX_FILE_BYTES:
        raise UsageError(f"{path} is larger than {_MAX_FILE_BYTES // (1024 * 1024)} MiB; it is no kbench-ci report")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UsageError(f"cannot read {path}: not UTF-8 text (byte {exc.start})") from None


def report_file_present(path: Path) -> bool:
    """Whether ``path`` exists as a name at all (a link included: reading it is then refused)."""
    return os.path.lexists(path)


# -- marker -------------------------------------------------------------------------------------


def validate_marker_id(marker_id: str) -> str:
    """``marker_id`` if it is safe inside an HTML comment and a file name, else UsageError."""
    if not _MARKER_ID.match(marker_id):
        raise UsageError(
            f"marker id '{marker_id}' is not allowed",
            hint="use 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit",
        )
    return marker_id


def marker(marker_id: str = "default") -> str:
    """The hidden first line that identifies a suite's comment."""
    return f"<!-- kbench-ci:comment id={validate_marker_id(marker_id)} -->"


def has_marker(body: str, marker_id: str) -> bool:
    """True when ``body`` starts with the marker of ``marker_id`` (leading blanks allowed)."""
    return body.lstrip().startswith(marker(marker_id))


def validate_comment_author(login: str) -> str:
    """``login`` (the ``comment-author`` input) if it is a GitHub login, else UsageError."""
    if not _LOGIN.match(login):
        raise UsageError(
            f"comment author '{login}' is not a GitHub login",
            hint="name the account the token writes as: an app's 'NAME[bot]' or a PAT's user login; "
            f"leave it empty for the workflow's token ({DEFAULT_COMMENT_AUTHOR})",
        )
    return login


def _comment_author(value: str | None, env: Mapping[str, str]) -> str:
    text = (value if value is not None else env.get("KBENCH_COMMENT_AUTHOR", "")).strip()
    return validate_comment_author(text) if text else DEFAULT_COMMENT_AUTHOR


# -- body size ----------------------------------------------------------------------------------


def fit_body(
    markdown: str,
    limit: int = COMMENT_LIMIT,
    *,
    note: str = DEFAULT_TRUNCATION_NOTE,
    measure: Callable[[str], int] = len,
) -> tuple[str, bool]:
    """``markdown`` shortened to fit ``limit`` (as counted by ``measure``), and whether it was.

    The budget keeps a safety margin below ``limit`` (GitHub's own count may differ slightly from
    Python's, e.g. for characters outside the BMP). When the text is too long:

    1. the contents of ``<details>`` blocks are dropped, largest first, each replaced by a
       one-line note (naming the block by its ``<summary>``), until the text fits;
    2. if it still does not fit, it is cut at a line boundary (closing an open code fence), and
    3. ``note`` is appended, saying where the full report is.
    """
    if limit <= 0:
        raise UsageError(f"a body size limit must be positive, not {limit}")
    budget = limit - min(1024, limit // 20)
    if measure(markdown) <= budget:
        return markdown, False

    text = _fold_details(markdown, budget, measure)
    tail = "\n\n---\n" + note + "\n"
    if measure(text + tail) <= budget:
        return text + tail, True
    return _cut_lines(text, budget - measure(tail), measure) + tail, True


def _fold_details(markdown: str, budget: int, measure: Callable[[str], int]) -> str:
    blocks = list(_DETAILS.finditer(markdown))
    # Fold the details of unchanged cases first (a reviewer reads the changed ones), then the
    # largest blocks: they buy the most room for the least lost detail.
    order = sorted(range(len(blocks)), key=lambda i: (not _quiet(blocks[i].group(1)), -len(blocks[i].group(0))))
    folded: set[int] = set()
    text = markdown
    for i in order:
        if measure(text) <= budget:
            break
        folded.add(i)
        text = _render_folded(markdown, blocks, folded)
    return text


def _quiet(block: str) -> bool:
    """A block about unchanged cases (its summary says so)."""
    summary = _SUMMARY.search(block)
    return summary is not None and "unchanged" in summary.group(1)


def _render_folded(markdown: str, blocks: list[re.Match[str]], folded: set[int]) -> str:
    pieces: list[str] = []
    position = 0
    for i, block in enumerate(blocks):
        if i not in folded:
            continue
        pieces.append(markdown[position : block.start()])
        pieces.append(_folded_note(block))
        position = block.end()
    pieces.append(markdown[position:])
    return "".join(pieces)


def _folded_note(block: re.Match[str]) -> str:
    summary = _SUMMARY.search(block.group(1))
    title = " ".join(_TAG.sub("", summary.group(1)).split()) if summary else ""
    what = f"details of '{title[:120]}'" if title else "details"
    return f"_({what} left out to fit the size limit; see the full report)_"


def _cut_lines(text: str, budget: int, measure: Callable[[str], int]) -> str:
    kept: list[str] = []
    used = 0
    in_fence = False
    closing = "```\n"
    for line in text.splitlines(keepends=True):
        size = measure(line)
        reserve = measure(closing) if (in_fence or _FENCE.match(line)) else 0
        if used + size + reserve > budget:
            break
        kept.append(line)
        used += size
        if _FENCE.match(line):
            in_fence = not in_fence
    if not kept and budget > 0:
        # A single line longer than the budget: cut it by characters.
        head = text[:budget]
        while measure(head) > budget:  # every character measures at least 1: this ends
            head = head[: len(head) - (measure(head) - budget)]
        kept.append(head)
    result = "".join(kept)
    if in_fence:
        result = result + ("" if result.endswith("\n") else "\n") + closing
    return result.rstrip("\n")


def build_body(markdown: str, marker_id: str = "default", limit: int = COMMENT_LIMIT) -> tuple[str, bool]:
    """The full comment body: marker line, then the report fitted into what is left. The report's
    control characters are shown as escapes (the report writes them so; this holds for a
    benchmark.md that something else wrote, as the fork recipe's artifact or a file changed after
    compare): a bidi override or ESC of a pull request's never reaches the comment as itself."""
    head = marker(marker_id) + "\n"
    text, truncated = fit_body(show_controls(markdown), limit - len(head))
    return head + text, truncated


# -- gate and mode ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Gate:
    """The ``gate`` object of results.json."""

    passed: bool
    summary: str
    counts: Mapping[str, int] = field(default_factory=dict)
    #: slower cases accepted (``--accept``, the PR label): not regressions, but still changes
    accepted: int = 0

    @property
    def changed(self) -> bool:
        return self.accepted > 0 or any(self.counts.get(kind, 0) > 0 for kind in CHANGE_KINDS)

    @property
    def regressions(self) -> int:
        return sum(self.counts.get(kind, 0) for kind in REGRESSION_KINDS)

    @classmethod
    def from_json(cls, data: Any, source: str = RESULTS_FILE) -> Gate:
        if not isinstance(data, dict) or data.get("schema") != RESULTS_SCHEMA:
            raise UsageError(f"{source} is not a kbench-ci compare result (schema '{RESULTS_SCHEMA}')")
        gate = data.get("gate")
        if not isinstance(gate, dict) or not isinstance(gate.get("passed"), bool):
            raise UsageError(f"{source} has no 'gate' object with a boolean 'passed'")
        raw_counts = gate.get("counts") or {}
        if not isinstance(raw_counts, dict):
            raise UsageError(f"{source}: gate.counts is not an object")
        counts: dict[str, int] = {}
        for key, value in raw_counts.items():
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise UsageError(f"{source}: gate.counts.{key} is not a non-negative integer")
            counts[str(key)] = value
        accepted = gate.get("accepted_cases") or []
        if not isinstance(accepted, list):
            raise UsageError(f"{source}: gate.accepted_cases is not a list")
        return cls(passed=gate["passed"], summary=str(gate.get("summary") or ""), counts=counts, accepted=len(accepted))


def load_gate(results_path: Path, *, reader: str = "kbench-ci comment") -> Gate:
    """Read the gate verdict from a results.json file; UsageError when missing or malformed
    (:func:`kbench_ci.results.load.load_results`: the one reader, on the standard library alone)."""
    try:
        results = load_results(results_path, accept=(RESULTS_SCHEMA,), reader=reader)
    except FileNotFoundError:
        raise UsageError(
            f"no results at {results_path}", hint="run 'kbench-ci compare --output-dir DIR' first"
        ) from None
    return Gate.from_json(results.data, str(results_path))


def parse_mode(mode: str) -> CommentMode:
    value = mode.strip().lower()
    for known in COMMENT_MODES:
        if value == known:
            return known
    raise UsageError(
        f"comment mode '{mode}' is not one of {', '.join(COMMENT_MODES)}",
        hint="on-change is the usual choice",
    )


@dataclass(frozen=True, slots=True)
class Decision:
    post: bool
    reason: str


def decide(mode: CommentMode, gate: Gate | None, *, existing: bool) -> Decision:
    """Whether to write the comment.

    ``existing``: an earlier comment of this suite is on the pull request; on-change and
    on-regression then always update it, so it never shows a stale verdict. ``gate`` is None
    when there is no results.json (only ``always`` can post then).
    """
    if mode == "never":
        return Decision(False, "comment mode is 'never'")
    if mode == "always":
        return Decision(True, "comment mode is 'always'")
    if existing:
        return Decision(True, f"comment mode is '{mode}' and an earlier comment is updated to the new result")
    if gate is None:
        return Decision(False, f"comment mode is '{mode}' but there is no {RESULTS_FILE} to judge by")
    if mode == "on-change":
        if gate.changed:
            return Decision(True, "comment mode is 'on-change' and some case changed")
        return Decision(
            False, "comment mode is 'on-change': every case is unchanged or inconclusive, and there is no earlier comment"
        )
    if not gate.passed:
        return Decision(True, "comment mode is 'on-regression' and the gate failed")
    return Decision(False, "comment mode is 'on-regression': the gate passed and there is no earlier comment")


# -- the command --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CommentOutcome:
    action: CommentAction
    url: str | None
    reason: str
    body_truncated: bool = False


def read_pr_number_file(path: Path) -> int:
    """The PR number written by the benchmark workflow (untrusted input: parsed strictly)."""
    try:
        text = read_report_file(path).strip()
    except FileNotFoundError:
        raise UsageError(
            f"no {PR_NUMBER_FILE} in {path.parent}",
            hint="the benchmark workflow's artifact must hold pr-number.txt (the kbench-ci action writes it)",
        ) from None
    if not _PR_NUMBER.match(text):
        raise UsageError(f"{path} does not hold a pull request number")
    return int(text)


def load_event_payload(env: Mapping[str, str]) -> dict[str, Any]:
    """The JSON payload at GITHUB_EVENT_PATH, or {} when there is none."""
    path = env.get("GITHUB_EVENT_PATH")
    if not path:
        return {}
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise UsageError(f"cannot read the event payload GITHUB_EVENT_PATH={path}: {exc}") from None
    return data if isinstance(data, dict) else {}


_SAFE_URL = re.compile(r"^https://[A-Za-z0-9.:-]+(/[A-Za-z0-9._~%/#-]*)?$")


def run_url(env: Mapping[str, str]) -> str | None:
    """The workflow run's page: GITHUB_SERVER_URL/GITHUB_REPOSITORY/actions/runs/GITHUB_RUN_ID,
    or, in the fork recipe's comment job (a ``workflow_run`` event), the benchmark run's page."""
    if env.get("GITHUB_EVENT_NAME") == "workflow_run":
        try:
            run = load_event_payload(env).get("workflow_run")
        except UsageError:
            run = None
        url = run.get("html_url") if isinstance(run, dict) else None
        return str(url) if isinstance(url, str) and _SAFE_URL.match(url) else None
    server = env.get("GITHUB_SERVER_URL", "").strip().rstrip("/") or "https://github.com"
    repository, run_id = env.get("GITHUB_REPOSITORY", "").strip(), env.get("GITHUB_RUN_ID", "").strip()
    if not run_id.isdigit() or not re.fullmatch(r"[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+", repository):
        return None
    url = f"{server}/{repository}/actions/runs/{run_id}"
    return url if _SAFE_URL.match(url) else None


def links_line(env: Mapping[str, str]) -> str | None:
    """``[workflow run](…) · [report artifact `name`](…)`` for the top of the comment, or None
    outside a workflow. The artifact's own link comes from upload-artifact's ``artifact-url``
    output (KBENCH_ARTIFACT_URL); without one, the run page's artifacts list."""
    run = run_url(env)
    if run is None:
        return None
    name = env.get("KBENCH_ARTIFACT_NAME", "").strip() or "kbench-ci-report"
    artifact = env.get("KBENCH_ARTIFACT_URL", "").strip()
    if not _SAFE_URL.match(artifact):
        artifact = f"{run}#artifacts"
    safe_name = name.replace("`", "").replace("]", "").replace("[", "")
    return f"[Workflow run]({run}) · [Report artifact `{safe_name}`]({artifact})"


# -- links to the history site -------------------------------------------------------------------

_PAGES_URL = re.compile(r"^https://[A-Za-z0-9.-]+(:[0-9]+)?(/[A-Za-z0-9._~%/-]*)?$")


def validate_pages_url(url: str) -> str:
    """The ``pages-url`` input: an https URL without query or fragment (it goes into a public
    comment as a link), else UsageError."""
    if not _PAGES_URL.match(url):
        raise UsageError(
            f"pages-url '{url}' is not an https URL of a site",
            hint="e.g. https://OWNER.github.io/REPO/ (where GitHub Pages serves the history branch)",
        )
    return url


def trend_anchor(gpu: str, case_id: str) -> str:
    """The id of a case's chart on the history site's index.html: the same name as
    :attr:`kbench_ci.history.show.Trend.chart_name` (a test keeps the two in step; this module
    imports nothing of kbench-ci's measuring side)."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", f"{gpu}__{case_id}").strip("_") + ".png"


def trend_links(results: Mapping[str, Any], pages_url: str) -> str | None:
    """A line linking every case the report calls ``slower`` (accepted or not) to its trend on
    the history site, or None when there is none. Each case's GPU model is its own (a merged
    report's cases may come from several) or the run's."""
    base = validate_pages_url(pages_url).rstrip("/") + "/"
    environment = results.get("environment") if isinstance(results.get("environment"), dict) else {}
    default_gpu = str((environment or {}).get("gpu_name") or "cpu")
    links = []
    for case in results.get("cases") or ():
        if not isinstance(case, dict) or case.get("verdict") != "slower" or not isinstance(case.get("case_id"), str):
            continue
        gpu = str(case.get("gpu") or default_gpu)
        label = case["case_id"].replace("`", "").replace("[", "\\[").replace("]", "\\]")
        links.append(f"[`{label}`]({base}#{trend_anchor(gpu, case['case_id'])})")
    if not links:
        return None
    return "Trend on the main branch of each slower case: " + " · ".join(links)


def _results_data(path: Path) -> Mapping[str, Any]:
    try:
        return load_results(path, accept=(RESULTS_SCHEMA,), reader="kbench-ci comment").data
    except FileNotFoundError:
        return {}


@dataclass(frozen=True, slots=True)
class _Target:
    number: int
    #: for a workflow_run event: the head sha the benchmark ran on, to check the PR against
    expected_head_sha: str | None
    #: where that sha comes from, when a mismatch is an error (``--report DIR --pr N`` in a
    #: workflow_run event: a report of another commit) rather than a newer push (skipped)
    refuse_mismatch: str | None = None


def _recorded_head_sha(directory: Path) -> str | None:
    """The head commit that the compare report in ``directory`` measured (its results.json's
    ``head.sha``); None when it records none, or measured a dirty working tree (no commit's)."""
    head = _results_data(directory / RESULTS_FILE).get("head")
    if not isinstance(head, dict) or str(head.get("description") or "").startswith("working tree (dirty)"):
        return None
    sha = head.get("sha")
    return sha if isinstance(sha, str) and _SHA.match(sha) else None


def _resolve_pr(
    pr_number: int | None, directory: Path, from_artifact: bool, env: Mapping[str, str], *, skip_head_check: bool = False
) -> _Target:
    if pr_number is not None and pr_number <= 0:
        raise UsageError(f"pull request number {pr_number} is not positive")
    payload = load_event_payload(env)
    workflow_run = payload.get("workflow_run")
    if pr_number is not None and from_artifact:
        # An artifact was made by a job that ran the pull request's code: a report posted on PR N
        # must be of PR N's head commit, whoever names N.
        head_sha = workflow_run.get("head_sha") if isinstance(workflow_run, dict) else None
        if isinstance(head_sha, str) and _SHA.match(head_sha):
            return _Target(pr_number, head_sha)
        if skip_head_check:
            return _Target(pr_number, None)
        raise UsageError(
            f"--pr {pr_number} with --from-artifact cannot be checked: the event has no workflow_run.head_sha to "
            "compare with the pull request's head, and the artifact was made by the pull request's own code",
            hint="run it in an 'on: workflow_run' workflow, or pass --skip-head-check if you have checked that "
            f"the artifact is of pull request {pr_number}'s head (docs/action.md#pull-requests-from-forks)",
        )
    if pr_number is not None and (isinstance(workflow_run, dict) or env.get("GITHUB_EVENT_NAME") == "workflow_run"):
        # A workflow_run job posts a report some other run made: it belongs on PR N only if it is
        # of PR N's head commit, the same check as --from-artifact's.
        recorded = _recorded_head_sha(directory)
        if recorded is not None:
            return _Target(pr_number, recorded, refuse_mismatch=f"{RESULTS_FILE} in {directory}")
        if skip_head_check:
            return _Target(pr_number, None)
        raise UsageError(
            f"--pr {pr_number} in a workflow_run event cannot be checked: {RESULTS_FILE} in {directory} records no "
            "clean head commit to compare with the pull request's head",
            hint="post the folder of a 'kbench-ci compare' run (its results.json records the head), use "
            f"--from-artifact for a benchmark run's artifact, or pass --skip-head-check if you have checked that "
            f"the report is of pull request {pr_number}'s head",
        )
    if pr_number is not None:
        return _Target(pr_number, None)
    if from_artifact or isinstance(workflow_run, dict):
        number = read_pr_number_file(directory / PR_NUMBER_FILE)
        head_sha = workflow_run.get("head_sha") if isinstance(workflow_run, dict) else None
        if not isinstance(head_sha, str) or not _SHA.match(head_sha):
            # pr-number.txt was written by the benchmark job, which ran the pull request's code:
            # without the commit that job ran on there is nothing to check it against, and a
            # forged number would put this report on another pull request. Fail closed.
            raise UsageError(
                f"{PR_NUMBER_FILE} in {directory} cannot be checked: the event has no workflow_run.head_sha",
                hint="run it in an 'on: workflow_run' workflow (examples/workflows/fork-pr-comment.yml), "
                "or name the pull request yourself with --pr N --skip-head-check",
            )
        return _Target(number, head_sha)
    pull_request = payload.get("pull_request")
    if isinstance(pull_request, dict) and isinstance(pull_request.get("number"), int):
        return _Target(pull_request["number"], None)
    raise UsageError(
        "no pull request number",
        hint="pass --pr N, run on a pull_request event, or pass --from-artifact DIR holding pr-number.txt",
    )


#: the sections of a compare report that stay out of the PR comment: the job summary and the
#: uploaded report hold them (per-case samples, correctness, audit, launches; the environment;
#: how it was measured)
REPORT_ONLY_SECTIONS = ("Cases", "Environment", "How it was measured")
#: the same words on a GPU and in CPU mode (where there is no audit, launch or compiler figure to
#: point at)
REPORT_ONLY_NOTE = ("_Each case's details (its samples, correctness and more), the environment and how it was "
                    "measured: in this job's summary and its uploaded report._")


def comment_summary(markdown: str) -> str:
    """A compare report as a PR comment: headline, the table, why each change happened, how to
    reproduce it and the chart; the sections of :data:`REPORT_ONLY_SECTIONS` are left to the
    job summary. Any other markdown is returned as it is."""
    if not markdown.startswith("# kbench-ci compare"):
        return markdown
    kept: list[str] = []
    dropped = False
    skipping = False
    for line in markdown.splitlines():
        if line.startswith("## "):
            skipping = line[3:].strip() in REPORT_ONLY_SECTIONS
            dropped = dropped or skipping
        if not skipping:
            kept.append(line)
    text = "\n".join(kept).rstrip() + "\n"
    return text + ("\n" + REPORT_ONLY_NOTE + "\n" if dropped else "")


def compose_body(
    directory: Path, *, marker_id: str = "default", env: Mapping[str, str] | None = None, pages_url: str | None = None
) -> tuple[str, bool, Gate | None]:
    """The comment exactly as it would be posted (hidden marker, links to the run, trend links,
    folding under GitHub's limit), whether it was shortened, and the gate of the results beside
    the report: no token, no network (``kbench-ci comment --dry-run`` prints it)."""
    env = os.environ if env is None else env
    validate_marker_id(marker_id)
    report = directory / REPORT_FILE
    try:
        markdown = read_report_file(report)
    except FileNotFoundError:
        raise UsageError(
            f"no report at {report}", hint="run 'kbench-ci compare --output-dir DIR' first"
        ) from None
    if not markdown.strip():
        raise UsageError(f"{report} is empty: there is nothing to post")
    results = directory / RESULTS_FILE
    gate = load_gate(results) if report_file_present(results) else None
    markdown = comment_summary(markdown)  # before the trend links: it reads the report's own title
    site = pages_url if pages_url is not None else (env.get("KBENCH_PAGES_URL", "").strip() or None)
    if site is not None and report_file_present(results):
        trends = trend_links(_results_data(results), site)
        if trends is not None:
            markdown = f"{trends}\n\n{markdown}"
    links = links_line(env)
    if links is not None:
        markdown = f"{links}\n\n{markdown}"
    body, truncated = build_body(markdown, marker_id)
    return body, truncated, gate


def run_comment(
    report_dir: Path,
    *,
    from_artifact: Path | None,
    repository: str | None,
    pr_number: int | None,
    token: str | None,
    api_url: str | None,
    mode: str = "always",
    marker_id: str = "default",
    env: Mapping[str, str] | None = None,
    client: GitHubClient | None = None,
    pages_url: str | None = None,
    skip_head_check: bool = False,
    comment_author: str | None = None,
) -> CommentOutcome:
    """Create or update this suite's comment on a pull request with ``benchmark.md``.

    ``from_artifact`` (a downloaded benchmark artifact) replaces ``report_dir`` and supplies the
    PR number from its pr-number.txt. Values left None come from ``env`` (default
    :data:`os.environ`): GITHUB_REPOSITORY, GITHUB_TOKEN, GITHUB_API_URL, and the PR number from
    the GITHUB_EVENT_PATH payload. A 403 is an outcome (``forbidden``), not an exception.
    ``pages_url`` (default: KBENCH_PAGES_URL): where the history site is served; each ``slower``
    case then links to its trend there. ``comment_author`` (default: KBENCH_COMMENT_AUTHOR, else
    ``github-actions[bot]``): the login the token writes as; only its comments are edited.
    """
    env = os.environ if env is None else env
    comment_mode = parse_mode(mode)
    validate_marker_id(marker_id)
    author = _comment_author(comment_author, env)
    if comment_mode == "never":
        return CommentOutcome("skipped", None, "comment mode is 'never'")

    directory = Path(from_artifact if from_artifact is not None else report_dir)
    body, truncated, gate = compose_body(directory, marker_id=marker_id, env=env, pages_url=pages_url)

    repo = Repository.parse(repository or env.get("GITHUB_REPOSITORY") or "")
    target = _resolve_pr(pr_number, directory, from_artifact is not None, env, skip_head_check=skip_head_check)
    if client is None:
        secret = token if token is not None else env.get("GITHUB_TOKEN", "")
        if not secret.strip():
            raise UsageError(
                "no GitHub token", hint="set GITHUB_TOKEN; in a workflow, pass ${{ github.token }}"
            )
        client = GitHubClient(secret, api_url=api_url or env.get("GITHUB_API_URL") or DEFAULT_API_URL)

    try:
        return _post(client, repo, target, comment_mode, gate, body, truncated, marker_id, author)
    except GitHubRateLimited as exc:
        return CommentOutcome(
            "rate-limited", None,
            f"no comment on {repo}#{target.number}: {exc.message}; the gate's verdict stands", truncated,
        )
    except GitHubError as exc:
        if exc.status == 403:
            reason = _forbidden_reason(exc, repo, target.number, fork=_is_fork_pull_request(env))
            return CommentOutcome("forbidden", None, reason, truncated)
        raise


def _post(
    client: GitHubClient,
    repo: Repository,
    target: _Target,
    mode: CommentMode,
    gate: Gate | None,
    body: str,
    truncated: bool,
    marker_id: str,
    author: str,
) -> CommentOutcome:
    where = f"{repo}#{target.number}"
    if target.expected_head_sha is not None:
        # pr-number.txt came from an artifact that the pull request's own code could write:
        # only believe it if that pull request's head is the commit that was benchmarked.
        pull = client.get_pull_request(repo, target.number)
        if pull.head_sha != target.expected_head_sha and target.refuse_mismatch is not None:
            raise UsageError(
                f"refusing to comment on {where}: the report is of {target.expected_head_sha[:12]} (the head in "
                f"{target.refuse_mismatch}), but the pull request's head is {pull.head_sha[:12]}",
                hint="post a report of the pull request's head commit",
            )
        if pull.head_sha != target.expected_head_sha:
            return CommentOutcome(
                "skipped",
                None,
                f"not commenting on {where}: its head is {pull.head_sha[:12]}, but the benchmark "
                f"ran on {target.expected_head_sha[:12]} (a newer push, or a pr-number.txt that "
                "names another pull request)",
                truncated,
            )

    def ours(comment: IssueComment) -> bool:
        # Anyone can write the marker: a comment is kbench-ci's only when its own identity wrote it.
        trusted = {author.lower()} | client.posted_authors
        return has_marker(comment.body, marker_id) and comment.author.lower() in trusted

    existing: IssueComment | None = None
    foreign: set[str] = set()
    for comment in client.iter_issue_comments(repo, target.number):
        if ours(comment):
            existing = existing or comment
        elif has_marker(comment.body, marker_id):
            foreign.add(comment.author if _LOGIN.match(comment.author) else "an unnamed account")
    decision = decide(mode, gate, existing=existing is not None)
    if not decision.post:
        return CommentOutcome("skipped", None, f"no comment on {where}: {decision.reason}", truncated)
    if existing is not None:
        updated = client.update_issue_comment(repo, existing.id, body)
        url = updated.html_url or existing.html_url
        return CommentOutcome("updated", url, f"updated the kbench-ci comment on {where}: {url}", truncated)
    created = client.create_issue_comment_once(repo, target.number, body, ours)
    note = ""
    if foreign:
        # Said so that a token of another identity is noticed: every run would add a comment.
        note = (
            f" (a comment with kbench-ci's marker by {', '.join(sorted(foreign))} was left alone: only "
            f"{author}'s are kbench-ci's; if the token writes as another account, name it in comment-author)"
        )
    return CommentOutcome(
        "created", created.html_url, f"created a kbench-ci comment on {where}: {created.html_url}{note}", truncated
    )


def _is_fork_pull_request(env: Mapping[str, str]) -> bool | None:
    """Whether the event is a pull request from a fork; None when the payload does not say."""
    try:
        payload = load_event_payload(env)
    except UsageError:
        return None
    pull = payload.get("pull_request")
    if not isinstance(pull, dict):
        return None
    head, base = pull.get("head"), pull.get("base")
    head_repo = head.get("repo") if isinstance(head, dict) else None
    base_repo = base.get("repo") if isinstance(base, dict) else None
    if not isinstance(head_repo, dict):
        return None
    head_name = head_repo.get("full_name")
    base_name = base_repo.get("full_name") if isinstance(base_repo, dict) else None
    if isinstance(head_name, str) and isinstance(base_name, str):
        return head_name != base_name
    fork = head_repo.get("fork")
    return fork if isinstance(fork, bool) else None


def _forbidden_reason(exc: GitHubError, repo: Repository, number: int, *, fork: bool | None) -> str:
    refused = f"GitHub refused to write the comment on {repo}#{number} ({exc.message})."
    if fork:
        return (
            f"{refused} This pull request comes from a fork, and a fork's pull request runs with a "
            "read-only GITHUB_TOKEN, so it cannot comment: benchmark it with 'comment: never' and post "
            f"from a separate workflow_run workflow, as in {FORK_RECIPE}."
        )
    return (
        f"{refused} The token may not write pull request comments: give the job "
        "'permissions: pull-requests: write' (or use a token that has it)."
        + (" If this is a pull request from a fork, see " + FORK_RECIPE + "." if fork is None else "")
    )
