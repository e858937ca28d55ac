"""Each side worker's own cost of a call, measured on trusted calls and taken out of its samples
(``KBENCH_CI_JUDGE_CALIBRATE_CALLS``; off by default).

A ~5 us kernel reads a steady 0.15-0.3 us more or less in one worker process than in another,
for that process's whole life, drawn anew with each process (docs/statistics.md, "The bias
follows the process"). In one process base and head share it and it cancels; under the judge
each side has a process of its own, and a 1% A/A compare reads ``slower``. So before a new
worker loads anything, the judge times an empty kernel handed over to it the way every side's
call is (:data:`kbench_ci.measure.sideproto.CALIBRATION_BASELINE`), and keeps the centre of
those times as the worker's figure. A case whose sides' workers all have one takes from every
side's samples the same amount, the figures' mean less CUPTI's reading of the empty kernel
(the level of a handed-over call); with ``KBENCH_CI_JUDGE_CALIBRATE_EACH=1`` each side loses
its own figure less that reading, so the differences between the processes go too (on an
H100 they were right for a 5 us kernel and wrong for a 23 us one: docs/statistics.md).

Pure arithmetic here (no torch: :mod:`.sides` keeps a worker's figure and is imported before
torch is); the calls themselves are made in :mod:`.case`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from kbench_ci.suite.settings import JUDGE_CALIBRATE_EACH_ENV

#: the calibration's first handed-over calls, not kept (the first hold of the judge's pacing,
#: the first launch in the process); fewer where the calls are few (at most half of them)
WARM_UP_CALLS = 5
#: the most the workers' figures may move the case's level (ms): the judge's one event
#: overhead is taken in its own process, after a held stream, and a handed-over call's pair
#: costs less (the judged times read 0.6-0.7 us under the in-process code's and 2% under ncu,
#: H100, 2026-12-05); a shift past this was measured under something else, and only the
#: differences are taken out
MAX_LEVEL_MS = 1.5e-3
#: the largest correction the judge takes out of a side's samples (ms). The offsets seen are
#: 0.15-0.3 us; a figure further from the case's mean than this was measured under something
#: else (a busy GPU), and none of the case's figures is taken out. Far below the 3 us the
#: judge's clock resolves (docs/statistics.md), so no figure can buy a side a verdict.
MAX_CORRECTION_MS = 0.5e-3


@dataclass(frozen=True, slots=True)
class Calibration:
    """One worker's own cost of a call: the centre (ms) of its kept trusted calls' times, or
    None with why it has none."""

    figure_ms: float | None
    calls: int = 0
    refused: str | None = None


@dataclass(frozen=True, slots=True)
class Corrections:
    """What the judge takes off each side's every sample (ms, by label; empty: nothing), and
    what the case's timing description says of it."""

    by_label: Mapping[str, float]
    words: str


