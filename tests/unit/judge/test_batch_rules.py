"""The judge's batch rules (kbench_ci.judge.trials): how many calls go under one span, a round's
calls in whole batches, and when a batched side's gap is short of the trusted sides' flush."""

from __future__ import annotations

import math

import pytest

from kbench_ci.judge.trials import BATCH_TARGET_US, FLUSH_SHORT_SHARE, MAX_BATCH, _flush_left_out, batch_size, round_calls
from kbench_ci.stats import ClockCheck


@pytest.mark.parametrize(("call_us", "expected"), [
    (BATCH_TARGET_US, 1), (2 * BATCH_TARGET_US, 1), (BATCH_TARGET_US / 4, 4), (BATCH_TARGET_US / 4 + 1, 4),
    (BATCH_TARGET_US / 4 - 1, 5), (1.0, MAX_BATCH), (math.inf, 1), (0.0, 1), (math.nan, 1), (-3.0, 1),
])
def test_a_batch_spans_the_target_and_no_more_calls_than_it_needs(call_us: float, expected: int) -> None:
    assert batch_size(call_us, affordable=1000) == expected


def test_a_batch_takes_no_more_calls_than_placements_can_be_afforded() -> None:
    assert batch_size(1.0, affordable=7) == 7
    assert batch_size(1.0, affordable=0) == 1


@pytest.mark.parametrize(("calls", "batch", "expected"), [(11, 1, 11), (11, 4, 11), (11, 11, 11), (11, 64, 64), (12, 4, 12)])
def test_a_round_is_its_calls_and_at_least_one_batch(calls: int, batch: int, expected: int) -> None:
    assert round_calls(calls, batch) == expected


def _gap(side_us: float, reference_us: float, resolution_us: float) -> ClockCheck:
    return ClockCheck(side_us=side_us, reference_us=reference_us, resolution_us=resolution_us)


def test_a_skipped_flush_is_a_finding() -> None:
    finding = _flush_left_out(_gap(side_us=2.0, reference_us=32.0, resolution_us=0.3))
    assert finding is not None and "flush the cache between calls" in finding


def test_a_gap_a_little_short_is_not_a_finding() -> None:
    # an honest kernel leaves less in the cache to write back: the flush a little shorter
    reference = 32.0
    assert _flush_left_out(_gap(side_us=reference * (1 - FLUSH_SHORT_SHARE) + 0.1, reference_us=reference,
                                resolution_us=0.3)) is None
    assert _flush_left_out(_gap(side_us=reference + 5.0, reference_us=reference, resolution_us=0.3)) is None


def test_a_shortfall_within_the_resolution_is_not_a_finding() -> None:
    assert _flush_left_out(_gap(side_us=0.0, reference_us=4.0, resolution_us=5.0)) is None
