"""The steps of the composite action (action.yml), as plain functions.

Run as ``python -m kbench_ci.github.action STEP`` from a ``run:`` step whose inputs arrive only
through ``env:``. Each step reads its environment like a runner step does, writes
``GITHUB_OUTPUT`` / ``GITHUB_STEP_SUMMARY``, and returns a :class:`StepResult`: an exit code and
the lines (workflow commands such as ``::warning::``) for :func:`main` to write to the log.

Steps:

``resolve``  which commits to compare and which pull request to comment on, from the event
             payload and the ``base`` input; fetches a missing commit into a shallow clone, and
             deepens it until it holds the two commits' merge base.
``compare``  runs ``kbench-ci compare ... --no-fail`` and records its exit code; never fails.
``summary``  appends benchmark.md to the job summary and sets the verdict outputs.
``comment``  the sticky pull request comment; a 403 (no permission, a fork) or a rate limit
             that outlasts a minute's wait is a warning, not a failure.
``comment-from-artifact``  the fork recipe's comment, from a downloaded artifact (not a step of
             action.yml: examples/workflows/fork-pr-comment.yml runs it).
``gate``     the job's verdict: 1 on a failed gate (if fail-on-regression), the compare
             step's own code when it was a usage (2) or environment (3) problem.
"""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Literal

from kbench_ci.errors import EnvironmentProblem, ExitCode, KbenchError, UsageError
from kbench_ci.git import deepen_to_merge_base, ensure_commit, rev_parse
from kbench_ci.github.comment import (
    COMMENT_LIMIT,
    PR_NUMBER_FILE,
    REPORT_FILE,
    RESULTS_FILE,
    CommentOutcome,
    Gate,
    fit_body,
    load_event_payload,
    load_gate,
    parse_mode,
    read_report_file,
    run_comment,
    run_url,
    validate_marker_id,
)

__all__ = [
    "STEPS",
    "STEP_SUMMARY_LIMIT",
    "Evaluation",
    "StepResult",
    "compare_argv",
    "evaluate",
    "main",
    "run_step",
    "write_outputs",
]

#: GitHub's limit for one step's job summary, in bytes.
STEP_SUMMARY_LIMIT = 1024 * 1024
DEFAULT_ARTIFACT = "kbench-ci-report"

_ZERO_SHA = re.compile(r"^0+$")

Verdict = Literal["passed", "failed", "error", "skipped"]


@dataclass(frozen=True, slots=True)
class StepResult:
    exit_code: int
    lines: tuple[str, ...] = ()


# -- runner files -------------------------------------------------------------------------------


def _runner_file(env: Mapping[str, str], name: str) -> Path:
    value = env.get(name)
    if not value:
        raise UsageError(f"{name} is not set", hint="this step runs inside a GitHub Actions job")
    return Path(value)


def write_outputs(path: Path, outputs: Mapping[str, str]) -> None:
    """Append step outputs in the heredoc form, safe for values with newlines."""
    with path.open("a", encoding="utf-8") as handle:
        for name, value in outputs.items():
            delimiter = f"ghadelimiter_{uuid.uuid4().hex}"
            while delimiter in value:  # astronomically unlikely, but cheap to rule out
                delimiter = f"ghadelimiter_{uuid.uuid4().hex}"
            handle.write(f"{name}<<{delimiter}\n{value}\n{delimiter}\n")


def _append_summary(path: Path, text: str) -> None:
    with path.open("a", encoding="utf-8") as handle:
        handle.write(text if text.endswith("\n") else text + "\n")


def _command(kind: str, message: str) -> str:
    """A workflow command (``::error::`` ...) with its message escaped as the runner expects."""
    escaped = message.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
    return f"::{kind}::{escaped}"


def _flag(env: Mapping[str, str], name: str, default: bool) -> bool:
    value = env.get(name, "").strip().lower()
    if not value:
        return default
    if value in ("true", "1", "yes"):
        return True
    if value in ("false", "0", "no"):
        return False
    raise UsageError(f"{name}={value!r} is not 'true' or 'false'")


# -- resolve ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Sides:
    base: str | None
    head: str
    pr_number: int | None
    reason: str
    labels: tuple[str, ...] = ()


DEFAULT_ACCEPT_LABEL = "kbench-ci: accept"


