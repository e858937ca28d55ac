"""The one home of git: resolving refs, merge bases, throw-away worktrees, and CI fetches.

Every git command kbench-ci runs starts here, through one of two choke points:

* :meth:`GitRepo._git` (GitPython) for ``compare``: every GitPython exception becomes a
  :class:`GitError` with a one-line message there or in :meth:`GitRepo.__init__`. Nothing it
  does changes the user's working tree, index, HEAD or branches: the base side is checked out
  into a detached worktree in a temporary directory, and that worktree is removed on the way out.
* :func:`_run_git` (the git CLI, prompts off, with a timeout) for the GitHub Action's
  ``resolve`` step: :func:`rev_parse` and :func:`ensure_commit`, which fetches a commit that a
  shallow CI clone lacks from ``origin`` (objects and a remote-tracking ref, nothing else).
"""

from __future__ import annotations

import difflib
import json
import logging
import os
import re
import subprocess
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Literal, TypeVar, get_args

from kbench_ci.errors import EnvironmentProblem, GitError, KbenchError, UsageError
from kbench_ci.scratch import remove_tree

if TYPE_CHECKING:
    # For annotations only; at run time GitPython is imported by _gitpython() (see there why).
    import git as gitpython

__all__ = [
    "BaseMode", "GitRepo", "ResolvedRevisions", "deepen_to_merge_base", "ensure_commit", "fetch_hint", "merge_base",
    "rev_parse",
]

_log = logging.getLogger(__name__)

BaseMode = Literal["merge-base", "tip"]
_BASE_MODES: tuple[str, ...] = get_args(BaseMode)

# In GitHub Actions the default checkout has depth 1: the base branch and the merge base are
# simply not there. This is the fix nearly every time a ref cannot be resolved in CI.
_CI_HINT = "in GitHub Actions, check out with actions/checkout and fetch-depth: 0"

_T = TypeVar("_T")

#: temporary folders of compare's worktrees, and the lock reason that names their owner
_WORKTREE_PREFIX = "kbench-worktree-"
#: a revision relative to another (HEAD~10, main^2, @{1}): fetching it by name makes no sense
_RELATIVE = re.compile(r"[~^@]")
_LOCK_REASON = "kbench-ci pid "


def _process_exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process: alive
        return True
    return True


@dataclass(frozen=True, slots=True)
class ResolvedRevisions:
    """The two sides of a comparison, as full shas.

    ``head_sha`` is None when the head side is the working tree as it is (uncommitted changes
    included); the caller then uses :attr:`GitRepo.root` directly. ``merge_base_of`` is the tip
    sha of ``base_ref`` from which the merge base was computed (None in ``tip`` mode, where
    ``base_sha`` is that tip itself).
    """

    base_ref: str
    base_sha: str
    head_ref: str | None
    head_sha: str | None
    base_mode: BaseMode
    merge_base_of: str | None


class _GitCommandFailed(GitError):
    """A git command exited non-zero; callers that expect this re-raise with a better message."""

    def __init__(self, message: str, *, status: int | None, stderr: str, hint: str | None) -> None:
        super().__init__(message, hint=hint)
        self.status = status
        self.stderr = stderr


def _gitpython() -> tuple[ModuleType, type[Exception]]:
    """GitPython, and gitdb's BadName (which shares no base class with GitPython's errors).

    Imported here, not at module level: GitPython raises ImportError at import time when no git
    executable is found, and that must not break commands that never touch git.
    """
    try:
        # A deliberately deferred third-party import (see the docstring), not a hidden cycle.
        import git  # noqa: PLC0415

        # git.exc re-exports gitdb's BadName; gitdb itself ships no type information.
        bad_name: type[Exception] = git.exc.BadName
    except ModuleNotFoundError as exc:
        raise EnvironmentProblem(
            f"the Python package '{exc.name}' is not installed", hint="pip install gitpython"
        ) from None
    except ImportError as exc:
        raise EnvironmentProblem(
            f"git is not usable: {_first_line(str(exc))}", hint="install git and put it on PATH"
        ) from None
    return git, bad_name


def _first_line(text: str | bytes | None) -> str:
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    for line in (text or "").splitlines():
        line = line.strip()
        if line.startswith("stderr:"):
            line = line[len("stderr:") :].strip().strip("'").strip()
        if line:
            return line
    return ""


