"""The history chart: change against the first commit, on an axis that does
not turn -2% into a cliff."""

from __future__ import annotations

import pytest

from kbench_ci.history.show import Trend, chart_series


def trend(medians: tuple[float, ...]) -> Trend:
    return Trend("NVIDIA H200", "softmax[N=1]", tuple(f"{i:040x}" for i in range(len(medians))), medians, ())


def test_a_small_change_is_drawn_on_an_axis_twice_the_threshold_wide() -> None:
    changes, limit = chart_series(trend((18.20, 18.25, 17.84, 17.86)), threshold=0.02)
    assert changes == pytest.approx([0.0, 0.2747, -1.978, -1.868], abs=1e-3)
    assert limit == pytest.approx(4.0)  # ±4%: the -2% reads as the threshold it is


def test_a_large_change_widens_the_axis_with_a_margin() -> None:
    _, limit = chart_series(trend((10.0, 11.5)), threshold=0.02)
    assert limit == pytest.approx(17.25)