def _labels(pull: Mapping[str, object]) -> tuple[str, ...]:
    """The pull request's label names as the event payload lists them (on ``labeled`` and
    ``unlabeled`` too, after the change)."""
    labels = pull.get("labels")
    if not isinstance(labels, list):
        return ()
    return tuple(str(label["name"]) for label in labels if isinstance(label, dict) and "name" in label)


def _sides_from_event(env: Mapping[str, str], cwd: Path) -> _Sides:
    event = env.get("GITHUB_EVENT_NAME", "")
    if event == "pull_request_target" and not _flag(env, "KBENCH_ALLOW_PULL_REQUEST_TARGET", False):
        # That event runs in the base repository's context: a write token and the repository's
        # secrets. Benchmarking runs the pull request's code, which would get both.
        raise UsageError(
            "refusing to benchmark on pull_request_target: that event runs with the base repository's "
            "write token and secrets, and the benchmark runs the pull request's code",
            hint="trigger the workflow on pull_request (for forks: examples/workflows/fork-pr-benchmark.yml); "
            "if every pull request that can reach this job is trusted, set allow-pull-request-target: true",
        )
    payload = load_event_payload(env)
    if event in ("pull_request", "pull_request_target"):
        pull = payload.get("pull_request")
        if isinstance(pull, dict):
            try:
                return _Sides(
                    base=str(pull["base"]["sha"]),
                    head=str(pull["head"]["sha"]),
                    pr_number=int(pull["number"]),
                    reason=f"pull request #{pull['number']}: its base branch tip against its head",
                    labels=_labels(pull),
                )
            except (KeyError, TypeError, ValueError):
                pass
        raise UsageError(f"the {event} event payload has no pull_request base/head sha")
    if event == "push":
        after = str(payload.get("after") or "")
        head = after if after and not _ZERO_SHA.match(after) else "HEAD"
        before = str(payload.get("before") or "")
        if before and not _ZERO_SHA.match(before):
            return _Sides(before, head, None, "push: the commit before the push against the pushed one")
        head_sha = ensure_commit(head, cwd, "pushed commit")
        parent = rev_parse(f"{head_sha}~1", cwd)
        if parent is None:
            return _Sides(
                None,
                head_sha,
                None,
                "push of a new branch whose first commit has no parent here: there is nothing to "
                "compare against (set the 'base' input, or check out with fetch-depth: 0)",
            )
        return _Sides(parent, head_sha, None, "push of a new branch: its parent commit against the pushed one")
    if event == "workflow_dispatch":
        repository = payload.get("repository")
        default_branch = repository.get("default_branch") if isinstance(repository, dict) else None
        base = f"origin/{default_branch}" if default_branch else None
        reason = f"manual run: the tip of {base} against the checked-out commit" if base else (
            "manual run, but the payload names no default branch: set the 'base' input"
        )
        return _Sides(base, "HEAD", None, reason)
    return _Sides(None, "HEAD", None, f"the '{event or 'unknown'}' event names no base commit: set the 'base' input")


def resolve(env: Mapping[str, str], cwd: Path) -> StepResult:
    # Check the inputs that later steps use now, so a typo fails the job on every event.
    marker_id = validate_marker_id(env.get("KBENCH_MARKER_ID", "").strip() or "default")
    parse_mode(env.get("KBENCH_COMMENT_MODE", "").strip() or "on-change")
    _flag(env, "KBENCH_FAIL_ON_REGRESSION", True)
    sides = _sides_from_event(env, cwd)
    accept_label = env.get("KBENCH_ACCEPT_LABEL", "").strip()
    if "KBENCH_ACCEPT_LABEL" not in env:
        accept_label = DEFAULT_ACCEPT_LABEL
    accepted_by = accept_label if accept_label and accept_label in sides.labels else ""
    explicit = env.get("INPUT_BASE", "").strip()
    base_ref, reason = (explicit, f"the 'base' input ({explicit})") if explicit else (sides.base, sides.reason)

    head_sha = ensure_commit(sides.head, cwd, "head commit")
    base_sha = ensure_commit(base_ref, cwd, "base commit") if base_ref else ""
    notes: list[str] = []
    if base_sha:
        notes.extend(_reach_merge_base(base_sha, head_sha, cwd))
    temp = Path(env.get("RUNNER_TEMP") or tempfile.gettempdir())
    report_dir = temp / "kbench-ci" / marker_id / "report"
    artifact = env.get("KBENCH_ARTIFACT_NAME", "").strip() or (
        DEFAULT_ARTIFACT if marker_id == "default" else f"{DEFAULT_ARTIFACT}-{marker_id}"
    )
    write_outputs(
        _runner_file(env, "GITHUB_OUTPUT"),
        {
            "base-sha": base_sha,
            "head-sha": head_sha,
            "pr-number": str(sides.pr_number or ""),
            "report-dir": str(report_dir),
            "artifact-name": artifact,
            "comparable": "true" if base_sha else "false",
            "reason": reason,
            "accept-label": accepted_by,
        },
    )
    if accepted_by:
        notes.append(f"kbench-ci: the pull request has the label '{accepted_by}': slower cases are accepted")
    if not base_sha:
        return StepResult(0, (_command("notice", f"kbench-ci: no comparison: {reason}"),))
    return StepResult(0, (*notes, f"kbench-ci: base {base_sha[:12]}, head {head_sha[:12]} ({reason})"))