class GitRepo:
    """A git repository with a working tree, found from any path inside it."""

    __slots__ = ("root", "_repo", "_git_exe", "_exc", "_bad_name")

    root: Path
    _repo: gitpython.Repo
    _git_exe: str
    _exc: ModuleType
    _bad_name: type[Exception]

    def __init__(self, path: Path) -> None:
        module, self._bad_name = _gitpython()
        self._exc = module.exc
        self._git_exe = module.Git.GIT_PYTHON_GIT_EXECUTABLE or "git"
        try:
            self._repo = module.Repo(Path(path), search_parent_directories=True)
        except (self._exc.InvalidGitRepositoryError, self._exc.NoSuchPathError):
            raise GitError(
                f"{path} is not inside a git repository",
                hint="run kbench-ci from inside a clone of the repository (cd into it first)",
            ) from None
        except (self._exc.GitError, self._bad_name, ValueError, OSError) as exc:
            detail = _first_line(str(exc)) or type(exc).__name__
            raise GitError(f"{path}: cannot open the git repository: {detail}") from None
        if self._repo.bare or self._repo.working_tree_dir is None:
            raise GitError(f"{path} is a bare git repository; kbench-ci needs a working tree")
        self.root = Path(self._repo.working_tree_dir)

    def __repr__(self) -> str:
        return f"GitRepo({str(self.root)!r})"

    # -- the choke point --------------------------------------------------------------------

    def _git(self, *args: str) -> str:
        """Run one git command in the repository root; stdout without the trailing newline."""
        return self._call(lambda: self._repo.git.execute([self._git_exe, *args]), args)

    def _call(self, fn: Callable[[], _T], args: tuple[str, ...]) -> _T:
        command = "git " + " ".join(args)
        try:
            return fn()
        except self._exc.GitCommandError as exc:
            stderr = _first_line(exc.stderr)
            hint = None
            if "dubious ownership" in stderr:
                # Common in containers: the checkout belongs to another uid than the job.
                hint = f"git config --global --add safe.directory {self.root}"
            raise _GitCommandFailed(
                f"{command} failed: {stderr or f'exit status {exc.status}'}",
                status=exc.status if isinstance(exc.status, int) else None,
                stderr=stderr,
                hint=hint,
            ) from None
        except self._exc.GitCommandNotFound:
            raise EnvironmentProblem(
                "git executable not found", hint="install git and put it on PATH"
            ) from None
        except (self._exc.GitError, self._bad_name, ValueError, OSError) as exc:
            detail = _first_line(str(exc)) or type(exc).__name__
            raise GitError(f"{command} failed: {detail}") from None

    # -- refs ---------------------------------------------------------------------------------

    def resolve(self, rev: str) -> str:
        """The full sha of the commit ``rev`` names (branch, tag, sha, ``HEAD~1``, ...)."""
        if not rev or not rev.strip() or rev.startswith("-"):
            # A leading dash would be read as an option by git.
            raise GitError(f"{rev!r} is not a git revision")
        try:
            return self._git("rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}")
        except _GitCommandFailed:
            close = self._closest_name(rev)
            # A name one typo away from a branch or tag here is most likely that typo (``mian``):
            # say so first; what a fetch would take follows, for a name that is elsewhere.
            fetch = self._fetch_hint(rev)
            hint = f'did you mean "{close}"? Otherwise: {fetch.removeprefix("check the spelling; ")}' if close else fetch
            raise GitError(f'cannot resolve "{rev}" to a commit in {self.root}', hint=hint) from None

    def _closest_name(self, rev: str) -> str | None:
        """The branch or tag (local, or a remote's) spelled most like ``rev``, its steps
        (``~2``) kept; None when none is close."""
        relative = _relative(rev)
        name, steps = (relative[0], rev[len(relative[0]):]) if relative is not None else (rev, "")
        try:
            listed = self._git("for-each-ref", "--format=%(refname:short)", "refs/heads", "refs/tags", "refs/remotes")
        except (_GitCommandFailed, KbenchError):
            return None
        names = [line for line in listed.splitlines() if line and not line.endswith("/HEAD")]
        close = difflib.get_close_matches(name, names, n=1, cutoff=0.6)
        return close[0] + steps if close and close[0] != name else None

    def _fetch_hint(self, rev: str) -> str:
        try:
            return fetch_hint(rev, self.root)
        except KbenchError:
            return _CI_HINT

    def resolve_revisions(
        self, base: str, head: str | None, base_mode: str = "merge-base"
    ) -> ResolvedRevisions:
        """Resolve both sides once, so every later step compares the same two commits.

        ``merge-base`` (the default) compares head with the point where it branched off
        ``base``, so commits that landed on ``base`` since are not blamed on the head; ``tip``
        uses ``base`` as it is. ``head=None`` is the working tree; its merge base is taken
        with ``HEAD``.
        """
        if base_mode not in _BASE_MODES:
            raise UsageError(
                f'unknown base mode "{base_mode}"; one of: {", ".join(_BASE_MODES)}'
            )
        base_tip = self.resolve(base)
        head_sha = self.resolve(head) if head is not None else None
        if base_mode == "tip":
            return ResolvedRevisions(base, base_tip, head, head_sha, "tip", None)

        head_point = head_sha if head_sha is not None else self.resolve("HEAD")
        head_label = head if head is not None else "HEAD"
        try:
            merge_base = self._git("merge-base", base_tip, head_point)
        except _GitCommandFailed as exc:
            if not (exc.status == 1 and not exc.stderr):
                raise
            # Exit 1 with nothing on stderr is git's way of saying "no common ancestor". In a
            # shallow clone that usually means the history was cut before it: fetch more.
            if not self._is_shallow():
                raise GitError(
                    f'"{base}" and "{head_label}" have no common ancestor',
                    hint="they share no history; compare against the tip with --base-mode tip",
                ) from None
            try:
                found = deepen_to_merge_base(base_tip, head_point, self.root)
            except GitError as fetch_failed:
                raise GitError(
                    f'"{base}" and "{head_label}" have no common ancestor in this shallow clone, and '
                    f"fetching more history failed: {fetch_failed.message}",
                    hint=f"fetch it yourself: git fetch --unshallow {_default_remote(self.root)}; {_CI_HINT}; "
                    "or compare against the tip with --base-mode tip",
                ) from None
            if found is None:
                raise GitError(
                    f'"{base}" and "{head_label}" have no common ancestor, even in the full history',
                    hint="compare against the tip with --base-mode tip",
                ) from None
            merge_base = found
        return ResolvedRevisions(base, merge_base, head, head_sha, "merge-base", base_tip)

    def _is_shallow(self) -> bool:
        try:
            return self._git("rev-parse", "--is-shallow-repository") == "true"
        except GitError:
            return False

    # -- worktrees ----------------------------------------------------------------------------

    @contextmanager
    def worktree(self, rev: str) -> Iterator[Path]:
        """Check ``rev`` out, detached, into a temporary directory; yield its path.

        The worktree is removed on exit, also on an exception or KeyboardInterrupt. Only git's
        own bookkeeping under ``.git/worktrees`` changes while it exists; the user's working
        tree, index, HEAD and branches are never touched.
        """
        sha = self.resolve(rev)
        self._sweep_stale_worktrees()
        parent = Path(tempfile.mkdtemp(prefix=_WORKTREE_PREFIX))
        # A fresh sub-directory: `git worktree add` refuses an existing non-empty path, and the
        # name (shown by `git worktree list` while it lives) says whose it is.
        path = parent / f"kbench-{sha[:12]}"
        added = False
        try:
            # Hooks are switched off: a user's post-checkout hook has no business running (and
            # perhaps writing into the user's tree) for a throw-away benchmark checkout.
            self._git(
                "-c", f"core.hooksPath={os.devnull}",
                "worktree", "add", "--detach", "--quiet", str(path), sha,
            )  # fmt: skip
            added = True
            # Locked with our pid as the reason: should this process be SIGKILLed before the
            # `finally` below runs, the next compare sees a kbench-ci worktree whose owner is gone
            # and removes it (_sweep_stale_worktrees); `git worktree prune` leaves locked ones be.
            self._git("worktree", "lock", "--reason", f"{_LOCK_REASON}{os.getpid()}", str(path))
            yield path
        finally:
            # `path.exists()` covers an add interrupted half-way (Ctrl-C while checking out).
            if added or path.exists():
                self._discard_worktree(path)
            remove_tree(parent)

    def _sweep_stale_worktrees(self) -> None:
        """Remove worktrees left by a kbench-ci process that no longer exists (it was killed)."""
        try:
            listing = self._git("worktree", "list", "--porcelain")
        except GitError:
            return
        path: Path | None = None
        for line in listing.splitlines():
            if line.startswith("worktree "):
                path = Path(line[len("worktree "):])
            elif line.startswith(f"locked {_LOCK_REASON}") and path is not None:
                pid_text = line[len(f"locked {_LOCK_REASON}"):].strip()
                if pid_text.isdigit() and not _process_exists(int(pid_text)):
                    _log.warning("removing the worktree %s left by kbench-ci process %s", path, pid_text)
                    self._discard_worktree(path)
                    if path.parent.name.startswith(_WORKTREE_PREFIX):
                        remove_tree(path.parent)

    def _discard_worktree(self, path: Path) -> None:
        # Best effort, never raising: this runs while another exception may be propagating, and
        # a stale temporary directory must not hide the real failure.
        try:
            # Twice --force: also removes a worktree that is locked or has changes in it.
            self._git("worktree", "remove", "--force", "--force", str(path))
            return
        except GitError:
            pass
        remove_tree(path)
        try:
            # Only when `remove` failed: prune drops the bookkeeping of worktrees whose
            # directories are gone. It would also drop such stale entries of the user's own,
            # which is why it is not run unconditionally.
            self._git("worktree", "prune")
        except GitError as exc:
            _log.warning("could not prune git worktree %s: %s", path, exc.one_line())
        if path.exists():
            _log.warning("could not remove temporary git worktree %s", path)

    # -- what differs between two sides --------------------------------------------------------

    def changed_paths(self, base: str, head: str | None) -> frozenset[str]:
        """Every path whose content differs between commit ``base`` and ``head``, relative to the
        repository root with ``/`` separators.

        ``head=None`` is the working tree as it is: staged and unstaged changes, and untracked
        files that are not ignored (a new header not yet added is a change too). A rename is
        its old path and its new path (``--no-renames``): whatever depended on either changed.
        """
        base_sha = self.resolve(base)
        head_side = (self.resolve(head),) if head is not None else ()
        # -z: names exactly as they are (no quoting of unusual characters); --no-optional-locks:
        # comparing against the working tree must not rewrite the user's index.
        listing = self._git(
            "--no-optional-locks", "diff", "--name-only", "-z", "--no-renames", "--no-ext-diff", base_sha, *head_side, "--"
        )
        paths = {name for name in listing.split("\0") if name}
        if head is None:
            untracked = self._git("--no-optional-locks", "ls-files", "-z", "--others", "--exclude-standard")
            paths.update(name for name in untracked.split("\0") if name)
        return frozenset(paths)

    # -- working tree state -------------------------------------------------------------------

    def is_dirty(self, own_outputs: Sequence[Path] = ()) -> bool:
        """Whether the working tree differs from HEAD, untracked (not ignored) files included.

        kbench-ci's own output never counts as a change: the folders in ``own_outputs`` (this
        run's ``--output-dir``), any untracked folder that holds only a kbench-ci report (an
        earlier run's, into another folder) and any untracked ``--json-summary`` file, so a
        first ``compare`` without a .gitignore entry does not make the next one read "dirty".
        """
        root = self.root.resolve()
        excluded = []
        for path in own_outputs:
            try:
                excluded.append(Path(path).resolve().relative_to(root))
            except ValueError:
                continue  # outside the repository: git does not see it
        return self._changed(excluded, root, "normal", ())

    def _changed(self, excluded: Sequence[Path], root: Path, untracked: str, pathspec: tuple[str, ...]) -> bool:
        # --no-optional-locks: plain `git status` may rewrite the index to refresh its stat
        # cache; this keeps even that from happening to the user's index.
        out = self._git(
            "--no-optional-locks", "status", "--porcelain", "-z", f"--untracked-files={untracked}", "--", *pathspec
        )
        entries = out.split("\0")
        index = 0
        while index < len(entries):
            entry = entries[index]
            index += 1
            if not entry:
                continue
            status, name = entry[:2], entry[3:]
            if status[0] in "RC":
                index += 1  # a rename or copy: the next field is the old path
            relative = Path(name.rstrip("/"))
            if any(relative == folder or folder in relative.parents for folder in excluded):
                continue
            if status == "??" and not name.endswith("/") and _a_kbench_summary(root / relative):
                continue
            if status == "??" and name.endswith("/"):
                if _only_a_kbench_report(root / relative):
                    continue
                if any(relative in folder.parents for folder in excluded):
                    # git shows only the topmost untracked folder: look inside it, file by file.
                    if not self._changed(excluded, root, "all", (f":(literal){relative.as_posix()}",)):
                        continue
            return True
        return False

    def head_description(self, own_outputs: Sequence[Path] = ()) -> str:
        """``abc1234`` for a clean checkout, ``working tree (dirty) at abc1234`` otherwise."""
        try:
            short = self._git("rev-parse", "--short", "--verify", "--quiet", "HEAD^{commit}")
        except _GitCommandFailed:
            raise GitError(
                f"{self.root} has no commits yet", hint="commit the kernels before comparing"
            ) from None
        return f"working tree (dirty) at {short}" if self.is_dirty(own_outputs) else short


