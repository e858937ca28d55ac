"""The steps of the composite action (action.yml), as plain functions.

Run as ``python -m kbench_ci.github.action STEP`` from a ``run:`` step whose inputs arrive only
through ``env:``. Each step reads its environment like a runner step does, writes
``GITHUB_OUTPUT`` / ``GITHUB_STEP_SUMMARY``, and returns a :class:`StepResult`: an exit code and
the lines (workflow commands such as ``::warning::``) for :func:`main` to write to the log.

Steps:

``resolve``  which commits to compare and which pull request to comment on, from the event
             payload and the ``base`` input; fetches a missing commit into a shallow clone, and
             deepens it until it holds the two commits' merge base.
``compare``  runs ``kbench-ci compare ... --no-fail`` (``--shard K/N`` with the ``shard`` input),
             or, in ``mode: merge``, ``kbench-ci merge DIRS... --no-fail`` over the downloaded
             shard artifacts, and records its exit code; never fails.
``summary``  appends benchmark.md to the job summary and sets the verdict outputs.
``history``  on a push to the default branch: ``kbench-ci history record`` (``record-history``),
             and ``history show`` rendered and committed to the history branch for GitHub Pages
             (``publish-history``); a failure there is a warning, the verdict stands.
``comment``  the sticky pull request comment; a 403 (no permission, a fork) or a rate limit
             that outlasts a minute's wait is a warning, not a failure.
``comment-from-artifact``  the fork recipe's comment, from a downloaded artifact (not a step of
             action.yml: examples/workflows/fork-pr-comment.yml runs it).
``gate``     the job's verdict: 1 on a failed gate (if fail-on-regression), the compare
             step's own code when it was a usage (2) or environment (3) problem.
"""

from __future__ import annotations

import contextlib
import glob
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

from kbench_ci.errors import EnvironmentProblem, ExitCode, KbenchError, ResultsFileError, UsageError
from kbench_ci.git import (
    RefMoved,
    branch_tip,
    commit_files_to_branch,
    deepen_to_merge_base,
    ensure_commit,
    fetch_branch,
    push_branch,
    rev_parse,
)
from kbench_ci.github import runner_guard
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
    validate_comment_author,
    validate_marker_id,
    validate_pages_url,
)
from kbench_ci.github.workflow_commands import workflow_command
from kbench_ci.procgroup import EXIT_WITH_PARENT_ENV, make_non_dumpable, on_parent_death, user_code_environment
from kbench_ci.results.controls import show_controls
from kbench_ci.results.load import load_results
from kbench_ci.results.versions import COMPARE_SCHEMA

