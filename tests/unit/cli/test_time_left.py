"""The heartbeat's time left comes from the typical finished case, so the
first cases measured again do not double it, and it counts cases measured at once (--gpus)."""

from __future__ import annotations

from kbench_ci.cli.console import time_left


def test_two_remeasured_first_cases_do_not_double_the_estimate() -> None:
    # 2 cases re-measured (30 s each), 4 plain ones (10 s): 8 left should take about 80 s.
    durations = [30.0, 30.0, 10.0, 10.0, 10.0, 10.0]
    estimate = time_left(durations, remaining=8, elapsed=sum(durations))
    assert estimate == 80.0  # the mean would say 8 x 16.7 = 133 s
    assert time_left(durations, remaining=0, elapsed=100.0) == 0.0


def test_cases_measured_at_once_shorten_it_and_nothing_finished_gives_none() -> None:
    # two GPUs: four 10 s cases done in 20 s of wall time
    assert time_left([10.0] * 4, remaining=6, elapsed=20.0) == 30.0
    assert time_left([], remaining=6, elapsed=20.0) is None
