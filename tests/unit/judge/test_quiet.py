"""The judge's wait for a quiet GPU at a change of turn (kbench_ci.judge.quiet, trials.turn):
the probe logic on made-up probe times, and whom it blames, with workers and a clock made up
here (the GPU's side of it: tests/gpu/test_judge_clock_gpu.py's ``linger`` head)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, cast

import pytest

from kbench_ci.judge import quiet
from kbench_ci.judge.clock import GpuClock
from kbench_ci.judge.sides import SideWorker
from kbench_ci.judge.state import Side
from kbench_ci.judge.trials import turn
from kbench_ci.results.model import VariantResult


def _probes(*latencies_us: float) -> Any:
    values: Iterator[float] = iter(latencies_us)
    return lambda: next(values)


def _ticks(step_s: float) -> Any:
    now = [0.0]

    def clock() -> float:
        now[0] += step_s
        return now[0]

    return clock


def test_three_quick_probes_in_a_row_are_quiet() -> None:
    found = quiet.wait_quiet(_probes(30.0, 40.0, 35.0), clock=_ticks(0.001))
    assert found.quiet and found.probes == 3 and found.slowest_us == 40.0


def test_a_busy_gpu_is_waited_for_and_a_slow_probe_starts_the_run_again() -> None:
    found = quiet.wait_quiet(_probes(30.0, 30.0, 2500.0, 30.0, 30.0, 30.0), clock=_ticks(0.001))
    assert found.quiet and found.probes == 6 and found.slowest_us == 2500.0


def test_a_gpu_busy_past_the_timeout_is_not_quiet() -> None:
    busy = quiet.wait_quiet(lambda: 2000.0, timeout_s=0.05, clock=_ticks(0.001))
    assert not busy.quiet and busy.waited_s >= 0.05 and busy.probes >= 50


class _Worker:
    def __init__(self, paused: bool) -> None:
        self.paused = paused

    def pause(self) -> None:
        self.paused = True

    def resume(self) -> None:
        self.paused = False


def _side(label: str, *, paused: bool, role: str = "solution") -> Side:
    return Side(label, role, cast(SideWorker, _Worker(paused)),
                VariantResult(label=label, kind="triton", role=role, status="ok"))  # type: ignore[arg-type]


class _Clock:
    def __init__(self, latency_us: float) -> None:
        self.latency_us = latency_us
        self.probes = 0

    def idle_latency_us(self) -> float:
        self.probes += 1
        return self.latency_us


def test_the_side_whose_turn_ended_is_blamed_for_a_gpu_still_busy_and_no_one_else(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(quiet, "QUIET_TIMEOUT_S", 0.02)
    head, base, baseline = _side("head", paused=False), _side("base", paused=True), _side("torch", paused=True, role="baseline")
    turn([base, head, baseline], base, cast(GpuClock, _Clock(latency_us=5000.0)))
    assert head.result.status == "incorrect"
    assert (head.result.message or "").startswith("GPU work of its own still ran after its turn ended")
    assert base.ok and baseline.ok
    assert not base.worker.paused and head.worker.paused and baseline.worker.paused


def test_a_quiet_gpu_passes_the_turn_and_a_turn_kept_by_the_same_side_is_not_probed() -> None:
    head, base = _side("head", paused=False), _side("base", paused=True)
    clock = _Clock(latency_us=40.0)
    turn([base, head], base, cast(GpuClock, clock))
    assert head.ok and base.ok and clock.probes == 3
    turn([base, head], base, cast(GpuClock, clock))  # base again: nobody else ran
    assert clock.probes == 3