__all__ = [
    "STEPS",
    "STEP_SUMMARY_LIMIT",
    "Evaluation",
    "StepResult",
    "compare_argv",
    "evaluate",
    "history_argvs",
    "merge_argv",
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
    return workflow_command(kind, message)


def _flag(env: Mapping[str, str], name: str, default: bool) -> bool:
    value = env.get(name, "").strip().lower()
    if not value:
        return default
    if value in ("true", "1", "yes"):
        return True
    if value in ("false", "0", "no"):
        return False
    raise UsageError(f"{name}={value!r} is not 'true' or 'false'")


def changed_only(env: Mapping[str, str]) -> bool:
    """The ``changed-only`` input: "auto" (or empty) is on for pull requests, off otherwise
    (a push to main measures everything, for the history)."""
    value = env.get("KBENCH_CHANGED_ONLY", "").strip().lower()
    if value in ("", "auto"):
        return env.get("GITHUB_EVENT_NAME", "").strip() in ("pull_request", "pull_request_target")
    return _flag(env, "KBENCH_CHANGED_ONLY", False)


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


Mode = Literal["compare", "merge"]


def action_mode(env: Mapping[str, str]) -> Mode:
    """The ``mode`` input: ``compare`` (benchmark this job's cases) or ``merge`` (only join the
    shard artifacts of a runner matrix into one report, comment and gate)."""
    value = env.get("KBENCH_MODE", "").strip().lower() or "compare"
    if value == "compare":
        return "compare"
    if value == "merge":
        return "merge"
    raise UsageError(f"mode '{value}' is not 'compare' or 'merge'")


def _report_location(env: Mapping[str, str], marker_id: str) -> tuple[Path, str]:
    temp = Path(env.get("RUNNER_TEMP") or tempfile.gettempdir())
    artifact = env.get("KBENCH_ARTIFACT_NAME", "").strip() or (
        DEFAULT_ARTIFACT if marker_id == "default" else f"{DEFAULT_ARTIFACT}-{marker_id}"
    )
    return temp / "kbench-ci" / marker_id / "report", artifact


def _resolve_merge(env: Mapping[str, str], marker_id: str) -> StepResult:
    """``mode: merge`` compares nothing itself: no commits to fetch, only where the merged report
    goes and which pull request it comments on."""
    if not env.get("KBENCH_MERGE_DIRS", "").strip():
        raise UsageError("mode: merge needs merge-dirs", hint="the folders the shard artifacts were downloaded to, e.g. shards/*")
    payload = load_event_payload(env)
    pull = payload.get("pull_request")
    number = pull.get("number") if isinstance(pull, dict) else None
    report_dir, artifact = _report_location(env, marker_id)
    reason = "merge of the shards' results"
    write_outputs(
        _runner_file(env, "GITHUB_OUTPUT"),
        {
            "base-sha": "", "head-sha": str(pull["head"]["sha"]) if isinstance(pull, dict) else env.get("GITHUB_SHA", ""),
            "pr-number": str(number) if isinstance(number, int) else "", "report-dir": str(report_dir),
            "artifact-name": artifact, "comparable": "true", "reason": reason, "accept-label": "",
        },
    )
    return StepResult(0, (f"kbench-ci: {reason}",))


def resolve(env: Mapping[str, str], cwd: Path) -> StepResult:
    # Check the inputs that later steps use now, so a typo fails the job on every event.
    marker_id = validate_marker_id(env.get("KBENCH_MARKER_ID", "").strip() or "default")
    parse_mode(env.get("KBENCH_COMMENT_MODE", "").strip() or "on-change")
    _flag(env, "KBENCH_FAIL_ON_REGRESSION", True)
    _flag(env, "KBENCH_RECORD_HISTORY", False)
    _flag(env, "KBENCH_PUBLISH_HISTORY", False)
    _pages_url(env)
    if env.get("KBENCH_COMMENT_AUTHOR", "").strip():
        validate_comment_author(env["KBENCH_COMMENT_AUTHOR"].strip())
    if action_mode(env) == "merge":
        if env.get("KBENCH_SHARD", "").strip():
            raise UsageError("mode: merge merges shards; the shard input belongs to the benchmark jobs")
        return _resolve_merge(env, marker_id)
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
    report_dir, artifact = _report_location(env, marker_id)
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

#: the build cache's folder under RUNNER_TEMP; action.yml's actions/cache step restores and saves
#: the same path
CACHE_FOLDER = "kbench-ci-cache"


def compare_argv(env: Mapping[str, str], cli: str) -> list[str]:
    """The ``kbench-ci compare`` command line for this step's environment."""
    base = env.get("KBENCH_BASE", "").strip()
    if not base:
        raise UsageError("KBENCH_BASE is empty: the resolve step found no base commit")
    argv = [cli, "compare", "--base", base]
    if head := env.get("KBENCH_HEAD", "").strip():
        argv += ["--head", head]
    argv += ["--output-dir", str(_runner_file(env, "KBENCH_REPORT_DIR"))]
    # Only when the input is set: without it each kernel is judged by its own threshold in
    # kbench.toml (a noisier kernel gets a looser one), as `kbench-ci compare` does.
    if threshold := env.get("KBENCH_THRESHOLD", "").strip():
        argv += ["--threshold", threshold]
    if config := env.get("KBENCH_CONFIG", "").strip():
        argv += ["--config", config]
    if shard := env.get("KBENCH_SHARD", "").strip():
        argv += ["--shard", shard]
        if timings := env.get("KBENCH_SHARD_TIMINGS", "").strip():
            argv += ["--shard-timings", timings]
    elif env.get("KBENCH_SHARD_TIMINGS", "").strip():
        raise UsageError("the shard-timings input needs the shard input (K/N)")
    if changed_only(env):
        argv.append("--changed-only")
    # Built libraries and JIT caches live where the action's actions/cache step restores them.
    if _flag(env, "KBENCH_CACHE", True):
        argv += ["--cache-dir", str(Path(env.get("RUNNER_TEMP") or tempfile.gettempdir()) / CACHE_FOLDER)]
    else:
        argv.append("--no-cache")
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
    return argv + _extra_args(env)


def _extra_args(env: Mapping[str, str]) -> list[str]:
    try:
        return shlex.split(env.get("KBENCH_EXTRA_ARGS", ""))
    except ValueError as exc:
        raise UsageError(f"extra-args cannot be split like a shell would: {exc}") from None


def merge_dirs(env: Mapping[str, str], cwd: Path) -> list[str]:
    """The ``merge-dirs`` input: folders or glob patterns (``shards/*``), one per line or
    separated by blanks, relative to the working directory; expanded here, never by a shell."""
    try:
        patterns = shlex.split(env.get("KBENCH_MERGE_DIRS", ""))
    except ValueError as exc:
        raise UsageError(f"merge-dirs cannot be split like a shell would: {exc}") from None
    found: list[str] = []
    for pattern in patterns:
        if glob.has_magic(pattern):
            matches = sorted(glob.glob(pattern, root_dir=cwd))
            found += [m for m in matches if (cwd / m).is_dir() and m not in found]
        elif pattern not in found:
            found.append(pattern)  # a folder named outright: merge says so if it is not there
    if not found:
        raise UsageError(
            f"merge-dirs ({' '.join(patterns) or 'empty'}) names no folder",
            hint="download the shard artifacts first (actions/download-artifact with a pattern), e.g. merge-dirs: shards/*",
        )
    return found


def merge_argv(env: Mapping[str, str], cli: str, cwd: Path) -> list[str]:
    """The ``kbench-ci merge`` command line for ``mode: merge``."""
    argv = [cli, "merge", *merge_dirs(env, cwd), "--output-dir", str(_runner_file(env, "KBENCH_REPORT_DIR")), "--no-fail"]
    fail = _flag(env, "KBENCH_FAIL_ON_REGRESSION", True)
    argv += ["--job-note", (
        "The job fails: the action's Gate step fails it (fail-on-regression: true)." if fail
        else "The job does not fail: fail-on-regression is false, so this report is the only signal."
    )]
    return argv + _extra_args(env)


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
    env: Mapping[str, str], cwd: Path, *, runner: Callable[[list[str], Path], int] | None = None,
    venv: Path | None = None,
) -> StepResult:
    """Run the comparison; record its exit code as the ``exit-code`` output and never fail,
    unless the job is being cancelled (then the step ends with 128 + the signal's number) or
    the pull request's code changed the action's venv (:mod:`.runner_guard`: the step fails,
    with ``tampered=true`` for the later steps, which then refuse to run)."""
    lines: list[str] = []
    stopped_by: int | None = None
    command = "compare"
    tampering: list[str] = []
    # The pull request's kernels run while this step waits: its environment (the runner's step
    # files, tokens) must not be readable through /proc by them (docs/action.md, threat model).
    make_non_dumpable()
    try:
        command = action_mode(env)
        cli = _kbench_cli(env)
        argv = merge_argv(env, cli, cwd) if command == "merge" else compare_argv(env, cli)
        _runner_file(env, "KBENCH_REPORT_DIR").mkdir(parents=True, exist_ok=True)
        # No bytecode of this step's own into the venv from here on either: a module it imported
        # late would leave a .pyc that reads as tampering.
        sys.dont_write_bytecode = True
        snapshot = runner_guard.take(_file_commands(env), Path(sys.prefix) if venv is None else venv)
        try:
            code = (runner or _run_inheriting)(argv, cwd)
        finally:
            tampering = runner_guard.restore(snapshot)
    except KbenchError as exc:
        lines.append(_command("error", f"kbench-ci {command} did not start: {exc.one_line()}"))
        code = int(exc.exit_code)
    except _Stopped as stop:
        stopped_by, code = stop.signum, stop.child_code
        lines.append(_command("warning", f"kbench-ci {command} was stopped by {stop.describe()}"))
    tampered = runner_guard.venv_changed(tampering)
    for phrase in tampering:
        lines.append(_command("error", f"while kbench-ci {command} ran pull-request code, {phrase}"))
    if tampered:
        lines.append(_command("error", (
            "the later steps will not run this venv's Python: re-run the job on a fresh runner, and read the pull "
            "request's code before trusting this runner again")))
    write_outputs(_runner_file(env, "GITHUB_OUTPUT"), {"exit-code": str(code), "tampered": "true" if tampered else "false"})
    if tampered:
        return StepResult(1, tuple(lines))
    return StepResult(128 + stopped_by if stopped_by is not None else 0, tuple(lines))