def _reach_merge_base(base_sha: str, head_sha: str, cwd: Path) -> list[str]:
    """Deepen a shallow checkout (actions/checkout fetches depth 1) until it holds the merge base
    that compare's default base mode needs. Best effort: compare says what is wrong if not."""
    try:
        found = deepen_to_merge_base(base_sha, head_sha, cwd)
    except KbenchError as exc:
        return [_command(
            "warning",
            f"kbench-ci: could not fetch the history down to the merge base of {base_sha[:12]} and "
            f"{head_sha[:12]}: {exc.one_line()}. Check out with actions/checkout and fetch-depth: 0",
        )]
    if found is None:
        return [_command(
            "warning",
            f"kbench-ci: {base_sha[:12]} and {head_sha[:12]} have no common ancestor; pass "
            "extra-args: --base-mode tip to compare against the base as it is",
        )]
    return [f"kbench-ci: merge base {found[:12]} is in the checkout"]


# -- compare ------------------------------------------------------------------------------------


def compare_argv(env: Mapping[str, str], cli: str) -> list[str]:
    """The ``kbench-ci compare`` command line for this step's environment."""
    base = env.get("KBENCH_BASE", "").strip()
    if not base:
        raise UsageError("KBENCH_BASE is empty: the resolve step found no base commit")
    argv = [cli, "compare", "--base", base]
    if head := env.get("KBENCH_HEAD", "").strip():
        argv += ["--head", head]
    argv += ["--output-dir", str(_runner_file(env, "KBENCH_REPORT_DIR"))]
    argv += ["--threshold", env.get("KBENCH_THRESHOLD", "").strip() or "2%"]
    if config := env.get("KBENCH_CONFIG", "").strip():
        argv += ["--config", config]
    # The job's fate is decided by the gate step, after the comment: --no-fail keeps this step
    # from failing first, and --job-note tells the report what really happens to the job.
    argv.append("--no-fail")
    fail = _flag(env, "KBENCH_FAIL_ON_REGRESSION", True)
    label = env.get("KBENCH_ACCEPT_LABEL", "").strip()
    accepted_by = env.get("KBENCH_ACCEPTED_BY", "").strip()
    note = (
        "The job fails: the action's Gate step fails it (fail-on-regression: true)." if fail
        else "The job does not fail: fail-on-regression is false, so this report is the only signal."
    )
    if label and not accepted_by:
        note += f" A known regression can be accepted with the pull request label '{label}' (never an incorrect case)."
    argv += ["--job-note", note]
    if accepted_by:
        argv += ["--accept", "*", "--accept-reason", f"the pull request has the label '{accepted_by}'"]
    try:
        argv += shlex.split(env.get("KBENCH_EXTRA_ARGS", ""))
    except ValueError as exc:
        raise UsageError(f"extra-args cannot be split like a shell would: {exc}") from None
    return argv


def _kbench_cli(env: Mapping[str, str]) -> str:
    if explicit := env.get("KBENCH_CLI", "").strip():
        return explicit
    beside = Path(sys.executable).with_name("kbench-ci")
    if beside.exists():
        return str(beside)
    found = shutil.which("kbench-ci")
    if found is None:
        raise EnvironmentProblem("the kbench-ci command is not installed next to this Python")
    return found


