"""Results files that cannot hang or lie. Each bad results.json,
given to each of the five readers (merge, history record, comment, the action's summary and gate
steps): none hangs, crashes or believes it; each says in one line which file and what is wrong,
with exit 2 (the summary step, which never fails a job, reports the error and sets verdict=error;
the gate step fails with exit 2)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from kbench_ci.errors import ExitCode, UsageError
from kbench_ci.gate.merge import MergeRequest, merge_shards
from kbench_ci.github.action import run_step
from kbench_ci.github.comment import compose_body
from kbench_ci.history.store import entries_from_report
from kbench_ci.results.schema import to_jsonable
from kbench_ci.results.writers import compare_payload
from tests.integration.github.test_action_steps import read_outputs
from tests.unit.results import test_round_trip as written

ROOT = Path(__file__).resolve().parents[3]
HUNG_AFTER_S = 20.0


def _good(tmp_path: Path) -> dict[str, Any]:
    """A compare's results.json as the writer makes it (every reader reads a compare's)."""
    data: dict[str, Any] = json.loads(json.dumps(to_jsonable(compare_payload(written._compare_outcome(tmp_path)))))
    return data


def _mutated(change: Callable[[dict[str, Any]], Any]) -> Callable[[Path, Path], None]:
    def make(tmp_path: Path, path: Path) -> None:
        data = _good(tmp_path)
        change(data)
        path.write_text(json.dumps(data))
    return make


def _text(make_text: Callable[[dict[str, Any]], str]) -> Callable[[Path, Path], None]:
    def make(tmp_path: Path, path: Path) -> None:
        path.write_text(make_text(_good(tmp_path)))
    return make


def _with_sample(token: str) -> Callable[[Path, Path], None]:
    """The head's first sample of the first timed case replaced by a bare JSON token."""
    def make(tmp_path: Path, path: Path) -> None:
        data = _good(tmp_path)
        case = next(c for c in data["cases"] if c["head"] and c["head"]["rounds_ms"])
        case["head"]["rounds_ms"][0][0] = "@SAMPLE@"
        path.write_text(json.dumps(data).replace('"@SAMPLE@"', token))
    return make


def _fifo(tmp_path: Path, path: Path) -> None:
    os.mkfifo(path)


def _link_out(tmp_path: Path, path: Path) -> None:
    """A link to a results.json outside the folder (a file that parses: /etc/passwd would not)."""
    outside = tmp_path / "outside" / "secret.json"
    outside.parent.mkdir()
    outside.write_text(json.dumps(_good(tmp_path)))
    path.symlink_to(outside)


def _set(where: Callable[[dict[str, Any]], dict[str, Any]], key: str, value: Any) -> Callable[[dict[str, Any]], None]:
    return lambda data: where(data).__setitem__(key, value)


def _first_timed(data: dict[str, Any]) -> dict[str, Any]:
    return next(c for c in data["cases"] if c["head"] and c["head"]["rounds_ms"])


#: name -> (how to make it, a fragment of the one line every reader must say)
BAD: dict[str, tuple[Callable[[Path, Path], None], str]] = {
    "fifo": (_fifo, "is a FIFO, not a regular file"),
    "nested_200000_deep": (_text(lambda _: "[" * 200_000 + "]" * 200_000), "nests objects or lists more than 64 deep"),
    "top_level_array": (_text(lambda data: json.dumps([data])), "holds a list, not a results object"),
    "wrong_field_type": (_mutated(lambda data: data["cases"][0].__setitem__("dims", {"N": "eight"})),
                         "cases[0].dims.N is \"eight\", not a whole number"),
    "nan_sample": (_with_sample("NaN"), "holds NaN, which is not JSON"),
    "inf_sample": (_with_sample("Infinity"), "holds Infinity, which is not JSON"),
    "inf_string_sample": (_mutated(lambda data: _first_timed(data)["head"]["rounds_ms"][0].__setitem__(0, "inf")),
                          "is \"inf\", not a finite number >= 0"),
    "no_cases": (_mutated(lambda data: data.pop("cases")), "has no 'cases'"),
    "string_rounds_ms": (_mutated(lambda data: _first_timed(data)["head"].__setitem__("rounds_ms", "0.1, 0.1")),
                         "head.rounds_ms is \"0.1, 0.1\", not a list"),
    "one_case_id_3000_times": (_mutated(lambda data: data.__setitem__("cases", [_first_timed(data)] * 3000)),
                               "cases[1] repeats case id"),
    "symlink_out_of_the_folder": (_link_out, "is a symbolic link; refusing to follow it out of the folder"),
    "schema_version_999": (_mutated(_set(lambda data: data, "schema_version", 999)),
                           "has schema_version 999 of 'kbench-ci/compare', newer than this kbench-ci reads"),
}