#: the step's file-command files that :mod:`.runner_guard` puts back after compare
_FILE_COMMANDS = ("GITHUB_ENV", "GITHUB_OUTPUT", "GITHUB_PATH", "GITHUB_STATE", "GITHUB_STEP_SUMMARY")


def _file_commands(env: Mapping[str, str]) -> list[Path]:
    return [Path(env[name]) for name in _FILE_COMMANDS if env.get(name)]


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
        # compare needs none of the runner's step files or tokens: it gets none, so neither do
        # the processes it starts, and its own /proc/PID/environ holds none.
        # Its own parent watch on (as in any step): should this step be SIGKILLed, compare stops.
        # No bytecode of its own into the action's venv either: the step checks the venv is
        # unchanged after compare (runner_guard), and a new .pyc would read as tampering.
        environment = {**user_code_environment(), EXIT_WITH_PARENT_ENV: "1", "PYTHONDONTWRITEBYTECODE": "1"}
        process = subprocess.Popen(argv, cwd=cwd, env=environment)
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
    # The runner's worker SIGKILLs a cancelled step: this step is re-parented, but compare's
    # parent (this step) lives on, so compare would run to its end. Stop it as on SIGTERM.
    try:
        with on_parent_death(lambda: forward(signal.SIGTERM, None)):
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
    #: the gate step's exit code when it is not the compare step's: a results.json that is not as
    #: kbench-ci wrote it (a link, a FIFO, nested too deep, NaN, a newer schema_version) is the
    #: user's file, exit 2, whatever the compare step returned
    exit_code: int | None = None
    #: results.json's recorded ``gate.passed`` disagrees with its cases: something rewrote it after
    #: compare (a process the pull request left running); the job fails whatever fail-on-regression says
    tampered: bool = False


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
    command = "merge" if env.get("KBENCH_MODE", "").strip().lower() == "merge" else "compare"
    incomplete = command == "merge" and code == int(ExitCode.SHARDS_INCOMPLETE)
    if code not in (0, 1) and not incomplete:
        meaning = _EXIT_MEANING.get(code, "it crashed or was killed")
        failed = _failed_on_user_files(env) if command == "compare" and code == int(ExitCode.USAGE) else None
        if failed is not None:
            # Every case was measured and written; those that failed, failed on the user's
            # ref.py, setup() or settings (compare's own line in the log names the file): the
            # verdict is an error, as for any usage problem, and the report says which cases.
            return Evaluation(
                "error", failed, code,
                f"kbench-ci {command} exited {code}: a case failed because of its ref.py, setup() or settings, "
                f"not its kernel (the compare step's log names the file and the fix): {failed.summary}",
            )
        return Evaluation("error", None, code, f"kbench-ci {command} exited {code}: {meaning}")
    results = _runner_file(env, "KBENCH_REPORT_DIR") / RESULTS_FILE
    try:
        recorded = load_gate(results, reader="the kbench-ci action")
        gate = judged_gate(results)
    except ResultsFileError as exc:
        return Evaluation("error", None, code, f"kbench-ci {command} exited {code}, but {exc.one_line()}",
                          exit_code=int(exc.exit_code))
    except UsageError as exc:
        return Evaluation("error", None, code, f"kbench-ci {command} exited {code}, but {exc.one_line()}")
    if incomplete:
        # Not a verdict on the change: a shard is missing, twice, or of another commit. The
        # report names it; the job fails whatever fail-on-regression says.
        return Evaluation("error", gate, code, recorded.summary or "the shards do not add up to one run")
    if recorded.passed != gate.passed:
        said, judged = ("passed", "fail it") if recorded.passed else ("failed", "pass it")
        return Evaluation(
            "failed", gate, code,
            f"results.json says the gate {said}, but its cases {judged} ({gate.summary}): it was changed after "
            f"kbench-ci {command} wrote it, by pull-request code left running or another process of the runner's "
            "user; the job fails",
            tampered=True,
        )
    if code == 1 and gate.passed:
        return Evaluation("error", gate, code, f"kbench-ci {command} exited 1 although results.json says the gate passed")
    verdict: Verdict = "passed" if gate.passed else "failed"
    return Evaluation(verdict, gate, code, gate.summary or f"gate {verdict}")


