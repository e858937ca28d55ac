"""The output folder: checked before any work, held against a second run, and
never left with one run's results beside another run's report."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kbench_ci.errors import EnvironmentProblem, ExitCode, UsageError
from kbench_ci.results.atomic import write_text_atomically
from kbench_ci.results.outdir import check_output_file, output_folder


def test_a_folder_that_is_a_file_is_refused_before_any_work(tmp_path: Path) -> None:
    (tmp_path / "out").write_text("not a folder")
    with pytest.raises(UsageError) as info, output_folder(tmp_path / "out"):
        pytest.fail("the block must not run")
    assert info.value.one_line() == (
        f"--output-dir {tmp_path / 'out'} is a file, not a folder (pass a folder (it is created when missing))"
    )
    assert info.value.exit_code == ExitCode.USAGE


def test_a_folder_that_cannot_be_created_is_refused(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    with pytest.raises(UsageError, match="cannot be created: Not a directory"), output_folder(tmp_path / "file" / "out"):
        pytest.fail("the block must not run")


def test_a_missing_folder_is_created(tmp_path: Path) -> None:
    with output_folder(tmp_path / "a" / "b") as path:
        assert path.is_dir() and list(path.iterdir()) == []  # the write test left nothing


def test_a_second_run_into_the_same_folder_is_refused(tmp_path: Path) -> None:
    with output_folder(tmp_path / "out"):
        with pytest.raises(UsageError) as info, output_folder(tmp_path / "out"):
            pytest.fail("the second run must not start")
        assert "is being written by another kbench-ci run" in info.value.message
        assert "pass another --output-dir" in (info.value.hint or "")
    with output_folder(tmp_path / "out"):  # released when the first run ends
        pass


def _pair(folder: Path, tag: str) -> None:
    folder.mkdir(exist_ok=True)
    (folder / "results.json").write_text(f'{{"run": "{tag}"}}')
    (folder / "benchmark.md").write_text(f"# run {tag}")


def test_new_results_beside_an_old_report_leave_no_report(tmp_path: Path) -> None:
    out = tmp_path / "out"
    _pair(out, "old")
    with pytest.raises(RuntimeError), output_folder(out):
        write_text_atomically(out / "results.json", '{"run": "new"}')
        raise RuntimeError("the report could not be written")
    assert (out / "results.json").read_text() == '{"run": "new"}'
    assert not (out / "benchmark.md").exists()


def test_a_finished_run_and_a_run_that_wrote_nothing_keep_their_pair(tmp_path: Path) -> None:
    out = tmp_path / "out"
    _pair(out, "old")
    with pytest.raises(UsageError), output_folder(out):
        raise UsageError("failed before measuring anything")
    assert (out / "benchmark.md").read_text() == "# run old"  # the old pair still belongs together
    with output_folder(out):
        write_text_atomically(out / "results.json", '{"run": "new"}')
        write_text_atomically(out / "benchmark.md", "# run new")
    assert (out / "benchmark.md").read_text() == "# run new"


def test_the_json_summary_target_is_checked(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="is a folder, not a file"):
        check_output_file(tmp_path, "--json-summary")
    (tmp_path / "file").write_text("")
    with pytest.raises(UsageError, match="--json-summary's folder .* is a file, not a folder"):
        check_output_file(tmp_path / "file" / "summary.json", "--json-summary")
    check_output_file(tmp_path / "new" / "summary.json", "--json-summary")


def test_a_write_that_fails_mid_run_is_one_line_not_a_traceback(tmp_path: Path) -> None:
    gone = tmp_path / "gone"
    gone.write_text("")  # the folder was replaced by a file
    with pytest.raises(EnvironmentProblem) as info:
        write_text_atomically(gone / "results.json", "{}")
    assert info.value.one_line().startswith(f"cannot write {gone / 'results.json'}: ")
    assert os.listdir(tmp_path) == ["gone"]
