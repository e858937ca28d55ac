#!/usr/bin/env python3
"""Does a case's time depend on which version of the inputs its call was given?

    python3 scripts/probes/by_version.py RESULTS_JSON [--case CASE_ID]

For each case of a compare's (or run's) results.json that kept ``round_versions``: per variant
and input version, the number of samples and their median (us), then per version head/base and
the geometric mean of those ratios next to the pooled head/base. Why: on the H200 the vector
add at 2^23 (33 us) read trimodal samples (32.8-33.4 / 33.8-34.8 / 35.2-35.5 us) and stayed
`inconclusive` at +-1% after 158 rounds in three compares. Both sides meet the same versions in
the same order, yet pairing base and head call by call (so version by version) did not narrow
the spread of head/base (sd of the log ratio 0.032 paired, 0.035 with the calls shuffled within
each round, results.json of that compare): the modes look per call, not per version. This
script reads it off the versions directly where results.json kept them. Prints figures only;
judges nothing.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from collections import defaultdict
from pathlib import Path


def by_version(variant: dict) -> dict[int, list[float]]:
    samples: dict[int, list[float]] = defaultdict(list)
    for round_ms, round_versions in zip(variant.get("rounds_ms", ()), variant.get("round_versions", ()), strict=True):
        for sample, version in zip(round_ms, round_versions, strict=True):
            samples[version].append(sample * 1e3)
    return dict(samples)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("results", type=Path)
    parser.add_argument("--case", default=None)
    args = parser.parse_args()
    data = json.loads(args.results.read_text())
    cases = data.get("cases") or [data["case"]]
    shown = 0
    for case in cases:
        if args.case and case.get("case_id") != args.case:
            continue
        variants = [case[side] for side in ("base", "head") if isinstance(case.get(side), dict)] or case.get("variants", [])
        tables = {v["label"]: by_version(v) for v in variants if v.get("round_versions")}
        if not tables:
            continue
        shown += 1
        print(f"{case.get('case_id', '?')}: verdict {case.get('verdict', '-')}, pooled ratio {case.get('ratio')}")
        for label, table in tables.items():
            cells = ", ".join(f"v{v}: {len(s)} x {statistics.median(s):.2f}" for v, s in sorted(table.items()))
            print(f"  {label}: {cells}")
        if {"base", "head"} <= tables.keys():
            shared = sorted(tables["base"].keys() & tables["head"].keys())
            ratios = [statistics.median(tables["head"][v]) / statistics.median(tables["base"][v]) for v in shared]
            print("  head/base per version: " + ", ".join(f"v{v} {r:.4f}" for v, r in zip(shared, ratios, strict=True)))
            if ratios:
                print(f"  geometric mean over versions: {math.exp(statistics.fmean(math.log(r) for r in ratios)):.4f}")
    if not shown:
        print("no case with round_versions (results.json written before they were kept?)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