def judged_gate(results: Path) -> Gate:
    """The gate of ``results`` judged from its cases (:func:`kbench_ci.results.decide.gate_of_results`,
    what ``merge`` decides by), never from its recorded ``gate`` object, which a process of the
    runner's user can rewrite after compare. ResultsFileError for a file not as kbench-ci writes one,
    FileNotFoundError when there is none."""
    # Imported here: this module runs on the standard library alone in the fork recipe's comment
    # workflow; the summary and gate steps run in the action's venv, with numpy.
    from kbench_ci.results.decide import gate_of_results  # noqa: PLC0415

    data = load_results(results, accept=(COMPARE_SCHEMA,), reader="the kbench-ci action").data
    judged = gate_of_results(data, str(results))
    return Gate(passed=judged.passed, summary=judged.summary, counts=judged.counts, accepted=len(judged.accepted))


def _failed_on_user_files(env: Mapping[str, str]) -> Gate | None:
    """The failed gate of a compare that exited 2 because its failing cases failed on the user's
    files (it writes results.json first); None when there is none (a usage error stopped compare
    before it measured anything, or the file is not one to trust)."""
    try:
        gate = judged_gate(_runner_file(env, "KBENCH_REPORT_DIR") / RESULTS_FILE)
    except (FileNotFoundError, UsageError):
        return None
    return None if gate.passed else gate


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
    if evaluation.verdict in ("error", "skipped") or evaluation.tampered:
        parts.append(f"### kbench-ci: {evaluation.message}\n")
    if os.path.lexists(report) and not has_report:
        lines.append(_command("warning", f"kbench-ci: {report} is not a plain file (a link?); it is not shown"))
    if has_report:
        # as in the comment (build_body): a pull request's control characters shown as escapes
        text = show_controls(read_report_file(report))
        note = (
            "_The job summary was shortened to fit GitHub's 1 MiB limit; the full report is "
            f"`benchmark.md` in the `{artifact}` artifact._"
        )
        folded, _ = fit_body(
            text, STEP_SUMMARY_LIMIT - _bytes("\n".join(parts)) - 1, note=note, measure=_bytes
        )
        parts.append(folded)
    if parts:
        _append_summary(_runner_file(env, "GITHUB_STEP_SUMMARY"), show_controls("\n".join(parts)))

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
    if evaluation.gate is not None and _plain_file(results):
        lines += _annotations(results, env)
    kind = {"passed": "notice", "skipped": "notice", "failed": "warning", "error": "error"}[evaluation.verdict]
    if evaluation.tampered:
        kind = "error"
    return StepResult(0, (*lines, _command(kind, f"kbench-ci: {evaluation.message}")))


