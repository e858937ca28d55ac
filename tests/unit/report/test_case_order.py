"""Cases in the suite's order within each verdict group: a suite written
vadd, relu, scale read vadd, scale, relu, ordered by ratio."""

from __future__ import annotations

from kbench_ci.report.compare import sort_worst_first
from kbench_ci.results.outcome import CaseComparison
from kbench_ci.stats import RatioEstimate, Verdict


def case(kernel: str, verdict: Verdict, ratio: float) -> CaseComparison:
    estimate = RatioEstimate(ratio=ratio, ci_low=ratio - 0.01, ci_high=ratio + 0.01, p_value=0.5, n_rounds=4,
                             confidence=0.95, round_ratios=(ratio,) * 4)
    return CaseComparison(case_id=f"{kernel}[N=1]", kernel=kernel, dims={"N": 1}, verdict=verdict, threshold=0.02,
                          estimate=estimate, message=None)


def test_the_worst_verdicts_come_first_and_each_group_keeps_the_suite_order() -> None:
    suite = [
        case("vadd", Verdict.UNCHANGED, 0.999), case("relu", Verdict.SLOWER, 1.05), case("scale", Verdict.UNCHANGED, 1.004),
        case("gelu", Verdict.SLOWER, 1.30), case("silu", Verdict.INCORRECT, 1.0), case("tanh", Verdict.UNCHANGED, 1.001),
    ]
    assert [c.kernel for c in sort_worst_first(suite)] == ["silu", "relu", "gelu", "vadd", "scale", "tanh"]
