"""The trend of every case over the recorded commits: history.md, one chart per case, and a
static index.html that GitHub Pages can serve. Steps (lasting changes larger than the threshold)
are found by :func:`kbench_ci.stats.detect_steps` and named by the commit range they happened in.

Each case's threshold is, in order: ``--threshold``; the one it was last judged by (a compare
records it); its kernel's in kbench.toml (``[defaults]`` included); the default 2%. A 5% suite's
history must not call a 3% wobble a step because the history was read at 2%.
"""

from __future__ import annotations

import html
import importlib
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from kbench_ci.errors import ConfigError, MissingExtraError
from kbench_ci.history.store import CasePoint, HistoryEntry
from kbench_ci.report.markdown import cell, code
from kbench_ci.stats import Step, detect_steps
from kbench_ci.suite.loader import find_config, load_suite
from kbench_ci.suite.settings import DEFAULT_THRESHOLD

#: where a trend's threshold came from: ``--threshold``, the results recorded, kbench.toml, 2%
ThresholdSource = Literal["flag", "recorded", "suite", "default"]
_SAID = {
    "flag": "--threshold",
    "recorded": "the threshold the cases were judged by",
    "suite": "the kernels' threshold in kbench.toml",
    "default": "the default: no threshold was recorded or found in kbench.toml",
}


@dataclass(frozen=True, slots=True)
class Trend:
    """One case on one GPU model: its median per recorded commit, oldest first, and its steps."""

    gpu: str
    case_id: str
    commits: tuple[str, ...]
    medians_ms: tuple[float, ...]
    steps: tuple[Step, ...]
    #: per commit, where recorded: registers of the main kernel, share of the GPU's ceiling
    registers: tuple[int | None, ...] = ()
    peak_shares: tuple[float | None, ...] = ()
    #: the smallest lasting change its steps are, and where that threshold came from
    threshold: float = DEFAULT_THRESHOLD
    threshold_from: ThresholdSource = "default"

    @property
    def chart_name(self) -> str:
        return re.sub(r"[^A-Za-z0-9._-]+", "_", f"{self.gpu}__{self.case_id}").strip("_") + ".png"

    def step_range(self, step: Step) -> str:
        """The commits between which the step happened: last at the old level .. first at the new."""
        return f"{self.commits[step.index - 1][:12]}..{self.commits[step.index][:12]}"


def trends(
    history: Sequence[HistoryEntry],
    *,
    threshold: float | None = None,
    kernel: str | None = None,
    suite_thresholds: Callable[[], Mapping[str, float]] | None = None,
) -> list[Trend]:
    """Per (GPU model, case), in the order the entries were recorded (oldest first).

    ``threshold`` (``--threshold``) applies to every case; without it, a case's own (see the
    module docstring): ``suite_thresholds`` gives each kernel's in kbench.toml, asked at most once
    and only for a case whose entries recorded none."""
    series: dict[tuple[str, str], list[tuple[str, CasePoint]]] = {}
    for entry in history:
        for point in entry.points:
            if kernel is None or point.case_id == kernel or point.case_id.startswith(f"{kernel}["):
                series.setdefault((entry.gpu, point.case_id), []).append((entry.commit, point))
    suite: list[Mapping[str, float]] = []
    found = []
    for (gpu, case_id), points in sorted(series.items()):
        medians = tuple(p.median_ms for _, p in points)
        chosen, source = _threshold_for(case_id, [p for _, p in points], threshold, suite_thresholds, suite)
        found.append(Trend(gpu, case_id, tuple(c for c, _ in points), medians, tuple(detect_steps(medians, chosen)),
                           registers=tuple(p.registers for _, p in points),
                           peak_shares=tuple(p.peak_share for _, p in points),
                           threshold=chosen, threshold_from=source))
    return found


def _threshold_for(
    case_id: str,
    points: Sequence[CasePoint],
    flag: float | None,
    suite_thresholds: Callable[[], Mapping[str, float]] | None,
    suite: list[Mapping[str, float]],
) -> tuple[float, ThresholdSource]:
    if flag is not None:
        return flag, "flag"
    recorded = [p.threshold for p in points if p.threshold is not None]
    if recorded:
        return recorded[-1], "recorded"  # the newest: the suite may have loosened it since
    if suite_thresholds is not None:
        if not suite:
            suite.append(suite_thresholds())
        name = case_id.split("[", 1)[0]
        if name in suite[0]:
            return suite[0][name], "suite"
    return DEFAULT_THRESHOLD, "default"