def _annotations(results: Path, env: Mapping[str, str]) -> list[str]:
    """One annotation per case that fails the gate (or got faster), on its kernel's file."""
    # Imported here: this module runs on the standard library alone in the fork recipe's
    # comment workflow, and the annotations read results with the report's code (numpy).
    from kbench_ci.github.annotations import case_annotations, kernel_files  # noqa: PLC0415

    try:
        data = load_results(results, accept=(COMPARE_SCHEMA,), reader="the kbench-ci action").data
    except (FileNotFoundError, KbenchError):
        return []  # evaluate() has said what is wrong with it
    head = data.get("head") if isinstance(data.get("head"), dict) else {}
    workspace = Path(env.get("GITHUB_WORKSPACE") or Path.cwd())
    return case_annotations(data, kernel_files(workspace, head.get("config") if head else None))


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
        pages_url=_pages_url(env),
    )
    return _comment_result(env, outcome)


def _pages_url(env: Mapping[str, str]) -> str | None:
    """The ``pages-url`` input (where GitHub Pages serves the history site), checked."""
    value = env.get("KBENCH_PAGES_URL", "").strip()
    return validate_pages_url(value) if value else None


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


# -- history ------------------------------------------------------------------------------------

DEFAULT_HISTORY_BRANCH = "kbench-history"
HISTORY_REMOTE = "origin"
#: how often publishing the site is retried on a branch another job moved meanwhile
PUBLISH_ATTEMPTS = 8
_CHART = re.compile(r"""<img src='([A-Za-z0-9._-]+\.png)'""")


