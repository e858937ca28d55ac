"""A head that fills the disk must not make the base's failure its `fixed`:
before the base is measured alone the head's files go, and a base that fails alone
while the disk is still short of space (a head's file the judge cannot name as the head's, in
/dev/shm) is not a failure of the base's own."""

from __future__ import annotations

import os
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from kbench_ci.judge.sides import short_of_space


def test_short_of_space_names_the_first_nearly_full_file_system(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # (free, size) of each file system; Docker's /dev/shm is 64 MiB in all, so never 64 MiB free
    space = {"full": (10 << 20, 1 << 30), "roomy": (1 << 30, 2 << 30), "docker-shm": (20 << 20, 64 << 20),
             "docker-shm-full": (1 << 20, 64 << 20)}
    monkeypatch.setattr(os, "statvfs", lambda path: SimpleNamespace(
        f_bavail=space[Path(path).name][0], f_blocks=space[Path(path).name][1], f_frsize=1))
    assert short_of_space([tmp_path / "roomy", tmp_path / "docker-shm"]) is None
    assert short_of_space([tmp_path / "roomy", tmp_path / "full"]) == f"{tmp_path / 'full'} had 10 MiB free"
    assert short_of_space([tmp_path / "docker-shm-full"]) == f"{tmp_path / 'docker-shm-full'} had 1 MiB free"


def test_a_stopped_workers_files_are_removed_with_its_caches(tmp_path: Path) -> None:
    from kbench_ci.judge.sides import SideWorker

    cache = tmp_path / "triton"
    worker = SideWorker("head", "cpu", tmp_path / "scratch", {**os.environ, "TRITON_CACHE_DIR": str(cache),
                                                               "PYTHONPATH": str(Path(__file__).resolve().parents[3])})
    try:
        (worker.folder / "fill").write_bytes(b"x" * 4096)
        (cache / "side-head" / "planted").write_text("x")
    finally:
        worker.stop()
    worker.remove_files()
    assert not worker.folder.exists() and not (cache / "side-head").exists()
    assert cache.is_dir()  # the other sides' caches are left where they are


def test_each_side_keeps_a_bytecode_folder_of_its_own(tmp_path: Path) -> None:
    """A shared one would let a head plant bytecode for the base's next worker and the judge."""
    from kbench_ci.judge.sides import SideWorker

    judges = tmp_path / "pycache"
    environment = {**os.environ, "PYTHONPYCACHEPREFIX": str(judges), "PYTHONPATH": str(Path(__file__).resolve().parents[3])}
    worker = SideWorker("head", "cpu", tmp_path / "scratch", environment)
    worker.stop()
    assert judges / "side-head" in worker.writable


def _worker_on_a_disk(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Any, dict[str, int]]:
    """A started head worker whose folders' file system has ``space["free"]`` bytes free of 1 GiB."""
    from kbench_ci.judge.sides import SideWorker

    worker = SideWorker("head", "cpu", tmp_path / "scratch", {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[3])})
    worker.wait_started(120)
    space = {"free": 1 << 30}
    real = os.statvfs
    monkeypatch.setattr(os, "statvfs", lambda path: SimpleNamespace(f_bavail=space["free"], f_blocks=1 << 30, f_frsize=1)
                        if str(path).startswith((str(tmp_path), "/dev/shm/kbench-side-")) else real(path))
    return worker, space


def test_a_side_that_fills_the_disk_in_its_turn_fails_at_its_reply(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The judge's next write (its events file) came in the base's turn and
    failed there, blaming the base; the filler is stopped at its own reply now, its files gone."""
    from kbench_ci.judge.sides import SideFailed
    from kbench_ci.wire.sideproto import Made, MakeRequest

    worker, space = _worker_on_a_disk(tmp_path, monkeypatch)
    try:
        worker.send(MakeRequest(seed=1, slot=0))
        space["free"] = 1 << 20  # what it wrote while it had the turn
        with pytest.raises(SideFailed, match="filled the disk in its own turn"):
            worker.receive(Made, timeout_s=60)
        assert not worker.alive() and not worker.folder.exists()
        with pytest.raises(SideFailed, match="filled the disk"):
            worker.send(MakeRequest(seed=2, slot=0))
    finally:
        worker.stop()


def test_a_side_that_fills_the_disk_after_its_reply_is_stopped_at_the_change_of_turn(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from kbench_ci.judge.sides import SideFailed, hold_all_but
    from kbench_ci.wire.sideproto import Made, MakeRequest

    worker, space = _worker_on_a_disk(tmp_path, monkeypatch)
    try:
        assert isinstance(worker.ask(MakeRequest(seed=1, slot=0), Made, timeout_s=60), Made)
        space["free"] = 1 << 20  # a thread of its own, after its reply, still in its turn
        hold_all_but(None)
        assert not worker.alive() and not worker.folder.exists()
        with pytest.raises(SideFailed, match="filled the disk in its own turn"):
            worker.send(MakeRequest(seed=2, slot=0))
    finally:
        worker.stop()


def test_a_disk_short_before_the_sides_turn_is_not_its_doing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from kbench_ci.wire.sideproto import Made, MakeRequest

    worker, space = _worker_on_a_disk(tmp_path, monkeypatch)
    try:
        space["free"] = 1 << 20
        assert isinstance(worker.ask(MakeRequest(seed=1, slot=0), Made, timeout_s=60), Made)
        assert worker.alive()
    finally:
        worker.stop()


def test_the_next_turn_fails_a_side_that_filled_the_disk_after_its_reply(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from kbench_ci.judge.sides import SideWorker
    from kbench_ci.judge.state import Side
    from kbench_ci.judge.trials import turn
    from kbench_ci.results.model import VariantResult
    from kbench_ci.wire.sideproto import Made, MakeRequest

    head_worker, space = _worker_on_a_disk(tmp_path, monkeypatch)
    base_worker = SideWorker("base", "cpu", tmp_path / "scratch", {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[3])})
    try:
        head, base = (Side(worker.label, "solution", worker, VariantResult(label=worker.label, kind="pytorch", role="solution",
                                                                           status="ok"))
                      for worker in (head_worker, base_worker))
        assert isinstance(head_worker.ask(MakeRequest(seed=1, slot=0), Made, timeout_s=60), Made)
        space["free"] = 1 << 20
        turn([base, head], base)
        assert head.result.status == "error" and "filled the disk in its own turn" in (head.result.message or "")
        assert base.ok and base_worker.alive() and not head_worker.alive()
    finally:
        head_worker.stop()
        base_worker.stop()
