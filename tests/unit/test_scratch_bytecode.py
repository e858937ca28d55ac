"""The workers' bytecode folder does not grow a dead folder per run (scratch.prune_mirrored_bytecode)."""

from __future__ import annotations

from pathlib import Path

from kbench_ci.scratch import prune_mirrored_bytecode


def test_bytecode_mirrored_from_temp_folders_that_are_gone_is_removed_and_the_rest_kept(tmp_path: Path) -> None:
    temp_root = tmp_path / "tmp"
    (temp_root / "kbench-wt-alive" / "kbench-0123").mkdir(parents=True)  # a run still going
    prefix = tmp_path / "cache" / "pycache"
    mirror = prefix / temp_root.resolve().relative_to(temp_root.resolve().anchor)
    for name in ("kbench-wt-alive", "kbench-wt-gone", "kbench-build-gone"):
        (mirror / name / "kbench-0123" / "kernels").mkdir(parents=True)
        (mirror / name / "kbench-0123" / "kernels" / "scale.cpython-311.pyc").write_bytes(b"pyc")
    elsewhere = prefix / "opt" / "venv" / "torch"  # bytecode of installed packages: not in the temp folder
    elsewhere.mkdir(parents=True)
    (elsewhere / "__init__.cpython-311.pyc").write_bytes(b"pyc")

    removed = prune_mirrored_bytecode(prefix, temp_root)

    assert sorted(path.name for path in removed) == ["kbench-build-gone", "kbench-wt-gone"]
    assert sorted(path.name for path in mirror.iterdir()) == ["kbench-wt-alive"]
    assert (elsewhere / "__init__.cpython-311.pyc").exists()
    assert prune_mirrored_bytecode(tmp_path / "no-cache-yet", temp_root) == []