def _folder(tmp_path: Path, bad: str) -> Path:
    folder = tmp_path / "report"
    folder.mkdir()
    (folder / "benchmark.md").write_text("# kbench-ci compare\n\n**1 slower of 5**\n")
    BAD[bad][0](tmp_path, folder / "results.json")
    return folder


def _within(seconds: float, call: Callable[[], Any], fifo: Path | None = None) -> Any:
    """``call()``'s result or exception; fails the test when it blocks (then unblocks it)."""
    done: dict[str, Any] = {}

    def target() -> None:
        try:
            done["value"] = call()
        except BaseException as exc:  # noqa: BLE001 (handed to the test thread as it is)
            done["error"] = exc

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(seconds)
    if thread.is_alive():
        if fifo is not None:  # let the blocked open() return so the thread ends
            fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
            os.close(fd)
        pytest.fail(f"the reader hung on {fifo or 'the file'} for {seconds:g} s")
    if "error" in done:
        raise done["error"]
    return done.get("value")


def _refused_in_one_line(folder: Path, bad: str, call: Callable[[], Any]) -> None:
    fifo = folder / "results.json" if bad == "fifo" else None
    with pytest.raises(UsageError) as info:
        _within(HUNG_AFTER_S, call, fifo)
    line = info.value.one_line()
    assert info.value.exit_code == ExitCode.USAGE
    assert "\n" not in line and str(folder / "results.json") in line or f"results.json in {folder}" in line, line
    assert BAD[bad][1] in line, line


@pytest.mark.parametrize("bad", sorted(BAD))
def test_merge_refuses(tmp_path: Path, bad: str) -> None:
    folder = _folder(tmp_path, bad)
    _refused_in_one_line(folder, bad, lambda: merge_shards(MergeRequest((folder,), tmp_path / "merged")))
    assert not (tmp_path / "merged" / "results.json").exists()


@pytest.mark.parametrize("bad", sorted(BAD))
def test_history_record_refuses(tmp_path: Path, bad: str) -> None:
    folder = _folder(tmp_path, bad)
    _refused_in_one_line(folder, bad, lambda: entries_from_report(folder, force=True))


@pytest.mark.parametrize("bad", sorted(BAD))
def test_comment_refuses(tmp_path: Path, bad: str) -> None:
    folder = _folder(tmp_path, bad)
    _refused_in_one_line(folder, bad, lambda: compose_body(folder, env={}))


def _runner(tmp_path: Path, folder: Path) -> dict[str, str]:
    home = tmp_path / "runner"
    home.mkdir()
    (home / "output").touch()
    (home / "summary.md").touch()
    return {"GITHUB_OUTPUT": str(home / "output"), "GITHUB_STEP_SUMMARY": str(home / "summary.md"),
            "RUNNER_TEMP": str(home), "GITHUB_REPOSITORY": "o/r", "KBENCH_REPORT_DIR": str(folder),
            "KBENCH_COMPARE_EXIT_CODE": "0", "KBENCH_COMPARE_OUTCOME": "success"}


@pytest.mark.parametrize("bad", sorted(BAD))
def test_the_summary_step_reports_the_error_and_sets_verdict_error(tmp_path: Path, bad: str) -> None:
    folder = _folder(tmp_path, bad)
    env = _runner(tmp_path, folder)
    result = _within(HUNG_AFTER_S, lambda: run_step("summary", env, tmp_path), folder / "results.json")
    assert result.exit_code == 0  # the summary never fails the job: the gate step does
    error = result.lines[-1]
    assert error.startswith("::error::kbench-ci: ") and "results.json" in error and BAD[bad][1] in error, result.lines
    outputs = read_outputs(Path(env["GITHUB_OUTPUT"]))
    assert outputs["verdict"] == "error" and BAD[bad][1] in outputs["summary"]
    assert BAD[bad][1] in Path(env["GITHUB_STEP_SUMMARY"]).read_text()


