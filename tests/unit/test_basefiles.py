"""kbench_ci.basefiles: the base's files recorded before any pull-request code runs, put back and
named before each load of the base (the red team: tests/integration/gate/test_base_files_cpu.py)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from kbench_ci.basefiles import blame, record, restore
from kbench_ci.measure.protocol import CaseJob
from kbench_ci.results.model import MeasureSettings


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
