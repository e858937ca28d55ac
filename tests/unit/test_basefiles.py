"""kbench_ci.basefiles: the base's files recorded before any pull-request code runs, put back and
named before each load of the base (the red team: tests/integration/gate/test_base_files_cpu.py)."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

from kbench_ci.basefiles import blame, reclaim, record, remove, restore
from kbench_ci.gate.compare_case import built_library_files
from kbench_ci.results.model import MeasureSettings
from kbench_ci.wire.protocol import CaseJob


def _tree(root: Path) -> Path:
    kernels = root / "kernels"
    (kernels / "sub").mkdir(parents=True)
    (kernels / "mm.py").write_text("from mm_helpers import matmul_into\n")
    (kernels / "mm_helpers.py").write_text("def matmul_into(a, b, c): ...\n")
    (kernels / "sub" / "deep.py").write_text("X = 1\n")
    (kernels / "__pycache__").mkdir()
    (kernels / "__pycache__" / "mm.cpython-311.pyc").write_bytes(b"\0")
    (root / "elsewhere.py").write_text("not the kernel's\n")
    for path in (kernels, kernels / "sub"):
        path.chmod(0o755)
    for path in (kernels / "mm.py", kernels / "mm_helpers.py", kernels / "sub" / "deep.py"):
        path.chmod(0o644)
    return kernels


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_the_record_holds_the_kernel_folders_and_the_folders_above_them_not_bytecode(tmp_path: Path) -> None:
    kernels = _tree(tmp_path)
    paths = [entry.path for entry in record(tmp_path, [kernels])]
    assert paths[:2] == [str(tmp_path.resolve()), str(kernels.resolve())]  # top down: folders before their files
    assert {os.path.relpath(path, tmp_path) for path in paths} == {
        ".", "kernels", "kernels/sub", "kernels/mm.py", "kernels/mm_helpers.py", "kernels/sub/deep.py"}
    assert restore(record(tmp_path, [kernels])) == ()  # nothing changed, nothing named


def test_a_file_and_a_folder_set_to_000_are_put_back_and_named(tmp_path: Path) -> None:
    kernels = _tree(tmp_path)
    guarded = record(tmp_path, [kernels])
    os.chmod(kernels / "mm_helpers.py", 0)
    os.chmod(kernels / "sub" / "deep.py", 0o777)
    os.chmod(kernels, 0)
    changes = restore(guarded)
    assert _mode(kernels) == 0o755 and _mode(kernels / "mm_helpers.py") == 0o644 and _mode(kernels / "sub" / "deep.py") == 0o644
    described = [change.describe(str(tmp_path.resolve())) for change in changes]
    print(described)
    assert described == ["kernels (mode 0755 → 0000; put back)", "kernels/mm_helpers.py (mode 0644 → 0000; put back)",
                         "kernels/sub/deep.py (mode 0644 → 0777; put back)"]
    assert restore(guarded) == ()
    message = blame(changes, guarded[0].path)
    assert message.startswith("the pull request's code changed the base's files: kernels (mode 0755 → 0000; put back);")
    assert message.endswith("(the base was measured from them as they were)")


def test_a_changed_or_removed_file_is_named_and_not_called_restored(tmp_path: Path) -> None:
    kernels = _tree(tmp_path)
    guarded = record(tmp_path, [kernels])
    (kernels / "mm_helpers.py").write_text("def matmul_into(a, b, c): slow()\n")
    (kernels / "sub" / "deep.py").unlink()
    changes = restore(guarded)
    assert [(Path(change.path).name, change.what, change.restored) for change in changes] == [
        ("mm_helpers.py", "contents changed", False), ("deep.py", "removed", False)]
    assert blame(changes, guarded[0].path).endswith("(what the base read is not its own)")


@pytest.mark.skipif(os.geteuid() != 0, reason="only root gives a file to another owner")
def test_an_owner_a_root_head_changed_is_put_back(tmp_path: Path) -> None:
    kernels = _tree(tmp_path)
    guarded = record(tmp_path, [kernels])
    os.chown(kernels / "mm.py", 65534, 65534)
    os.chmod(kernels / "mm.py", 0)
    (change,) = restore(guarded)
    assert change.what == f"owner 0:{os.getgid()} → 65534:65534, mode 0644 → 0000" and change.restored, change
    status = (kernels / "mm.py").stat()
    assert (status.st_uid, status.st_gid, stat.S_IMODE(status.st_mode)) == (0, os.getgid(), 0o644)


def test_the_record_reaches_the_judge_in_its_job(tmp_path: Path) -> None:
    guarded = record(tmp_path, [_tree(tmp_path)])
    settings = MeasureSettings(device="cpu", seed=1, correctness_trials=1, timing_method="host_time", num_warmup=1,
                               trials_per_round=2, discard_first=0, rounds=2, flush_l2=False)
    job = CaseJob("mm[N=1]", {"N": 1}, (), (), settings, base_files=guarded)
    assert CaseJob.from_json(job.to_json()).base_files == guarded


def _chattr(path: Path, flags: str) -> bool:
    """``chattr`` where the machine lets this process (root with CAP_LINUX_IMMUTABLE, a file
    system with the flags)."""
    chattr = shutil.which("chattr")
    return chattr is not None and subprocess.run([chattr, flags, str(path)], capture_output=True).returncode == 0


def test_an_immutable_flag_on_a_base_file_is_cleared_and_named(tmp_path: Path) -> None:
    kernels = _tree(tmp_path)
    guarded = record(tmp_path, [kernels])
    if not _chattr(kernels / "mm_helpers.py", "+i"):
        pytest.skip("chattr +i needs root and a file system with the flag")
    try:
        (change,) = restore(guarded)
        assert (Path(change.path).name, change.what, change.restored) == ("mm_helpers.py", "flags none → i", True)
        (kernels / "mm_helpers.py").write_text("writable again\n")  # the flag is gone
    finally:
        _chattr(kernels / "mm_helpers.py", "-i")


def test_a_workers_folder_a_root_side_locked_is_writable_again_and_removable(tmp_path: Path) -> None:
    """The base's own folder (its library copies) and caches, locked by a root head: chattr +i
    on the folder, +a on a file in it, mode 000 below."""
    folder = tmp_path / "side-base"
    (folder / "libraries-1").mkdir(parents=True)
    (folder / "libraries-1" / "mm.so").write_bytes(b"\x7fELF")
    (folder / "libraries-1").chmod(0)
    (folder / "cache.bin").write_bytes(b"kernel")
    if not (_chattr(folder / "cache.bin", "+a") and _chattr(folder, "+i")):
        pytest.skip("chattr +i needs root and a file system with the flag")
    try:
        with pytest.raises(PermissionError):
            (folder / "libraries-2").mkdir()
        with pytest.raises(PermissionError):
            (folder / "cache.bin").write_bytes(b"recompiled")
        reclaim([folder])
        (folder / "libraries-2").mkdir()  # a new load's copy has its place again
        (folder / "cache.bin").write_bytes(b"recompiled")
        assert stat.S_IMODE((folder / "libraries-1").stat().st_mode) == 0o700
        _chattr(folder, "+i")
        remove(folder)
        assert not folder.exists()
    finally:
        if folder.exists():
            _chattr(folder, "-i")


def test_the_base_built_library_is_recorded_readable_even_if_a_head_build_reached_it_first(tmp_path: Path) -> None:
    """The head's build command runs beside the base's: by the time the base's library is
    recorded it may have set the library and the folders above it to 000 (as the runner's
    user). The record is what the base can load, and a later change is put back and named."""
    staging = tmp_path / "staging"
    folder = staging / "base" / "mm"
    folder.mkdir(parents=True)
    for name in ("mm.cu", "mm.so"):
        (folder / name).write_bytes(b"built")
        (folder / name).chmod(0o644)
    for path in (folder / "mm.so", folder, staging / "base"):
        path.chmod(0)
    guarded = built_library_files(staging, folder)
    assert {os.path.relpath(entry.path, staging.resolve()): entry.mode & 0o700 for entry in guarded} == {
        ".": 0o700, "base": 0o700, "base/mm": 0o700, "base/mm/mm.cu": 0o600, "base/mm/mm.so": 0o600}
    assert (folder / "mm.so").read_bytes() == b"built"
    os.chmod(folder / "mm.so", 0)
    (change,) = restore(guarded)
    assert change.describe(str(staging.resolve())) == "base/mm/mm.so (mode 0600 → 0000; put back)"


def test_reclaim_opens_no_link_nor_node_a_side_left_in_its_folder(tmp_path: Path) -> None:
    """A side's folder is reclaimed by the judge; what the side made there that is not a file
    or a folder (a link to a file of the judge's, a FIFO whose open would block) is left alone."""
    outside = tmp_path / "judge-file"
    outside.write_text("the judge's")
    outside.chmod(0o400)
    folder = tmp_path / "side-head"
    folder.mkdir()
    (folder / "link").symlink_to(outside)
    os.mkfifo(folder / "fifo", 0)
    reclaim([folder])  # returns: the FIFO was never opened
    assert stat.S_IMODE(outside.stat().st_mode) == 0o400
    assert stat.S_IMODE((folder / "fifo").lstat().st_mode) == 0
