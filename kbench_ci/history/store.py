"""The history branch: one JSON file per (GPU model, commit), committed without a work tree.

``entries/<gpu>/<commit>.json`` on the branch (default ``kbench-history``): recording the same
commit again rewrites the same file, so a commit has one entry per GPU model; results from
different GPU models never mix. Commits are made with git plumbing and a private index
(:func:`kbench_ci.git.commit_files_to_branch`), so the user's work tree, index and HEAD are
never touched, and the branch moves by compare-and-swap: two jobs recording at once both land,
the later one rebuilt on top of the earlier (locally and, with a remote, after a rejected push).
"""

from __future__ import annotations

import datetime as dt
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kbench_ci.errors import UsageError
from kbench_ci.git import (
    RefMoved,
    branch_tip,
    commit_files_to_branch,
    default_branch,
    fetch_branch,
    on_branch,
    push_branch,
    read_branch_files,
)
from kbench_ci.results.load import load_results
from kbench_ci.results.schema import speed_of_light_from_json

#: the branch the history lives on unless the user names another
DEFAULT_BRANCH = "kbench-history"
#: how often a record is rebuilt on a branch that another writer moved meanwhile
MAX_ATTEMPTS = 8
ENTRIES = "entries"
_SHA = re.compile(r"^[0-9a-f]{40}$")


@dataclass(frozen=True, slots=True)
class CasePoint:
    """One case of one run: the head's median latency and how many samples it rests on, and
    (where the run recorded them) why it runs at that speed: the registers per thread of its
    kernel with the largest share of GPU time, and its share of the GPU's ceiling."""

    case_id: str
    median_ms: float
    n_samples: int
    registers: int | None = None
    #: the larger of achieved bandwidth / copy bandwidth and FLOP/s / matmul rate (0..1)
    peak_share: float | None = None
    #: the threshold the case was judged by (a compare's; a run judges no speed): ``history
    #: show`` finds steps larger than it
    threshold: float | None = None

    def as_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"case_id": self.case_id, "median_ms": self.median_ms, "n_samples": self.n_samples}
        if self.registers is not None:
            data["registers"] = self.registers
        if self.peak_share is not None:
            data["peak_share"] = self.peak_share
        if self.threshold is not None:
            data["threshold"] = self.threshold
        return data

    @staticmethod
    def from_json(data: Mapping[str, Any]) -> CasePoint:
        registers, share, threshold = data.get("registers"), data.get("peak_share"), data.get("threshold")
        return CasePoint(str(data["case_id"]), float(data["median_ms"]), int(data["n_samples"]),
                         int(registers) if registers is not None else None, float(share) if share is not None else None,
                         float(threshold) if threshold is not None else None)


@dataclass(frozen=True, slots=True)
class HistoryEntry:
    commit: str
    recorded_at: str  # ISO 8601, UTC: the order of the points of a trend
    gpu: str
    points: tuple[CasePoint, ...]

    def as_json(self) -> dict[str, Any]:
        return {"commit": self.commit, "recorded_at": self.recorded_at, "gpu": self.gpu,
                "points": [point.as_json() for point in self.points]}

    @staticmethod
    def from_json(data: Mapping[str, Any]) -> HistoryEntry:
        return HistoryEntry(
            commit=str(data["commit"]), recorded_at=str(data["recorded_at"]), gpu=str(data["gpu"]),
            points=tuple(CasePoint.from_json(point) for point in data["points"]),
        )

    @property
    def path(self) -> str:
        return f"{ENTRIES}/{_slug(self.gpu)}/{self.commit}.json"


def _checked_commit(payload: Mapping[str, Any], commit: str | None, *, force: bool) -> str | None:
    """The commit to record under: ``commit`` (``--commit``) or the one the results say they
    measured (a run's ``commit``, a compare's head). Results measured on a dirty tree, or at
    another commit than ``--commit``, are not that commit's: refused unless ``force``."""
    if payload.get("schema") == "kbench-ci/compare":
        head: Mapping[str, Any] = payload["head"] if isinstance(payload.get("head"), Mapping) else {}
        measured, dirty = head.get("sha"), str(head.get("description") or "").startswith("working tree (dirty)")
    else:
        recorded: Mapping[str, Any] = payload["commit"] if isinstance(payload.get("commit"), Mapping) else {}
        measured, dirty = recorded.get("sha"), bool(recorded.get("dirty"))
    measured = measured if isinstance(measured, str) and measured else None
    if not force and dirty:
        raise UsageError(
            f"these results were measured on a working tree that differed from {(measured or '?')[:12]} "
            "(uncommitted changes): they are no commit's",
            hint="measure again in a clean checkout, or pass --force to record them anyway",
        )
    if not force and commit and measured and commit != measured:
        raise UsageError(
            f"these results were measured at {measured[:12]}, not at --commit {commit[:12]}",
            hint="leave out --commit to record them under the commit they measured, or pass --force",
        )
    return commit or measured


