"""The Mermaid charts of a compare: the slower and the
faster cases, each bar in its verdict's colour, the threshold as a line, the case names as
written (no brackets turned into a call). No bar is
clipped (+48% and +169% looked the same at ±8%), the axis starts at 0 and covers every bar (a
bar is drawn from the axis' start), no series is zero anywhere (a zero series drew a grey bar per
case), the title fits, the labels do not overlap (the bars lie along the chart) and an
inconclusive case is not charted as a change."""

from __future__ import annotations

import json
import re

from kbench_ci.report.compare import _compare_chart
from kbench_ci.stats import Verdict
from tests.unit.report.test_case_order import case

#: characters of a title that Mermaid draws in full across an 860 px chart
MAX_TITLE = 60


def _charts(text: str) -> list[str]:
    return re.findall(r"```mermaid\n(.*?)```", text, re.S)


def _series(chart: str, kind: str) -> list[list[float]]:
    return [[float(v) for v in values.split(", ")] for values in re.findall(rf"^  {kind} \[(.*)\]$", chart, re.M)]


def _axis(chart: str) -> tuple[float, float]:
    found = re.search(r'^  y-axis "[^"]*" (\S+) --> (\S+)$', chart, re.M)
    assert found is not None, chart
    return float(found.group(1)), float(found.group(2))


def test_every_bar_is_whole_inside_an_axis_that_starts_at_zero() -> None:
    cases = [case("vadd", Verdict.UNCHANGED, 1.001), case("relu", Verdict.SLOWER, 1.03),
             case("gelu", Verdict.SLOWER, 1.48), case("mish", Verdict.SLOWER, 2.69),
             case("silu", Verdict.FASTER, 0.97), case("tanh", Verdict.INCONCLUSIVE, 1.02)]
    text = _compare_chart(cases)
    assert text is not None
    slower, faster = _charts(text)
    ((bars,),) = [_series(slower, "bar")]
    assert bars == [3.0, 48.0, 169.0]  # not clipped: +48% and +169% differ
    low, high = _axis(slower)
    assert low == 0 and high >= max(bars)
    assert _series(faster, "bar") == [[3.0]] and _axis(faster)[0] == 0 and _axis(faster)[1] >= 3.0
    # the sign is in the label, the colour says slower or faster
    assert '"relu N=1 +3.00%", "gelu N=1 +48.00%", "mish N=1 +169.00%"' in slower
    assert '"silu N=1 -3.00%"' in faster
    for chart, colour in ((slower, "#cf222e"), (faster, "#1a7f37")):
        config = json.loads(re.search(r"%%\{init: (.*)\}%%", chart).group(1))  # type: ignore[union-attr]
        assert config["themeVariables"]["xyChart"]["plotColorPalette"].split(", ")[0] == colour
        assert "xychart-beta horizontal" in chart  # labels on the side: long case names do not overlap
        (title,) = re.findall(r'^  title "(.*)"$', chart, re.M)
        assert len(title) <= MAX_TITLE, title
        assert _series(chart, "line") == [[2.0] * len(_series(chart, "bar")[0])]


def test_no_series_is_zero_anywhere_and_no_inconclusive_case_is_charted() -> None:
    cases = [case("relu", Verdict.SLOWER, 1.05), case("tanh", Verdict.INCONCLUSIVE, 1.02), case("silu", Verdict.FASTER, 0.9)]
    text = _compare_chart(cases)
    assert text is not None and "tanh" not in text and "Changed cases" not in text
    for chart in _charts(text):
        for bars in _series(chart, "bar"):
            assert all(value > 0 for value in bars), chart
    only_slower = _compare_chart([case("relu", Verdict.SLOWER, 1.05)])
    assert only_slower is not None and len(_charts(only_slower)) == 1 and "faster" not in only_slower


def test_no_chart_when_nothing_is_slower_or_faster() -> None:
    assert _compare_chart([case("vadd", Verdict.UNCHANGED, 1.001), case("relu", Verdict.INCORRECT, 1.0)]) is None
    assert _compare_chart([case("tanh", Verdict.INCONCLUSIVE, 1.03)]) is None
