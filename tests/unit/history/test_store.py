"""The history branch: entries keyed by commit, never the work tree, no lost entry when
two jobs record at once. Real git repositories in tmp_path."""

from __future__ import annotations

import datetime as dt
import subprocess
import threading
from pathlib import Path
from typing import Any

import pytest

from kbench_ci.errors import UsageError
from kbench_ci.history.store import (
    CasePoint,
    HistoryEntry,
    entries,
    entries_from_results,
    entry_from_results,
    record,
    record_all,
)


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout.strip()


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    git(root, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "--allow-empty", "-m", "start")
    return root


def _entry(commit: str, median: float = 1.0, gpu: str = "NVIDIA H200", at: str = "2026-12-01T00:00:00+00:00") -> HistoryEntry:
    return HistoryEntry(commit=commit, recorded_at=at, gpu=gpu, points=(CasePoint("k[N=8]", median, 100),))


SHAS = [f"{n:040x}" for n in (1, 2, 3)]


def test_three_commits_give_three_points_and_recording_one_again_keeps_three(repo: Path) -> None:
    for n, sha in enumerate(SHAS):
        record(_entry(sha, median=1.0 + n, at=f"2026-12-0{n + 1}T00:00:00+00:00"), repo)
    record(_entry(SHAS[1], median=9.0, at="2026-12-02T00:00:00+00:00"), repo)
    found = entries(repo)
    assert [e.commit for e in found] == SHAS
    assert found[1].points[0].median_ms == 9.0  # the later recording of that commit


def test_recording_never_touches_the_work_tree_index_or_head(repo: Path) -> None:
    (repo / "tracked.txt").write_text("one\n")
    git(repo, "add", "tracked.txt")
    git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "file")
    (repo / "tracked.txt").write_text("changed, not staged\n")
    (repo / "staged.txt").write_text("staged\n")
    git(repo, "add", "staged.txt")
    before = (git(repo, "status", "--porcelain"), git(repo, "rev-parse", "HEAD"), git(repo, "symbolic-ref", "HEAD"))
    record(_entry(SHAS[0]), repo)
    after = (git(repo, "status", "--porcelain"), git(repo, "rev-parse", "HEAD"), git(repo, "symbolic-ref", "HEAD"))
    assert after == before
    assert git(repo, "ls-tree", "-r", "--name-only", "kbench-history") == f"entries/NVIDIA-H200/{SHAS[0]}.json"


def test_gpu_models_are_kept_apart(repo: Path) -> None:
    record(_entry(SHAS[0], gpu="NVIDIA H200"), repo)
    record(_entry(SHAS[0], gpu="NVIDIA A100-SXM4-80GB"), repo)
    assert sorted(e.gpu for e in entries(repo)) == ["NVIDIA A100-SXM4-80GB", "NVIDIA H200"]


def test_two_jobs_pushing_at_once_lose_nothing(tmp_path: Path) -> None:
    origin = tmp_path / "origin.git"
    git(tmp_path, "init", "-q", "--bare", str(origin))
    seed = tmp_path / "seed"
    git(tmp_path, "clone", "-q", str(origin), str(seed))
    git(seed, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "--allow-empty", "-m", "start")
    git(seed, "push", "-q", "origin", "HEAD:refs/heads/main")
    clones = []
    for name in ("a", "b", "c", "d"):
        clone = tmp_path / name
        git(tmp_path, "clone", "-q", str(origin), str(clone))
        clones.append(clone)
    shas = [f"{n:040x}" for n in range(10, 14)]
    errors: list[BaseException] = []

    def job(clone: Path, sha: str) -> None:
        try:
            record(_entry(sha), clone, remote="origin")
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=job, args=pair) for pair in zip(clones, shas, strict=True)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    assert sorted(e.commit for e in entries(origin)) == shas


