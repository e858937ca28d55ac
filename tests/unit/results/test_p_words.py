"""A p-value is never shown bare: beside an interval that leans one way, "p = 1" reads as a
contradiction unless the reader sees it is the paired test of few rounds."""

from __future__ import annotations

from kbench_ci.results.decide import p_words
from kbench_ci.stats import compare_rounds


def test_a_p_value_says_what_it_was_computed_over() -> None:
    # two rounds leaning the same way by 15%: the interval leans, the signed-rank test of two
    # rounds cannot go below 0.5
    estimate = compare_rounds([(1.0, 1.0, 1.0), (1.0, 1.0, 1.0)], [(0.85, 0.86, 0.84), (0.80, 0.81, 0.79)])
    assert estimate.n_rounds == 2 and estimate.p_value >= 0.5
    assert p_words(estimate) == f"p = {estimate.p_value:.3g} over 2 rounds"
    one = compare_rounds([(1.0, 1.1, 0.9, 1.0)], [(1.0, 1.05, 0.95, 1.0)])
    assert p_words(one).endswith("over one round's calls")
