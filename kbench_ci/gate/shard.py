"""``--shard K/N`` where the cases are planned: which of them this job measures, and the record
of it that goes into results.json (read back by ``merge``)."""

from __future__ import annotations

from collections.abc import Sequence

from kbench_ci.results.outcome import ShardRecord, ShardRequest
from kbench_ci.suite.shards import Shard, cases_of_shard

__all__ = ["plan_shard"]


def plan_shard(case_ids: Sequence[str], shard: ShardRequest | None, *, commit: str | None = None) -> ShardRecord | None:
    """The shard's share of ``case_ids`` (every case of the matrix: for ``compare``, both sides'
    union), or None without ``--shard``. Every job of the matrix computes the same split."""
    if shard is None:
        return None
    everything = tuple(sorted(set(case_ids)))
    mine = cases_of_shard(everything, Shard(shard.index, shard.count), shard.timings)
    return ShardRecord(
        index=shard.index, count=shard.count, all_case_ids=everything, case_ids=tuple(sorted(mine)),
        balanced_by="timings" if shard.timings else "count", timings_file=shard.timings_file, commit=commit,
    )
