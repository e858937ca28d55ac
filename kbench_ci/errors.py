"""Typed errors raised by library code.

Library modules raise these; only the command line's error boundary
(:func:`kbench_ci.cli.console.error_boundary`) turns them into a one-line message and an exit
code. Each error names the thing that is wrong and, where there is one, the fix (``hint``).
"""

from __future__ import annotations

from enum import IntEnum


class ExitCode(IntEnum):
    """Exit codes of every kbench-ci command (documented in the README)."""

    OK = 0
    #: a kernel is incorrect, slower, crashed, hung or failed to build (the gate's own verdict)
    GATE_FAILED = 1
    #: bad usage: a flag, a config file, a missing or malformed user file, a bad git ref
    USAGE = 2
    #: the environment cannot do what was asked: no GPU, no nvcc, a missing optional extra,
    #: an unreachable API
    ENVIRONMENT = 3
    #: ``merge``: the shards do not add up to one run (a shard missing or twice, a case in two
    #: shards, shards of different counts or commits); the merged report names the shard
    SHARDS_INCOMPLETE = 4
    #: the person pressed Ctrl-C (128 + SIGINT, as a shell reports it)
    INTERRUPTED = 130


class KbenchError(Exception):
    """Base of every error kbench-ci raises on purpose."""

    exit_code: ExitCode = ExitCode.USAGE

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def one_line(self) -> str:
        return f"{self.message} ({self.hint})" if self.hint else self.message


class UsageError(KbenchError):
    """A bad flag or argument."""


class ConfigError(UsageError):
    """kbench.toml / [tool.kbench] is malformed or names something that does not exist."""


class ConfigProblems(ConfigError):
    """Several problems of one config file, reported at once: one line each, so a user fixes
    them all in one go instead of one per run."""

    def __init__(self, label: str, problems: tuple[ConfigError, ...]) -> None:
        super().__init__(
            f"{label}: {len(problems)} problems:" + "".join(f"\n  - {problem.one_line()}" for problem in problems)
        )
        self.problems = problems


class UserFileError(UsageError):
    """A solution or ref.py file is missing, unreadable or breaks the contract."""


class SignatureError(UserFileError):
    """A CUDA ``solve`` signature cannot be bound (unsupported type, parameter with no value)."""


class MergeInputError(UsageError):
    """``merge`` was given something that is not a shard's result folder (no results.json, a
    results.json of another command, or one that does not parse)."""


class ResultsFileError(UsageError):
    """A results.json that cannot be trusted as kbench-ci wrote it: not a regular file (a link,
    a FIFO), too large or too deeply nested, not JSON, NaN or Infinity, a field of the wrong
    type, a case id twice, another schema or a newer schema_version. One line names the file
    and the problem; exit 2."""


class GitError(UsageError):
    """A git ref cannot be resolved, or the directory is not a git repository."""


class EnvironmentProblem(KbenchError):
    """The machine cannot do what was asked (no GPU, no nvcc, an optional extra missing)."""

    exit_code = ExitCode.ENVIRONMENT


class MissingExtraError(EnvironmentProblem):
    """An optional package is needed for this implementation kind or baseline."""

    def __init__(self, package: str, extra: str, needed_for: str) -> None:
        super().__init__(
            f"{needed_for} needs the Python package '{package}', which is not installed",
            hint=f"pip install 'kbench-ci[{extra}]'",
        )
        self.package = package
        self.extra = extra


class BuildError(KbenchError):
    """Compiling a kernel failed; ``message`` carries the compiler's output."""

    exit_code = ExitCode.GATE_FAILED


class GitHubError(EnvironmentProblem):
    """The GitHub API could not be reached or refused a request."""

    def __init__(self, message: str, *, status: int | None = None, hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.status = status


class GitHubRateLimited(GitHubError):
    """GitHub's primary or secondary rate limit, still in force after the time kbench-ci waits."""

    def __init__(self, message: str, *, status: int, retry_after_s: float | None, hint: str | None = None) -> None:
        super().__init__(message, status=status, hint=hint)
        self.retry_after_s = retry_after_s


class GitHubUnreachable(GitHubError):
    """No HTTP answer at all (refused, reset, timed out): a request may or may not have arrived."""
