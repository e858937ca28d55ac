"""bench's --NAME=VALUE dimensions: positive integers only, and a mistyped
flag is not silently taken for a dimension."""

from __future__ import annotations

from pathlib import Path

import pytest

from kbench_ci.errors import UsageError
from kbench_ci.gate.bench import BenchRequest, check_dimension_names, parse_dimension_args
from kbench_ci.results.model import MeasureSettings

OPTIONS = ["--ref", "--num-trials", "--num-warmup", "--seed", "--timeout", "--output-dir"]


@pytest.mark.parametrize(("args", "dims"), [
    (["--N=1024"], {"N": 1024}),
    (["--M", "8", "--N=+16"], {"M": 8, "N": 16}),
])
def test_positive_integers_are_dimensions(args: list[str], dims: dict[str, int]) -> None:
    assert parse_dimension_args(args, OPTIONS) == dims


@pytest.mark.parametrize(("value", "hint"), [
    ("1024.5", "positive integers"), ("1e3", "write --N=1000"), ("1000.0", "write --N=1000"), ("-5", "positive integers"),
    ("0", "positive integers"), ("inf", "positive integers"), ("nan", "positive integers"), ("", "positive integers"),
])
def test_anything_else_is_a_usage_error(value: str, hint: str) -> None:
    with pytest.raises(UsageError) as info:
        parse_dimension_args([f"--N={value}"], OPTIONS)
    assert info.value.message == f"dimension --N must be a positive integer, got '{value}'"
    assert hint in (info.value.hint or "")


def _request(tmp_path: Path, dims: dict[str, int], setup: str) -> BenchRequest:
    (tmp_path / "kernel.py").write_text(f"{setup}\n\ndef run_kernel(x, y, **_):\n    pass\n")
    (tmp_path / "ref.py").write_text("def reference(x, **kwargs):\n    return x\n")
    return BenchRequest(
        solution=tmp_path / "kernel.py", ref=tmp_path / "ref.py", implementation="pytorch", baselines=(),
        dims=dims, output_dir=tmp_path / "out",
        settings=MeasureSettings(device="cpu", seed=42, correctness_trials=1, timing_method="host_time", num_warmup=0,
                                 trials_per_round=2, discard_first=0, rounds=1, flush_l2=False),
        known_options=tuple(OPTIONS),
    )


def test_a_dimension_close_to_a_flag_and_named_by_no_function_is_a_mistyped_flag(tmp_path: Path) -> None:
    with pytest.raises(UsageError) as info:
        check_dimension_names(_request(tmp_path, {"N": 8, "trials": 5}, "def setup(N, **_):\n    pass"))
    assert info.value.one_line() == (
        "unknown option '--trials' (did you mean --num-trials? No function of kernel.py or ref.py takes a "
        "parameter 'trials', so it is no dimension either)"
    )


def test_a_dimension_a_function_names_is_kept_however_close_to_a_flag(tmp_path: Path) -> None:
    check_dimension_names(_request(tmp_path, {"N": 8, "trials": 5}, "def setup(N, trials, **_):\n    pass"))


def test_a_dimension_far_from_every_flag_is_kept(tmp_path: Path) -> None:
    check_dimension_names(_request(tmp_path, {"N": 8, "heads": 5}, "def setup(N, **_):\n    pass"))


def test_a_file_that_does_not_parse_is_left_to_the_worker(tmp_path: Path) -> None:
    check_dimension_names(_request(tmp_path, {"trials": 5}, "def setup(N, **_) syntax error"))