#: what a kbench-ci output folder holds (results first; the pair of a run, a --json-summary)
_REPORT_FILES = frozenset({"results.json", "benchmark.md", "summary.json", "pr-number.txt"})


def _a_kbench_summary(path: Path) -> bool:
    """An untracked file that is a ``--json-summary`` of kbench-ci (its schema is its first key)."""
    try:
        if path.is_symlink() or not path.is_file() or path.stat().st_size > 1 << 20:
            return False
        data = json.loads(path.read_bytes())
    except (OSError, ValueError):
        return False
    return isinstance(data, dict) and next(iter(data), None) == "schema" and data["schema"] == "kbench-ci/summary"


def _only_a_kbench_report(folder: Path) -> bool:
    """An untracked folder whose files are all a kbench-ci report, with a results.json that says so."""
    try:
        names = {entry.name for entry in folder.iterdir()}
        if "results.json" not in names or not names <= _REPORT_FILES:
            return False
        with (folder / "results.json").open("rb") as handle:
            start = handle.read(200)
    except OSError:
        return False
    return b'"schema": "kbench-ci/' in start


# -- a CI clone, through the git CLI ------------------------------------------------------------
#
# The GitHub Action's resolve step works in the clone actions/checkout made, which is shallow by
# default, and fetches the commits it lacks. It runs the git CLI directly (not GitPython), with
# prompts off and a timeout, so a fetch that would ask for credentials fails instead of hanging.