def entries_from_results(
    payload: Mapping[str, Any], *, commit: str | None = None, now: dt.datetime | None = None, force: bool = False
) -> tuple[HistoryEntry, ...]:
    """The entries of a ``run`` or ``compare`` results.json, one per GPU model: each timed case's
    median (the head's, for a compare). A merged report of shards on several GPU models names
    each case's model (its ``gpu``); otherwise the run's GPU is every case's. ``commit``: the
    commit measured; a compare's head sha when not given. ``force``: record results of a dirty
    tree, or of another commit than ``commit``, anyway."""
    schema = payload.get("schema")
    commit = _checked_commit(payload, commit, force=force)
    if schema == "kbench-ci/compare":
        measured = [
            (case, CasePoint(case["case_id"], *_median_of(case.get("head")), *_why_figures(case.get("head")),
                             threshold=_threshold_of(case)))
            for case in payload.get("cases", ()) if _median_of(case.get("head"))[1] > 0
        ]
    elif schema == "kbench-ci/run":
        measured = [
            (case, CasePoint(case["case_id"], float(case["median_ms"]), int(case["n_samples"]),
                             *_why_figures(case.get("result"))))
            for case in payload.get("cases", ()) if case.get("median_ms") is not None and case.get("n_samples")
        ]
    else:
        raise UsageError(f"results.json has schema {schema!r}, not a run's or a compare's",
                         hint="record the report folder of `kbench-ci run` or `kbench-ci compare`")
    if not commit or not _SHA.match(commit):
        got = "none was given or recorded" if not commit else f"'{commit}' is not one"
        raise UsageError(f"no full commit sha to record these results under: {got}",
                         hint="pass --commit $(git rev-parse HEAD)")
    run_gpu = str((payload.get("environment") or {}).get("gpu_name") or "cpu")
    # microseconds: records made within one second (a backfill) keep the order they were made in
    when = (now or dt.datetime.now(dt.timezone.utc)).isoformat(timespec="microseconds")
    by_gpu: dict[str, list[CasePoint]] = {}
    for case, point in measured:
        by_gpu.setdefault(str(case.get("gpu") or run_gpu), []).append(point)
    if not by_gpu:
        by_gpu[run_gpu] = []
    return tuple(HistoryEntry(commit=commit, recorded_at=when, gpu=gpu, points=tuple(points))
                 for gpu, points in sorted(by_gpu.items()))


def entry_from_results(payload: Mapping[str, Any], *, commit: str | None = None, now: dt.datetime | None = None) -> HistoryEntry:
    """The one entry of a results.json measured on one GPU model (UsageError for several)."""
    found = entries_from_results(payload, commit=commit, now=now)
    if len(found) > 1:
        raise UsageError(f"these results hold {len(found)} GPU models ({', '.join(e.gpu for e in found)})",
                         hint="record them with entries_from_results: one entry per model")
    return found[0]


def _threshold_of(case: Mapping[str, Any]) -> float | None:
    """The threshold a compare judged the case by, where results.json holds a usable one."""
    value = case.get("threshold")
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value < 1:
        return None
    return float(value)


def _why_figures(variant: Mapping[str, Any] | None) -> tuple[int | None, float | None]:
    """A variant's registers (its largest-share kernel in the CUPTI audit, else the compiler's
    first kernel) and its share of the GPU's ceiling, from results.json; None where absent."""
    if not isinstance(variant, Mapping):
        return None, None
    audit = variant.get("escape_audit") or {}
    launches = [launch for launch in audit.get("launches") or () if launch.get("registers") is not None]
    compiled = [kernel for kernel in variant.get("compiled") or () if kernel.get("registers") is not None]
    registers = launches[0]["registers"] if launches else compiled[0]["registers"] if compiled else None
    light = speed_of_light_from_json(variant.get("speed_of_light"))
    shares = [share for share in (light.bandwidth_fraction, light.flops_fraction) if share is not None] if light else []
    return (int(registers) if registers is not None else None), (max(shares) if shares else None)


def _median_of(variant: Mapping[str, Any] | None) -> tuple[float, int]:
    """Median (ms) and count of a variant's samples in results.json; (0, 0) when it has none."""
    samples = sorted(s for rounds in (variant or {}).get("rounds_ms", ()) for s in rounds)
    if not samples or (variant or {}).get("status") != "ok":
        return 0.0, 0
    middle = len(samples) // 2
    median = samples[middle] if len(samples) % 2 else (samples[middle - 1] + samples[middle]) / 2
    return float(median), len(samples)


def record(entry: HistoryEntry, repo: Path, *, branch: str = DEFAULT_BRANCH, remote: str | None = None) -> str:
    """Add ``entry`` to the branch (and push it to ``remote``); the branch's new commit."""
    return record_all((entry,), repo, branch=branch, remote=remote)