def compare(
    env: Mapping[str, str], cwd: Path, *, runner: Callable[[list[str], Path], int] | None = None
) -> StepResult:
    """Run the comparison; record its exit code as the ``exit-code`` output and never fail,
    unless the job is being cancelled (then the step ends with 128 + the signal's number)."""
    lines: list[str] = []
    stopped_by: int | None = None
    try:
        argv = compare_argv(env, _kbench_cli(env))
        _runner_file(env, "KBENCH_REPORT_DIR").mkdir(parents=True, exist_ok=True)
        code = (runner or _run_inheriting)(argv, cwd)
    except KbenchError as exc:
        lines.append(_command("error", f"kbench-ci compare did not start: {exc.one_line()}"))
        code = int(exc.exit_code)
    except _Stopped as stop:
        stopped_by, code = stop.signum, stop.child_code
        lines.append(_command("warning", f"kbench-ci compare was stopped by {stop.describe()}"))
    write_outputs(_runner_file(env, "GITHUB_OUTPUT"), {"exit-code": str(code)})
    return StepResult(128 + stopped_by if stopped_by is not None else 0, tuple(lines))


#: how long the compare process gets to clean up (kill its worker, remove its worktrees) after
#: the first stop signal before it is killed. GitHub cancels with SIGINT, SIGTERM 7.5 s later and
#: SIGKILL after that; this step forwards each signal and waits, and never kills first.
COMPARE_GRACE_S = 10.0
_FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class _Stopped(Exception):
    """The step was told to stop while compare ran; compare has ended (cleanly or killed)."""

    def __init__(self, signum: int, child_code: int, killed_after_s: float | None) -> None:
        super().__init__(signum)
        self.signum = signum
        self.child_code = child_code
        #: None when compare ended by itself; else the grace it was given before SIGKILL
        self.killed_after_s = killed_after_s

    def describe(self) -> str:
        name = signal.Signals(self.signum).name
        if self.killed_after_s is not None:
            return f"{name}; it did not end within {self.killed_after_s:g} s and was killed"
        return f"{name}; it cleaned up and exited {self.child_code}"


def _run_inheriting(argv: list[str], cwd: Path, *, grace_s: float = COMPARE_GRACE_S) -> int:
    """Run ``argv`` with this process's stdout/stderr (so its log streams into the job log).

    A stop signal to this step is passed on to the child, which then gets ``grace_s`` seconds to
    clean up; ``subprocess.run`` would SIGKILL it 0.25 s after a Ctrl-C, leaving its worktrees
    behind. Raises :class:`_Stopped` when a signal came in.
    """
    sys.stdout.flush()
    try:
        process = subprocess.Popen(argv, cwd=cwd)
    except OSError as exc:
        raise EnvironmentProblem(f"cannot run {argv[0]}: {exc.strerror or exc}") from None
    received: list[int] = []

    def forward(signum: int, frame: FrameType | None) -> None:
        received.append(signum)
        # The runner may signal the whole process group, and compare ignores a second signal
        # while it cleans up, so passing each one on is harmless either way.
        with contextlib.suppress(ProcessLookupError):
            process.send_signal(signum)

    main_thread = threading.current_thread() is threading.main_thread()
    previous = {sig: signal.signal(sig, forward) for sig in _FORWARDED} if main_thread else {}
    killed_after_s: float | None = None
    try:
        deadline: float | None = None
        while True:
            try:
                code = process.wait(timeout=0.1)
                break
            except subprocess.TimeoutExpired:
                pass
            if received and deadline is None:
                deadline = time.monotonic() + grace_s
            if deadline is not None and time.monotonic() > deadline:
                process.kill()
                code = process.wait()
                killed_after_s = grace_s
                break
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)
    if received:
        raise _Stopped(received[0], code, killed_after_s)
    return code


# -- verdict (summary and gate) -----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Evaluation:
    verdict: Verdict
    gate: Gate | None
    compare_exit: int | None
    message: str


_EXIT_MEANING = {
    int(ExitCode.USAGE): "bad usage or configuration",
    int(ExitCode.ENVIRONMENT): "an environment problem",
}


