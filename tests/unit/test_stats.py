"""Unit tests of kbench_ci.stats on fixed data, hand-computed p-values and seeded synthetic samples.

The synthetic timing model: each round draws lognormal noise around 1.0 ms; head may be shifted
by a multiplicative factor; a per-round drift may scale both sides of a round alike (the GPU's
clock/thermal state, which the interleaved A B B A measurement shares within a round); and a
fraction of samples may be hit by a 3-10x outlier (a preemption, a context switch).
"""

from __future__ import annotations

import json
import math
import statistics
import time
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from kbench_ci import stats
from kbench_ci.stats import (
    RatioEstimate,
    Summary,
    Verdict,
    classify,
    compare_rounds,
    geometric_mean,
    median_ci,
    needs_remeasure,
    shift_p,
    speedup,
    summarize,
    with_process_spread,
)

THRESHOLD = 0.02


def make_rounds(
    seed: int,
    *,
    shift: float = 1.0,
    n_rounds: int = 20,
    n_samples: int = 50,
    sigma: float = 0.01,
    drift: float = 0.0,
    outlier_fraction: float = 0.0,
) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Synthetic (base_rounds, head_rounds) in ms; head = shift x base in distribution."""
    rng = np.random.default_rng(seed)
    drift_factors = rng.uniform(1.0 - drift, 1.0 + drift, n_rounds)
    base, head = [], []
    for factor in drift_factors:
        sides = []
        for scale in (1.0, shift):
            x = scale * factor * rng.lognormal(0.0, sigma, n_samples)
            hit = rng.random(n_samples) < outlier_fraction
            x[hit] *= rng.uniform(3.0, 10.0, int(hit.sum()))
            sides.append(x)
        base.append(sides[0])
        head.append(sides[1])
    return base, head


# The many-seed sweeps use 500 bootstrap replicates instead of the default 2000 to keep this file
# fast; the verdict rules are the same, only the percentile interval is slightly noisier.
SWEEP_BOOTSTRAP = 500


def verdict_of(base, head, threshold: float = THRESHOLD) -> Verdict:
    return classify(compare_rounds(base, head, n_bootstrap=SWEEP_BOOTSTRAP), threshold)


def estimate(ratio: float, lo: float, hi: float, p: float) -> RatioEstimate:
    return RatioEstimate(
        ratio=ratio, ci_low=lo, ci_high=hi, p_value=p, n_rounds=20, confidence=0.95,
        round_ratios=(ratio,) * 20,
    )


# --------------------------------------------------------------------------------------------
# summarize / median_ci
# --------------------------------------------------------------------------------------------

FIXED = [3.1, 1.2, 5.5, 2.2, 4.8, 2.9, 3.3, 10.0, 0.7, 2.5]


def test_summarize_matches_numpy_reference():
    s = summarize(FIXED)
    x = np.array(FIXED)
    assert isinstance(s, Summary)
    assert s.n == 10
    assert s.median == np.median(x) == 3.0
    assert s.mean == pytest.approx(np.mean(x), rel=1e-15)
    assert s.std == pytest.approx(np.std(x, ddof=1), rel=1e-15)
    assert (s.min, s.max) == (0.7, 10.0)
    assert s.p20 == pytest.approx(np.percentile(x, 20), rel=1e-15)
    assert s.p80 == pytest.approx(np.percentile(x, 80), rel=1e-15)
    # n = 10: P(B <= 1) = 11/1024 <= 0.025 < P(B <= 2) = 56/1024, so ranks (2, 9), coverage 97.9%.
    # sorted: 0.7 1.2 2.2 2.5 2.9 3.1 3.3 4.8 5.5 10.0
    assert (s.ci_low, s.ci_high) == (1.2, 5.5)
    assert s.confidence == 0.95


def test_summarize_is_not_rounded():
    s = summarize([1.0000001234567, 1.0000001234568, 1.0000001234569])
    assert s.median == 1.0000001234568


def test_summarize_single_sample():
    s = summarize([2.5])
    assert (s.n, s.median, s.mean, s.std, s.min, s.max) == (1, 2.5, 2.5, 0.0, 2.5, 2.5)
    assert (s.ci_low, s.ci_high) == (2.5, 2.5)


@pytest.mark.parametrize(
    ("n", "ranks"),
    [
        (9, (2, 8)),  # P(B <= 1) = 10/512 = 0.0195 <= 0.025; coverage 96.1%
        (6, (1, 6)),  # [min, max] covers 1 - 2/64 = 96.9% >= 95%: a real interval
        (25, (8, 18)),  # P(B <= 7) = 0.0216 <= 0.025 < P(B <= 8) = 0.0539
    ],
)
def test_median_ci_order_statistic_ranks(n, ranks):
    # Samples 1..n in shuffled order: the CI bounds are then the ranks themselves.
    samples = list(np.random.default_rng(n).permutation(np.arange(1.0, n + 1)))
    assert median_ci(samples) == (float(ranks[0]), float(ranks[1]))


@pytest.mark.parametrize("n", [1, 2, 3, 5])
def test_median_ci_tiny_n_falls_back_to_min_max(n):
    # For n <= 5 even [min, max] covers the median with only 1 - 2**(1-n) < 95%.
    samples = [7.0, 3.0, 9.0, 4.0, 5.0][:n]
    assert median_ci(samples) == (min(samples), max(samples))


def test_median_ci_tiny_n_depends_on_confidence():
    # At 90% n = 5 does have an interval: [min, max] covers 93.75% >= 90%. n = 4 (87.5%) does not.
    assert median_ci([7.0, 3.0, 9.0, 4.0, 5.0], confidence=0.90) == (3.0, 9.0)
    assert median_ci([1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0], confidence=0.5) == (3.0, 5.0)


def test_median_ci_normal_approximation_matches_exact_rank_for_large_n():
    n = 2001  # above the exact-binomial cutoff
    exact_j = 0
    cumulative = 0
    for i in range(n):
        cumulative += math.comb(n, i)
        if Fraction(cumulative, 2**n) > Fraction(0.025):
            break
        exact_j = i + 1
    lo, hi = median_ci(np.arange(1.0, n + 1))
    assert abs(lo - exact_j) <= 1
    assert hi == n + 1 - lo


def test_median_ci_covers_true_median_about_95_percent():
    # Exponential(1) has median ln 2; n = 25 gives ranks (8, 18) with exact coverage 95.7%.
    rng = np.random.default_rng(12345)
    draws = rng.exponential(1.0, size=(1000, 25))
    covered = 0
    for row in draws:
        lo, hi = median_ci(row)
        covered += lo <= math.log(2.0) <= hi
    assert 0.90 <= covered / 1000 <= 0.99


@pytest.mark.parametrize("bad", [[], [1.0, float("nan")], [float("inf"), 1.0], [[1.0, 2.0]]])
def test_summarize_and_median_ci_reject_bad_samples(bad):
    with pytest.raises(ValueError):
        summarize(bad)
    with pytest.raises(ValueError):
        median_ci(bad)


@pytest.mark.parametrize("confidence", [0.0, 1.0, -0.5, 1.5, float("nan")])
def test_bad_confidence_raises(confidence):
    with pytest.raises(ValueError):
        summarize([1.0, 2.0], confidence=confidence)
    with pytest.raises(ValueError):
        compare_rounds([[1.0]] * 3, [[1.0]] * 3, confidence=confidence)


# --------------------------------------------------------------------------------------------
# speedup / geometric_mean
# --------------------------------------------------------------------------------------------


def test_speedup_is_baseline_over_solution():
    assert speedup(2.0, 0.5) == 4.0
    assert speedup(1.0, 2.0) == 0.5


@pytest.mark.parametrize(
    ("baseline", "solution"),
    [(0.0, 1.0), (1.0, 0.0), (-1.0, 1.0), (1.0, float("nan")), (float("inf"), 1.0)],
)
def test_speedup_rejects_bad_medians(baseline, solution):
    with pytest.raises(ValueError):
        speedup(baseline, solution)


def test_geometric_mean():
    assert geometric_mean([2.0, 8.0]) == pytest.approx(4.0, rel=1e-15)
    assert geometric_mean([2.0, 0.5]) == pytest.approx(1.0, rel=1e-15)
    assert geometric_mean([1.1]) == pytest.approx(1.1, rel=1e-15)
    # 1000 ratios of 1e300 would overflow a plain product.
    assert geometric_mean([1e300] * 1000) == pytest.approx(1e300, rel=1e-12)


@pytest.mark.parametrize("bad", [[], [0.0, 1.0], [-2.0, 2.0], [float("nan")], [float("inf")]])
def test_geometric_mean_rejects_bad_values(bad):
    with pytest.raises(ValueError):
        geometric_mean(bad)


# --------------------------------------------------------------------------------------------
# Verdict
# --------------------------------------------------------------------------------------------


def test_verdict_fails_gate():
    failing = {v for v in Verdict if v.fails_gate}
    assert failing == {Verdict.SLOWER, Verdict.INCORRECT, Verdict.FAILED}


def test_verdict_severity_orders_worst_first():
    expected = [
        Verdict.INCORRECT, Verdict.FAILED, Verdict.SLOWER, Verdict.INCONCLUSIVE, Verdict.REMOVED,
        Verdict.FIXED, Verdict.ADDED, Verdict.FASTER, Verdict.UNCHANGED,
    ]
    values = np.random.default_rng(0).permutation([v.value for v in Verdict])
    shuffled = [Verdict(v) for v in values]
    assert sorted(shuffled, key=lambda v: v.severity, reverse=True) == expected
    assert len({v.severity for v in Verdict}) == len(Verdict)


def test_verdict_is_a_plain_string():
    assert Verdict.SLOWER == "slower"
    assert str(Verdict.SLOWER) == "slower"
    assert f"{Verdict.INCONCLUSIVE}" == "inconclusive"
    assert Verdict("fixed") is Verdict.FIXED


# --------------------------------------------------------------------------------------------
# classify / needs_remeasure on hand-made estimates (the rule table)
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("ratio", "lo", "hi", "p", "expected"),
    [
        (1.03, 1.01, 1.05, 0.01, Verdict.SLOWER),
        (1.03, 1.01, 1.05, 0.05, Verdict.INCONCLUSIVE),  # p must be strictly below alpha
        (1.03, 0.99, 1.07, 0.01, Verdict.INCONCLUSIVE),  # CI reaches below 1
        (1.019, 1.01, 1.03, 1e-6, Verdict.INCONCLUSIVE),  # real but r within threshold, CI not
        (1.01, 1.005, 1.015, 1e-6, Verdict.UNCHANGED),  # significant, but inside the band
        (0.97, 0.95, 0.99, 0.01, Verdict.FASTER),
        (0.97, 0.95, 1.001, 0.01, Verdict.INCONCLUSIVE),
        (0.985, 0.975, 0.995, 1e-6, Verdict.INCONCLUSIVE),  # r inside band (1/1.02 = 0.9804)
        (1.0, 1 / 1.02, 1.02, 0.5, Verdict.UNCHANGED),  # band edges are inclusive
        (1.0, 0.97, 1.0, 0.5, Verdict.INCONCLUSIVE),
    ],
)
def test_classify_rule_table(ratio, lo, hi, p, expected):
    assert classify(estimate(ratio, lo, hi, p), THRESHOLD) is expected


def test_classify_alpha_is_respected():
    e = estimate(1.05, 1.02, 1.08, 0.03)
    assert classify(e, THRESHOLD) is Verdict.SLOWER
    assert classify(e, THRESHOLD, alpha=0.01) is Verdict.INCONCLUSIVE


@pytest.mark.parametrize("threshold", [0.0, -0.02, float("nan"), float("inf")])
def test_classify_rejects_bad_threshold(threshold):
    with pytest.raises(ValueError):
        classify(estimate(1.0, 0.99, 1.01, 0.5), threshold)
    with pytest.raises(ValueError):
        needs_remeasure(estimate(1.0, 0.99, 1.01, 0.5), threshold)


@pytest.mark.parametrize("alpha", [0.0, 1.0, float("nan")])
def test_classify_rejects_bad_alpha(alpha):
    with pytest.raises(ValueError):
        classify(estimate(1.0, 0.99, 1.01, 0.5), THRESHOLD, alpha=alpha)


@pytest.mark.parametrize(
    ("ratio", "lo", "hi", "p", "expected"),
    [
        (1.03, 1.01, 1.05, 0.01, True),  # SLOWER
        (1.03, 0.98, 1.08, 0.25, True),  # INCONCLUSIVE, r above the band: suspect
        (1.01, 0.98, 1.05, 0.25, False),  # INCONCLUSIVE, r inside the band
        (0.97, 0.90, 1.03, 0.25, False),  # INCONCLUSIVE, r below the band
        (1.0, 0.99, 1.01, 0.5, False),  # UNCHANGED
        (0.95, 0.94, 0.96, 0.001, True),  # FASTER: a speed-up must show twice too
    ],
)
def test_needs_remeasure(ratio, lo, hi, p, expected):
    assert needs_remeasure(estimate(ratio, lo, hi, p), THRESHOLD) is expected


# --------------------------------------------------------------------------------------------
# Significance tests: hand-computed p-values
# --------------------------------------------------------------------------------------------


def rounds_with_ratios(log_ratios):
    """One-sample rounds whose per-round log ratios are exactly the given values."""
    base = [[1.0] for _ in log_ratios]
    head = [[math.exp(d)] for d in log_ratios]
    return base, head


@pytest.mark.parametrize(
    ("log_ratios", "p"),
    [
        # All 6 positive: T+ = 21 is the maximum; one pattern of 64 each tail -> 2/64.
        ([0.01, 0.02, 0.03, 0.04, 0.05, 0.06], 2 / 64),
        # All 3 positive: 2/8, can never be significant.
        ([0.01, 0.02, 0.03], 2 / 8),
        # 5 of 6 positive, smallest negative: T+ = 20; sums >= 20 are {21, 20} -> 2/64, p = 4/64.
        ([-0.01, 0.02, 0.03, 0.04, 0.05, 0.06], 4 / 64),
        # n = 4, T+ = 1+2+3 = 6: P(T+ >= 6) = 7/16 < P(T+ <= 6) = 11/16 -> p = 14/16.
        ([0.01, 0.02, 0.03, -0.04], 14 / 16),
        # A zero difference is dropped: same as the 3 positive ones alone.
        ([0.0, 0.01, 0.02, 0.03], 2 / 8),
        # Tied |d|: mid-ranks 1.5, 1.5, 3 (doubled: 3, 3, 6). Signs +, -, +: 2T+ = 9. Subset sums
        # of {3, 3, 6}: 0 3 3 6 6 9 9 12 -> P(2T+ >= 9) = 3/8, P(2T+ <= 9) = 7/8 -> p = 6/8.
        ([0.01, -0.01, 0.02], 6 / 8),
        # All positive with ties is still the single extreme pattern: 2/8.
        ([0.01, 0.01, 0.02], 2 / 8),
        # 5 rounds all positive: 2/32 = 0.0625, the floor that makes 5 rounds never significant.
        ([0.01, 0.02, 0.03, 0.04, 0.05], 2 / 32),
    ],
)
def test_wilcoxon_exact_p_values(log_ratios, p):
    base, head = rounds_with_ratios(log_ratios)
    assert compare_rounds(base, head).p_value == pytest.approx(p, rel=1e-12)


def test_wilcoxon_tied_mid_ranks_exact_distribution():
    # |d| = 1, 1, 2, 2 -> ranks 1.5, 1.5, 3.5, 3.5 (total 10). Signs +, +, +, -: T+ = 6.5.
    # Subsets of {1.5, 1.5, 3.5, 3.5} with sum >= 6.5: {3.5,3.5}=7, {1.5,1.5,3.5}x2 = 6.5,
    # {1.5,3.5,3.5}x2 = 8.5, all = 10 -> 6/16; sum <= 6.5 -> 12/16. p = 2 * 6/16 = 0.75.
    base, head = rounds_with_ratios([0.01, 0.01, 0.02, -0.02])
    assert compare_rounds(base, head).p_value == pytest.approx(0.75, rel=1e-12)


def test_wilcoxon_all_zero_differences_is_p_one():
    base, head = rounds_with_ratios([0.0] * 8)
    assert compare_rounds(base, head).p_value == 1.0


def test_wilcoxon_normal_approximation_above_20_rounds():
    # n = 25 all positive: T+ = 325, mean 162.5, var = 25*26*51/24 = 1381.25,
    # z = (162.5 - 0.5) / sqrt(1381.25) = 4.35893..., p = erfc(z / sqrt 2) = 1.30706e-5.
    base, head = rounds_with_ratios([0.001 * (i + 1) for i in range(25)])
    assert compare_rounds(base, head).p_value == pytest.approx(1.30706e-05, rel=1e-5)
    # Exact for 20 rounds (2 / 2**20) and normal above: both tiny, in the same ballpark.
    base, head = rounds_with_ratios([0.001 * (i + 1) for i in range(20)])
    assert compare_rounds(base, head).p_value == pytest.approx(2 / 2**20, rel=1e-12)


def test_mann_whitney_single_round_hand_computed():
    # U_head = (4+5+6) - 6 = 9, mean 4.5, var = 3*3/12 * 7 = 5.25,
    # z = (4.5 - 0.5) / sqrt(5.25) = 1.74574, p = erfc(z / sqrt 2) = 0.080856.
    e = compare_rounds([[1.0, 2.0, 3.0]], [[4.0, 5.0, 6.0]])
    assert e.n_rounds == 1
    assert e.p_value == pytest.approx(0.0808556, rel=1e-5)
    assert e.ratio == 5.0 / 2.0
    assert e.round_ratios == (2.5,)


def test_mann_whitney_single_round_with_ties():
    # Pooled 1 1 2 2 3 3 -> ranks 1.5 1.5 3.5 3.5 5.5 5.5. Head {2, 3, 3}: 14.5 - 6 = U = 8.5.
    # Ties: three pairs, sum(t^3 - t) = 18, var = 9/12 * (7 - 18/30) = 4.8,
    # z = (4 - 0.5) / sqrt(4.8) = 1.59752, p = erfc(z / sqrt 2) = 0.110149.
    e = compare_rounds([[1.0, 1.0, 2.0]], [[2.0, 3.0, 3.0]])
    assert e.p_value == pytest.approx(0.110149, rel=1e-5)
    # Everything tied: no evidence at all.
    assert compare_rounds([[1.0, 1.0]], [[1.0, 1.0, 1.0]]).p_value == 1.0


def test_shift_p_is_the_mann_whitney_test_of_two_sides_figures():
    # the hand-computed single-round case above, through the public entry: order does not matter
    assert shift_p([4.0, 5.0, 6.0], [1.0, 2.0, 3.0]) == pytest.approx(0.0808556, rel=1e-5)
    assert shift_p([1.0, 2.0, 3.0], [4.0, 5.0, 6.0]) == pytest.approx(0.0808556, rel=1e-5)
    # ten against ten, apart: z = (50 - 0.5) / sqrt(175) = 3.7418, p = 1.826e-4
    assert shift_p([float(i) for i in range(10)], [float(i) for i in range(10, 20)]) == pytest.approx(1.8267e-4, rel=1e-3)
    assert shift_p([1.0, 1.0], [1.0, 1.0, 1.0]) == 1.0
    with pytest.raises(ValueError):
        shift_p([], [1.0])


def test_rank_tests_agree_with_scipy_when_available():
    scipy_stats = pytest.importorskip("scipy.stats")
    rng = np.random.default_rng(7)
    for n in (7, 15, 20, 21, 40):
        d = rng.normal(0.2, 1.0, n)
        base, head = rounds_with_ratios(d)
        method = "exact" if n <= 20 else "approx"
        ref = scipy_stats.wilcoxon(d, method=method, correction=True).pvalue
        assert compare_rounds(base, head).p_value == pytest.approx(ref, rel=1e-9)
    for n_base, n_head in ((5, 8), (30, 30), (100, 57)):
        b = np.round(rng.lognormal(0.0, 0.1, n_base), 2)
        h = np.round(rng.lognormal(0.05, 0.1, n_head), 2)
        ref = scipy_stats.mannwhitneyu(h, b, method="asymptotic", use_continuity=True).pvalue
        assert compare_rounds([b], [h]).p_value == pytest.approx(ref, rel=1e-9)


# --------------------------------------------------------------------------------------------
# compare_rounds: estimate, bootstrap, validation
# --------------------------------------------------------------------------------------------


def test_compare_rounds_point_estimates():
    # Off any grid (gaps of no common step), so the medians are the plain ones.
    base = [[1.0, 2.0, 3.3137], [4.7071, 5.9162]]
    head = [[2.1213, 4.3589], [6.2449, 8.9443, 10.7238]]
    e = compare_rounds(base, head)
    assert stats.timer_step([*base[0], *base[1], *head[0], *head[1]]) == 0.0
    assert e.ratio == np.median([*head[0], *head[1]]) / np.median([*base[0], *base[1]])
    assert e.round_ratios == (np.median(head[0]) / 2.0, 8.9443 / np.median(base[1]))
    assert e.n_rounds == 2
    assert e.confidence == 0.95


def test_compare_rounds_on_a_grid_uses_interpolated_medians():
    # Integers are samples of a clock with tick 1: every median is the grouped one.
    base = [[1.0, 2.0, 3.0], [4.0, 5.0]]
    head = [[2.0, 4.0], [6.0, 8.0, 10.0]]
    e = compare_rounds(base, head)
    assert e.ratio == statistics.median_grouped([2, 4, 6, 8, 10], 1) / statistics.median_grouped([1, 2, 3, 4, 5], 1)
    assert e.round_ratios == (statistics.median_grouped([2, 4], 1) / statistics.median_grouped([1, 2, 3], 1),
                              statistics.median_grouped([6, 8, 10], 1) / statistics.median_grouped([4, 5], 1))


@pytest.mark.parametrize("step", [1.0, 0.032, 3.2e-5])
def test_timer_step_finds_the_tick_under_an_offset_and_float32_rounding(step):
    rng = np.random.default_rng(5)
    ticks = rng.integers(150, 200, 300)
    # As CUDA events give them: float32 milliseconds, then a float64 overhead subtracted.
    samples = (ticks * step).astype(np.float32).astype(np.float64) - 0.37 * step
    assert stats.timer_step(samples) == pytest.approx(step, rel=1e-3)
    assert stats.timer_step(rng.normal(5.0, 0.1, 300)) == 0.0  # a continuous clock has none
    assert stats.timer_step([4.0, 4.0, 4.0]) == 0.0


def test_interpolated_median_matches_median_grouped():
    rng = np.random.default_rng(6)
    for trial in range(50):
        step = [1.0, 0.25, 32e-6][trial % 3]
        samples = (rng.integers(10, 16, int(rng.integers(1, 40))) * step).tolist()
        assert stats.interpolated_median(samples, step) == pytest.approx(statistics.median_grouped(samples, step), rel=1e-12)
        assert stats.interpolated_median(samples, 0.0) == np.median(samples)


def test_interpolated_median_resolves_a_shift_below_the_tick():
    # 5.8 us on a 32 ns clock: a 0.2% slowdown moves a few samples one tick up. The plain
    # median reads 0 or a whole tick (0.55%); the interpolated one reads close to the truth.
    rng = np.random.default_rng(7)
    step = 0.032
    true = rng.normal(5.8, 0.05, 200_000)
    base = np.floor(true / step) * step
    head = np.floor(true * 1.002 / step) * step
    plain = np.median(head) / np.median(base) - 1
    grouped = stats.interpolated_median(head) / stats.interpolated_median(base) - 1
    assert plain in (0.0, pytest.approx(step / np.median(base), rel=1e-6))
    assert grouped == pytest.approx(0.002, abs=0.0003)


def test_aa_at_the_tick_of_a_5_us_kernel_is_unchanged():
    # H200, A/A, cvadd at N = 2^20 (5.7 us, CUDA events in 32 ns steps), 400 rounds: the plain
    # medians gave 1.00578 [0.99425, 1.01163], inconclusive at 1% after the round cap, because
    # the base's median sat one tick below the head's. Interpolated within the tick it is
    # the unchanged it is.
    data = json.loads((Path(__file__).parent.parent / "fixtures" / "stats" / "tick_bound_aa_rounds.json").read_text())
    e = compare_rounds(data["base_rounds_ms"], data["head_rounds_ms"])
    assert stats.timer_step(np.concatenate(data["base_rounds_ms"])) == pytest.approx(32e-6, rel=1e-3)
    assert abs(e.ratio - 1) < 0.004
    assert stats.classify(e, 0.01) is stats.Verdict.UNCHANGED


def test_bootstrap_round_stage_pools_the_picked_rounds():
    # Rounds whose samples are all equal make stage 2 (resampling within a round) a no-op, so
    # each replicate must be exactly np.median of the picked rounds pooled, with unequal round
    # sizes, ties across rounds and even pool sizes.
    from kbench_ci.stats import _RoundTable, _two_stage_medians

    rng = np.random.default_rng(3)
    for trial in range(30):
        n_rounds = int(rng.integers(1, 7))
        levels = np.round(rng.uniform(1, 3, n_rounds), trial % 3)
        rounds = [np.full(int(rng.integers(1, 9)), level) for level in levels]
        picks = rng.integers(0, n_rounds, size=(40, n_rounds))
        got = _two_stage_medians(_RoundTable.of(rounds), picks, np.random.default_rng(trial))
        expected = [np.median(np.concatenate([rounds[r] for r in row])) for row in picks]
        np.testing.assert_allclose(got, expected, rtol=0, atol=1e-12)


@pytest.mark.parametrize("grid", [False, True])
@pytest.mark.parametrize("equal_lengths", [True, False])
def test_bootstrap_sample_stage_matches_explicit_pools(equal_lengths, grid):
    # White-box: replay the helper's own draws and build each pool explicitly. Equal round
    # sizes draw integers; unequal ones floor(uniform * round size).
    from kbench_ci.stats import _RoundTable, _two_stage_medians

    rng = np.random.default_rng(4)
    for trial in range(20):
        if equal_lengths:
            n_rounds = int(rng.integers(1, 6))
            sizes = [6] * n_rounds
        else:  # at least two distinct sizes, or the helper (rightly) takes the equal-size path
            n_rounds = int(rng.integers(2, 6))
            sizes = [8, 3] + [int(n) for n in rng.integers(1, 9, n_rounds - 2)]
        rounds = [np.round(rng.uniform(1, 3, n), trial % 3) for n in sizes]
        picks = rng.integers(0, n_rounds, size=(30, n_rounds))
        # Values rounded to 0, 1 or 2 decimals: with grid, medians interpolated within that tick.
        step = 10.0 ** -(trial % 3) if grid else 0.0
        got = _two_stage_medians(_RoundTable.of(rounds), picks, np.random.default_rng(trial), step)

        replay = np.random.default_rng(trial)
        width = max(sizes)
        lengths = np.array(sizes)[picks]
        if equal_lengths:
            draws = replay.integers(0, width, size=(30, n_rounds, width))
        else:
            draws = (replay.random((30, n_rounds, width)) * lengths[:, :, None]).astype(np.int64)
        expected = [
            stats.interpolated_median(np.concatenate(
                [rounds[r][draws[b, j, : sizes[r]]] for j, r in enumerate(row)]
            ), step)
            for b, row in enumerate(picks)
        ]
        np.testing.assert_allclose(got, expected, rtol=0, atol=1e-12)


def test_compare_rounds_is_reproducible_and_seeded():
    base, head = make_rounds(1, shift=1.01, sigma=0.05, n_rounds=8)
    a = compare_rounds(base, head, seed=11)
    assert compare_rounds(base, head, seed=11) == a
    b = compare_rounds(base, head, seed=12)
    assert (b.ratio, b.p_value, b.round_ratios) == (a.ratio, a.p_value, a.round_ratios)
    assert (b.ci_low, b.ci_high) != (a.ci_low, a.ci_high)


def test_compare_rounds_accepts_unequal_round_sizes():
    rng = np.random.default_rng(5)
    base = [rng.lognormal(0, 0.01, n) for n in (10, 30, 7, 50, 21, 3, 40)]
    head = [1.05 * rng.lognormal(0, 0.01, n) for n in (12, 5, 33, 50, 2, 18, 25)]
    e = compare_rounds(base, head)
    assert e.ci_low <= e.ratio <= e.ci_high
    assert 1.03 < e.ci_low and e.ci_high < 1.07
    assert e.p_value == pytest.approx(2 / 2**7, rel=1e-12)


def test_compare_rounds_speed():
    base, head = make_rounds(2, n_samples=100)
    start = time.perf_counter()
    compare_rounds(base, head, n_bootstrap=2000)
    assert time.perf_counter() - start < 1.0


@pytest.mark.parametrize(
    ("base", "head"),
    [
        ([[1.0], [1.0]], [[1.0]]),  # different number of rounds
        ([], []),  # no rounds
        ([[1.0], []], [[1.0], [1.0]]),  # empty round
        ([[1.0, float("nan")]], [[1.0]]),
        ([[1.0]], [[float("inf")]]),
        ([[1.0, 0.0]], [[1.0]]),  # latency 0
        ([[1.0]], [[-1.0]]),
        ("abc", "abc"),
    ],
)
def test_compare_rounds_rejects_bad_rounds(base, head):
    with pytest.raises(ValueError):
        compare_rounds(base, head)


@pytest.mark.parametrize("n_bootstrap", [0, -5, 2.5, True])
def test_compare_rounds_rejects_bad_n_bootstrap(n_bootstrap):
    with pytest.raises(ValueError):
        compare_rounds([[1.0]] * 3, [[1.0]] * 3, n_bootstrap=n_bootstrap)


# --------------------------------------------------------------------------------------------
# compare_rounds + classify on synthetic timing data
# --------------------------------------------------------------------------------------------


def test_three_percent_slowdown_is_slower():
    base, head = make_rounds(100, shift=1.03)
    e = compare_rounds(base, head)
    assert classify(e, THRESHOLD) is Verdict.SLOWER
    assert e.ci_low <= 1.03 <= e.ci_high
    assert e.p_value == pytest.approx(2 / 2**20, rel=1e-12)  # every round slower
    assert needs_remeasure(e, THRESHOLD)


def test_three_percent_speedup_is_faster():
    base, head = make_rounds(101, shift=1 / 1.03)
    e = compare_rounds(base, head)
    assert classify(e, THRESHOLD) is Verdict.FASTER
    assert needs_remeasure(e, THRESHOLD)


def test_shift_is_detected_across_seeds_and_ci_covers_it():
    verdicts, covered = [], 0
    for seed in range(100):
        base, head = make_rounds(1000 + seed, shift=1.03)
        e = compare_rounds(base, head, n_bootstrap=SWEEP_BOOTSTRAP)
        verdicts.append(classify(e, THRESHOLD))
        covered += e.ci_low <= 1.03 <= e.ci_high
    assert verdicts.count(Verdict.SLOWER) == 100
    # The 95% interval should cover the true ratio at least about 95% of the time (the two-stage
    # bootstrap errs on the wide side).
    assert covered >= 90


def test_identical_distributions_are_never_slower():
    verdicts = [verdict_of(*make_rounds(seed)) for seed in range(300)]
    assert Verdict.SLOWER not in verdicts
    assert Verdict.FASTER not in verdicts
    assert verdicts.count(Verdict.UNCHANGED) >= 0.9 * len(verdicts)


def test_heavy_tails_do_not_hide_or_fake_a_shift():
    # 5% of samples on both sides multiplied by 3-10x: the median shrugs them off.
    for seed in range(20):
        base, head = make_rounds(2000 + seed, shift=1.03, outlier_fraction=0.05)
        assert verdict_of(base, head) is Verdict.SLOWER
    verdicts = [verdict_of(*make_rounds(3000 + seed, outlier_fraction=0.05)) for seed in range(200)]
    assert Verdict.SLOWER not in verdicts
    assert verdicts.count(Verdict.UNCHANGED) >= 0.9 * len(verdicts)


def test_very_noisy_few_rounds_is_inconclusive_not_slower():
    remeasure = 0
    for seed in range(50):
        base, head = make_rounds(4000 + seed, shift=1.03, sigma=0.2, n_rounds=3)
        e = compare_rounds(base, head, n_bootstrap=SWEEP_BOOTSTRAP)
        assert classify(e, THRESHOLD) is Verdict.INCONCLUSIVE
        remeasure += needs_remeasure(e, THRESHOLD)
    # When the point estimate lands above the band the orchestrator is asked to measure again.
    assert remeasure >= 10


def test_few_rounds_agreeing_by_chance_are_not_unchanged():
    # Seed 4042: a true 3% slowdown whose 3 noisy rounds happen to agree on ratios 1.011, 1.000,
    # 1.005. Bootstrapping rounds alone gave the CI [1.0003, 1.0133] inside the band, i.e.
    # UNCHANGED -- a missed regression. The within-round stage knows each round median is
    # ~3.5% noisy and widens the interval.
    base, head = make_rounds(4042, shift=1.03, sigma=0.2, n_rounds=3)
    ratios = [np.median(h) / np.median(b) for b, h in zip(base, head, strict=True)]
    assert max(ratios) < 1.02 and min(ratios) > 0.98  # the fluke this test is about
    e = compare_rounds(base, head)
    assert classify(e, THRESHOLD) is Verdict.INCONCLUSIVE
    assert e.ci_high - e.ci_low > 2 * THRESHOLD


def test_paired_drift_neither_hides_nor_fakes_a_shift():
    # Each round scaled by its own factor in [0.95, 1.05] on both sides: pairing cancels it.
    for seed in range(50):
        base, head = make_rounds(5000 + seed, shift=1.03, drift=0.05)
        e = compare_rounds(base, head, n_bootstrap=SWEEP_BOOTSTRAP)
        assert classify(e, THRESHOLD) is Verdict.SLOWER
        # The drift (10% wide) does not leak into the paired interval.
        assert e.ci_high - e.ci_low < THRESHOLD
    verdicts = [verdict_of(*make_rounds(6000 + seed, drift=0.05)) for seed in range(100)]
    assert Verdict.SLOWER not in verdicts
    assert Verdict.FASTER not in verdicts
    assert verdicts.count(Verdict.UNCHANGED) >= 90


def test_drift_confined_to_head_rounds_is_not_cancelled():
    # Sanity check of the previous test: the same 5% drift applied to head only is a real
    # difference between the sides, and the round-to-round variation it adds must show up as
    # a wider interval than with the drift shared by both sides.
    rng = np.random.default_rng(77)
    base, head = make_rounds(78, drift=0.0)
    shared_b, shared_h = make_rounds(78, drift=0.05)
    head_only = [h * f for h, f in zip(head, rng.uniform(0.95, 1.05, len(head)), strict=True)]
    shared = compare_rounds(shared_b, shared_h)
    unshared = compare_rounds(base, head_only)
    assert (unshared.ci_high - unshared.ci_low) > 3 * (shared.ci_high - shared.ci_low)


def test_single_round_bootstraps_samples():
    base, head = make_rounds(200, shift=1.03, n_rounds=1, n_samples=200)
    e = compare_rounds(base, head)
    assert e.n_rounds == 1
    assert 1.0 < e.ci_low <= 1.03 <= e.ci_high < 1.06
    assert e.p_value < 1e-6
    assert classify(e, THRESHOLD) is Verdict.SLOWER
    base, head = make_rounds(201, n_rounds=1, n_samples=200)
    assert classify(compare_rounds(base, head), THRESHOLD) is Verdict.UNCHANGED


# --- the memoisation probe's statistics ------------------------------------------


def test_the_sign_test_is_exact_and_one_sided() -> None:
    from kbench_ci.stats import sign_test_p

    assert sign_test_p(10, 10) == pytest.approx(1 / 1024)
    assert sign_test_p(9, 10) == pytest.approx(11 / 1024)
    assert sign_test_p(0, 10) == pytest.approx(1.0)


def test_a_cache_is_read_from_pairs_beyond_the_noise_and_the_sign_test() -> None:
    from kbench_ci.stats import memo_evidence

    new = [2.0, 2.1, 1.9, 2.0, 2.2, 2.0, 1.95, 2.05, 2.0, 2.1]
    seen = [1.0] * 10
    evidence = memo_evidence(new, seen, noise=0.01, seen_as="the same content one call before")
    assert evidence.cached and evidence.ratio == pytest.approx(2.0, abs=0.05) and evidence.slower_pairs == 10
    # the same effect in 8 of 10 pairs only: not yet (p = 0.055), but worth more pairs
    mixed = memo_evidence([*new[:8], 0.9, 0.9], seen, noise=0.01, seen_as="x")
    assert not mixed.cached and mixed.suspect
    # within the noise: an honest kernel
    honest = memo_evidence([1.02, 1.01, 1.03, 1.02, 1.01, 1.02, 1.04, 1.01, 1.02, 1.03], seen, noise=0.02, seen_as="x")
    assert not honest.cached and not honest.suspect and honest.bound == pytest.approx(1.06)


def test_too_few_pairs_decide_nothing_and_pairs_must_match() -> None:
    from kbench_ci.stats import memo_evidence

    assert not memo_evidence([3.0] * 5, [1.0] * 5, noise=0.0, seen_as="x").cached
    with pytest.raises(ValueError):
        memo_evidence([1.0, 2.0], [1.0], noise=0.0, seen_as="x")


def test_relative_spread_is_robust_to_one_slow_sample() -> None:
    from kbench_ci.stats import relative_spread

    assert relative_spread([1.0] * 9 + [50.0]) == 0.0
    assert relative_spread([0.9, 1.0, 1.1] * 5) == pytest.approx(0.14826, rel=1e-3)


def test_the_clock_check_sees_a_gap_beyond_the_floor_and_the_noise_and_nothing_within() -> None:
    from kbench_ci.stats import CLOCK_FLOOR_GPU_US, clock_check

    rng = np.random.default_rng(3)
    reference = list(300.0 + rng.normal(0.0, 0.5, 200))
    honest = list(300.6 + rng.normal(0.0, 0.5, 200))  # an honest side's handoff differs by under a microsecond
    check = clock_check(honest, reference, floor_us=CLOCK_FLOOR_GPU_US)
    assert not check.exceeded and check.resolution_us == CLOCK_FLOOR_GPU_US
    lying = list(303.6 + rng.normal(0.0, 0.5, 200))  # reports 3.6 us less of a ~7 us call than it spent
    check = clock_check(lying, reference, floor_us=CLOCK_FLOOR_GPU_US)
    assert check.exceeded and check.excess_us == pytest.approx(3.6, abs=0.2)
    # few, noisy calls widen the resolution beyond the floor: the same 3.6 us then proves nothing
    noisy = clock_check(list(303.6 + rng.normal(0.0, 8.0, 6)), list(300.0 + rng.normal(0.0, 8.0, 6)), floor_us=CLOCK_FLOOR_GPU_US)
    assert noisy.resolution_us > CLOCK_FLOOR_GPU_US and not noisy.exceeded
    # four calls a side resolve nothing, however far apart (their scaled MAD can be 0): an
    # honest CPU bench of 3 trials on a loaded machine read 2018 us past the 2000 us floor
    few = clock_check([4518.0, 4518.0, 4519.0, 4518.0], [2500.0, 2500.0, 2500.0, 2500.0], floor_us=2000.0)
    assert few.excess_us == pytest.approx(2018.0) and few.resolution_us == 2000.0 and not few.exceeded
    assert clock_check([4518.0] * 5, [2500.0] * 5, floor_us=2000.0).exceeded


def test_the_cpu_clock_floor_grows_with_the_sides_own_time() -> None:
    from kbench_ci.stats import CLOCK_FLOOR_CPU_SHARE, CLOCK_FLOOR_CPU_US, CLOCK_FLOOR_GPU_US, clock_floor_us

    assert clock_floor_us(True, 50_000.0) == CLOCK_FLOOR_GPU_US
    assert clock_floor_us(False, 100.0) == CLOCK_FLOOR_CPU_US
    assert clock_floor_us(False, 50_000.0) == pytest.approx(CLOCK_FLOOR_CPU_SHARE * 50_000.0)


# --- the processes' own spread (the judge) ---------------------------------------------------


def test_the_process_spread_widens_each_half_of_the_interval_in_log_space() -> None:
    estimate = RatioEstimate(ratio=1.02, ci_low=1.01, ci_high=1.04, p_value=0.001, n_rounds=20, confidence=0.95,
                             round_ratios=(1.02,) * 20)
    widened = with_process_spread(estimate, 0.01)
    z = 1.959964 * math.log1p(0.01)
    assert math.log(1.02) - math.log(widened.ci_low) == pytest.approx(math.hypot(math.log(1.02 / 1.01), z), rel=1e-5)
    assert math.log(widened.ci_high) - math.log(1.02) == pytest.approx(math.hypot(math.log(1.04 / 1.02), z), rel=1e-5)
    assert (widened.ratio, widened.p_value, widened.n_rounds) == (1.02, 0.001, 20)
    # a 2% change beyond a 1% threshold: slower in its own interval, not once 1% of spread is in it
    assert classify(estimate, 0.01) is Verdict.SLOWER
    assert classify(widened, 0.01) is Verdict.INCONCLUSIVE
    assert with_process_spread(estimate, 0.0) == estimate
    with pytest.raises(ValueError, match="spread"):
        with_process_spread(estimate, float("nan"))
