"""Speedups read at any size: interpreted Triton at 480 ms against a 0.17 ms
eager baseline printed `0.000×`."""

from __future__ import annotations

import pytest

from kbench_ci.report.markdown import speedup_text


@pytest.mark.parametrize(("ratio", "text"), [
    (0.17 / 480, "2,824× slower"),
    (0.05, "20.0× slower"),
    (0.1, "0.10×"),
    (1.8412, "1.84×"),
    (99.5, "99.50×"),
    (2350.4, "2,350×"),
    (0.0, "—"),
    (float("nan"), "—"),
])
def test_speedup_text(ratio: float, text: str) -> None:
    assert speedup_text(ratio) == text


def test_bench_keeps_three_digits_in_the_usual_range() -> None:
    assert speedup_text(1.23456, 3) == "1.235×"