def _history_branch(env: Mapping[str, str]) -> str:
    return env.get("KBENCH_HISTORY_BRANCH", "").strip() or DEFAULT_HISTORY_BRANCH


def _site_dir(env: Mapping[str, str]) -> Path:
    return _runner_file(env, "KBENCH_REPORT_DIR").parent / "history-site"


def _threshold_fraction(env: Mapping[str, str]) -> str | None:
    """The threshold input ("2%", "0.02") as the fraction ``history show --threshold`` takes;
    None when it is not set (``history show`` then uses the thresholds the results recorded)."""
    text = env.get("KBENCH_THRESHOLD", "").strip()
    if not text:
        return None
    try:
        value = float(text[:-1]) / 100 if text.endswith("%") else float(text)
    except ValueError:
        raise UsageError(f"threshold '{text}' is not a number or a percentage") from None
    return f"{value:g}"


def not_a_default_branch_push(env: Mapping[str, str]) -> str | None:
    """Why the history is not recorded in this job, or None on a push to the default branch
    (only the main line's results make its history; a pull request's never do)."""
    event = env.get("GITHUB_EVENT_NAME", "")
    if event != "push":
        return f"the history is recorded on push to the default branch only; this is a '{event or 'unknown'}' event"
    payload = load_event_payload(env)
    repository = payload.get("repository")
    default = repository.get("default_branch") if isinstance(repository, dict) else None
    ref = env.get("GITHUB_REF", "").strip() or str(payload.get("ref") or "")
    if not default:
        return "the push event's payload names no default branch"
    if ref != f"refs/heads/{default}":
        return f"the history is recorded on pushes to {default} only; this push is to {ref or 'an unknown ref'}"
    return None


def history_argvs(env: Mapping[str, str], cli: str) -> list[list[str]]:
    """The commands of the history step: ``history record`` (record-history, and publish-history,
    which needs the new entry), then ``history show`` (publish-history)."""
    record, publish = _flag(env, "KBENCH_RECORD_HISTORY", False), _flag(env, "KBENCH_PUBLISH_HISTORY", False)
    branch = _history_branch(env)
    argvs = []
    if record or publish:
        head = env.get("KBENCH_HEAD", "").strip()
        if not head:
            raise UsageError("KBENCH_HEAD is empty: the resolve step found no commit to record")
        record_argv = [cli, "history", "record", "--report", str(_runner_file(env, "KBENCH_REPORT_DIR")),
                       "--commit", head, "--branch", branch, "--push", HISTORY_REMOTE]
        # The branch `history record` checks the commit is on: the payload's, as actions/checkout
        # sets no origin/HEAD to find it by.
        repository = load_event_payload(env).get("repository")
        default = repository.get("default_branch") if isinstance(repository, dict) else None
        if isinstance(default, str) and default:
            record_argv += ["--main-branch", default]
        argvs.append(record_argv)
    if publish:
        show = [cli, "history", "show", "--output-dir", str(_site_dir(env)), "--branch", branch]
        if (threshold := _threshold_fraction(env)) is not None:
            show += ["--threshold", threshold]
        argvs.append(show)
    return argvs


