"""results.json and benchmark.md follow the umask like any other file."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from kbench_ci.results.atomic import write_json_atomically, write_text_atomically


@pytest.mark.parametrize(("umask", "mode"), [(0o022, 0o644), (0o027, 0o640), (0o002, 0o664)])
def test_written_files_follow_the_umask(tmp_path: Path, umask: int, mode: int) -> None:
    previous = os.umask(umask)
    try:
        write_json_atomically(tmp_path / "results.json", {"schema": "kbench-ci/run"})
        write_text_atomically(tmp_path / "benchmark.md", "# report\n")
        # What open() makes under the same umask, for comparison.
        (tmp_path / "plain.txt").write_text("x")
    finally:
        os.umask(previous)
    expected = stat.S_IMODE((tmp_path / "plain.txt").stat().st_mode)
    assert expected == mode
    for name in ("results.json", "benchmark.md"):
        assert stat.S_IMODE((tmp_path / name).stat().st_mode) == mode, name
    assert os.umask(previous) == previous  # the umask was put back
