#!/usr/bin/env python3
"""How wide would a case's interval be with another estimate of head/base? (figures, for a design)

    python3 scripts/probes/paired_ci.py RESULTS_JSON [--case CASE_ID ...]

For each case of a compare's results.json with equal-sized rounds on both sides:

  reported  the interval in results.json (kbench_ci.stats.compare_rounds: ratio of pooled
            medians, two-stage paired bootstrap)
  pairs     the median of log(head call / base call) over the calls of the same round and
            place, its interval from a bootstrap over rounds (1,000 replicates)
  spread    sd of those per-call log ratios, paired and with each round's base calls shuffled
            (equal: the call's place, and so its input version, does not carry the mode)

Why: a case whose samples are multimodal (the vector add at 2^23 on an H200: 32.8-33.4 /
33.8-34.8 / 35.2-35.5 us) has its pooled median in a gap between modes, where few samples lie,
so the median moves with the modes' shares and its interval stays wide (+-1.0% after 158 rounds);
the median of per-call differences, a Hodges-Lehmann-like estimate, is unaffected by gaps (the
difference of two draws fills them) and is exact for a pure change of scale. Not wired into the
gate: it would need the A/A and 2% runs on the GPU first.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

REPLICATES = 1000


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("results", type=Path)
    parser.add_argument("--case", action="append", default=[])
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    data = json.loads(args.results.read_text())
    for case in data.get("cases", []):
        if args.case and case["case_id"] not in args.case:
            continue
        base_rounds, head_rounds = case["base"].get("rounds_ms") or [], case["head"].get("rounds_ms") or []
        if not base_rounds or len({len(r) for r in base_rounds + head_rounds}) != 1 or len(base_rounds) != len(head_rounds):
            continue
        base, head = np.asarray(base_rounds), np.asarray(head_rounds)
        log_ratios = np.log(head / base)
        shuffled = np.log(head / np.asarray([rng.permutation(r) for r in base]))
        replicates = [np.median(log_ratios[rng.integers(0, len(base), len(base))]) for _ in range(REPLICATES)]
        low, high = np.exp(np.quantile(replicates, [0.025, 0.975]))
        print(f"{case['case_id']:32s} {case['verdict']:12s} rounds {len(base):3d}  "
              f"reported {case['ratio']:.4f} [{case['ci_low']:.4f}, {case['ci_high']:.4f}]  "
              f"pairs {np.exp(np.median(log_ratios)):.4f} [{low:.4f}, {high:.4f}]  "
              f"spread {log_ratios.std():.4f} paired, {shuffled.std():.4f} shuffled")
    return 0


if __name__ == "__main__":
    sys.exit(main())