def evaluate(env: Mapping[str, str]) -> Evaluation:
    """The verdict from the compare step's exit code and outcome and the report's results.json."""
    outcome = env.get("KBENCH_COMPARE_OUTCOME", "").strip()
    text = env.get("KBENCH_COMPARE_EXIT_CODE", "").strip()
    if outcome == "skipped" and not text:
        reason = env.get("KBENCH_SKIP_REASON", "").strip() or "no base commit"
        return Evaluation("skipped", None, None, f"no comparison: {reason}")
    if not text.isdigit():
        return Evaluation(
            "error", None, None, f"the compare step left no exit code (outcome: {outcome or 'unknown'})"
        )
    code = int(text)
    if code not in (0, 1):
        meaning = _EXIT_MEANING.get(code, "it crashed or was killed")
        return Evaluation("error", None, code, f"kbench-ci compare exited {code}: {meaning}")
    results = _runner_file(env, "KBENCH_REPORT_DIR") / RESULTS_FILE
    try:
        gate = load_gate(results)
    except UsageError as exc:
        return Evaluation("error", None, code, f"kbench-ci compare exited {code}, but {exc.one_line()}")
    if code == 1 and gate.passed:
        return Evaluation("error", gate, code, "kbench-ci compare exited 1 although results.json says the gate passed")
    verdict: Verdict = "passed" if gate.passed else "failed"
    return Evaluation(verdict, gate, code, gate.summary or f"gate {verdict}")


def summary(env: Mapping[str, str]) -> StepResult:
    evaluation = evaluate(env)
    report_dir = _runner_file(env, "KBENCH_REPORT_DIR")
    report = report_dir / REPORT_FILE
    results = report_dir / RESULTS_FILE
    has_report = _plain_file(report)
    artifact = env.get("KBENCH_ARTIFACT_NAME", "").strip() or DEFAULT_ARTIFACT

    pr_number = env.get("KBENCH_PR_NUMBER", "").strip()
    if pr_number and report_dir.is_dir():
        # For the fork recipe: the comment workflow reads the PR number from the artifact.
        # A fresh file: a link planted there by a kernel must not redirect this write.
        number_file = report_dir / PR_NUMBER_FILE
        number_file.unlink(missing_ok=True)
        with number_file.open("x", encoding="utf-8") as handle:
            handle.write(pr_number + "\n")

    parts: list[str] = []
    lines: list[str] = []
    if evaluation.verdict in ("error", "skipped"):
        parts.append(f"### kbench-ci: {evaluation.message}\n")
    if os.path.lexists(report) and not has_report:
        lines.append(_command("warning", f"kbench-ci: {report} is not a plain file (a link?); it is not shown"))
    if has_report:
        text = read_report_file(report)
        note = (
            "_The job summary was shortened to fit GitHub's 1 MiB limit; the full report is "
            f"`benchmark.md` in the `{artifact}` artifact._"
        )
        folded, _ = fit_body(
            text, STEP_SUMMARY_LIMIT - _bytes("\n".join(parts)) - 1, note=note, measure=_bytes
        )
        parts.append(folded)
    if parts:
        _append_summary(_runner_file(env, "GITHUB_STEP_SUMMARY"), "\n".join(parts))

    regressions = evaluation.gate.regressions if evaluation.gate else 0
    write_outputs(
        _runner_file(env, "GITHUB_OUTPUT"),
        {
            "verdict": evaluation.verdict,
            "regressions": str(regressions),
            "summary": evaluation.message,
            "report-path": str(report) if has_report else "",
            "results-path": str(results) if _plain_file(results) else "",
            "has-report": "true" if has_report else "false",
            "run-url": run_url(env) or "",
        },
    )
    kind = {"passed": "notice", "skipped": "notice", "failed": "warning", "error": "error"}[evaluation.verdict]
    return StepResult(0, (*lines, _command(kind, f"kbench-ci: {evaluation.message}")))


def _plain_file(path: Path) -> bool:
    """A regular file, not a link to one: the report folder sits where a kernel could write."""
    try:
        return stat.S_ISREG(path.lstat().st_mode)
    except OSError:
        return False


def _bytes(text: str) -> int:
    return len(text.encode("utf-8"))


# -- comment ------------------------------------------------------------------------------------


def comment(env: Mapping[str, str]) -> StepResult:
    pr_text = env.get("KBENCH_PR_NUMBER", "").strip()
    if not pr_text.isdigit():
        raise UsageError("KBENCH_PR_NUMBER is not a pull request number")
    outcome = run_comment(
        _runner_file(env, "KBENCH_REPORT_DIR"),
        from_artifact=None,
        repository=None,
        pr_number=int(pr_text),
        token=None,
        api_url=None,
        mode=env.get("KBENCH_COMMENT_MODE", "").strip() or "on-change",
        marker_id=env.get("KBENCH_MARKER_ID", "").strip() or "default",
        env=env,
    )
    return _comment_result(env, outcome)


