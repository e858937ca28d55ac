"""`merge`'s check that shards add up to one run, on synthetic shard records: every
problem names the shard at fault, and a missing shard of a count-balanced split names exactly the
cases it would have measured."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from kbench_ci.gate.merge import ShardSource, check_shards, check_shards_per_model, runs_per_model
from kbench_ci.results.outcome import ShardRecord
from kbench_ci.suite.shards import assign_shards

PLAN = tuple(sorted(f"k{i}[N={2 ** i}]" for i in range(10)))


def source(index: int, count: int = 3, *, plan: tuple[str, ...] = PLAN, head: str = "h" * 40,
           measured: tuple[str, ...] | None = None, complete: bool = True, name: str | None = None) -> ShardSource:
    mine = tuple(sorted(c for c, k in assign_shards(plan, count).items() if k == index))
    return ShardSource(
        directory=Path(name or f"shard-{index}"), command="compare",
        shard=ShardRecord(index, count, all_case_ids=plan, case_ids=mine), unsharded=False, gpu="cpu",
        commits=("b" * 40, head), complete=complete, measured=mine if measured is None else measured, payload={},
    )


def test_complete_shards_have_no_problem() -> None:
    check = check_shards([source(1), source(2), source(3)])
    assert check.problems == () and [s.label for s in check.counted] == ["1/3", "2/3", "3/3"]


@pytest.mark.parametrize("missing", [1, 2, 3])
def test_a_missing_shard_is_named_with_exactly_its_cases(missing: int) -> None:
    present = [source(k) for k in (1, 2, 3) if k != missing]
    (problem,) = check_shards(present).problems
    assert problem.shard == f"{missing}/3" and "is missing" in problem.message
    assert problem.cases == source(missing).shard.case_ids and problem.cases


def test_each_way_of_not_adding_up_names_its_shard() -> None:
    problems = check_shards([
        source(1), source(2), source(2, name="again"), source(3, head="f" * 40),
    ]).problems
    texts = [f"{p.shard}: {p.message}" for p in problems]
    assert any(t.startswith("2/3: shard 2/3 is there twice") for t in texts)
    assert any(t.startswith("3/3:") and "different commits" in t for t in texts)
    assert any(t.startswith("3/3: shard 3/3 is missing") for t in texts)  # the foreign one does not count
    other_plan = check_shards([source(1), source(2), source(3, plan=PLAN[:-1])]).problems
    assert other_plan[0].shard == "3/3" and "planned other cases" in other_plan[0].message
    other_count = check_shards([source(1), source(2), source(3), source(1, count=2)]).problems
    assert [p.shard for p in other_count] == ["1/2"] and "split into 2" in other_count[0].message


def test_an_unfinished_shard_and_a_case_measured_twice_are_named() -> None:
    two = source(2)
    problems = check_shards([
        source(1), ShardSource(**{**{f: getattr(two, f) for f in ShardSource.__slots__},  # type: ignore[arg-type]
                                  "measured": two.measured[:-1], "complete": False}),
        source(3, measured=(*source(3).measured, source(1).measured[0])),
    ]).problems
    unfinished = next(p for p in problems if "did not finish" in p.message)
    assert unfinished.shard == "2/3" and unfinished.cases == (two.measured[-1],)
    twice = next(p for p in problems if "is in shard" in p.message)
    assert twice.shard == "3/3" and twice.cases == (source(1).measured[0],)


def test_the_whole_suite_on_each_model_is_checked_model_by_model() -> None:
    """Shard index 1 on two models: each model's shards must add up on their own, every model
    must have measured the first model's commits and plan, and a problem names its model."""
    a100 = "NVIDIA A100"
    cpu = [source(k) for k in (1, 2, 3)]
    on_a100 = [replace(source(k, count=2), gpu=a100, directory=Path(f"a100-{k}")) for k in (1, 2)]  # its own N
    assert runs_per_model(cpu + on_a100) and not runs_per_model(cpu)
    check = check_shards_per_model(cpu + on_a100)
    assert check.problems == () and check.per_model and len(check.counted) == 5
    assert sorted(c for s in check.counted for c in s.measured) == sorted(PLAN * 2)  # every case once per model

    missing = check_shards_per_model(cpu + on_a100[:1]).problems
    assert [p.shard for p in missing] == ["2/2 on NVIDIA A100"] and missing[0].message.startswith(f"{a100}: shard 2/2 is missing")
    other_head = [replace(s, commits=("b" * 40, "f" * 40)) for s in on_a100]
    (problem,) = check_shards_per_model(cpu + other_head).problems
    assert problem.shard == "1/2 on NVIDIA A100" and "different commits" in problem.message
    other_plan = [replace(source(k, count=2, plan=PLAN[:-1]), gpu=a100) for k in (1, 2)]
    (problem,) = check_shards_per_model(cpu + other_plan).problems
    assert problem.shard == "1/2 on NVIDIA A100" and "planned other cases than cpu" in problem.message
