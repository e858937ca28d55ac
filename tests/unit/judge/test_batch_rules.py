"""The judge's batch rules (kbench_ci.judge.trials): how many calls go under one span, a round's
calls in whole batches, when a batched side's gap is short of the trusted sides' flush, and
when its later calls ran from a cache left warm."""

from __future__ import annotations

import math

import pytest

from kbench_ci.judge.trials import (
    BATCH_TARGET_US,
    FLUSH_SHORT_SHARE,
    MAX_BATCH,
    WARM_LATER_SHARE,
    _flush_left_out,
    _warm_after_first,
    batch_size,
    batch_sizes,
    round_calls,
)


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


@pytest.mark.parametrize(("calls", "batch", "expected"), [
    (11, 10, [6, 5]), (11, 11, [11]), (11, 1, [1] * 11), (11, 4, [4, 4, 3]), (12, 4, [4, 4, 4]), (3, 2, [2, 1]),
    (64, 64, [64]), (1, 5, [1]),
])
def test_a_rounds_calls_go_in_batches_as_even_as_can_be(calls: int, batch: int, expected: list[int]) -> None:
    sizes = batch_sizes(calls, batch)
    assert sizes == expected
    assert sum(sizes) == calls and max(sizes) <= batch and max(sizes) - min(sizes) <= 1


THEIRS = [31.0, 32.5, 33.0, 30.2, 34.1, 32.0, 31.7, 33.3]


def test_a_skipped_flush_is_a_finding() -> None:
    finding = _flush_left_out([2.0, 2.4, 1.9, 2.2, 2.0, 2.6, 2.1, 2.3], THEIRS, resolution_us=0.3)
    assert finding is not None and "flush the cache between calls" in finding


def test_a_gap_a_little_short_is_not_a_finding() -> None:
    # an honest kernel leaves less in the cache to write back: the flush a little shorter
    near = [gap * (1 - FLUSH_SHORT_SHARE) + 0.5 for gap in THEIRS]
    assert _flush_left_out(near, THEIRS, resolution_us=0.3) is None
    assert _flush_left_out([gap + 5.0 for gap in THEIRS], THEIRS, resolution_us=0.3) is None


def test_a_shortfall_within_the_resolution_and_chance_is_not_a_finding() -> None:
    # half of theirs, but the resolution is wider and the gaps overlap: no test can tell
    theirs = [4000.0, 900.0, 5200.0, 1500.0, 3900.0, 2600.0, 700.0, 4800.0]
    mine = [gap / 2 for gap in reversed(theirs)]
    assert _flush_left_out(mine, theirs, resolution_us=5000.0) is None


def test_a_shortfall_under_a_wide_resolution_is_found_by_the_rank_test() -> None:
    # a loaded CPU: every gap of theirs holds flushes of 2-8 ms, so the medians' interval is
    # wider than the shortfall, but every batch of the head's is shorter than every one of theirs
    theirs = [2300.0, 4100.0, 7900.0, 2600.0, 5200.0, 3300.0, 6100.0, 2900.0, 4400.0, 3800.0]
    mine = [600.0, 900.0, 450.0, 1200.0, 700.0, 640.0, 820.0, 580.0, 1000.0, 760.0]
    finding = _flush_left_out(mine, theirs, resolution_us=5000.0)
    assert finding is not None and "rank test" in finding


def test_a_skipped_flush_under_load_is_found_below_their_fastest_batch() -> None:
    # a compare's figures next to 4 busy processes on 2 cores (11-call batches of a 2^16-float
    # add): the base's gaps fell from ~10 ms to ~1.6 ms a call, the head's first batch held a
    # wake-up; the resolution (5878 us) is wider than the shortfall and the rank test's p 0.010
    theirs = [9792.9, 6231.7, 4995.2, 5568.7, 3700.6, 1758.1, 1571.9, 1625.0]
    mine = [7387.7, 124.4, 111.7, 108.9, 114.1, 101.8, 94.4, 112.7]
    finding = _flush_left_out(mine, theirs, resolution_us=5877.9)
    assert finding is not None and "fastest batch 1571.9 us" in finding


def test_an_honest_gap_under_the_same_load_is_not_below_their_fastest_batch() -> None:
    # the same load on an honest head: its batches hold the flush, so its median is near their
    # fastest batch, whatever the spread above it
    theirs = [9792.9, 6231.7, 4995.2, 5568.7, 3700.6, 1758.1, 1571.9, 1625.0]
    honest = [7387.7, 1524.4, 1611.7, 1408.9, 1814.1, 1301.8, 1494.4, 2112.7]
    assert _flush_left_out(honest, theirs, resolution_us=5877.9) is None


def test_no_batches_that_flushed_is_no_finding() -> None:
    assert _flush_left_out([], THEIRS, resolution_us=0.3) is None
    assert _flush_left_out([1.0], [], resolution_us=0.3) is None


# one ratio a batch: its later calls' own time (their mean) over its first call's
HONEST = [1.00, 0.98, 1.02, 0.99, 1.01, 0.97, 1.03, 1.00]


def test_later_calls_from_a_warm_cache_are_a_finding() -> None:
    """skip_flush on an H100 (a 2^20 add): its first call 6.0 us after the judge's flush, the
    later ones ~3.6 us after its own flush read its next inputs instead."""
    warm = [0.61, 0.58, 0.63, 0.60, 0.62, 0.59, 0.60, 0.61]
    finding = _warm_after_first(warm, HONEST)
    assert finding is not None and "60% of its first call's time" in finding and "100%" in finding


def test_a_batch_done_in_its_first_call_is_a_finding() -> None:
    """front_load: every call's work in the first, next to nothing reported for the others."""
    assert _warm_after_first([0.02] * 8, HONEST) is not None


def test_later_calls_a_little_faster_or_by_chance_are_not_a_finding() -> None:
    assert _warm_after_first([ratio * (WARM_LATER_SHARE + 0.05) for ratio in HONEST], HONEST) is None
    assert _warm_after_first(list(reversed(HONEST)), HONEST) is None
    # far below, but two batches: no rank test can tell that from chance
    assert _warm_after_first([0.5, 0.5], HONEST[:2]) is None
    assert _warm_after_first([], HONEST) is None and _warm_after_first(HONEST, []) is None


def test_four_batches_a_side_are_no_finding_however_far_apart() -> None:
    """A CPU bench of 3 trials has one batch or two a side. On a loaded 2-core machine an honest
    side's gaps lay 12 ms under the trusted side's 25 ms (a scaled MAD of 0: a resolution of 0),
    and that read as a skipped flush; four figures a side resolve nothing."""
    assert _flush_left_out([11876.0, 11880.0], [25182.0, 25190.0], resolution_us=0.0) is None
    assert _flush_left_out([2.0] * 4, THEIRS[:4], resolution_us=0.0) is None
    assert _flush_left_out([2.0] * 5, THEIRS[:5], resolution_us=0.3) is not None
    assert _warm_after_first([0.02] * 4, HONEST[:4]) is None
    assert _warm_after_first([0.02] * 5, HONEST[:5]) is not None