def comment_from_artifact(env: Mapping[str, str]) -> StepResult:
    """The fork recipe's comment job (examples/workflows/fork-pr-comment.yml): the downloaded
    artifact at ``KBENCH_ARTIFACT_DIR`` is untrusted data (see :func:`run_comment`).

    This module needs only the standard library, so that job runs kbench-ci from a checkout pinned
    to a commit and installs nothing.
    """
    outcome = run_comment(
        _runner_file(env, "KBENCH_ARTIFACT_DIR"),
        from_artifact=_runner_file(env, "KBENCH_ARTIFACT_DIR"),
        repository=None,
        pr_number=None,
        token=None,
        api_url=None,
        mode=env.get("KBENCH_COMMENT_MODE", "").strip() or "on-change",
        marker_id=env.get("KBENCH_MARKER_ID", "").strip() or "default",
        env=env,
    )
    return _comment_result(env, outcome)


def _comment_result(env: Mapping[str, str], outcome: CommentOutcome) -> StepResult:
    if env.get("GITHUB_OUTPUT"):
        write_outputs(
            _runner_file(env, "GITHUB_OUTPUT"),
            {"comment-url": outcome.url or "", "comment-action": outcome.action},
        )
    lines = [f"kbench-ci: {outcome.reason}"]
    if outcome.action in ("forbidden", "rate-limited"):
        lines = [_command("warning", f"kbench-ci: {outcome.reason}")]
    if outcome.body_truncated:
        limit = f"{COMMENT_LIMIT:,}-character limit"
        lines.append(_command("notice", f"kbench-ci: the comment was shortened to fit GitHub's {limit}"))
    return StepResult(0, tuple(lines))


# -- gate ---------------------------------------------------------------------------------------


def gate(env: Mapping[str, str]) -> StepResult:
    fail_on_regression = _flag(env, "KBENCH_FAIL_ON_REGRESSION", True)
    evaluation = evaluate(env)
    message = f"kbench-ci: {evaluation.message}"
    if evaluation.verdict == "skipped":
        return StepResult(0, (_command("notice", message),))
    if evaluation.verdict == "passed":
        return StepResult(0, (message,))
    if evaluation.verdict == "failed":
        if fail_on_regression:
            return StepResult(int(ExitCode.GATE_FAILED), (_command("error", message),))
        return StepResult(0, (_command("warning", message + " (fail-on-regression is false)"),))
    code = evaluation.compare_exit
    if code is None or code == 0:
        code = int(ExitCode.ENVIRONMENT)
    return StepResult(min(code, 255), (_command("error", message),))


# -- entry point --------------------------------------------------------------------------------

STEPS: dict[str, Callable[[Mapping[str, str], Path], StepResult]] = {
    "resolve": resolve,
    "compare": lambda env, cwd: compare(env, cwd),
    "summary": lambda env, cwd: summary(env),
    "comment": lambda env, cwd: comment(env),
    "comment-from-artifact": lambda env, cwd: comment_from_artifact(env),
    "gate": lambda env, cwd: gate(env),
}


def run_step(name: str, env: Mapping[str, str], cwd: Path) -> StepResult:
    """Run one step; a KbenchError becomes an ``::error::`` line and its exit code."""
    step = STEPS.get(name)
    if step is None:
        return StepResult(int(ExitCode.USAGE), (f"unknown step '{name}'; steps: {', '.join(STEPS)}",))
    try:
        return step(env, cwd)
    except KbenchError as exc:
        return StepResult(int(exc.exit_code), (_command("error", f"kbench-ci {name}: {exc.one_line()}"),))


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 1:
        sys.stderr.write(f"usage: python -m kbench_ci.github.action {{{'|'.join(STEPS)}}}\n")
        return int(ExitCode.USAGE)
    result = run_step(args[0], os.environ, Path.cwd())
    for line in result.lines:
        sys.stdout.write(line + "\n")
    sys.stdout.flush()
    return result.exit_code


if __name__ == "__main__":
    raise SystemExit(main())