def kept(samples: Sequence[float]) -> list[float]:
    """``samples`` less their first :data:`WARM_UP_CALLS` (at most half of them)."""
    return list(samples[min(WARM_UP_CALLS, len(samples) // 2):])


def centre_ms(samples: Sequence[float]) -> float:
    """The mean of the middle half of ``samples``. Event times are quantised at 32 ns, a sixth of
    the offsets looked for: a median would jump from one tick to the next, a mean of the middle
    half falls between them, and a call held up by something else does not move it."""
    if not samples:
        raise ValueError("no samples to take a centre of")
    ordered = sorted(samples)
    quarter = len(ordered) // 4
    middle = ordered[quarter:len(ordered) - quarter]
    return math.fsum(middle) / len(middle)


_WHAT = "each worker's own cost of a call"


def corrections(
    calibrations: Mapping[str, Calibration | None], *, each: bool, limit_ms: float = MAX_CORRECTION_MS,
    level_ms: float | None = None, level_limit_ms: float = MAX_LEVEL_MS,
) -> Corrections:
    """The correction of each side (by label) from its worker's calibration (None: its worker was
    never calibrated): its figure less the mean of all the sides' figures. None is taken out
    where any side lacks a figure (the others' would then be measured against a mean that is
    not the case's), nor where any correction is beyond ``limit_ms``; the words say why.

    ``level_ms``: what the figures would be were a handed-over call's event pair to cost what
    the judge's one overhead says (CUPTI's duration of the empty kernel they time; the figures
    are already less that overhead). Given, each side's correction is its figure less it: the
    differences between the processes go, and the case's level becomes the handed-over calls'
    own, unless the mean figure is more than ``level_limit_ms`` from it (then only the
    differences go, and the words say so).

    ``each`` false (:data:`~kbench_ci.suite.settings.JUDGE_CALIBRATE_EACH_ENV` 0, the default):
    the level alone, the same shift for every side, so no side moves against another; nothing
    without ``level_ms``, nor where one figure is beyond ``limit_ms`` from the figures' mean
    (it was measured under something else, and the mean with it). On an H100 the differences
    took a 5 us kernel's A/A from +8.3% to +0.6% but moved a 23 us kernel's by -2.1% and a
    Triton softmax's by -1.1% in the same run (docs/statistics.md): a process's cost is not one
    cost per call."""
    if not calibrations:
        return Corrections({}, "")
    for label, calibration in calibrations.items():
        if calibration is None:
            return Corrections({}, f"{_WHAT} not taken out: {label}'s worker was not calibrated before its first load")
        if calibration.figure_ms is None:
            return Corrections({}, f"{_WHAT} not taken out: {label}'s worker has no figure ({calibration.refused or 'not measured'})")
    figures = {label: calibration.figure_ms for label, calibration in calibrations.items()
               if calibration is not None and calibration.figure_ms is not None}
    mean = math.fsum(figures.values()) / len(figures)
    by_label = {label: figure - mean for label, figure in figures.items()}
    calls = min(calibration.calls for calibration in calibrations.values() if calibration is not None)
    measured = f"{_WHAT}, measured on {calls} trusted calls in its worker before any side's code loaded there"
    listed = ", ".join(f"{label} {correction * 1e3:+.2f} us" for label, correction in by_label.items())
    # (a femtosecond's slack: a correction of exactly the bound, made of floats, is within it)
    beyond = [label for label, correction in by_label.items() if abs(correction) > limit_ms + 1e-12]
    if beyond:
        bound = f"±{limit_ms * 1e3:.2f} us"
        why = (f"is beyond the {bound} the judge takes out" if each
               else f"figure is more than {bound} from the figures' mean, measured under something else")
        return Corrections({}, f"{measured}, not taken out: {beyond[0]}'s {why} ({listed}; figures {_figures(figures)})")
    if not each:
        return _level_alone(figures, mean, measured, listed, level_ms, level_limit_ms)
    level = ""
    if level_ms is not None:
        shift = mean - level_ms
        if abs(shift) <= level_limit_ms + 1e-12:
            by_label = {label: correction + shift for label, correction in by_label.items()}
            level = (f"; and the level: every side {shift * 1e3:+.2f} us, the figures' mean less CUPTI's "
                     f"{level_ms * 1e3:.3f} us for the same empty kernel (a handed-over call's event pair costs "
                     "what the figures say, not the judge's one overhead)")
        else:
            level = (f"; the level not moved: the figures' mean is {shift * 1e3:+.2f} us from CUPTI's "
                     f"{level_ms * 1e3:.3f} us for the same empty kernel, beyond ±{level_limit_ms * 1e3:.2f} us")
    return Corrections(by_label, f"{measured}, taken out: {listed} (figures {_figures(figures)}){level}")


def _level_alone(
    figures: Mapping[str, float], mean: float, measured: str, listed: str, level_ms: float | None, level_limit_ms: float,
) -> Corrections:
    """Every side shifted by the figures' mean less CUPTI's reading, or nothing, with the words."""
    kept_in = (f"the workers' differences ({listed}) kept in: each worker's own is taken out only with "
               f"{JUDGE_CALIBRATE_EACH_ENV}=1")
    if level_ms is None:
        return Corrections({}, f"{measured}, not taken out: no CUPTI reading of the empty kernel to set the level by; {kept_in}")
    shift = mean - level_ms
    if abs(shift) > level_limit_ms + 1e-12:
        return Corrections({}, (f"{measured}, not taken out: the figures' mean is {shift * 1e3:+.2f} us from CUPTI's "
                                f"{level_ms * 1e3:.3f} us for the same empty kernel, beyond ±{level_limit_ms * 1e3:.2f} us "
                                f"(figures {_figures(figures)})"))
    return Corrections({label: shift for label in figures}, (
        f"{measured}: the level taken out, every side {shift * 1e3:+.2f} us, the figures' mean less CUPTI's "
        f"{level_ms * 1e3:.3f} us for the same empty kernel (a handed-over call's event pair costs what the figures say, "
        f"not the judge's one overhead; figures {_figures(figures)}); {kept_in}"))


def _figures(figures: Mapping[str, float]) -> str:
    return ", ".join(f"{label} {figure * 1e3:.3f} us" for label, figure in figures.items())