def _compare_payload(sha: str) -> dict[str, Any]:
    ok = {"status": "ok", "rounds_ms": [[1.0, 3.0], [2.0]]}
    return {
        "schema": "kbench-ci/compare", "head": {"sha": sha}, "environment": {"gpu_name": "NVIDIA H200"},
        "cases": [{"case_id": "k[N=8]", "head": ok}, {"case_id": "bad[N=8]", "head": {"status": "incorrect", "rounds_ms": []}}],
    }


def test_a_compare_is_recorded_under_its_head_commit_with_the_heads_medians() -> None:
    when = dt.datetime(2026, 12, 2, tzinfo=dt.timezone.utc)
    entry = entry_from_results(_compare_payload(SHAS[2]), now=when)
    assert entry == HistoryEntry(SHAS[2], "2026-12-02T00:00:00.000000+00:00", "NVIDIA H200", (CasePoint("k[N=8]", 2.0, 3),))


def test_results_without_a_commit_or_of_another_kind_are_refused() -> None:
    with pytest.raises(UsageError, match="no full commit sha") as info:
        entry_from_results({**_compare_payload(SHAS[0]), "head": {"sha": None}})
    assert info.value.hint is not None and "--commit" in info.value.hint
    # No Python None in a message
    assert info.value.message.endswith("under: none was given or recorded") and "None" not in info.value.message
    with pytest.raises(UsageError, match="not a run's or a compare's"):
        entry_from_results({"schema": "kbench-ci/bench"})


def test_a_merge_of_shards_on_two_gpu_models_records_each_case_under_its_own_model(repo: Path) -> None:
    """A merged report names each case's GPU: its points must not all land under the first
    shard's model, and both models' entries go on the branch in one commit."""
    ok = {"status": "ok", "rounds_ms": [[1.0, 3.0], [2.0]]}
    merged = {
        "schema": "kbench-ci/compare", "head": {"sha": SHAS[0]}, "environment": {"gpu_name": "NVIDIA H200"},
        "cases": [{"case_id": "k[N=8]", "head": ok, "gpu": "NVIDIA H200"},
                  {"case_id": "k[N=8]", "head": {**ok, "rounds_ms": [[5.0]]}, "gpu": "NVIDIA A100-SXM4-80GB"},
                  {"case_id": "j[N=8]", "head": ok, "gpu": "NVIDIA A100-SXM4-80GB"}],
    }
    a100, h200 = entries_from_results(merged)
    assert (a100.gpu, [(p.case_id, p.median_ms) for p in a100.points]) == ("NVIDIA A100-SXM4-80GB", [("k[N=8]", 5.0), ("j[N=8]", 2.0)])
    assert (h200.gpu, [(p.case_id, p.median_ms) for p in h200.points]) == ("NVIDIA H200", [("k[N=8]", 2.0)])
    with pytest.raises(UsageError, match="2 GPU models"):
        entry_from_results(merged)
    record_all((a100, h200), repo)
    assert git(repo, "rev-list", "--count", "kbench-history") == "1"
    assert sorted(git(repo, "ls-tree", "-r", "--name-only", "kbench-history").splitlines()) == [
        f"entries/NVIDIA-A100-SXM4-80GB/{SHAS[0]}.json", f"entries/NVIDIA-H200/{SHAS[0]}.json"]
    assert {(e.gpu, len(e.points)) for e in entries(repo)} == {("NVIDIA A100-SXM4-80GB", 2), ("NVIDIA H200", 1)}


def test_a_compare_records_the_threshold_each_case_was_judged_by() -> None:
    """`history show` reads steps at the threshold the suite judged by."""
    payload = _compare_payload(SHAS[0])
    payload["cases"][0]["threshold"] = 0.05
    (entry,) = entries_from_results(payload)
    assert entry.points[0].threshold == 0.05
    assert HistoryEntry.from_json(entry.as_json()) == entry
    assert entries_from_results(_compare_payload(SHAS[0]))[0].points[0].threshold is None
