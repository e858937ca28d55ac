"""Statistics for the gate: summaries, confidence intervals, significance tests, verdicts.

Pure functions over raw latency samples (milliseconds). No GPU, no I/O, no printing, and no
rounding anywhere: every number leaves this module at full float precision, and only the report
decides how many digits to show.

The shape of the data
---------------------
For one case, base and head are timed interleaved in *rounds* on one GPU (A B B A ...). Round
``i`` of base and round ``i`` of head share a clock and thermal state, so they form a *pair*.
Everything here that compares base and head respects that pairing:

* the confidence interval of the head/base ratio bootstraps whole rounds, drawing the same round
  indices for both sides, then samples within them (:func:`compare_rounds`);
* the significance test is a Wilcoxon signed-rank test on the per-round log ratios, so a drift
  that moves both sides of a round alike cancels out.

Only numpy and the standard library are used (no scipy: it is not a core dependency).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from enum import Enum
from functools import lru_cache
from statistics import NormalDist

import numpy as np
from numpy.random import PCG64, Generator

__all__ = [
    "RatioEstimate",
    "Step",
    "Summary",
    "Verdict",
    "classify",
    "compare_rounds",
    "detect_steps",
    "geometric_mean",
    "interpolated_median",
    "median_ci",
    "needs_remeasure",
    "speedup",
    "summarize",
    "timer_step",
]

# Up to this many samples the median CI uses the exact binomial distribution (integers from
# math.comb, cached per n); above it the normal approximation is accurate to well under one rank.
_EXACT_BINOMIAL_MAX_N = 1000

# Up to this many nonzero round differences the Wilcoxon p-value comes from the exact permutation
# distribution (2**20 sign patterns, computed by a DP over rank sums, not enumerated); above it
# the normal approximation is used.
_EXACT_WILCOXON_MAX_N = 20

# Upper bound on resampled samples materialised at once by the bootstrap (per side), so memory
# stays bounded (tens of MiB) however many rounds and samples a case has.
_MAX_CHUNK_ELEMENTS = 1 << 22

_SQRT2 = math.sqrt(2.0)

# Timer step detection (see timer_step): distinct values closer than this, relative to their
# size, are one value (float32 rounding of the same tick), and every gap between distinct
# values must be within this fraction of a whole number of steps.
_TIE_RELATIVE = 1e-6
_STEP_TOLERANCE = 0.05


# --------------------------------------------------------------------------------------------
# Summaries of one side
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Summary:
    """Descriptive statistics of one set of latency samples.

    ``ci_low``/``ci_high`` bound the population *median* at level ``confidence`` (see
    :func:`median_ci` for how, and for the tiny-n fallback).
    """

    n: int
    median: float
    mean: float
    std: float  # sample std (ddof=1); 0.0 when n == 1
    min: float
    max: float
    p20: float
    p80: float
    ci_low: float
    ci_high: float
    confidence: float


def summarize(samples: Sequence[float], confidence: float = 0.95) -> Summary:
    """Summarize ``samples``: n, median, mean, sample std, min, max, p20, p80, median CI.

    Percentiles use numpy's default linear interpolation. The median's confidence interval is
    the distribution-free order-statistic interval of :func:`median_ci`.

    Raises ValueError on empty input, non-finite samples, or ``confidence`` outside (0, 1).
    """
    _check_confidence(confidence)
    x = np.sort(_as_samples(samples, "samples"))
    n = int(x.size)
    p20, p80 = np.percentile(x, [20.0, 80.0])
    ci_low, ci_high = _median_ci_sorted(x, confidence)
    return Summary(
        n=n,
        median=float(np.median(x)),
        mean=float(np.mean(x)),
        # ddof=1 of a single sample is 0/0; one sample carries no spread information, say 0.0.
        std=float(np.std(x, ddof=1)) if n > 1 else 0.0,
        min=float(x[0]),
        max=float(x[-1]),
        p20=float(p20),
        p80=float(p80),
        ci_low=ci_low,
        ci_high=ci_high,
        confidence=float(confidence),
    )


def median(samples: Sequence[float]) -> float:
    """The sample median (ValueError on empty or non-finite input, as :func:`summarize`)."""
    return float(np.median(_as_samples(samples, "samples")))


def timer_step(samples: Sequence[float]) -> float:
    """The tick of the clock that took ``samples``, or 0.0 when they are not on a grid.

    CUDA events on an H200 count in steps of 32 ns (0.55% of a 5.8 us kernel): most samples of
    such a kernel fall on two or three values, and a plain median jumps a whole step when the
    middle moves from one value to the next. Samples are on a grid when every gap between
    distinct values is a whole multiple of the smallest gap (to within 5%); a subtracted
    constant (the event overhead) shifts the grid and changes nothing. Continuous samples
    (a host clock) have gaps of no common step and give 0.0.
    """
    values = np.unique(_as_samples(samples, "samples"))
    return _grid_step(values)


def _grid_step(distinct: np.ndarray) -> float:
    if distinct.size < 2:
        return 0.0
    gaps = np.diff(distinct)
    gaps = gaps[gaps > _TIE_RELATIVE * np.abs(distinct[1:])]
    if gaps.size == 0:
        return 0.0
    step = float(gaps.min())
    multiples = gaps / step
    if float(np.max(np.abs(multiples - np.round(multiples)))) > _STEP_TOLERANCE:
        return 0.0
    return step


def interpolated_median(samples: Sequence[float], step: float | None = None) -> float:
    """The median of samples taken on a clock with tick ``step``, interpolated within the tick.

    With ``step`` 0 (or when the samples are not on a grid and ``step`` is None) this is the
    plain median. Otherwise each sample stands for a value spread evenly over its tick, and the
    median is read off that spread (the median of grouped data, as
    :func:`statistics.median_grouped`): ``x - step/2 + step * (n/2 - below) / at`` where ``x`` is
    the upper middle sample, ``below`` counts the samples under ``x`` and ``at`` those equal to
    it. A shift of a quarter of the samples by one tick moves it by about half a tick instead
    of nothing or a whole tick, so a ratio of two such medians resolves changes far below the
    tick.
    """
    x = np.sort(_as_samples(samples, "samples"))
    if step is None:
        step = _grid_step(np.unique(x))
    return _grouped_median_sorted(x, float(step))


def _grouped_median_sorted(x: np.ndarray, step: float) -> float:
    if step <= 0.0:
        return float(np.median(x))
    n = x.size
    middle = float(x[n // 2])
    tie = _TIE_RELATIVE * abs(middle)
    below = int(np.searchsorted(x, middle - tie, side="left"))
    at = int(np.searchsorted(x, middle + tie, side="right")) - below
    return middle - step / 2.0 + step * (n / 2.0 - below) / at


def median_ci(samples: Sequence[float], confidence: float = 0.95) -> tuple[float, float]:
    """Distribution-free confidence interval of the population median.

    Method: for i.i.d. samples from any continuous distribution, the number B of samples below
    the true median is Binomial(n, 1/2). The interval between order statistics
    ``[x_(j), x_(n-j+1)]`` (1-based) therefore covers the median with probability
    ``1 - 2 * P(B <= j - 1)``. We take the largest ``j`` (the narrowest symmetric interval)
    whose coverage is still at least ``confidence``:

    * ``n <= 1000``: ``P(B <= j - 1)`` is computed exactly from ``math.comb`` (integer arithmetic);
    * ``n > 1000``: normal approximation with continuity correction,
      ``j = floor(n/2 + 1/2 - z * sqrt(n) / 2)`` with ``z`` the ``(1 + confidence)/2`` quantile.

    Because ranks are integers the actual coverage is at least ``confidence`` (conservative).

    Tiny-n fallback: when even ``[min, max]`` covers with probability ``1 - 2**(1-n)`` below
    ``confidence`` (n <= 5 at 95%), no such interval exists and ``(min, max)`` is returned; its
    true coverage is then only ``1 - 2**(1-n)`` (e.g. 93.75% for n = 5, 50% for n = 2, and the
    degenerate ``(x, x)`` for n = 1). Callers that need the stated level must take more samples.

    Raises ValueError on empty input, non-finite samples, or ``confidence`` outside (0, 1).
    """
    _check_confidence(confidence)
    return _median_ci_sorted(np.sort(_as_samples(samples, "samples")), confidence)


def _median_ci_sorted(x: np.ndarray, confidence: float) -> tuple[float, float]:
    ranks = _median_ci_ranks(int(x.size), float(confidence))
    if ranks is None:
        return float(x[0]), float(x[-1])
    j, k = ranks
    return float(x[j - 1]), float(x[k - 1])


@lru_cache(maxsize=512)
def _median_ci_ranks(n: int, confidence: float) -> tuple[int, int] | None:
    """1-based ranks (j, n - j + 1) of the median CI, or None when no interval reaches the level."""
    tail = (1.0 - confidence) / 2.0
    if n <= _EXACT_BINOMIAL_MAX_N:
        total = 1 << n
        cumulative = 0
        j = 0
        # i never passes n // 2: P(B <= n // 2) >= 1/2 > tail, so the loop breaks first and
        # j <= n - j + 1 always holds.
        for i in range(n // 2 + 1):
            cumulative += math.comb(n, i)
            # int / int is correctly rounded even for huge integers, so this is exact enough to
            # decide the rank.
            if cumulative / total > tail:
                break
            j = i + 1
    else:
        z = NormalDist().inv_cdf(1.0 - tail)
        j = math.floor(n / 2.0 + 0.5 - z * math.sqrt(n) / 2.0)
    if j < 1:
        return None
    return j, n - j + 1


def speedup(baseline_median: float, solution_median: float) -> float:
    """Speedup of a solution over a baseline: ``baseline_median / solution_median``.

    Greater than 1 means the solution is faster. Raises ValueError unless both medians are
    finite and > 0 (a latency of 0 or less is a measurement bug, not a speedup).
    """
    for name, value in (("baseline_median", baseline_median), ("solution_median", solution_median)):
        if not (math.isfinite(value) and value > 0.0):
            raise ValueError(f"{name} must be finite and > 0, got {value!r}")
    return float(baseline_median) / float(solution_median)


def geometric_mean(values: Sequence[float]) -> float:
    """Geometric mean of ratios: ``exp(mean(log(values)))``.

    The right average for speedups and slowdowns, since 2x and 0.5x cancel to 1x. Computed in
    log space so a long list of ratios neither overflows nor underflows. Raises ValueError on
    empty input or any value that is not finite and > 0.
    """
    try:
        x = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"values must be a sequence of numbers: {exc}") from exc
    if x.ndim != 1 or x.size == 0:
        raise ValueError("geometric_mean needs a non-empty 1-D sequence of ratios")
    if not (np.all(np.isfinite(x)) and np.all(x > 0.0)):
        raise ValueError("geometric_mean needs every value finite and > 0")
    return float(np.exp(np.mean(np.log(x))))


# --------------------------------------------------------------------------------------------
# Verdicts
# --------------------------------------------------------------------------------------------


class Verdict(str, Enum):
    """The named outcome of one case: timing verdicts plus correctness/lifecycle outcomes.

    ``classify`` only ever returns SLOWER, FASTER, UNCHANGED or INCONCLUSIVE; the others are
    decided by the orchestrator (correctness, crashes, cases present on one side only).
    """

    SLOWER = "slower"
    FASTER = "faster"
    UNCHANGED = "unchanged"
    INCONCLUSIVE = "inconclusive"
    INCORRECT = "incorrect"
    FIXED = "fixed"
    FAILED = "failed"
    ADDED = "added"
    REMOVED = "removed"

    # Python 3.11+ formats a (str, Enum) member as "Verdict.SLOWER" in f-strings; reports and
    # JSON want the plain value, the same on every Python version.
    def __str__(self) -> str:
        return self.value

    @property
    def fails_gate(self) -> bool:
        """True for SLOWER, INCORRECT and FAILED: the outcomes that make the gate exit non-zero."""
        return self in _FAILS_GATE

    @property
    def severity(self) -> int:
        """Higher is worse. Sorting by ``-severity`` (or ``reverse=True``) lists worst first:
        INCORRECT, FAILED, SLOWER, INCONCLUSIVE, REMOVED, FIXED, ADDED, FASTER, UNCHANGED."""
        return _SEVERITY[self]


_FAILS_GATE = frozenset({Verdict.SLOWER, Verdict.INCORRECT, Verdict.FAILED})

_WORST_FIRST = (
    Verdict.INCORRECT,
    Verdict.FAILED,
    Verdict.SLOWER,
    Verdict.INCONCLUSIVE,
    Verdict.REMOVED,
    Verdict.FIXED,
    Verdict.ADDED,
    Verdict.FASTER,
    Verdict.UNCHANGED,
)
_SEVERITY = {verdict: len(_WORST_FIRST) - i for i, verdict in enumerate(_WORST_FIRST)}


# --------------------------------------------------------------------------------------------
# Head vs base
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RatioEstimate:
    """Head/base latency ratio of one case (> 1 means head is slower), with its uncertainty."""

    ratio: float  # median(head samples) / median(base samples), all rounds pooled
    ci_low: float  # `confidence` interval of that ratio (bootstrap percentile interval)
    ci_high: float
    p_value: float  # two-sided, of the paired significance test (see compare_rounds)
    n_rounds: int
    confidence: float
    round_ratios: tuple[float, ...]  # per round: median(head round) / median(base round)


def compare_rounds(
    base_rounds: Sequence[Sequence[float]],
    head_rounds: Sequence[Sequence[float]],
    *,
    confidence: float = 0.95,
    n_bootstrap: int = 2000,
    seed: int = 0,
) -> RatioEstimate:
    """Estimate head/base latency ratio with a paired bootstrap CI and a paired significance test.

    ``base_rounds[i]`` and ``head_rounds[i]`` are the raw samples (ms) of round ``i`` of each
    side, measured interleaved, so each round is a pair sharing the GPU's clock/thermal state.

    Point estimate: ``ratio = median(all head samples) / median(all base samples)``. Every
    median here is :func:`interpolated_median` at the clock's tick (:func:`timer_step` of both
    sides' samples together): the plain median for a clock without a grid, and for CUDA
    events one that is not stuck on a 32 ns step (docs/statistics.md says why).

    Confidence interval: a two-stage paired bootstrap. Each of ``n_bootstrap`` replicates

    1. draws ``n_rounds`` round indices with replacement, the *same* indices for both sides
       (the pairing: a round's clock/thermal state stays matched across sides, so drift common
       to both sides cancels instead of widening the interval);
    2. within each drawn round, resamples that round's samples with replacement, independently
       per side (a round's base and head samples are different measurements);

    and computes ``median(pooled head samples) / median(pooled base samples)``. The interval is
    the ``(1 - confidence)/2`` and ``(1 + confidence)/2`` percentiles of the replicates.

    Why stage 2, and what it costs: docs/statistics.md.

    Single-round fallback (``n_rounds == 1``): stage 1 has nothing to choose, so this is a
    plain bootstrap of individual samples within the round, base and head resampled
    independently (unpaired). It ignores correlation between successive samples, so it is
    narrower than a multi-round interval would be; prefer several rounds.

    Significance test (two-sided ``p_value``):

    * ``n_rounds >= 2``: Wilcoxon signed-rank test of the per-round log ratios
      ``d_i = log(median(head round i) / median(base round i))`` against 0. Rounds with
      ``d_i == 0`` are dropped (Wilcoxon's convention); |d| ties get average ranks. The
      statistic is ``T+ = sum of ranks of the positive d_i``. For at most 20 remaining rounds
      the p-value is exact: the permutation distribution of ``T+`` over all ``2**n`` sign
      patterns (computed by dynamic programming over rank sums, exact with tied mid-ranks too),
      ``p = min(1, 2 * min(P(T+ <= t), P(T+ >= t)))``. Above 20, the normal approximation with
      tie correction, ``mean = n(n+1)/4``, ``var = n(n+1)(2n+1)/24 - sum(t^3 - t)/48``, and a
      continuity correction of 1/2. Note the resolution floor: the smallest exact p is
      ``2 / 2**n``, so at ``alpha = 0.05`` at least 6 rounds are needed for any significant
      result (5 rounds give at best p = 0.0625).
    * ``n_rounds == 1``: Mann-Whitney U test of head vs base raw samples, normal approximation
      with tie correction, ``mean = n_b n_h / 2``,
      ``var = n_b n_h / 12 * ((N + 1) - sum(t^3 - t) / (N (N - 1)))``, continuity correction 1/2.

    When every difference is zero (or all samples tie) the p-value is 1.0.

    Reproducible: the bootstrap uses ``numpy.random.Generator(PCG64(seed))``.

    Raises ValueError when the sides have different numbers of rounds, there are no rounds,
    a round is empty, a sample is not finite or not > 0, ``confidence`` is outside (0, 1), or
    ``n_bootstrap < 1``.
    """
    _check_confidence(confidence)
    if isinstance(n_bootstrap, bool) or not isinstance(n_bootstrap, (int, np.integer)):
        raise ValueError(f"n_bootstrap must be an int, got {n_bootstrap!r}")
    if n_bootstrap < 1:
        raise ValueError(f"n_bootstrap must be >= 1, got {n_bootstrap}")
    base = _as_rounds(base_rounds, "base_rounds")
    head = _as_rounds(head_rounds, "head_rounds")
    if len(base) != len(head):
        raise ValueError(
            f"base and head must have the same number of rounds, got {len(base)} and {len(head)}"
        )
    n_rounds = len(base)

    # One clock took both sides: its tick is read off all their samples together.
    step = _grid_step(np.unique(np.concatenate([*base, *head])))

    def center(samples: np.ndarray) -> float:
        return _grouped_median_sorted(np.sort(samples), step)

    ratio = center(np.concatenate(head)) / center(np.concatenate(base))
    round_ratios = tuple(center(h) / center(b) for b, h in zip(base, head, strict=True))

    replicates = _bootstrap_rounds(base, head, int(n_bootstrap), Generator(PCG64(seed)), step)
    if n_rounds == 1:
        p_value = _mann_whitney_p(base[0], head[0])
    else:
        p_value = _wilcoxon_signed_rank_p(np.log(np.asarray(round_ratios)))

    tail = (1.0 - confidence) / 2.0
    ci_low, ci_high = np.quantile(replicates, [tail, 1.0 - tail])
    return RatioEstimate(
        ratio=ratio,
        ci_low=float(ci_low),
        ci_high=float(ci_high),
        p_value=float(p_value),
        n_rounds=n_rounds,
        confidence=float(confidence),
        round_ratios=round_ratios,
    )


def classify(estimate: RatioEstimate, threshold: float, *, alpha: float = 0.05) -> Verdict:
    """Timing-only verdict of a head/base ratio (correctness verdicts are decided elsewhere).

    With t = threshold (e.g. 0.02 for 2%), ratio r, CI [lo, hi], p-value p, checked in order:

    - SLOWER       if r > 1 + t and lo > 1 and p < alpha   (a real slowdown, larger than the threshold)
    - FASTER       if r < 1/(1 + t) and hi < 1 and p < alpha
    - UNCHANGED    if lo >= 1/(1 + t) and hi <= 1 + t   (the whole CI lies inside [1/(1+t), 1+t])
    - INCONCLUSIVE otherwise (too noisy to tell at this threshold)

    The band is symmetric in log space (1/(1+t) .. 1+t), so "2% slower" and "2% faster" are
    the same size of change. A change that is statistically significant but whose CI stays
    inside the band is UNCHANGED: it is real but smaller than the threshold the user set.

    Raises ValueError unless threshold is finite and > 0 and alpha is in (0, 1).
    """
    if not (math.isfinite(threshold) and threshold > 0.0):
        raise ValueError(f"threshold must be finite and > 0, got {threshold!r}")
    if not (0.0 < alpha < 1.0):
        raise ValueError(f"alpha must be in (0, 1), got {alpha!r}")
    upper = 1.0 + threshold
    lower = 1.0 / upper
    r, lo, hi, p = estimate.ratio, estimate.ci_low, estimate.ci_high, estimate.p_value
    if r > upper and lo > 1.0 and p < alpha:
        return Verdict.SLOWER
    if r < lower and hi < 1.0 and p < alpha:
        return Verdict.FASTER
    if lo >= lower and hi <= upper:
        return Verdict.UNCHANGED
    return Verdict.INCONCLUSIVE


#: how far apart two processes of their own time one kernel, once a call (us, a standard
#: deviation of head less base over compares): under the judge each side's CUDA context is its
#: own, and its effect holds for the whole case. On an H100, A/A and the 2% change of
#: ``scripts/acceptance/aa_and_regression.py`` read 66 and 86 ns at a 6.7 us add, 70 and 91 ns
#: at 23 us, 51-117 ns from 46 to 180 us (docs/statistics.md, "The processes' own spread")
PROCESS_SPREAD_US = 0.09


def spread_half_width(spread: float, confidence: float) -> float:
    """The half-width, in log space, that a random effect of relative standard deviation
    ``spread`` alone gives an interval at ``confidence``: the change it cannot resolve."""
    return NormalDist().inv_cdf((1.0 + confidence) / 2.0) * math.log1p(spread)


def with_process_spread(estimate: RatioEstimate, spread: float) -> RatioEstimate:
    """``estimate`` with its interval widened by a random effect of relative standard deviation
    ``spread`` (the processes' own, :data:`PROCESS_SPREAD_US` over the base's median): each half
    of the interval, in log space, becomes the root of the sum of its square and the square of
    ``spread`` times the interval's normal quantile. The ratio, the p-value and the rounds stay."""
    if not (math.isfinite(spread) and spread >= 0.0):
        raise ValueError(f"spread must be finite and >= 0, got {spread!r}")
    if spread == 0.0 or estimate.ci_low <= 0 or estimate.ratio <= 0:
        return estimate
    z = spread_half_width(spread, estimate.confidence)
    center = math.log(estimate.ratio)
    below = math.hypot(max(0.0, center - math.log(estimate.ci_low)), z)
    above = math.hypot(max(0.0, math.log(estimate.ci_high) - center), z)
    return replace(estimate, ci_low=math.exp(center - below), ci_high=math.exp(center + above))


#: rounds before an interim interval's width is trusted to project where it can shrink to
MIN_ROUNDS_TO_PROJECT = 8
#: how much faster than 1/sqrt(rounds) the interval may still shrink before a decision counts as
#: out of reach (the width of a few rounds is itself noisy): stop only when clearly hopeless
PROJECTION_SLACK = 1.5


@dataclass(frozen=True, slots=True)
class Reach:
    """Where an undecided comparison can get within its remaining rounds (:func:`decision_reach`)."""

    #: the most rounds the budget and the cap allow
    rounds_possible: int
    #: the interval's projected half-width there, as a relative change (0.018 = ±1.8%)
    resolvable: float
    #: no verdict is reachable at that width, even with :data:`PROJECTION_SLACK`
    out_of_reach: bool


def decision_reach(estimate: RatioEstimate, threshold: float, rounds_possible: int) -> Reach | None:
    """Can more rounds decide this inconclusive comparison? The interval's half-width (in log
    space) shrinks about as 1/sqrt(rounds). Out of reach when, projected to ``rounds_possible``
    and divided by the slack, it is still wider than the band (so no interval can ever fit
    inside it: never ``unchanged``) while the ratio itself lies inside the band (no change
    beyond the threshold suspected: a ``slower`` would need the estimate to move out of the
    band and the interval to clear 1, beyond what this noise resolves). A ratio already beyond
    the band is never out of reach: it goes on, and to re-measurement. None before
    :data:`MIN_ROUNDS_TO_PROJECT` rounds or with a degenerate interval."""
    done = estimate.n_rounds
    if done < MIN_ROUNDS_TO_PROJECT or estimate.ci_low <= 0 or estimate.ratio <= 0 or rounds_possible < done:
        return None
    half_width = (math.log(estimate.ci_high) - math.log(estimate.ci_low)) / 2
    projected = half_width * math.sqrt(done / rounds_possible)
    band = math.log1p(threshold)
    out_of_reach = projected / PROJECTION_SLACK > band and abs(math.log(estimate.ratio)) < band
    return Reach(rounds_possible=rounds_possible, resolvable=math.expm1(projected), out_of_reach=out_of_reach)


def needs_remeasure(estimate: RatioEstimate, threshold: float, *, alpha: float = 0.05) -> bool:
    """True when the case is a suspected change worth measuring again with more rounds.

    That is: ``classify`` says SLOWER or FASTER, or it says INCONCLUSIVE with ``r > 1 + t``. The
    orchestrator re-measures these and the second run decides alone, so one noisy run neither
    fails a good change nor lets a slow one pass as "inconclusive", and a claimed speed-up must
    show twice (A/A on an H200: 1 `faster` in 90 case-runs of single measurements, a 17 us
    vector add at 0.989 with its interval just below 1). Same ValueErrors as ``classify``.
    """
    verdict = classify(estimate, threshold, alpha=alpha)
    if verdict in (Verdict.SLOWER, Verdict.FASTER):
        return True
    return verdict is Verdict.INCONCLUSIVE and estimate.ratio > 1.0 + threshold


# --------------------------------------------------------------------------------------------
# Internals: validation
# --------------------------------------------------------------------------------------------


def _check_confidence(confidence: float) -> None:
    # `not (0 < c < 1)` also rejects NaN, for which every comparison is False.
    if not (0.0 < confidence < 1.0):
        raise ValueError(f"confidence must be in (0, 1), got {confidence!r}")


def scaled_mad(x: np.ndarray) -> float:
    """The median absolute deviation from the median, scaled to be the standard deviation for
    normal noise: a spread that the odd slow call does not move."""
    return 1.4826 * float(np.median(np.abs(x - np.median(x))))


def _as_samples(samples: Sequence[float], what: str) -> np.ndarray:
    """A 1-D float64 copy of ``samples``; ValueError when empty, not 1-D or not finite."""
    try:
        x = np.array(samples, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{what} must be a sequence of numbers: {exc}") from exc
    if x.ndim != 1:
        raise ValueError(f"{what} must be a 1-D sequence of numbers, got shape {x.shape}")
    if x.size == 0:
        raise ValueError(f"{what} is empty")
    if not np.all(np.isfinite(x)):
        raise ValueError(f"{what} contains non-finite values (NaN or inf)")
    return x


def _as_rounds(rounds: Sequence[Sequence[float]], what: str) -> list[np.ndarray]:
    """Each round as a positive finite 1-D float64 array; ValueError on anything else."""
    if isinstance(rounds, (str, bytes)):
        raise ValueError(f"{what} must be a sequence of rounds of samples")
    try:
        rounds = list(rounds)
    except TypeError as exc:
        raise ValueError(f"{what} must be a sequence of rounds of samples") from exc
    if not rounds:
        raise ValueError(f"{what} has no rounds")
    out = []
    for i, samples in enumerate(rounds):
        x = _as_samples(samples, f"{what}[{i}]")
        # Latencies are strictly positive; 0 or less would make the ratio and its log meaningless.
        if not np.all(x > 0.0):
            raise ValueError(f"{what}[{i}] contains samples <= 0")
        out.append(x)
    return out


# --------------------------------------------------------------------------------------------
# Internals: bootstrap
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _RoundTable:
    """One side's rounds, laid out for vectorised resampling."""

    sorted_values: np.ndarray  # every sample of the side, ascending
    positions: np.ndarray  # (n_rounds, width) int32: index in sorted_values of sample j of round r
    lengths: np.ndarray  # (n_rounds,) samples per round
    equal_lengths: bool
    #: (size + 1,) int32: which distinct value (0, 1, ...) each sorted position holds; the last
    #: slot, for padding, is past every real one
    groups: np.ndarray

    @staticmethod
    def of(rounds: list[np.ndarray]) -> _RoundTable:
        lengths = np.array([r.size for r in rounds], dtype=np.int64)
        values = np.concatenate(rounds)
        order = np.argsort(values, kind="stable")
        rank = np.empty(values.size, dtype=np.int64)
        rank[order] = np.arange(values.size)
        width = int(lengths.max())
        # int32 positions sort about 4x faster than int64; no side holds 2**31 samples.
        positions = np.zeros((len(rounds), width), dtype=np.int32)
        offset = 0
        for r, n in enumerate(lengths):
            positions[r, :n] = rank[offset : offset + n]
            offset += n
        sorted_values = values[order]
        # A new group starts wherever the next value is more than a tie above the last one.
        starts = np.diff(sorted_values) > _TIE_RELATIVE * np.abs(sorted_values[1:])
        groups = np.concatenate([[0], np.cumsum(starts)]).astype(np.int32)
        return _RoundTable(
            sorted_values=sorted_values,
            positions=positions,
            lengths=lengths,
            equal_lengths=bool(np.all(lengths == width)),
            groups=np.append(groups, np.int32(np.iinfo(np.int32).max)),
        )


def _bootstrap_rounds(
    base: list[np.ndarray], head: list[np.ndarray], n_bootstrap: int, rng: Generator, step: float = 0.0
) -> np.ndarray:
    """Two-stage paired bootstrap replicates of median(pooled head) / median(pooled base)."""
    n_rounds = len(base)
    base_table, head_table = _RoundTable.of(base), _RoundTable.of(head)
    # Stage 1: round indices with replacement, one draw for both sides -- that is the pairing.
    picks = rng.integers(0, n_rounds, size=(n_bootstrap, n_rounds))
    width = max(base_table.positions.shape[1], head_table.positions.shape[1])
    chunk = max(1, _MAX_CHUNK_ELEMENTS // (n_rounds * width))
    replicates = np.empty(n_bootstrap, dtype=np.float64)
    for start in range(0, n_bootstrap, chunk):
        stop = min(start + chunk, n_bootstrap)
        head_medians = _two_stage_medians(head_table, picks[start:stop], rng, step)
        base_medians = _two_stage_medians(base_table, picks[start:stop], rng, step)
        replicates[start:stop] = head_medians / base_medians
    return replicates


def _two_stage_medians(table: _RoundTable, picks: np.ndarray, rng: Generator, step: float = 0.0) -> np.ndarray:
    """Stage 2: per replicate, resample each picked round's samples; np.median of the pool
    (with ``step`` > 0, the interpolated median of :func:`_grouped_median_sorted`).

    Works in index space: each drawn sample is replaced by its position in the side's sorted
    values, so sorting those small integers orders the pool, and the middle positions give the
    median (the mean of the two middle elements when the pool size is even), equal to
    np.median of the materialised pool.
    """
    n_replicates, n_rounds = picks.shape
    width = table.positions.shape[1]
    lengths = table.lengths[picks]  # (n_replicates, n_rounds)
    if table.equal_lengths:
        draws = rng.integers(0, width, size=(n_replicates, n_rounds, width))
    else:
        # A per-round upper bound makes Generator.integers several times slower; floor(U * n)
        # with a 53-bit uniform U is uniform on 0..n-1 to within n / 2**53.
        uniform = rng.random((n_replicates, n_rounds, width))
        draws = (uniform * lengths[:, :, None]).astype(np.int64)
    # Flat index into positions: row of the picked round plus the drawn column. In-place add and
    # np.take avoid two temporaries and fancy indexing's overhead (about 3x faster).
    draws += (picks * width)[:, :, None]
    pool = np.take(table.positions.ravel(), draws)
    if not table.equal_lengths:
        # Slots past a short round's length are padding: give them a position past every real
        # one, so they sort last and never reach the middle of the pool.
        pool[np.arange(width) >= lengths[:, :, None]] = table.sorted_values.size
    pool = pool.reshape(n_replicates, n_rounds * width)
    pool_sizes = lengths.sum(axis=1)
    if table.equal_lengths:
        # Every pool has the same size: only its two middle positions need to be in place,
        # which a partition does in linear time (about 2.5x faster than the full sort).
        middle = n_rounds * width
        pool.partition(sorted({(middle - 1) // 2, middle // 2}), axis=1)
    else:
        pool.sort(axis=1)
    upper = np.take_along_axis(pool, (pool_sizes // 2)[:, None], axis=1)[:, 0]
    if step > 0.0:
        # The counts under and at the upper middle's value, by group: order within the pool
        # does not matter for them, so the partial partition above is enough.
        pool_groups = np.take(table.groups, pool)
        middle_group = table.groups[upper][:, None]
        below = np.count_nonzero(pool_groups < middle_group, axis=1)
        at = np.count_nonzero(pool_groups == middle_group, axis=1)
        grouped: np.ndarray = table.sorted_values[upper] - step / 2.0 + step * (pool_sizes / 2.0 - below) / at
        return grouped
    lower = np.take_along_axis(pool, ((pool_sizes - 1) // 2)[:, None], axis=1)[:, 0]
    medians: np.ndarray = (table.sorted_values[lower] + table.sorted_values[upper]) / 2.0
    return medians


# --------------------------------------------------------------------------------------------
# Steps in a history of per-commit latencies
# --------------------------------------------------------------------------------------------

#: a new level must hold for at least this many commits to count as a lasting change
MIN_STEP_COMMITS = 3


@dataclass(frozen=True, slots=True)
class Step:
    """A lasting change in a series of per-commit latencies: ``values[index - 1]`` is the last
    point at the old level, ``values[index]`` the first at the new one. ``before`` and ``after``
    are the two levels (medians of their segments)."""

    index: int
    before: float
    after: float

    @property
    def ratio(self) -> float:
        return self.after / self.before


def detect_steps(values: Sequence[float], threshold: float, *, min_commits: int = MIN_STEP_COMMITS) -> list[Step]:
    """Lasting changes larger than ``threshold`` in a series of per-commit latencies (as asv does).

    In log space the series is fitted with piecewise-constant levels, segments at least
    ``min_commits`` long, by optimal partitioning (dynamic programming over all split points)
    minimising the squared residuals plus a penalty per segment of ``3 * sigma**2 * log(n)``
    (BIC-like), where sigma is the noise estimated robustly from successive differences (their
    MAD). Each segment's level is its median, so a one-commit blip is no lasting change.
    Adjacent levels closer than ``threshold`` are then merged, so every step reported is
    larger than the case's threshold. Noise never reads as a step more often than the penalty
    allows: see tests/unit/test_steps.py for the planted-step and flat-history rates.

    Raises ValueError on a value that is not finite and > 0, a threshold <= 0, or min_commits < 1.
    """
    if not (math.isfinite(threshold) and threshold > 0):
        raise ValueError(f"threshold must be > 0, got {threshold!r}")
    if min_commits < 1:
        raise ValueError(f"min_commits must be >= 1, got {min_commits!r}")
    raw = _as_samples(values, "values") if len(values) else np.ones(0)
    if np.any(raw <= 0):
        raise ValueError("values must all be > 0 (latencies)")
    x = np.log(raw)
    n = x.size
    if n < 2 * min_commits:
        return []
    diffs = np.diff(x)
    sigma = scaled_mad(diffs) / math.sqrt(2)
    # A perfectly flat series has no noise to scale by: a tiny floor keeps the penalty positive.
    sigma = max(sigma, 1e-9)
    penalty = 3.0 * sigma**2 * math.log(n)
    bounds = _optimal_partition(x, penalty, min_commits)
    # Levels are segment medians: a segment the fit made around a one-commit blip has the level
    # of its neighbours, and merges into them below.
    levels = [float(np.median(x[a:b])) for a, b in bounds]
    # Merge neighbours whose levels differ by less than the threshold, smallest gap first.
    log_band = math.log1p(threshold)
    while len(bounds) > 1:
        gaps = [abs(levels[k + 1] - levels[k]) for k in range(len(levels) - 1)]
        k = int(np.argmin(gaps))
        if gaps[k] >= log_band:
            break
        bounds[k : k + 2] = [(bounds[k][0], bounds[k + 1][1])]
        levels[k : k + 2] = [float(np.median(x[bounds[k][0] : bounds[k][1]]))]
    return [
        Step(index=bounds[k + 1][0], before=math.exp(levels[k]), after=math.exp(levels[k + 1]))
        for k in range(len(bounds) - 1)
    ]


def _optimal_partition(x: np.ndarray, penalty: float, min_length: int) -> list[tuple[int, int]]:
    """Segments [a, b) minimising sum of squared deviations from each segment's mean plus
    ``penalty`` per segment, every segment at least ``min_length`` long (O(n^2), vectorised)."""
    n = x.size
    s1 = np.concatenate([[0.0], np.cumsum(x)])
    s2 = np.concatenate([[0.0], np.cumsum(x * x)])
    best = np.full(n + 1, np.inf)
    best[0] = -penalty  # the first segment pays no split
    last_start = np.zeros(n + 1, dtype=np.int64)
    for end in range(min_length, n + 1):
        starts = np.arange(0, end - min_length + 1)
        lengths = end - starts
        sums = s1[end] - s1[starts]
        cost = (s2[end] - s2[starts]) - sums * sums / lengths
        total = best[starts] + cost + penalty
        pick = int(np.argmin(total))
        best[end] = total[pick]
        last_start[end] = starts[pick]
    segments = []
    end = n
    while end > 0:
        start = int(last_start[end])
        segments.append((start, end))
        end = start
    return segments[::-1]


# --------------------------------------------------------------------------------------------
# Internals: rank tests
# --------------------------------------------------------------------------------------------


def _average_ranks(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """1-based ranks of ``x`` with ties given their average rank, and the size of each tie group."""
    order = np.argsort(x, kind="mergesort")
    xs = x[order]
    starts_group = np.empty(xs.size, dtype=bool)
    starts_group[0] = True
    starts_group[1:] = xs[1:] != xs[:-1]
    group = np.cumsum(starts_group) - 1
    sizes = np.bincount(group)
    first_position = np.flatnonzero(starts_group)
    # Positions first+1 .. first+size (1-based) average to first + (size + 1) / 2.
    average = first_position + (sizes + 1) / 2.0
    ranks = np.empty(xs.size, dtype=np.float64)
    ranks[order] = average[group]
    return ranks, sizes


def _wilcoxon_signed_rank_p(differences: np.ndarray) -> float:
    """Two-sided p-value of the Wilcoxon signed-rank test of ``differences`` against 0."""
    d = differences[differences != 0.0]
    n = int(d.size)
    if n == 0:
        return 1.0
    ranks, tie_sizes = _average_ranks(np.abs(d))
    t_plus = float(ranks[d > 0.0].sum())

    if n <= _EXACT_WILCOXON_MAX_N:
        # Average ranks are multiples of 1/2, so doubled ranks are integers and the exact
        # null distribution of 2*T+ (each sign + or - with probability 1/2, independently) is a
        # subset-sum count: dist[s] = number of sign patterns with doubled rank sum s.
        doubled = np.rint(2.0 * ranks).astype(np.int64)
        total = int(doubled.sum())
        dist = np.zeros(total + 1, dtype=np.int64)
        dist[0] = 1
        for a in doubled:
            shifted = dist.copy()
            shifted[a:] += dist[: total + 1 - a]
            dist = shifted
        observed = int(doubled[d > 0.0].sum())  # 2 * T+, exactly
        at_most = int(dist[: observed + 1].sum())
        at_least = int(dist[observed:].sum())
        return min(1.0, 2 * min(at_most, at_least) / float(2**n))

    mean = n * (n + 1) / 4.0
    tie_sizes = tie_sizes.astype(np.float64)
    variance = n * (n + 1) * (2 * n + 1) / 24.0 - float(np.sum(tie_sizes**3 - tie_sizes)) / 48.0
    return _two_sided_normal_p(t_plus - mean, variance)


def _mann_whitney_p(base: np.ndarray, head: np.ndarray) -> float:
    """Two-sided p-value of the Mann-Whitney U test, normal approximation with tie correction."""
    n_base, n_head = int(base.size), int(head.size)
    n_total = n_base + n_head
    ranks, tie_sizes = _average_ranks(np.concatenate([base, head]))
    u_head = float(ranks[n_base:].sum()) - n_head * (n_head + 1) / 2.0
    mean = n_base * n_head / 2.0
    tie_sizes = tie_sizes.astype(np.float64)
    tie_term = float(np.sum(tie_sizes**3 - tie_sizes)) / (n_total * (n_total - 1))
    variance = n_base * n_head / 12.0 * ((n_total + 1) - tie_term)
    return _two_sided_normal_p(u_head - mean, variance)


def _two_sided_normal_p(deviation: float, variance: float) -> float:
    """2 * P(Z >= (|deviation| - 1/2) / sqrt(variance)), the continuity-corrected normal tail."""
    # Zero variance means every observation ties: no evidence of any difference.
    if variance <= 0.0:
        return 1.0
    z = max(abs(deviation) - 0.5, 0.0) / math.sqrt(variance)
    # erfc keeps precision in the far tail, where 1 - cdf would cancel to 0.
    return math.erfc(z / _SQRT2)


# --- The memoisation probe (measure/memo_probe.py) -------------------------------------------

#: the smallest slowdown of new content over remembered content that is ever read as caching
MEMO_MIN_EFFECT = 0.05
#: the effect must also exceed this many times the relative spread of a single timed call
MEMO_NOISE_FACTOR = 3.0
#: the one-sided sign test's level: new content slower in so many pairs that a kernel as fast on
#: both would do it by chance at most this often (10 pairs: 9 slower; 20: 16; 30: 22)
MEMO_SIGN_P = 0.011
#: fewer pairs than this decide nothing
MEMO_MIN_PAIRS = 6


def sign_test_p(successes: int, trials: int) -> float:
    """P(X >= successes) for X ~ Binomial(trials, 1/2): the one-sided sign test."""
    return math.fsum(math.comb(trials, k) for k in range(successes, trials + 1)) / 2.0**trials


@dataclass(frozen=True, slots=True)
class MemoEvidence:
    """Calls on content a variant never saw, each against a call on content it had seen."""

    #: what the remembered content was: "the same content just before", "content it saw many times"
    seen_as: str
    #: median of (time on new content) / (time on remembered content) over the pairs
    ratio: float
    #: pairs where the new content took longer, of all pairs
    slower_pairs: int
    pairs: int
    #: the ratio that would have been read as caching
    bound: float

    @property
    def cached(self) -> bool:
        return self.pairs >= MEMO_MIN_PAIRS and self.ratio > self.bound and sign_test_p(self.slower_pairs, self.pairs) <= MEMO_SIGN_P

    @property
    def suspect(self) -> bool:
        """Faster on seen content by more than the noise, but not yet in enough pairs: worth more pairs."""
        return self.ratio > self.bound and not self.cached


def relative_spread(samples: Sequence[float]) -> float:
    """The spread of single samples around their median, as a fraction of it (scaled MAD: the
    standard deviation for normal noise, robust to the odd slow call)."""
    x = _as_samples(samples, "samples")
    centre = float(np.median(x))
    if centre <= 0:
        return 0.0
    return scaled_mad(x) / centre


def memo_evidence(new: Sequence[float], seen: Sequence[float], noise: float, seen_as: str) -> MemoEvidence:
    """Pairs ``(new[i], seen[i])`` of calls made back to back under the same conditions. A kernel
    that computes takes as long on either; one that remembers results is faster on content it
    has seen. Read as caching when the median ratio exceeds ``1 + max(MEMO_MIN_EFFECT,
    MEMO_NOISE_FACTOR * noise)`` and the sign test says the new content was slower in more
    pairs than chance allows (:data:`MEMO_SIGN_P`)."""
    if len(new) != len(seen):
        raise ValueError("new and seen need one sample per pair")
    ratios = [a / b for a, b in zip(new, seen, strict=True) if b > 0]
    bound = 1.0 + max(MEMO_MIN_EFFECT, MEMO_NOISE_FACTOR * noise)
    return MemoEvidence(
        seen_as=seen_as,
        ratio=float(np.median(ratios)) if ratios else 1.0,
        slower_pairs=sum(ratio > 1.0 for ratio in ratios),
        pairs=len(ratios),
        bound=bound,
    )


# --- The judge's outside clock (judge/clock.py) ------------------------------------------------

#: the smallest difference between two sides' handoff gaps read as a lie on a GPU (us): honest
#: kernels of different shapes differ by up to ~1.5 us in the gap on an H200 (docs/statistics.md)
CLOCK_FLOOR_GPU_US = 3.0
#: on a CPU (the judge's monotonic clock around a socket round trip): at least this many us, and
#: at least this share of the side's own median time
CLOCK_FLOOR_CPU_US = 2000.0
CLOCK_FLOOR_CPU_SHARE = 0.2
#: a difference must also exceed this many standard errors of the two medians' difference
CLOCK_SE_FACTOR = 4.0
#: fewer figures than this on either side resolve nothing: their scaled MAD, and so the standard
#: error, can be 0 (a CPU bench of 3 trials has 4 calls a side; on a loaded 2-core machine an
#: honest side's 4 gaps lay 2-13 ms from the trusted side's, and a resolution of 0 read that as
#: a lie or a skipped flush)
CLOCK_MIN_FIGURES = 5


@dataclass(frozen=True, slots=True)
class ClockCheck:
    """One of a side's figures under the judge's clock against the trusted sides' (us)."""

    side_us: float
    reference_us: float
    #: the smallest excess of ``side_us`` over ``reference_us`` that is read as real
    resolution_us: float
    #: whether both sides had :data:`CLOCK_MIN_FIGURES` figures: with fewer, nothing is read as real
    enough: bool = True

    @property
    def excess_us(self) -> float:
        return self.side_us - self.reference_us

    @property
    def exceeded(self) -> bool:
        return self.enough and self.excess_us > self.resolution_us


def median_standard_error(values: Sequence[float]) -> float:
    """The standard error of a sample's median, from its scaled MAD (robust to odd calls)."""
    x = _as_samples(values, "values")
    return 1.2533 * scaled_mad(x) / math.sqrt(len(x))


def clock_check(side: Sequence[float], reference: Sequence[float], *, floor_us: float) -> ClockCheck:
    """``side``'s median against ``reference``'s (per-call figures, us): an excess counts only
    beyond ``floor_us`` and :data:`CLOCK_SE_FACTOR` standard errors of the difference, and not at
    all with fewer than :data:`CLOCK_MIN_FIGURES` figures a side."""
    noise = math.hypot(median_standard_error(side), median_standard_error(reference))
    return ClockCheck(
        side_us=float(np.median(_as_samples(side, "side"))), reference_us=float(np.median(_as_samples(reference, "reference"))),
        resolution_us=max(floor_us, CLOCK_SE_FACTOR * noise), enough=min(len(side), len(reference)) >= CLOCK_MIN_FIGURES,
    )


def shift_p(side: Sequence[float], reference: Sequence[float]) -> float:
    """Two-sided p-value that ``side`` and ``reference`` (independent figures, e.g. one a batch)
    come from one distribution, against a shift of one from the other: the Mann-Whitney U test
    (normal approximation, tie correction, continuity correction 1/2)."""
    return _mann_whitney_p(_as_samples(reference, "reference"), _as_samples(side, "side"))


def clock_floor_us(on_gpu: bool, side_median_us: float) -> float:
    """:data:`CLOCK_FLOOR_GPU_US` on a GPU; on a CPU the larger of the absolute and relative floors."""
    if on_gpu:
        return CLOCK_FLOOR_GPU_US
    return max(CLOCK_FLOOR_CPU_US, CLOCK_FLOOR_CPU_SHARE * side_median_us)


#: the tail test: a side whose gap passes the trusted sides' 99th percentile plus the floor in
#: more than this share of its calls (beyond twice the trusted sides' own share), and in at least
#: CLOCK_TAIL_MIN_CALLS calls, lied on those calls (a lie on a minority of calls leaves the median)
CLOCK_TAIL_SHARE = 0.05
CLOCK_TAIL_MIN_CALLS = 5


@dataclass(frozen=True, slots=True)
class ClockTail:
    """How many of a side's calls had a gap beyond the trusted sides' 99th percentile plus the
    floor (``threshold_us``), against how many of the trusted sides' own calls did."""

    calls_beyond: int
    calls: int
    reference_beyond: int
    reference_calls: int
    threshold_us: float

    @property
    def exceeded(self) -> bool:
        share = self.calls_beyond / max(self.calls, 1)
        reference_share = self.reference_beyond / max(self.reference_calls, 1)
        return self.calls_beyond >= CLOCK_TAIL_MIN_CALLS and share > CLOCK_TAIL_SHARE + 2.0 * reference_share


def clock_tail(side: Sequence[float], reference: Sequence[float], *, floor_us: float) -> ClockTail:
    theirs = _as_samples(reference, "reference")
    threshold = float(np.quantile(theirs, 0.99)) + floor_us
    return ClockTail(
        calls_beyond=int(np.sum(_as_samples(side, "side") > threshold)), calls=len(side),
        reference_beyond=int(np.sum(theirs > threshold)), reference_calls=len(theirs), threshold_us=threshold,
    )


@dataclass(frozen=True, slots=True)
class SeenFaster:
    """The judge's spans (us) of calls on contents new to a side, each against the call beside it
    on contents it had seen: a side that remembers answers spends less of the judge's clock on
    the seen ones. The judge's clock, not the side's own: a side may lie about its time on the
    new contents alone."""

    #: median of (span on the new contents - span on the seen ones beside it)
    median_extra_us: float
    slower_pairs: int
    pairs: int
    #: the extra that would be read as caching
    bound_us: float

    @property
    def cached(self) -> bool:
        return (self.pairs >= MEMO_MIN_PAIRS and self.median_extra_us > self.bound_us
                and sign_test_p(self.slower_pairs, self.pairs) <= MEMO_SIGN_P)


def seen_faster(new_us: Sequence[float], seen_us: Sequence[float], *, bound_us: float) -> SeenFaster:
    """Pairs ``(new_us[i], seen_us[i])``; read as caching when the new contents took longer in
    more pairs than chance allows (the sign test at :data:`MEMO_SIGN_P`) and by more than
    ``bound_us`` at the median."""
    if len(new_us) != len(seen_us):
        raise ValueError("new and seen need one span per pair")
    extra = [a - b for a, b in zip(new_us, seen_us, strict=True)]
    return SeenFaster(
        median_extra_us=float(np.median(extra)) if extra else 0.0, slower_pairs=sum(e > 0 for e in extra), pairs=len(extra),
        bound_us=bound_us,
    )