@pytest.mark.parametrize("bad", sorted(BAD))
def test_the_gate_step_fails_with_exit_2_naming_the_file(tmp_path: Path, bad: str) -> None:
    folder = _folder(tmp_path, bad)
    env = _runner(tmp_path, folder)
    for fail_on_regression in ("true", "false"):  # not a regression: the verdict is missing
        step_env = {**env, "KBENCH_FAIL_ON_REGRESSION": fail_on_regression}
        result = _within(HUNG_AFTER_S, lambda: run_step("gate", step_env, tmp_path), folder / "results.json")  # noqa: B023
        assert result.exit_code == ExitCode.USAGE
        (line,) = result.lines
        assert line.startswith("::error::kbench-ci: ") and "results.json" in line and BAD[bad][1] in line, line


def test_a_good_file_passes_every_reader(tmp_path: Path) -> None:
    folder = tmp_path / "report"
    folder.mkdir()
    (folder / "benchmark.md").write_text("# kbench-ci compare\n\n**1 slower of 5**\n")
    (folder / "results.json").write_text(json.dumps(_good(tmp_path)))
    merged = merge_shards(MergeRequest((folder,), tmp_path / "merged"))
    assert merged.command == "compare"
    assert entries_from_report(folder, force=True)
    assert compose_body(folder, env={})[2] is not None
    env = _runner(tmp_path, folder)
    assert run_step("summary", env, tmp_path).exit_code == 0
    assert read_outputs(Path(env["GITHUB_OUTPUT"]))["verdict"] == "failed"
    assert run_step("gate", env, tmp_path).exit_code == ExitCode.GATE_FAILED


# -- at the command line: one line on stderr, exit 2, no traceback, no hang --------------------------


def _kbench(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "kbench_ci", *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=60)


@pytest.mark.parametrize("bad", ["fifo", "nested_200000_deep", "top_level_array"])
@pytest.mark.parametrize("command", ["merge", "history", "comment"])
def test_each_command_says_it_in_one_line_and_exits_2(tmp_path: Path, bad: str, command: str) -> None:
    folder = _folder(tmp_path, bad)
    argv = {
        "merge": ["merge", str(folder), "--output-dir", str(tmp_path / "merged")],
        "history": ["history", "record", "--report", str(folder), "--force"],
        "comment": ["comment", "--report", str(folder), "--dry-run"],
    }[command]
    try:
        done = _kbench(tmp_path, *argv)
    except subprocess.TimeoutExpired:
        pytest.fail(f"kbench-ci {command} hung on the {bad} results.json")
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr and done.stderr.count("\n") == 1, done.stderr
    assert "results.json" in done.stderr and BAD[bad][1] in done.stderr


@pytest.mark.parametrize("bad", ["nested_200000_deep", "schema_version_999"])
def test_the_action_steps_as_the_runner_runs_them(tmp_path: Path, bad: str) -> None:
    folder = _folder(tmp_path, bad)
    env = {**os.environ, **_runner(tmp_path, folder), "PYTHONPATH": str(ROOT)}
    codes = {}
    for step in ("summary", "gate"):
        done = subprocess.run([sys.executable, "-m", "kbench_ci.github.action", step], env=env, capture_output=True,
                              text=True, cwd=tmp_path, timeout=60)
        assert "Traceback" not in done.stderr, done.stderr
        assert "::error::kbench-ci: " in done.stdout and BAD[bad][1] in done.stdout, done.stdout
        codes[step] = done.returncode
    assert codes == {"summary": 0, "gate": 2}


# -- a sixth reader: --shard-timings (an earlier results.json) ------------------------------------


@pytest.mark.parametrize("bad", ["fifo", "nested_200000_deep", "nan_sample", "schema_version_999", "one_case_id_3000_times",
                                 "symlink_out_of_the_folder"])
def test_shard_timings_refuses(tmp_path: Path, bad: str) -> None:
    from kbench_ci.suite.shards import read_timings

    folder = _folder(tmp_path, bad)
    _refused_in_one_line(folder, bad, lambda: read_timings(folder / "results.json"))
