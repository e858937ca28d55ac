"""An undecided comparison stops when its interval cannot shrink enough in
the rounds left, and says what change it can resolve (stats.decision_reach)."""

from __future__ import annotations

import math

from kbench_ci.stats import MIN_ROUNDS_TO_PROJECT, RatioEstimate, decision_reach


def estimate(ratio: float, low: float, high: float, rounds: int) -> RatioEstimate:
    return RatioEstimate(ratio=ratio, ci_low=low, ci_high=high, p_value=0.5, n_rounds=rounds, confidence=0.95,
                         round_ratios=(ratio,) * rounds)


def test_a_noisy_case_with_few_rounds_left_is_out_of_reach_and_says_what_it_can_resolve() -> None:
    reach = decision_reach(estimate(1.003, 0.97, 1.036, 8), 0.01, rounds_possible=16)
    assert reach is not None and reach.out_of_reach
    projected = (math.log(1.036) - math.log(0.97)) / 2 * math.sqrt(8 / 16)
    assert math.isclose(reach.resolvable, math.expm1(projected)) and 0.02 < reach.resolvable < 0.025


def test_the_same_noise_with_many_rounds_left_goes_on() -> None:
    reach = decision_reach(estimate(1.003, 0.97, 1.036, 8), 0.01, rounds_possible=400)
    assert reach is not None and not reach.out_of_reach


def test_a_clear_change_whose_interval_can_clear_one_is_within_reach() -> None:
    reach = decision_reach(estimate(1.05, 0.995, 1.11, 8), 0.02, rounds_possible=12)
    assert reach is not None and not reach.out_of_reach


def test_the_slack_keeps_a_borderline_case_going() -> None:
    # Projected exactly to the band's edge: without the 1.5x slack it would stop; with it, it goes on.
    band = math.log1p(0.01)
    half = band * 1.2  # projected half-width just over the band at the rounds possible
    low, high = math.exp(-half), math.exp(half)
    reach = decision_reach(estimate(1.0, low, high, 16), 0.01, rounds_possible=16)
    assert reach is not None and not reach.out_of_reach


def test_too_few_rounds_or_a_broken_interval_project_nothing() -> None:
    assert decision_reach(estimate(1.0, 0.9, 1.1, MIN_ROUNDS_TO_PROJECT - 1), 0.01, 400) is None
    assert decision_reach(estimate(1.0, 0.0, 1.1, 10), 0.01, 400) is None


def test_a_slowdown_near_the_threshold_with_a_tight_interval_goes_on() -> None:
    """Found in review: 1.047 in [1.03, 1.065] at a 5% threshold is a real slowdown that more
    rounds may call slower; it must not stop as inconclusive."""
    reach = decision_reach(estimate(1.047, 1.03, 1.065, 8), 0.05, rounds_possible=64)
    assert reach is not None and not reach.out_of_reach


def test_a_ratio_beyond_the_band_never_stops_early_however_noisy() -> None:
    reach = decision_reach(estimate(1.06, 0.90, 1.25, 8), 0.02, rounds_possible=10)
    assert reach is not None and not reach.out_of_reach