_CLI_TIMEOUT_S = 600
_FULL_SHA = re.compile(r"^[0-9a-fA-F]{40}([0-9a-fA-F]{24})?$")
_HEX = re.compile(r"^[0-9a-fA-F]{7,64}$")
#: depths tried, one after the other, before the whole history is fetched: most pull requests
#: branch off a few commits back, and a full fetch of a large repository is slow
_DEEPEN_STEPS = (50, 400, 3000)
# A ref we are willing to hand to git: no option-looking or otherwise surprising text.
_SAFE_REF = re.compile(r"^[A-Za-z0-9_.][A-Za-z0-9_./~^@{}+-]*$")


def _run_git(
    args: Sequence[str], cwd: Path, *, check: bool = True, timeout: float = _CLI_TIMEOUT_S
) -> subprocess.CompletedProcess[str]:
    """Run one git command in ``cwd`` (the only place the CI functions below start git)."""
    env = {**os.environ, "GIT_TERMINAL_PROMPT": "0"}
    try:
        done = subprocess.run(
            ["git", *args],
            cwd=cwd,
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    except FileNotFoundError:
        raise EnvironmentProblem("git is not installed", hint="install git on the runner") from None
    except subprocess.TimeoutExpired:
        raise GitError(f"'git {' '.join(args)}' took more than {timeout:g}s") from None
    if check and done.returncode != 0:
        raise GitError(_failure(args, done.stderr, done.returncode, cwd))
    return done


#: what git says when it could not talk to a remote at all (network, URL, credentials)
_UNREACHABLE = re.compile(
    r"Could not read from remote repository|unable to access|Could not resolve host|"
    r"does not appear to be a git repository|Connection (refused|timed out)|Authentication failed|"
    r"terminal prompts disabled|Repository not found|Connection closed",
    re.IGNORECASE,
)
#: the remote-talking commands whose first operand is the remote
_REMOTE_COMMANDS = frozenset({"fetch", "ls-remote", "push"})
#: an ls-remote for a hint: a hint must not wait as long as a fetch may
_HINT_TIMEOUT_S = 30.0


def _shown_url(url: str) -> str:
    """A remote's URL without a user or token (``https://x-access-token:...@host/...``)."""
    return re.sub(r"^([a-zA-Z][a-zA-Z0-9+.-]*://)[^/@]*@", r"\1", url.strip())


def _remote_url(remote: str, cwd: Path) -> str:
    done = _run_git(["remote", "get-url", "--", remote], cwd, check=False)
    return _shown_url(done.stdout) if done.returncode == 0 and done.stdout.strip() else remote


def _unreachable(remote: str, cwd: Path) -> str:
    return f"the remote '{remote}' at {_remote_url(remote, cwd)} could not be reached"


def _failure(args: Sequence[str], stderr: str, returncode: int, cwd: Path) -> str:
    """One line for a failed git command: a remote that could not be reached is named with its
    URL; otherwise git's own first ``fatal:``/``error:`` line (its last lines are often the tail
    of a paragraph: "and the repository exists.")."""
    if args and args[0] in _REMOTE_COMMANDS and _UNREACHABLE.search(stderr):
        operands = [arg for arg in args[1:] if not arg.startswith("-")]
        if operands:
            return _unreachable(operands[0], cwd)
    lines = [line.strip() for line in stderr.strip().splitlines() if line.strip()]
    first = next((line for line in lines if line.startswith(("fatal:", "error:"))), lines[-1] if lines else "")
    return f"'git {' '.join(args)}' failed: {first or returncode}"


def _preferred_remote(remotes: Sequence[str], cwd: Path) -> str:
    """``origin``; else the remote the checked-out branch tracks; else the first one."""
    if "origin" in remotes or not remotes:
        return "origin"
    branch = _run_git(["symbolic-ref", "--quiet", "--short", "HEAD"], cwd, check=False).stdout.strip()
    if branch:
        tracked = _run_git(["config", "--get", f"branch.{branch}.remote"], cwd, check=False).stdout.strip()
        if tracked in remotes:
            return tracked
    return remotes[0]


#: a relative revision: a name, then ~N, ^N and ^{type} steps (a reflog's @{...} is not fetchable)
_RELATIVE_STEP = re.compile(r"~(\d*)|\^(\d*)|\^\{[^}]*\}")


def _relative(rev: str) -> tuple[str, str, int] | None:
    """``main~2`` -> ("main", "~2", 3): the name, its steps, and the depth that holds the commit
    they lead to; None when ``rev`` has no steps or has some git cannot fetch (``@{1}``)."""
    cut = _RELATIVE.search(rev)
    if cut is None:
        return None
    name, steps = rev[: cut.start()], rev[cut.start() :]
    depth, at = 1, 0
    while at < len(steps):
        step = _RELATIVE_STEP.match(steps, at)
        if step is None:
            return None
        if step.group(1) is not None:
            depth += int(step.group(1) or 1)
        elif step.group(2) is not None:
            depth += 0 if step.group(2) == "0" else 1
        at = step.end()
    return (name if name not in ("", "@") else "HEAD"), steps, depth


def fetch_hint(rev: str, cwd: Path) -> str:
    """What to run so that ``rev``, which the clone at ``cwd`` cannot resolve, resolves: a
    ``git fetch`` that works as written in a depth-1, single-branch clone (what actions/checkout
    and ``clone --depth=1`` make), and the name to use after it.

    The remote is asked (``git ls-remote``) what the name is: a branch and a tag are fetched by
    different refspecs, and a short sha can be fetched only as the full sha of a ref's tip.
    """
    remotes = _run_git(["remote"], cwd, check=False).stdout.split()
    shallow = _run_git(["rev-parse", "--is-shallow-repository"], cwd, check=False).stdout.strip() == "true"
    count = _run_git(["rev-list", "--count", "HEAD"], cwd, check=False).stdout.strip()
    commits = int(count) if count.isdigit() else 0
    if commits == 0:
        return "this repository has no commits yet: commit the suite first with git add -A; git commit, then compare"
    relative = _relative(rev)
    if _RELATIVE.search(rev) and (relative is None or rev_parse(relative[0], cwd) is not None):
        # The name is here: its history is not (or this is a reflog entry, which no fetch brings).
        if shallow:
            remote = _preferred_remote(remotes, cwd)
            return (f"{rev} goes back further than this shallow clone's history; fetch more of it: "
                    f"git fetch --unshallow {remote}; {_CI_HINT}")
        return f"{rev} goes back further than the history here: {commits} commit{'s' if commits != 1 else ''} reach HEAD"
    if not remotes:
        return "check the spelling; this repository has no remote to fetch it from, and git branch -a lists what is here"
    name, steps, depth = relative if relative is not None else (rev, "", 1)

    remote = _preferred_remote(remotes, cwd)
    kind = "name"
    for prefix, named in (("refs/heads/", "branch"), ("refs/tags/", "tag")):
        if name.startswith(prefix):
            kind, name = named, name.removeprefix(prefix)
    for candidate in remotes:
        for prefix in (f"refs/remotes/{candidate}/", f"{candidate}/"):
            if kind == "name" and name.startswith(prefix) and len(name) > len(prefix):
                kind, name, remote = "branch", name.removeprefix(prefix), candidate

    try:
        listed = _run_git(["ls-remote", "--heads", "--tags", "--", remote], cwd, check=False,
                          timeout=_HINT_TIMEOUT_S)
    except GitError:  # it took too long
        listed = subprocess.CompletedProcess([], 1, "", "Connection timed out")
    if listed.returncode != 0:
        # Whether it is a branch or a tag, only the remote could say: the common case.
        guess = f"git fetch {remote} +refs/heads/{name}:refs/remotes/{remote}/{name}, then use {remote}/{name}{steps}"
        return (f"{_failure(['ls-remote', remote], listed.stderr, listed.returncode, cwd)}: check its URL with "
                f"git remote -v, the network and credentials, then fetch it if it is a branch: {guess}; {_CI_HINT}")
    refs: dict[str, str] = {}
    for line in listed.stdout.splitlines():
        sha, _, ref = line.partition("\t")
        refs[ref.strip()] = sha.strip()

    depth_flag = f"--depth={depth} " if steps and shallow else ""
    if kind in ("name", "branch") and f"refs/heads/{name}" in refs:
        fetch = f"git fetch {depth_flag}{remote} +refs/heads/{name}:refs/remotes/{remote}/{name}"
        use = f"{remote}/{name}{steps}"
        then = "" if rev == use else f", then use {use}"
    elif kind in ("name", "tag") and f"refs/tags/{name}" in refs:
        fetch = f"git fetch {depth_flag}{remote} +refs/tags/{name}:refs/tags/{name}"
        then = ""
    elif kind == "name" and _HEX.match(name):
        tips = sorted({sha for ref, sha in refs.items() if sha.lower().startswith(name.lower())})
        if _FULL_SHA.match(name) or len(tips) == 1:
            full = name if _FULL_SHA.match(name) else tips[0]
            fetch = f"git fetch {depth_flag}{remote} {full}"
            then = ""
        else:
            # A server resolves only full shas and ref names: fetch the history that may hold it.
            everything = f"'+refs/heads/*:refs/remotes/{remote}/*'"
            fetch = f"git fetch {'--unshallow ' if shallow else ''}{remote} {everything}"
            return (f"{name} is a short sha, which no remote can fetch by itself: pass the full sha, or fetch "
                    f"every branch's history: {fetch}; {_CI_HINT}")
    else:
        what = {"branch": "branch", "tag": "tag"}.get(kind, "branch or tag")
        return (f"check the spelling: the remote '{remote}' has no {what} named {name}, and "
                f"git ls-remote --heads --tags {remote} lists those it has")
    prefix = "this is a shallow clone; " if shallow else ""
    return f"{prefix}fetch it: {fetch}{then}; {_CI_HINT}"


def rev_parse(ref: str, cwd: Path) -> str | None:
    """The full sha of the commit ``ref`` names in the clone at ``cwd``; None when git cannot tell.

    Nothing is fetched. ``ref`` is passed to git as given: check text from outside first (as
    :func:`ensure_commit` does).
    """
    done = _run_git(["rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}"], cwd, check=False)
    return done.stdout.strip() if done.returncode == 0 and done.stdout.strip() else None


def _check_ref(ref: str, what: str) -> str:
    ref = ref.strip()
    if not _SAFE_REF.match(ref) or ".." in ref:
        raise UsageError(f"{what} '{ref}' is not a commit sha or ref name kbench-ci accepts")
    return ref


def ensure_commit(ref: str, cwd: Path, what: str) -> str:
    """The full sha of ``ref`` in the clone at ``cwd``, fetching it from ``origin`` when a shallow
    clone lacks it.

    ``ref`` is a sha or a branch name (``main`` or ``origin/main``); ``what`` names it in
    messages ("base commit"). A branch is fetched into its remote-tracking ref
    ``refs/remotes/origin/<branch>``; a sha is fetched by itself (depth 1).
    """
    ref = _check_ref(ref, what)
    sha = rev_parse(ref, cwd)
    if sha is None and not _FULL_SHA.match(ref) and not ref.startswith("origin/"):
        sha = rev_parse(f"origin/{ref}", cwd)
    if sha is not None:
        return sha
    if _FULL_SHA.match(ref):
        _run_git(["fetch", "--no-tags", "--depth=1", "origin", ref], cwd)
        sha = rev_parse(ref, cwd)
    else:
        branch = ref.removeprefix("origin/")
        _run_git(
            ["fetch", "--no-tags", "--depth=1", "origin", f"+refs/heads/{branch}:refs/remotes/origin/{branch}"],
            cwd,
        )
        sha = rev_parse(f"origin/{branch}", cwd)
    if sha is None:
        raise GitError(
            f"{what} '{ref}' is not a commit here, even after fetching it",
            hint="check out with actions/checkout and fetch-depth: 0",
        )
    return sha


def _default_remote(cwd: Path) -> str:
    """``origin`` when there is one, else the remote the checked-out branch tracks, else the
    first remote (``origin`` when there is none)."""
    done = _run_git(["remote"], cwd, check=False)
    return _preferred_remote(done.stdout.split() if done.returncode == 0 else [], cwd)


def merge_base(first: str, second: str, cwd: Path) -> str | None:
    """The merge base of two commits of the clone at ``cwd``; None when it holds none."""
    done = _run_git(["merge-base", first, second], cwd, check=False)
    return done.stdout.strip() if done.returncode == 0 and done.stdout.strip() else None


def deepen_to_merge_base(base: str, head: str, cwd: Path) -> str | None:
    """The merge base of ``base`` and ``head`` (full shas), deepening a shallow clone as far as
    it needs: fetch both commits with growing depths, then the whole history.

    None when even the whole history has no common ancestor; :class:`GitError` when a fetch
    fails (no remote, no network, no credentials). A clone that is not shallow is not fetched.
    """
    found = merge_base(base, head, cwd)
    if found is not None or _run_git(["rev-parse", "--is-shallow-repository"], cwd).stdout.strip() != "true":
        return found
    remote = _default_remote(cwd)
    for depth in _DEEPEN_STEPS:
        _run_git(["fetch", "--no-tags", f"--depth={depth}", remote, base, head], cwd)
        found = merge_base(base, head, cwd)
        if found is not None:
            return found
        if _run_git(["rev-parse", "--is-shallow-repository"], cwd).stdout.strip() != "true":
            return None  # the whole history is here already
    _run_git(["fetch", "--no-tags", "--unshallow", remote, base, head], cwd)
    return merge_base(base, head, cwd)


def default_branch(cwd: Path) -> str | None:
    """The repository's default branch by name (``main``): what ``origin/HEAD`` points at (a
    clone sets it), else a local ``main`` or ``master``; None when neither tells."""
    done = _run_git(["symbolic-ref", "--quiet", "--short", "refs/remotes/origin/HEAD"], cwd, check=False)
    if done.returncode == 0 and done.stdout.strip().startswith("origin/"):
        return done.stdout.strip().removeprefix("origin/")
    for name in ("main", "master"):
        if rev_parse(f"refs/heads/{name}", cwd) is not None:
            return name
    return None


def on_branch(commit: str, branch: str, cwd: Path) -> bool | None:
    """Whether ``commit`` is on ``branch`` (reachable from its local tip or ``origin/BRANCH``);
    None when this clone does not hold the commit, or has no such branch, so cannot tell."""
    branch = _check_ref(branch, "branch")
    tips = [tip for tip in (rev_parse(f"refs/heads/{branch}", cwd), rev_parse(f"refs/remotes/origin/{branch}", cwd)) if tip]
    if not tips or rev_parse(_check_ref(commit, "commit"), cwd) is None:
        return None
    return any(_run_git(["merge-base", "--is-ancestor", commit, tip], cwd, check=False).returncode == 0 for tip in tips)


# --------------------------------------------------------------------------------------------
# A data branch written without a work tree (kbench-ci history)
# --------------------------------------------------------------------------------------------


class RefMoved(GitError):
    """A ref was not where a compare-and-swap update expected it (another writer got there first)."""


#: who the history branch's commits are by: a data branch written by a bot, also on a runner
#: with no git identity configured
_DATA_AUTHOR = {
    "GIT_AUTHOR_NAME": "kbench-ci", "GIT_AUTHOR_EMAIL": "kbench-ci@users.noreply.github.com",
    "GIT_COMMITTER_NAME": "kbench-ci", "GIT_COMMITTER_EMAIL": "kbench-ci@users.noreply.github.com",
}


def _plumbing(args: Sequence[str], cwd: Path, *, index_file: Path | None = None, stdin: str | bytes | None = None) -> str:
    """git with its own index file (never the user's), output stripped; GitError on failure.
    ``stdin`` as bytes goes in byte for byte (a binary blob); as text, encoded."""
    env = {**os.environ, "GIT_TERMINAL_PROMPT": "0", **_DATA_AUTHOR}
    if index_file is not None:
        env["GIT_INDEX_FILE"] = str(index_file)
    data = stdin.encode("utf-8") if isinstance(stdin, str) else stdin
    try:
        done = subprocess.run(["git", *args], cwd=cwd, env=env, input=data, capture_output=True,
                              timeout=_CLI_TIMEOUT_S, check=False)
    except FileNotFoundError:
        raise EnvironmentProblem("git is not installed", hint="install git on the runner") from None
    except subprocess.TimeoutExpired:
        raise GitError(f"'git {' '.join(args)}' took more than {_CLI_TIMEOUT_S}s") from None
    if done.returncode != 0:
        lines = done.stderr.decode("utf-8", "replace").strip().splitlines()
        raise GitError(f"'git {' '.join(args)}' failed: {lines[-1] if lines else done.returncode}")
    return done.stdout.decode("utf-8", "replace").strip()


def branch_tip(branch: str, cwd: Path) -> str | None:
    """The commit ``refs/heads/BRANCH`` points at, or None where it does not exist."""
    return rev_parse(f"refs/heads/{_check_ref(branch, 'branch')}", cwd)


def commit_files_to_branch(
    branch: str, files: Mapping[str, str | bytes], message: str, cwd: Path, *, parent: str | None, expected: str | None
) -> str:
    """Commit ``files`` (path in the tree -> text, or bytes as they are) on top of ``parent``'s tree (None: a new root)
    and move ``refs/heads/BRANCH`` from ``expected`` (None: the branch must not exist yet) to that
    commit, atomically: RefMoved when the branch is elsewhere by then. The work tree, the index
    and HEAD are never touched."""
    old_value = expected
    ref = f"refs/heads/{_check_ref(branch, 'branch')}"
    with tempfile.TemporaryDirectory(prefix="kbench-ci-index-") as folder:
        index = Path(folder) / "index"
        if parent is not None:
            _plumbing(["read-tree", parent], cwd, index_file=index)
        for path, content in files.items():
            blob = _plumbing(["hash-object", "-w", "--stdin"], cwd, stdin=content)
            _plumbing(["update-index", "--add", "--cacheinfo", f"100644,{blob},{path}"], cwd, index_file=index)
        tree = _plumbing(["write-tree"], cwd, index_file=index)
    commit = _plumbing(["commit-tree", tree, *(["-p", parent] if parent else []), "-m", message], cwd)
    try:
        # The old value makes this a compare-and-swap: "" means "must not exist yet".
        _plumbing(["update-ref", ref, commit, old_value or ""], cwd)
    except GitError as exc:
        raise RefMoved(f"{ref} moved while recording: {exc.message}") from None
    return commit


def read_branch_files(branch_or_commit: str, folder: str, cwd: Path) -> dict[str, str]:
    """Every file under ``folder`` in the tree of ``branch_or_commit``: path -> text."""
    listing = _plumbing(["ls-tree", "-r", "--name-only", branch_or_commit, "--", folder], cwd)
    return {path: _plumbing(["show", f"{branch_or_commit}:{path}"], cwd) for path in listing.splitlines() if path}


def push_branch(branch: str, remote: str, cwd: Path) -> bool:
    """Push ``branch`` to ``remote`` without force; False when the remote rejected it (it moved)."""
    ref = f"refs/heads/{_check_ref(branch, 'branch')}"
    done = _run_git(["push", "--porcelain", _check_ref(remote, "remote"), f"{ref}:{ref}"], cwd, check=False)
    if done.returncode == 0:
        return True
    if "rejected" in done.stdout + done.stderr or "non-fast-forward" in done.stdout + done.stderr:
        return False
    raise GitError(_failure(["push", remote, branch], done.stderr, done.returncode, cwd))


def fetch_branch(branch: str, remote: str, cwd: Path) -> str | None:
    """Fetch ``remote``'s ``branch``; its commit, or None where the remote has no such branch."""
    name = _check_ref(branch, "branch")
    target = f"refs/remotes/{_check_ref(remote, 'remote')}/{name}"
    done = _run_git(["fetch", "--no-tags", remote, f"+refs/heads/{name}:{target}"], cwd, check=False)
    if done.returncode != 0:
        if "couldn't find remote ref" in done.stderr:
            return None
        raise GitError(_failure(["fetch", remote, name], done.stderr, done.returncode, cwd))
    return rev_parse(target, cwd)
