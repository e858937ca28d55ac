"""Where `--isolation` comes from: the command line, else KBENCH_CI_ISOLATION, else kbench.toml's
[defaults] isolation, else "process"; a value that is neither is one line naming where it came from."""

from __future__ import annotations

from pathlib import Path

import pytest

from kbench_ci.errors import UsageError
from kbench_ci.suite.loader import load_suite
from kbench_ci.suite.settings import ExecutionOptions, SuiteSettings, changed_settings, execution
from tests.unit.suite.test_config import MINIMAL, load_error, write_suite


def test_the_default_is_the_in_process_worker() -> None:
    chosen = execution(SuiteSettings(), ExecutionOptions(), environ={})
    assert chosen.isolation == "process"
    assert chosen.worker_module == "kbench_ci.measure.worker"


def test_kbench_toml_then_the_environment_then_the_flag() -> None:
    suite = SuiteSettings(isolation="judge")
    assert execution(suite, ExecutionOptions(), environ={}).worker_module == "kbench_ci.judge.main"
    assert execution(suite, ExecutionOptions(), environ={"KBENCH_CI_ISOLATION": "process"}).isolation == "process"
    assert execution(SuiteSettings(), ExecutionOptions(isolation="judge"), environ={"KBENCH_CI_ISOLATION": "process"}).isolation == "judge"


@pytest.mark.parametrize(("options", "environ", "where"), [
    (ExecutionOptions(isolation="jail"), {}, "--isolation"),
    (ExecutionOptions(), {"KBENCH_CI_ISOLATION": "sandbox"}, "KBENCH_CI_ISOLATION"),
])
def test_an_unknown_isolation_names_where_it_came_from(options: ExecutionOptions, environ: dict[str, str], where: str) -> None:
    with pytest.raises(UsageError) as info:
        execution(SuiteSettings(), options, environ=environ)
    assert info.value.one_line().startswith(where)
    assert "process, judge" in info.value.one_line()


def test_kbench_toml_takes_judge_and_refuses_anything_else(tmp_path: Path) -> None:
    suite = load_suite(write_suite(tmp_path, "[defaults]\nisolation = \"judge\"\n\n" + MINIMAL))
    assert suite.settings.isolation == "judge"
    message = load_error(tmp_path, "[defaults]\nisolation = \"jail\"\n\n" + MINIMAL)
    assert "isolation" in message and "'judge'" in message


@pytest.mark.parametrize(("name", "value"), [
    ("KBENCH_CI_JUDGE_FRESH_MS", "fast"), ("KBENCH_CI_JUDGE_FRESH_MS", "-1"), ("KBENCH_CI_JUDGE_FRESH_MS", "inf"),
    ("KBENCH_CI_JUDGE_PLACEMENTS", "0"), ("KBENCH_CI_JUDGE_PLACEMENTS", "2.5"),
    ("KBENCH_CI_JUDGE_TOUCH_STRIDE", "64k"), ("KBENCH_CI_JUDGE_TOUCH_STRIDE", "-1"),
    ("KBENCH_CI_JUDGE_SETTLE_US", "nan"), ("KBENCH_CI_JUDGE_SETTLE_US", "-2"), ("KBENCH_CI_JUDGE_SETTLE_US", "5000"),
])
def test_a_bad_judge_knob_stops_a_judged_command_and_names_itself(name: str, value: str) -> None:
    with pytest.raises(UsageError) as info:
        execution(SuiteSettings(), ExecutionOptions(isolation="judge"), environ={name: value})
    assert info.value.one_line().startswith(f"{name}={value!r} is not a number of")
    assert name in (info.value.hint or "")
    # the in-process worker reads neither: a judge knob does not stop it
    assert execution(SuiteSettings(), ExecutionOptions(isolation="process"), environ={name: value}).isolation == "process"


def test_the_judge_knobs_read_their_values_and_defaults() -> None:
    from kbench_ci.suite.settings import (
        judge_fresh_ms,
        judge_placements,
        judge_settle_us,
        judge_touch_stride,
    )

    assert judge_fresh_ms({}) == 5.0 and judge_fresh_ms({"KBENCH_CI_JUDGE_FRESH_MS": "0"}) == 0.0
    assert judge_fresh_ms({"KBENCH_CI_JUDGE_FRESH_MS": " 2.5 "}) == 2.5
    assert judge_placements({}) == 4 and judge_placements({"KBENCH_CI_JUDGE_PLACEMENTS": "2"}) == 2
    assert judge_touch_stride({}) == 65536 and judge_touch_stride({"KBENCH_CI_JUDGE_TOUCH_STRIDE": "0"}) == 0
    assert judge_settle_us({}) == 0.0 and judge_settle_us({"KBENCH_CI_JUDGE_SETTLE_US": "5"}) == 5.0


def test_a_compare_names_every_default_the_pull_request_changed(tmp_path: Path) -> None:
    """compare runs with the base's [defaults]; what the head's differ in is named, field by field
    (cache_dir relative to each side's suite folder: the sides are checked out apart)."""
    base_root, head_root = tmp_path / "base", tmp_path / "head"
    base = SuiteSettings(isolation="judge", rounds=10, cache_dir=base_root / "cache")
    head = SuiteSettings(isolation="process", rounds=2, cache_dir=head_root / "cache", timing_method="host_time")
    assert changed_settings(base, head, base_root=base_root, head_root=head_root) == (
        "timing_method cuda_event → host_time", "rounds 10 → 2", "isolation judge → process",
    )
    moved = SuiteSettings(isolation="judge", rounds=10, cache_dir=head_root / "elsewhere")
    assert changed_settings(base, moved, base_root=base_root, head_root=head_root) == ("cache_dir cache → elsewhere",)
    assert changed_settings(base, base, base_root=base_root, head_root=base_root) == ()
    assert changed_settings(SuiteSettings(), SuiteSettings(isolation="judge"), base_root=base_root,
                            head_root=head_root) == ("isolation unset → judge",)