def record_all(
    recorded: Sequence[HistoryEntry], repo: Path, *, branch: str = DEFAULT_BRANCH, remote: str | None = None
) -> str:
    """Add ``recorded`` (one commit's entries, one per GPU model) to the branch in one commit
    (and push it to ``remote``); the branch's new commit.

    A writer that lost the race (the local ref moved, or the push was rejected) records again on
    top of the new tip: nothing another job recorded meanwhile is lost."""
    if not recorded:
        raise ValueError("nothing to record")
    files = {entry.path: json.dumps(entry.as_json(), indent=1, sort_keys=True) + "\n" for entry in recorded}
    message = f"kbench-ci history: {recorded[0].commit[:12]} on {', '.join(entry.gpu for entry in recorded)}"
    for _ in range(MAX_ATTEMPTS):
        local = branch_tip(branch, repo)
        parent = local
        if remote is not None:
            # The remote is the truth: its tip holds every entry any job pushed.
            parent = fetch_branch(branch, remote, repo) or local
        try:
            commit = commit_files_to_branch(branch, files, message, repo, parent=parent, expected=local)
        except RefMoved:
            continue  # another writer in this clone: record again on its tip
        if remote is None or push_branch(branch, remote, repo):
            return commit
    raise UsageError(f"could not record on branch {branch}: it moved {MAX_ATTEMPTS} times while recording",
                     hint="retry; another job records on it at the same time")


def entries(repo: Path, *, branch: str = DEFAULT_BRANCH) -> list[HistoryEntry]:
    """Every entry on the branch, oldest recording first. A branch that does not exist is a
    usage error (naming how to make one), not an empty history: a site of no charts would
    read as a history with no steps."""
    tip = branch_tip(branch, repo)
    if tip is None:
        raise UsageError(
            f"no history branch '{branch}' in this repository",
            hint=f"record a run first: kbench-ci history record --report DIR --branch {branch}; or fetch it: "
            f"git fetch origin {branch}:{branch}",
        )
    found = [HistoryEntry.from_json(json.loads(text)) for text in read_branch_files(tip, ENTRIES, repo).values()]
    return sorted(found, key=lambda e: (e.recorded_at, e.commit))


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-") or "unknown"


def report_payload(folder: Path) -> Mapping[str, Any]:
    """The results.json of a ``run`` or ``compare`` report folder, checked."""
    path = folder / "results.json"
    try:
        # The one reader: no link followed, no FIFO waited on, every field read here checked,
        # no case id twice (it would be recorded twice), no NaN or string samples.
        return load_results(path, reader="kbench-ci history record").data
    except FileNotFoundError:
        raise UsageError(f"{path} not found", hint="pass the --output-dir of a `kbench-ci run` or `compare`") from None


def entries_from_report(folder: Path, *, commit: str | None = None, force: bool = False) -> tuple[HistoryEntry, ...]:
    """The entries (one per GPU model) of the results.json in a ``run`` or ``compare`` report folder."""
    return entries_from_results(report_payload(folder), commit=commit, force=force)


def check_main_line(commit: str, repo: Path, *, main_branch: str | None = None) -> str:
    """The branch the history follows (``main_branch``, else the repository's default branch),
    when ``commit`` is on it; UsageError when it is not, or this clone cannot tell.

    The history is the main line's trend (README, docs/action.md: recorded on pushes to the
    default branch): a feature branch's results, slower or wrong ones included, would be read
    as a step of main. A failed gate is no reason to refuse: a regression that reached the main
    line is what the history is for (see :func:`gate_note`)."""
    branch = main_branch or default_branch(repo)
    if branch is None:
        raise UsageError("cannot tell which branch the history follows: this clone has no origin/HEAD, main or master",
                         hint="name it with --main-branch NAME, or pass --force to record anyway")
    found = on_branch(commit, branch, repo)
    if found is None:
        raise UsageError(f"cannot tell whether {commit[:12]} is on {branch}: this clone lacks that commit or branch",
                         hint=f"run it in the checkout that measured the commit, with {branch} fetched, or pass --force")
    if not found:
        raise UsageError(
            f"{commit[:12]} is not on {branch}: the history is {branch}'s trend, and another branch's results would "
            "read as its steps",
            hint=f"record results of a commit on {branch}, name the history's branch with --main-branch, or pass --force",
        )
    return branch


def gate_note(payload: Mapping[str, Any]) -> str | None:
    """What to say when the recorded results' gate failed (they are recorded all the same)."""
    gate = payload.get("gate")
    if not isinstance(gate, Mapping) or gate.get("passed") is not False:
        return None
    summary = gate.get("summary")
    said = f" ({summary})" if isinstance(summary, str) and summary else ""
    return (f"their gate failed{said}: recorded all the same, the history keeps what reached the main line "
            "(a wrong or failed case has no time to record)")
