"""Which cases a shard of a runner matrix measures (``--shard K/N``): a pure function of the case
ids, N and (optionally) the seconds each case took last time, so every job of the matrix computes
the same split on its own and every case lands in exactly one shard.

Balanced by time when timings are given (longest first, each to the shard with the least time
so far: the LPT rule, within 4/3 of the best possible makespan), by count otherwise. A case
without a timing counts as the median of the known ones.
"""

from __future__ import annotations

import re
import statistics
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from kbench_ci.errors import UsageError
from kbench_ci.results.load import read_json, validate_results

_SPEC = re.compile(r"^\s*(\d+)\s*/\s*(\d+)\s*$")


@dataclass(frozen=True, slots=True)
class Shard:
    index: int  # 1-based, as written: --shard 2/3
    count: int

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"


def parse_shard(text: str) -> Shard:
    match = _SPEC.match(text)
    if not match or not 1 <= int(match.group(1)) <= int(match.group(2)):
        raise UsageError(f"a shard must be K/N with 1 <= K <= N, got {text!r}", hint="e.g. 2/3: the second of three")
    return Shard(int(match.group(1)), int(match.group(2)))


def assign_shards(case_ids: Iterable[str], count: int, timings: Mapping[str, float] | None = None) -> dict[str, int]:
    """Every case id -> its shard (1..count)."""
    ids = sorted(set(case_ids))
    known = [t for t in (timings or {}).values() if t > 0]
    default = statistics.median(known) if known else 1.0
    weight = {case: (timings or {}).get(case, default) if known else 1.0 for case in ids}
    loads = [0.0] * count
    shard_of: dict[str, int] = {}
    for case in sorted(ids, key=lambda c: (-weight[c], c)):
        target = min(range(count), key=lambda k: (loads[k], k))
        loads[target] += weight[case]
        shard_of[case] = target + 1
    return shard_of


def cases_of_shard(case_ids: Iterable[str], shard: Shard, timings: Mapping[str, float] | None = None) -> set[str]:
    return {case for case, k in assign_shards(case_ids, shard.count, timings).items() if k == shard.index}


def read_timings(path: Path) -> dict[str, float]:
    """Seconds per case id: a ``{case_id: seconds}`` JSON file, or an earlier results.json (run or
    compare), whose cases' ``seconds.total`` are used."""
    try:
        # results.json's one reader: a FIFO does not hang, a file nested too deep does not crash
        data = read_json(path)
    except FileNotFoundError:
        raise UsageError(f"timings file {path} not found", hint="pass a results.json of an earlier run, or leave it out") from None
    if isinstance(data, dict) and "schema" in data:
        data = validate_results(data, path, reader="--shard-timings").data
    if isinstance(data, dict) and isinstance(data.get("cases"), list):
        try:
            return {str(c["case_id"]): float((c.get("seconds") or {}).get("total") or 0.0)
                    for c in data["cases"] if isinstance(c, dict) and "case_id" in c}
        except (AttributeError, TypeError, ValueError):
            raise UsageError(f"timings file {path}: a case's seconds.total is not a number") from None
    if isinstance(data, dict) and all(isinstance(v, (int, float)) for v in data.values()):
        return {str(k): float(v) for k, v in data.items()}
    raise UsageError(f"timings file {path} is neither a results.json nor {{case_id: seconds}}")