def suite_thresholds(start: Path) -> dict[str, float]:
    """Each kernel's threshold in the suite found from ``start`` (as ``compare`` finds it); {}
    where there is no suite file. A malformed one is a ConfigError, as for any command."""
    try:
        path = find_config(start)
    except ConfigError:
        return {}
    return {kernel.name: kernel.threshold for kernel in load_suite(path, check_files=False).kernels}


def threshold_sentence(found: Sequence[Trend]) -> str:
    """What a step is, with the threshold(s) the trends were read at and where they came from."""
    values = sorted({trend.threshold for trend in found})
    sources = sorted({trend.threshold_from for trend in found})
    if not values:
        return "a step is a lasting change larger than the case's threshold."
    said = "; ".join(_SAID[source] for source in sources)
    if len(values) == 1:
        return f"a step is a lasting change larger than {_percent(values[0])} ({said})."
    return (f"a step is a lasting change larger than the case's threshold, {_percent(values[0])} to "
            f"{_percent(values[-1])} (column `threshold`; {said}).")


def _percent(fraction: float) -> str:
    return f"{fraction * 100:.3g}%"


def _first_to_last(values: Sequence[Any], text: Any) -> str:
    """"first → last" of the recorded values (the same once: one value), or — when none is."""
    known = [value for value in values if value is not None]
    if not known:
        return "—"
    return text(known[0]) if known[0] == known[-1] else f"{text(known[0])} → {text(known[-1])}"


def render_markdown(found: Sequence[Trend]) -> str:
    lines = ["# kbench-ci history", "", f"Median latency per recorded commit; {threshold_sentence(found)}", ""]
    if not found:
        return "\n".join([*lines, "Nothing recorded yet.", ""])
    lines += ["| GPU | case | commits | first | last | change | threshold | steps | registers | % of peak |",
              "|---|---|---|---|---|---|---|---|---|---|"]
    for trend in found:
        steps = "; ".join(f"{(s.ratio - 1):+.1%} at {trend.step_range(s)}" for s in trend.steps) or "none"
        change = trend.medians_ms[-1] / trend.medians_ms[0] - 1
        lines.append(
            f"| {cell(trend.gpu, 80)} | {code(trend.case_id)} | {len(trend.commits)} | {_ms(trend.medians_ms[0])} | "
            f"{_ms(trend.medians_ms[-1])} | {change:+.1%} | {_percent(trend.threshold)} | {steps} | "
            f"{_first_to_last(trend.registers, str)} | "
            f"{_first_to_last(trend.peak_shares, lambda share: f'{share:.0%}')} |"
        )
    return "\n".join([*lines, ""])


def render_index_html(found: Sequence[Trend]) -> str:
    parts = ["<!doctype html><meta charset='utf-8'><title>kbench-ci history</title>",
             "<h1>kbench-ci history</h1>",
             f"<p>Median latency per recorded commit; {html.escape(threshold_sentence(found))}</p>"]
    for trend in found:
        steps = "; ".join(f"{(s.ratio - 1):+.1%} at {trend.step_range(s)}" for s in trend.steps) or "no step"
        steps += f" (threshold {_percent(trend.threshold)})"
        parts += [f"<h2 id='{html.escape(trend.chart_name)}'>{html.escape(trend.case_id)} on {html.escape(trend.gpu)}</h2>",
                  f"<p>{html.escape(steps)}</p>",
                  f"<img src='{html.escape(trend.chart_name)}' alt='{html.escape(trend.case_id)}'>"]
    return "\n".join(parts) + "\n"


def chart_series(trend: Trend, threshold: float | None = None) -> tuple[list[float], float]:
    """A trend as the chart draws it: each median's change (%) against the first recorded one,
    and the half-height of the axis: at least twice the threshold (the trend's own unless
    given), or the largest change and a margin."""
    threshold = trend.threshold if threshold is None else threshold
    first = trend.medians_ms[0]
    changes = [100.0 * (median / first - 1.0) for median in trend.medians_ms]
    limit = max(2.0 * threshold * 100.0, 1.15 * max((abs(c) for c in changes), default=0.0))
    return changes, limit


@dataclass(frozen=True, slots=True)
class WhySeries:
    """What a trend's second panel draws: per commit (by index) where recorded, the registers
    per thread of the main kernel and its share of the GPU's ceiling (%)."""

    register_points: tuple[tuple[int, int], ...]
    peak_points: tuple[tuple[int, float], ...]

    @property
    def empty(self) -> bool:
        return not self.register_points and not self.peak_points


