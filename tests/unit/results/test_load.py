"""The one reader of results.json (kbench_ci/results/load.py): every file the
writers write passes its strictest check, and each way a file can hang a reader, crash it or lie
to it is one ResultsFileError naming the file and the problem."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from kbench_ci.errors import ExitCode, ResultsFileError
from kbench_ci.results.load import MAX_BYTES, VERDICTS, load_results, validate_results
from kbench_ci.results.schema import BENCH_SCHEMA, COMPARE_SCHEMA, RUN_SCHEMA
from kbench_ci.results.writers import bench_results_payload, compare_payload, run_payload
from kbench_ci.stats import Verdict
from tests.unit.results import test_round_trip as written

ALL = (RUN_SCHEMA, COMPARE_SCHEMA, BENCH_SCHEMA)


def _on_disk(tmp_path: Path, payload: dict[str, Any]) -> Path:
    """The payload through the one writer of results files (test_round_trip's ``_written``)."""
    written._written(tmp_path, payload)
    return tmp_path / "results.json"


def test_every_results_json_the_writers_write_passes_the_strict_check(tmp_path: Path) -> None:
    outcome, request = written._run_outcome(tmp_path)
    loaded = load_results(_on_disk(tmp_path, run_payload(outcome, request)), reader="test", strict=True)
    assert loaded.command == "run" and len(loaded.data["cases"]) == len(outcome.cases)
    compared = load_results(_on_disk(tmp_path, compare_payload(written._compare_outcome(tmp_path))), reader="test", strict=True)
    assert compared.command == "compare"
    from kbench_ci.results.writers import BenchRecord

    case = written._result("bench[N=8]", {"N": 8}, written._variant("solution"))
    record = BenchRecord(command_line=("kbench-ci", "bench"), solution="k.cu", ref="ref.py", implementation="cuda-cpp",
                         settings=written.SETTINGS, baselines=(), atol=1e-3, rtol=None, precision=None, ptr_sizes={},
                         ptr_size=None)
    bench = load_results(_on_disk(tmp_path, bench_results_payload(record, case, None)), accept=ALL, reader="test", strict=True)
    assert bench.command == "bench"


def test_the_verdicts_it_accepts_are_the_verdicts() -> None:
    assert set(VERDICTS) == {verdict.value for verdict in Verdict}


def _good() -> dict[str, Any]:
    return {"schema": RUN_SCHEMA, "schema_version": 1, "environment": {"gpu_name": "NVIDIA H200"},
            "cases": [{"case_id": "vadd[N=8]", "median_ms": 0.1, "n_samples": 3,
                       "result": {"status": "ok", "rounds_ms": [[0.1, 0.1, 0.1]]}}]}


def _refused(path: Path, match: str, **kwargs: Any) -> ResultsFileError:
    with pytest.raises(ResultsFileError, match=match) as info:
        load_results(path, reader="kbench-ci test", **kwargs)
    assert info.value.exit_code == ExitCode.USAGE
    assert "\n" not in info.value.one_line() and str(path.name) in info.value.one_line()
    return info.value


def _file(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "results.json"
    path.write_text(text)
    return path


def test_a_fifo_is_refused_without_blocking(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "results.json")
    _refused(tmp_path / "results.json", "is a FIFO, not a regular file")


def test_a_symbolic_link_is_never_followed(tmp_path: Path) -> None:
    (tmp_path / "results.json").symlink_to("/etc/passwd")
    _refused(tmp_path / "results.json", "is a symbolic link; refusing to follow it")


def test_a_folder_is_refused(tmp_path: Path) -> None:
    (tmp_path / "results.json").mkdir()
    _refused(tmp_path / "results.json", "is a folder, not a regular file")


def test_a_file_larger_than_the_cap_is_refused_unparsed(tmp_path: Path) -> None:
    path = tmp_path / "results.json"
    with path.open("wb") as handle:
        handle.truncate(MAX_BYTES + 1)
    _refused(path, "is larger than 64 MiB")


def test_json_nested_200000_deep_is_refused_before_parsing(tmp_path: Path) -> None:
    _refused(_file(tmp_path, "[" * 200_000 + "]" * 200_000), "nests objects or lists more than 64 deep")
    deep_object = '{"schema": "kbench-ci/run", "x": ' + '{"a": ' * 200_000 + "1" + "}" * 200_001
    _refused(_file(tmp_path, deep_object), "nests objects or lists more than 64 deep")


def test_brackets_inside_strings_are_not_nesting(tmp_path: Path) -> None:
    good = _good()
    good["cases"][0]["message"] = '[[[[{{{{ "\\"[' * 100
    assert load_results(_file(tmp_path, json.dumps(good)), reader="test").data == good


@pytest.mark.parametrize("token", ["NaN", "Infinity", "-Infinity"])
def test_nan_and_infinity_tokens_are_refused(tmp_path: Path, token: str) -> None:
    text = json.dumps(_good()).replace("0.1, 0.1, 0.1", f"0.1, {token}, 0.1")
    _refused(_file(tmp_path, text), f"holds {token}, which is not JSON")


def test_a_number_beyond_a_float_is_refused(tmp_path: Path) -> None:
    text = json.dumps(_good()).replace("0.1, 0.1, 0.1", "0.1, 1e999, 0.1")
    _refused(_file(tmp_path, text), "holds the number 1e999, beyond what a float holds")


def test_a_key_twice_is_refused(tmp_path: Path) -> None:
    text = json.dumps(_good())[:-1] + ', "schema_version": 1}'
    _refused(_file(tmp_path, text), 'has the key "schema_version" twice')


@pytest.mark.parametrize("text", ["[]", "[1, 2]", '"results"', "3", "null"])
def test_a_top_level_that_is_not_an_object_is_refused(tmp_path: Path, text: str) -> None:
    _refused(_file(tmp_path, text), "not a results object")


def test_not_json_is_refused(tmp_path: Path) -> None:
    _refused(_file(tmp_path, "{not json"), "cannot read .*: not JSON")
    _refused(_file(tmp_path, '{"n": ' + "1" * 5000 + "}"), "cannot read .*: not JSON")


@pytest.mark.parametrize(("version", "match"), [
    (999, "has schema_version 999 of 'kbench-ci/run', newer than this kbench-ci reads"),
    (0, "has schema_version 0, not a version"),
    ("1", 'has schema_version "1", not a version'),
    (True, "has schema_version true, not a version"),
    (None, "has schema_version null, not a version"),
])
def test_an_unknown_or_newer_schema_version_is_refused(tmp_path: Path, version: Any, match: str) -> None:
    _refused(_file(tmp_path, json.dumps({**_good(), "schema_version": version})), match)


def test_no_schema_version_is_refused(tmp_path: Path) -> None:
    data = _good()
    del data["schema_version"]
    _refused(_file(tmp_path, json.dumps(data)), "has schema_version null, not a version")


def test_another_schema_is_refused_naming_what_the_reader_reads(tmp_path: Path) -> None:
    error = _refused(_file(tmp_path, json.dumps({"schema": BENCH_SCHEMA, "schema_version": 1})),
                     r"is a results.json of `kbench-ci bench` \('kbench-ci/bench'\)")
    assert error.hint == "kbench-ci test reads the results.json of `kbench-ci compare` or `kbench-ci run`"
    _refused(_file(tmp_path, json.dumps({"schema": "other/thing"})), "of schema \"other/thing\", not a kbench-ci results.json")


def test_no_cases_is_refused(tmp_path: Path) -> None:
    data = _good()
    del data["cases"]
    _refused(_file(tmp_path, json.dumps(data)), "the top level has no 'cases'")


@pytest.mark.parametrize(("change", "match"), [
    (lambda case: case["result"].update(rounds_ms="0.1,0.1"), r"cases\[0\].result.rounds_ms is \"0.1,0.1\", not a list"),
    (lambda case: case["result"].update(rounds_ms=[["0.1"]]), r"cases\[0\].result.rounds_ms\[0\]\[0\] is \"0.1\", not a finite"),
    (lambda case: case["result"].update(rounds_ms=[[None]]), r"rounds_ms\[0\]\[0\] is null, not a finite number"),
    (lambda case: case["result"].update(rounds_ms=[["inf"]]), r"rounds_ms\[0\]\[0\] is \"inf\", not a finite number"),
    (lambda case: case["result"].update(rounds_ms=[[-1.0]]), r"rounds_ms\[0\]\[0\] is -1.0, not a finite number >= 0"),
    (lambda case: case.update(median_ms="0.1"), r"cases\[0\].median_ms is \"0.1\", not a finite number"),
    (lambda case: case.update(n_samples=2.5), r"cases\[0\].n_samples is 2.5, not a whole number"),
    (lambda case: case.update(case_id=7), r"cases\[0\].case_id is 7, not a string"),
    (lambda case: case.update(dims={"N": "8"}), r"cases\[0\].dims.N is \"8\", not a whole number"),
    (lambda case: case.update(status="great"), r"cases\[0\].status is \"great\", not one of 'ok'"),
    (lambda case: case["result"].update(compiled=[{"name": "k", "source": "ptxas", "evil": 1}]),
     r"compiled\[0\].evil is not a field kbench-ci writes"),
    (lambda case: case.pop("case_id"), r"cases\[0\] has no 'case_id'"),
])
def test_a_field_of_the_wrong_type_is_named(tmp_path: Path, change: Any, match: str) -> None:
    data = _good()
    change(data["cases"][0])
    _refused(_file(tmp_path, json.dumps(data)), match)


def test_a_case_id_twice_is_refused(tmp_path: Path) -> None:
    data = _good()
    data["cases"] = data["cases"] * 3000
    _refused(_file(tmp_path, json.dumps(data)), r"cases\[1\] repeats case id \"vadd\[N=8\]\" of cases\[0\]")


def test_strict_needs_what_merge_rebuilds_the_report_from(tmp_path: Path) -> None:
    path = _file(tmp_path, json.dumps(_good()))
    assert load_results(path, reader="test").command == "run"
    _refused(path, "the top level has no 'gate'", strict=True)


def test_a_compare_case_with_a_ratio_needs_its_rounds(tmp_path: Path) -> None:
    case = {"case_id": "a", "ratio": 1.1, "ci_low": 1.0, "ci_high": 1.2, "p_value": 0.01, "n_rounds": None}
    data = {"schema": COMPARE_SCHEMA, "schema_version": 1, "cases": [case]}
    _refused(_file(tmp_path, json.dumps(data)), r"cases\[0\].n_rounds is null, not a whole number \(there is a ratio\)")


def test_a_verdict_must_be_a_verdict(tmp_path: Path) -> None:
    data = {"schema": COMPARE_SCHEMA, "schema_version": 1, "cases": [{"case_id": "a", "verdict": "great"}]}
    _refused(_file(tmp_path, json.dumps(data)), r"cases\[0\].verdict is \"great\", not one of 'slower'")


def test_validate_results_names_the_path_it_is_given() -> None:
    with pytest.raises(ResultsFileError, match=r"^x/results.json: cases is \"no\", not a list$"):
        validate_results({"schema": RUN_SCHEMA, "schema_version": 1, "cases": "no"}, Path("x/results.json"), reader="t")
