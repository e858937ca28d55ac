"""The case's two clocks (kbench_ci.measure.deadlines): a side is blamed only for its turns' time,
the judge only for its own, and never before the case's timeout has passed on the wall clock."""

from __future__ import annotations

import random

import pytest

from kbench_ci.measure.deadlines import WORKER_START_TIMEOUT_S, CaseClock, own_allowance_s


def _run(clock: CaseClock, segments: list[tuple[float, bool]], step: float = 0.01) -> tuple[str | None, float]:
    """Advance ``clock`` through ``segments`` (seconds, a side has the turn) in polls of ``step``
    seconds, as the parent does; what expired first, and when on the wall clock."""
    now = clock.started
    for seconds, side_has_turn in segments:
        end = now + seconds
        while now < end:
            now = min(end, now + step)
            clock.advance(now, side_has_turn=side_has_turn)
            expired = clock.expired()
            if expired is not None:
                return expired, now - clock.started
    return None, now - clock.started


def test_a_slow_judge_start_then_a_hanging_head_blames_the_head() -> None:
    """The busy-machine CI failure: the judge's workers took longer to start than the case's whole
    timeout, then the head hung in its turn. One deadline blamed the judge; two blame the head."""
    clock = CaseClock(8.0, started=100.0, judged=True)
    expired, at = _run(clock, [(12.0, False), (3600.0, True)])
    assert expired == "sides"
    assert at == pytest.approx(20.0, abs=0.02)  # 12 s of the judge's own, then 8 s of the head's turn
    assert clock.own_s == pytest.approx(12.0, abs=0.02)


def test_the_judge_is_blamed_only_past_its_own_allowance() -> None:
    clock = CaseClock(8.0, started=0.0, judged=True)
    expired, at = _run(clock, [(10_000.0, False)], step=0.5)
    assert expired == "own"
    assert at == pytest.approx(8.0 + WORKER_START_TIMEOUT_S, abs=0.6)


def test_in_process_only_the_start_is_the_workers_own() -> None:
    """The in-process worker: its start (before the first turn) is its own; from the first turn
    on every second is the case's, between turns too (its kernels' code runs in it)."""
    clock = CaseClock(8.0, started=0.0)
    expired, at = _run(clock, [(20.0, False), (5.0, True), (5.0, False)])
    assert expired == "sides" and at == pytest.approx(28.0, abs=0.02)
    assert clock.own_s == pytest.approx(20.0, abs=0.02)


def test_the_judges_time_between_turns_is_its_own() -> None:
    clock = CaseClock(8.0, started=0.0, judged=True)
    expired, _ = _run(clock, [(5.0, True), (60.0, False), (2.0, True)])
    assert expired is None and clock.sides_s == pytest.approx(7.0, abs=0.02)


@pytest.mark.parametrize("timeout_s", [0.5, 6.0, 8.0, 600.0])
def test_the_judges_deadline_is_strictly_later_than_the_sides_on_any_schedule(timeout_s: float) -> None:
    """Over random schedules of turns: the judge is never blamed before the case's timeout has
    passed on the wall clock, nor a side before its turns used the whole timeout."""
    draw = random.Random(f"deadlines-{timeout_s}")
    assert own_allowance_s(timeout_s) > timeout_s
    for _ in range(50):
        segments = [(draw.uniform(0.0, 2 * timeout_s), draw.random() < 0.5) for _ in range(draw.randint(1, 12))]
        segments.append((10 * (timeout_s + WORKER_START_TIMEOUT_S), draw.random() < 0.5))
        clock = CaseClock(timeout_s, started=0.0, judged=True)
        expired, at = _run(clock, segments, step=(timeout_s + WORKER_START_TIMEOUT_S) / 400)
        assert expired is not None
        if expired == "own":
            assert at > timeout_s and clock.sides_s <= timeout_s
        else:
            assert clock.sides_s > timeout_s and clock.own_s <= own_allowance_s(timeout_s)
