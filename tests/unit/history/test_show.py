"""history show (issue 14): per case a trend, its steps named by commit range, charts, a site."""

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
    text = render_markdown(list(found.values()), threshold=0.02)
    assert f"at {17:012x}..{18:012x}" in text and "| none |" in text


def test_the_kernel_filter_and_gpu_models_kept_apart() -> None:
    mixed = _history() + _history(gpu="NVIDIA A100")
    assert {(t.gpu, t.case_id) for t in trends(mixed, threshold=0.02, kernel="vadd")} == {
        ("NVIDIA A100", "vadd[N=8]"), ("NVIDIA H200", "vadd[N=8]")}
    assert all(len(t.commits) == 30 for t in trends(mixed, threshold=0.02))


def test_the_site_has_a_chart_per_trend_an_index_and_history_md(tmp_path: Path) -> None:
    written = write_site(trends(_history(), threshold=0.02), tmp_path, threshold=0.02)
    charts = [p for p in written if p.suffix == ".png"]
    assert len(charts) == 2 and all(p.read_bytes().startswith(b"\x89PNG") for p in charts)
    index = (tmp_path / "index.html").read_text()
    assert all(f"src='{p.name}'" in index for p in charts)
    assert "+10" in (tmp_path / "history.md").read_text()


def test_nothing_recorded_says_so() -> None:
    assert "Nothing recorded yet." in render_markdown([], threshold=0.02)


def _png_size(path: Path) -> tuple[int, int]:
    header = path.read_bytes()[16:24]
    return int.from_bytes(header[:4], "big"), int.from_bytes(header[4:], "big")


def test_registers_and_share_of_peak_are_charted_per_commit_below_the_time(tmp_path: Path) -> None:
    """Issue 23.5: a step in time can be read against a step in registers or % of peak."""
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
    write_site(list(found.values()), tmp_path, threshold=0.02)
    with_why, without = (tmp_path / found[name].chart_name for name in ("vadd[N=8]", "softmax[M=4]"))
    assert _png_size(with_why) == (800, 480) and _png_size(without) == (800, 300)
    assert "168 → 207" in (tmp_path / "history.md").read_text()
