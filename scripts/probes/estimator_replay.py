#!/usr/bin/env python3
"""Replay kept GPU samples through another centre than the pooled median (figures, for a design).

    python3 scripts/probes/estimator_replay.py RESULTS_JSON ... [--threshold 0.01] [--change 0.02]

Every case of the given compare results.json files is taken as an A/A (run them on A/A
compares) and judged at ``--threshold`` twice: as kbench-ci judges it (kbench_ci.stats:
ratio of pooled medians, two-stage paired bootstrap, Wilcoxon over rounds) and with the
interquartile mean (the mean of the middle half of the pooled samples) in the same bootstrap.
Then the head's samples are scaled by 1 + ``--change`` (a known slowdown on real noise) and
judged again. Prints the verdict counts, the median half-width of the intervals, and the cases
where the two disagree.

Why: a case whose samples are multimodal has its pooled median in a gap between modes, and the
median's interval then stays wide (the 33 us vector add: +-1% after 158 rounds, docs/statistics.md
"Open: a case whose samples are multimodal"); a mean of the middle half does not sit on one point.
The stopping rule's rounds are those the product ran, so this judges intervals on the samples
kept, not how many rounds another rule would have run.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from kbench_ci.stats import RatioEstimate, Verdict, _wilcoxon_signed_rank_p, classify, compare_rounds  # noqa: E402

REPLICATES = 2000


def interquartile_mean(values: np.ndarray, axis: int = -1) -> np.ndarray:
    ordered = np.sort(values, axis=axis)
    n = ordered.shape[axis]
    low, high = n // 4, n - n // 4
    return np.take(ordered, np.arange(low, high), axis=axis).mean(axis=axis)


def iqm_estimate(base_rounds: list[list[float]], head_rounds: list[list[float]], rng: np.random.Generator) -> RatioEstimate:
    """Ratio of pooled interquartile means; two-stage paired bootstrap (rounds drawn once for
    both sides, then each round's samples per side); Wilcoxon over per-round IQM ratios."""
    base, head = np.asarray(base_rounds), np.asarray(head_rounds)
    rounds, width = base.shape
    ratio = float(interquartile_mean(head.ravel()) / interquartile_mean(base.ravel()))
    picks = rng.integers(0, rounds, size=(REPLICATES, rounds))

    def pooled(side: np.ndarray) -> np.ndarray:
        columns = rng.integers(0, width, size=(REPLICATES, rounds, width))
        return interquartile_mean(side[picks[:, :, None], columns].reshape(REPLICATES, rounds * width))

    replicates = pooled(head) / pooled(base)
    low, high = np.quantile(replicates, [0.025, 0.975])
    per_round = interquartile_mean(head) / interquartile_mean(base)
    p_value = _wilcoxon_signed_rank_p(np.log(per_round)) if rounds > 1 else 1.0
    return RatioEstimate(ratio=ratio, ci_low=float(low), ci_high=float(high), p_value=float(p_value), n_rounds=rounds,
                         confidence=0.95, round_ratios=tuple(float(r) for r in per_round))


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("results", type=Path, nargs="+")
    parser.add_argument("--threshold", type=float, default=0.01)
    parser.add_argument("--change", type=float, default=0.02)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    counts: dict[str, Counter[str]] = {name: Counter() for name in ("median A/A", "IQM A/A", "median +change", "IQM +change")}
    widths: dict[str, list[float]] = {name: [] for name in counts}
    disagreements = []
    for path in args.results:
        for case in json.loads(path.read_text()).get("cases", []):
            base, head = case["base"].get("rounds_ms") or [], case["head"].get("rounds_ms") or []
            if not base or len(base) != len(head) or len({len(r) for r in base + head}) != 1:
                continue
            changed = [[s * (1 + args.change) for s in r] for r in head]
            for label, head_rounds in (("A/A", head), ("+change", changed)):
                median_estimate = compare_rounds(base, head_rounds)
                iqm = iqm_estimate(base, head_rounds, rng)
                verdicts = {}
                for name, estimate in (("median", median_estimate), ("IQM", iqm)):
                    verdict = classify(estimate, args.threshold)
                    verdicts[name] = verdict
                    counts[f"{name} {label}"][verdict.value] += 1
                    widths[f"{name} {label}"].append((estimate.ci_high - estimate.ci_low) / 2)
                if verdicts["median"] is not verdicts["IQM"]:
                    disagreements.append(
                        f"{path.parent.name}/{case['case_id']} {label}: median {verdicts['median'].value} "
                        f"{median_estimate.ratio:.4f} [{median_estimate.ci_low:.4f}, {median_estimate.ci_high:.4f}], "
                        f"IQM {verdicts['IQM'].value} {iqm.ratio:.4f} [{iqm.ci_low:.4f}, {iqm.ci_high:.4f}] "
                        f"({len(base)} rounds)")
    for name, counter in counts.items():
        total = sum(counter.values())
        shown = ", ".join(f"{v.value} {counter[v.value]}" for v in Verdict if counter[v.value])
        print(f"{name:16s} {total:4d} case-runs: {shown}; median half-width {100 * float(np.median(widths[name])):.2f}%")
    print(f"\n{len(disagreements)} disagreements:")
    print("\n".join(disagreements))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
