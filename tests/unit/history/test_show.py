"""history show: per case a trend, its steps named by commit range, charts, a site."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from kbench_ci.history.show import render_markdown, trends, write_site
from kbench_ci.history.store import CasePoint, HistoryEntry


def _history(gpu: str = "NVIDIA H200") -> list[HistoryEntry]:
    rng = np.random.default_rng(7)
    entries = []
    for n in range(30):
        level = 1.0 if n < 18 else 1.10  # a 10% slowdown lands at commit 18
        entries.append(HistoryEntry(
            commit=f"{n:012x}".ljust(40, "a"), recorded_at=f"2026-11-{n + 1:02d}T00:00:00+00:00", gpu=gpu,
            points=(CasePoint("vadd[N=8]", float(level * np.exp(rng.normal(0, 0.005))), 100),
                    CasePoint("softmax[M=4]", float(2.0 * np.exp(rng.normal(0, 0.005))), 100)),
        ))
    return entries


def test_a_step_is_named_by_the_commits_it_happened_between() -> None:
    found = {t.case_id: t for t in trends(_history(), threshold=0.02)}
    vadd = found["vadd[N=8]"]
    assert [s.index for s in vadd.steps] == [18]
    assert vadd.step_range(vadd.steps[0]) == f"{17:012x}..{18:012x}"
    assert found["softmax[M=4]"].steps == ()
    text = render_markdown(list(found.values()))
    assert f"at {17:012x}..{18:012x}" in text and "| none |" in text


def test_the_kernel_filter_and_gpu_models_kept_apart() -> None:
    mixed = _history() + _history(gpu="NVIDIA A100")
    assert {(t.gpu, t.case_id) for t in trends(mixed, threshold=0.02, kernel="vadd")} == {
        ("NVIDIA A100", "vadd[N=8]"), ("NVIDIA H200", "vadd[N=8]")}
    assert all(len(t.commits) == 30 for t in trends(mixed, threshold=0.02))


def test_the_site_has_a_chart_per_trend_an_index_and_history_md(tmp_path: Path) -> None:
    written = write_site(trends(_history(), threshold=0.02), tmp_path)
    charts = [p for p in written if p.suffix == ".png"]
    assert len(charts) == 2 and all(p.read_bytes().startswith(b"\x89PNG") for p in charts)
    index = (tmp_path / "index.html").read_text()
    assert all(f"src='{p.name}'" in index for p in charts)
    assert "+10" in (tmp_path / "history.md").read_text()


def test_nothing_recorded_says_so() -> None:
    assert "Nothing recorded yet." in render_markdown([])


def _png_size(path: Path) -> tuple[int, int]:
    header = path.read_bytes()[16:24]
    return int.from_bytes(header[:4], "big"), int.from_bytes(header[4:], "big")


def test_registers_and_share_of_peak_are_charted_per_commit_below_the_time(tmp_path: Path) -> None:
    """A step in time can be read against a step in registers or % of peak."""
    from kbench_ci.history.show import why_series

    history = _history()
    entries = [
        HistoryEntry(e.commit, e.recorded_at, e.gpu, tuple(
            CasePoint(p.case_id, p.median_ms, p.n_samples,
                      registers=(168 if n < 18 else 207) if p.case_id.startswith("vadd") else None,
                      peak_share=(0.80 if n < 18 else 0.72) if p.case_id.startswith("vadd") and n % 3 else None)
            for p in e.points))
        for n, e in enumerate(history)
    ]
    found = {t.case_id: t for t in trends(entries, threshold=0.02)}
    why = why_series(found["vadd[N=8]"])
    assert why.register_points[17:19] == ((17, 168), (18, 207))
    assert len(why.peak_points) == 20 and why.peak_points[0] == (1, 80.0) and why.peak_points[-1][1] == 72.0
    assert why_series(found["softmax[M=4]"]).empty
    write_site(list(found.values()), tmp_path)
    with_why, without = (tmp_path / found[name].chart_name for name in ("vadd[N=8]", "softmax[M=4]"))
    assert _png_size(with_why) == (800, 480) and _png_size(without) == (800, 300)
    assert "168 → 207" in (tmp_path / "history.md").read_text()


def _wobble(threshold: float | None) -> list[HistoryEntry]:
    """A 3% lasting change at commit 5, recorded by a suite judged at ``threshold``."""
    return [HistoryEntry(commit=f"{n:040x}", recorded_at=f"2026-11-{n + 1:02d}T00:00:00+00:00", gpu="NVIDIA H200",
                         points=(CasePoint("vadd[N=8]", 1.0 if n < 5 else 1.03, 100, threshold=threshold),))
            for n in range(10)]


def test_history_show_states_and_uses_the_threshold_the_cases_were_judged_by() -> None:
    """Under a 5% suite it said "larger than 2%" and called a 3% wobble a step."""
    (trend,) = trends(_wobble(0.05))
    assert trend.threshold == 0.05 and trend.steps == ()
    text = render_markdown([trend])
    assert "a step is a lasting change larger than 5% (the threshold the cases were judged by)" in text
    assert "2%" not in text
    # --threshold still wins, and says so.
    (forced,) = trends(_wobble(0.05), threshold=0.02)
    assert len(forced.steps) == 1 and "larger than 2% (--threshold)" in render_markdown([forced])


def test_without_recorded_thresholds_the_suites_are_used_else_the_default(tmp_path: Path) -> None:
    from kbench_ci.history.show import suite_thresholds

    (tmp_path / ".git").mkdir()
    (tmp_path / "kbench.toml").write_text(
        '[defaults]\nthreshold = "5%"\n'
        '[[kernels]]\nname = "vadd"\nsolution = "k/v.py"\nref = "k/ref.py"\nshapes = [{N = 8}]\n'
        '[[kernels]]\nname = "gemm"\nsolution = "k/g.py"\nref = "k/ref.py"\nshapes = [{N = 8}]\nthreshold = 0.1\n')
    assert suite_thresholds(tmp_path) == {"vadd": 0.05, "gemm": 0.1}
    (trend,) = trends(_wobble(None), suite_thresholds=lambda: suite_thresholds(tmp_path))
    assert (trend.threshold, trend.threshold_from, trend.steps) == (0.05, "suite", ())
    assert "larger than 5% (the kernels' threshold in kbench.toml)" in render_markdown([trend])
    (default,) = trends(_wobble(None), suite_thresholds=dict)
    assert default.threshold_from == "default" and len(default.steps) == 1
    assert "larger than 2% (the default: no threshold was recorded" in render_markdown([default])
    (tmp_path / "other" / ".git").mkdir(parents=True)  # a repository of its own, with no suite
    assert suite_thresholds(tmp_path / "other") == {}


def test_cases_of_different_thresholds_say_the_range_and_each_its_own() -> None:
    mixed = _wobble(0.05) + [HistoryEntry(e.commit, e.recorded_at, "NVIDIA A100", tuple(
        CasePoint(p.case_id, p.median_ms, p.n_samples, threshold=0.02) for p in e.points)) for e in _wobble(None)]
    found = trends(mixed)
    assert {t.gpu: t.threshold for t in found} == {"NVIDIA H200": 0.05, "NVIDIA A100": 0.02}
    text = render_markdown(found)
    assert "larger than the case's threshold, 2% to 5% (column `threshold`" in text
    rows = {line.split("|")[1].strip(): line for line in text.splitlines() if "vadd" in line}
    assert "| 5% |" in rows["NVIDIA H200"] and "| 2% |" in rows["NVIDIA A100"]
