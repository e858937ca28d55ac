"""Issue 26, item 6: the Mermaid chart shows what a reviewer needs: the changed cases only, one
+186% bar clipped so it cannot flatten the ±3% ones, the threshold as lines on both sides, each
bar in its verdict's colour, and the case names as written (no brackets turned into a call)."""

from __future__ import annotations

import re

from kbench_ci.report.compare import _compare_chart
from kbench_ci.stats import Verdict
from tests.unit.report.test_case_order import case


def _series(chart: str, kind: str) -> list[list[float]]:
    return [[float(v) for v in values.split(", ")] for values in re.findall(rf"^  {kind} \[(.*)\]$", chart, re.M)]


def test_the_chart_shows_changed_cases_clipped_coloured_and_against_the_threshold() -> None:
    cases = [case("vadd", Verdict.UNCHANGED, 1.001), case("relu", Verdict.SLOWER, 1.03),
             case("gelu", Verdict.SLOWER, 2.86), case("silu", Verdict.FASTER, 0.97), case("tanh", Verdict.INCONCLUSIVE, 1.02)]
    chart = _compare_chart(cases)
    assert chart is not None
    assert '"relu N=1", "gelu N=1", "silu N=1", "tanh N=1"' in chart and "vadd" not in chart
    slower, faster, inconclusive = _series(chart, "bar")
    assert slower == [3.0, 8.0, 0.0, 0.0]  # +186% clipped at 4 x the 2% threshold
    assert faster == [0.0, 0.0, -3.0, 0.0] and inconclusive == [0.0, 0.0, 0.0, 2.0]
    assert _series(chart, "line") == [[2.0] * 4, [-2.0] * 4]
    assert "bars clipped at ±8%" in chart
    palette = re.search(r'"plotColorPalette": "([^"]+)"', chart)
    assert palette is not None and palette.group(1).split(", ")[:2] == ["#cf222e", "#1a7f37"]


def test_no_chart_when_nothing_changed() -> None:
    assert _compare_chart([case("vadd", Verdict.UNCHANGED, 1.001), case("relu", Verdict.INCORRECT, 1.0)]) is None