def why_series(trend: Trend) -> WhySeries:
    return WhySeries(
        tuple((index, value) for index, value in enumerate(trend.registers) if value is not None),
        tuple((index, 100.0 * value) for index, value in enumerate(trend.peak_shares) if value is not None),
    )


def write_site(found: Sequence[Trend], folder: Path) -> list[Path]:
    """history.md, index.html and one PNG per trend in ``folder``; the paths written."""
    pyplot = _pyplot()
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for trend in found:
        why = why_series(trend)
        if why.empty:
            figure, axes = pyplot.subplots(figsize=(8, 3))
            bottom = axes
        else:
            # Time on top; below it, per commit, what the kernel did to the hardware, so a step
            # in time can be read against a step in registers or in % of peak.
            figure, (axes, why_axes) = pyplot.subplots(
                2, 1, figsize=(8, 4.8), sharex=True, gridspec_kw={"height_ratios": [3, 2]})
            _draw_why(why_axes, why)
            for step in trend.steps:
                why_axes.axvline(step.index - 0.5, color="red", linestyle="--", linewidth=1)
            bottom = why_axes
        xs = range(len(trend.commits))
        changes, limit = chart_series(trend)
        threshold = trend.threshold
        # The change against the first recorded commit, on an axis at least twice the threshold
        # wide, the threshold band shaded: -2% must not look like a cliff (an axis of 18,050 to
        # 18,400 us made it one).
        axes.axhspan(-threshold * 100, threshold * 100, color="0.92", label=f"±{_percent(threshold)}: within the threshold")
        axes.axhline(0, color="0.6", linewidth=0.8)
        axes.plot(xs, changes, marker="o", markersize=3)
        for step in trend.steps:
            axes.axvline(step.index - 0.5, color="red", linestyle="--", linewidth=1)
            axes.annotate(f"{step.ratio - 1:+.1%}", (step.index - 0.5, 0.8 * limit), color="red", fontsize=8)
        axes.set_ylim(-limit, limit)
        bottom.set_xticks(list(xs), [c[:7] for c in trend.commits], rotation=90, fontsize=6)
        axes.set_ylabel(f"change vs {trend.commits[0][:7]} (%)", fontsize=8)
        axes.set_title(f"{trend.case_id} on {trend.gpu}: {_ms(trend.medians_ms[0])} at {trend.commits[0][:7]}, "
                       f"{_ms(trend.medians_ms[-1])} now", fontsize=9)
        axes.legend(loc="lower left", fontsize=7, frameon=False)
        figure.tight_layout()
        path = folder / trend.chart_name
        figure.savefig(path, dpi=100)
        pyplot.close(figure)
        written.append(path)
    for name, text in (("history.md", render_markdown(found)), ("index.html", render_index_html(found))):
        (folder / name).write_text(text, encoding="utf-8")
        written.append(folder / name)
    return written


def _draw_why(axes: Any, why: WhySeries) -> None:
    """Registers (left axis, steps) and % of peak (right axis, dashed) on one panel."""
    handles = []
    if why.register_points:
        xs, values = zip(*why.register_points, strict=True)
        handles += axes.step(xs, values, where="mid", color="tab:purple", marker="s", markersize=3, label="registers per thread")
        axes.set_ylabel("registers", fontsize=8)
        axes.set_ylim(0, max(values) * 1.25)
    if why.peak_points:
        share_axes = axes.twinx() if why.register_points else axes
        xs, shares = zip(*why.peak_points, strict=True)
        handles += share_axes.plot(xs, shares, color="tab:green", linestyle="--", marker="o", markersize=3, label="% of peak")
        share_axes.set_ylabel("% of peak", fontsize=8)
        share_axes.set_ylim(0, max(100.0, max(shares) * 1.1))
    axes.legend(handles=handles, loc="lower left", fontsize=7, frameon=False)


def _pyplot() -> Any:
    """matplotlib's pyplot on the Agg backend (no display on a runner); an extra."""
    try:
        matplotlib = importlib.import_module("matplotlib")
    except ModuleNotFoundError:
        raise MissingExtraError("matplotlib", "history", "drawing history charts") from None
    matplotlib.use("Agg")
    return importlib.import_module("matplotlib.pyplot")


def _ms(value: float) -> str:
    return f"{value * 1e3:.2f} us" if value < 1 else f"{value:.3f} ms"
