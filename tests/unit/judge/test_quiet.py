"""The judge's wait for a quiet GPU at a change of turn (kbench_ci.judge.quiet, trials.turn):
the probe logic on made-up probe times, and what a GPU that stays busy does to the case, with
workers and a clock made up here (the GPU's side of it: tests/gpu/test_judge_clock_gpu.py's
``linger`` head)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, cast

import pytest

from kbench_ci.judge import quiet, trials
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
    #: never stopped for filling a disk (SideWorker.filled)
    filled = None

    def __init__(self, paused: bool) -> None:
        self.paused = paused
        #: SideWorker's: what of its scheduling its last resume could not set back
        self.scheduling_refused: tuple[str, ...] = ()

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


@pytest.fixture
def sides(monkeypatch: pytest.MonkeyPatch) -> list[Side]:
    """Three sides whose workers the judge's hold pauses (made up: the real one stops processes
    and ends the judge's other children, here pytest's)."""
    made = [_side("base", paused=True), _side("head", paused=False), _side("torch", paused=True, role="baseline")]

    def hold_all_but(current: object) -> None:
        for side in made:
            if side.worker is not current:
                side.worker.pause()

    monkeypatch.setattr(trials, "hold_all_but", hold_all_but)
    return made


def test_a_gpu_still_busy_at_a_change_of_turn_makes_every_side_an_error_and_none_incorrect(
    monkeypatch: pytest.MonkeyPatch, sides: list[Side],
) -> None:
    """Busy work cannot be told from another process's on the same GPU: nobody is blamed as a
    cheat, the case is not comparable."""
    monkeypatch.setattr(quiet, "QUIET_TIMEOUT_S", 0.02)
    base, head, baseline = sides
    turn(sides, base, cast(GpuClock, _Clock(latency_us=5000.0)))
    for side in sides:
        assert side.result.status == "error", side.result
        assert (side.result.message or "").startswith("the GPU stayed busy with every side's worker stopped")
    assert not base.worker.paused and head.worker.paused and baseline.worker.paused


def test_a_quiet_gpu_passes_the_turn_and_every_turn_is_probed(sides: list[Side]) -> None:
    base, head, _ = sides
    clock = _Clock(latency_us=40.0)
    turn(sides, base, cast(GpuClock, clock))
    assert all(side.ok for side in sides) and clock.probes == 3
    turn(sides, head, cast(GpuClock, clock))
    assert all(side.ok for side in sides) and clock.probes == 6
    assert base.worker.paused and not head.worker.paused


def test_without_a_gpu_clock_nothing_is_probed(sides: list[Side]) -> None:
    base, head, _ = sides
    turn(sides, base, None)
    assert all(side.ok for side in sides) and head.worker.paused and not base.worker.paused