def chart_files(page: str, folder: Path) -> dict[str, bytes]:
    """The charts index.html shows (PNG files beside it, by name), as bytes: committed beside the
    page, as Pages serves them. A name that is not a plain file in ``folder`` is left out."""
    found = {}
    for match in _CHART.finditer(page):
        chart = folder / match.group(1)
        if _plain_file(chart):
            found[match.group(1)] = chart.read_bytes()
    return found


def publish_site(folder: Path, branch: str, cwd: Path, *, remote: str = HISTORY_REMOTE) -> str:
    """Commit ``history show``'s index.html, its PNG charts and history.md to the root of the
    history branch, beside its entries, and push it; the new commit. A push rejected because
    another job moved the branch is retried on the new tip."""
    page = read_report_file(folder / "index.html")
    files: dict[str, str | bytes] = {
        "index.html": page,
        "history.md": read_report_file(folder / "history.md"),
        **chart_files(page, folder),
    }
    for _ in range(PUBLISH_ATTEMPTS):
        local = branch_tip(branch, cwd)
        parent = fetch_branch(branch, remote, cwd) or local
        try:
            commit = commit_files_to_branch(branch, files, "kbench-ci history: the site", cwd, parent=parent, expected=local)
        except RefMoved:
            continue
        if push_branch(branch, remote, cwd):
            return commit
    raise EnvironmentProblem(f"could not publish the history site on {branch}: it moved {PUBLISH_ATTEMPTS} times")


def history(
    env: Mapping[str, str], cwd: Path, *, runner: Callable[[list[str], Path], int] | None = None
) -> StepResult:
    """Record (and publish) the history on a push to the default branch. Best effort: a failure
    is a warning, never the job's verdict."""
    record, publish = _flag(env, "KBENCH_RECORD_HISTORY", False), _flag(env, "KBENCH_PUBLISH_HISTORY", False)
    if not (record or publish):
        return StepResult(0, ())
    why_not = not_a_default_branch_push(env)
    if why_not is not None:
        return StepResult(0, (_command("notice", f"kbench-ci: history not recorded: {why_not}"),))
    if env.get("KBENCH_COMPARE_EXIT_CODE", "").strip() not in ("0", "1"):
        return StepResult(0, (_command("warning", "kbench-ci: history not recorded: the compare step left no results"),))
    lines: list[str] = []
    try:
        cli = _kbench_cli(env)
        for argv in history_argvs(env, cli):
            code = (runner or _run_inheriting)(argv, cwd)
            if code != 0:
                return StepResult(0, (*lines, _command(
                    "warning", f"kbench-ci: `kbench-ci {' '.join(argv[1:3])}` exited {code}; the history was not "
                    "updated (the gate's verdict stands)")))
            lines.append(f"kbench-ci: `kbench-ci {' '.join(argv[1:3])}` done")
        if publish:
            tip = publish_site(_site_dir(env), _history_branch(env), cwd)
            lines.append(f"kbench-ci: published the history site on {_history_branch(env)} at {tip[:12]}")
    except KbenchError as exc:
        lines.append(_command("warning", f"kbench-ci: the history was not updated: {exc.one_line()}"))
    except _Stopped as stop:
        return StepResult(128 + stop.signum, (*lines, _command("warning", f"kbench-ci history was stopped by {stop.describe()}")))
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
        if fail_on_regression or evaluation.tampered:
            return StepResult(int(ExitCode.GATE_FAILED), (_command("error", message),))
        return StepResult(0, (_command("warning", message + " (fail-on-regression is false)"),))
    code = evaluation.exit_code if evaluation.exit_code is not None else evaluation.compare_exit
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
    "history": lambda env, cwd: history(env, cwd),
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
        # a line may quote a pull request's words: no ESC sequence or bidi override of theirs plays in the log
        sys.stdout.write(show_controls(line) + "\n")
    sys.stdout.flush()
    return result.exit_code


if __name__ == "__main__":
    raise SystemExit(main())
