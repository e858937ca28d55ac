"""Shards of a runner matrix: every case in exactly one shard, the same split in every
job, balanced by time when timings are given."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kbench_ci.errors import UsageError
from kbench_ci.suite.shards import Shard, assign_shards, cases_of_shard, parse_shard, read_timings

CASES = [f"k{n}[N={2**n}]" for n in range(11)]


@pytest.mark.parametrize("count", [1, 2, 3, 7, 11, 15])
def test_every_case_is_in_exactly_one_shard(count: int) -> None:
    shards = [cases_of_shard(CASES, Shard(k, count)) for k in range(1, count + 1)]
    assert sorted(c for s in shards for c in s) == sorted(CASES)
    sizes = [len(s) for s in shards]
    assert max(sizes) - min(sizes) <= 1  # by count without timings


def test_the_split_does_not_depend_on_the_order_cases_come_in() -> None:
    assert assign_shards(CASES, 3) == assign_shards(list(reversed(CASES)), 3)


def test_timings_balance_the_time_not_the_count() -> None:
    timings = {c: 1.0 for c in CASES} | {CASES[0]: 10.0}
    shard_of = assign_shards(CASES, 2, timings)
    alone = [c for c in CASES if shard_of[c] == shard_of[CASES[0]]]
    assert alone == [CASES[0]]  # 10 s on one runner, the ten 1 s cases on the other
    # A case without a timing counts as the median of the known ones.
    assert set(assign_shards([*CASES, "new[N=1]"], 2, timings)) == {*CASES, "new[N=1]"}


def test_shard_specs() -> None:
    assert parse_shard("2/3") == Shard(2, 3) and str(parse_shard(" 1 / 1 ")) == "1/1"
    for bad in ("0/3", "4/3", "3", "a/b", "-1/2"):
        with pytest.raises(UsageError, match="a shard must be K/N"):
            parse_shard(bad)


def test_timings_from_an_earlier_results_json_or_a_plain_map(tmp_path: Path) -> None:
    results = tmp_path / "results.json"
    results.write_text(json.dumps({"cases": [{"case_id": "a[N=1]", "seconds": {"total": 8.0}}]}))
    assert read_timings(results) == {"a[N=1]": 8.0}
    plain = tmp_path / "t.json"
    plain.write_text(json.dumps({"a[N=1]": 2}))
    assert read_timings(plain) == {"a[N=1]": 2.0}
    with pytest.raises(UsageError, match="not found"):
        read_timings(tmp_path / "missing.json")
