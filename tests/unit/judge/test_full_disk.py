"""A head that fills the disk must not make the base's failure its `fixed` (red team,
2026-12-05): before the base is measured alone the head's files go, and a base that fails alone
while the disk is still short of space (a head's file the judge cannot name as the head's, in
/dev/shm) is not a failure of the base's own."""

from __future__ import annotations

import os
from pathlib import Path
from types import SimpleNamespace

import pytest

from kbench_ci.judge import case


def test_short_of_space_names_the_first_nearly_full_file_system(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # (free, size) of each file system; Docker's /dev/shm is 64 MiB in all, so never 64 MiB free
    space = {"full": (10 << 20, 1 << 30), "roomy": (1 << 30, 2 << 30), "docker-shm": (20 << 20, 64 << 20),
             "docker-shm-full": (1 << 20, 64 << 20)}
    monkeypatch.setattr(case.os, "statvfs", lambda path: SimpleNamespace(
        f_bavail=space[Path(path).name][0], f_blocks=space[Path(path).name][1], f_frsize=1))
    assert case.short_of_space([tmp_path / "roomy", tmp_path / "docker-shm"]) is None
    assert case.short_of_space([tmp_path / "roomy", tmp_path / "full"]) == f"{tmp_path / 'full'} had 10 MiB free"
    assert case.short_of_space([tmp_path / "docker-shm-full"]) == f"{tmp_path / 'docker-shm-full'} had 1 MiB free"


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
