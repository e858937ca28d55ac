"""Each variant's notes (e.g. torch settings its code changed) reach the run/compare details."""

from __future__ import annotations

from kbench_ci.report.markdown import notes_lines
from kbench_ci.results.model import VariantResult


def test_only_variants_with_notes_get_a_line_each_named_by_side() -> None:
    head = VariantResult(label="head", kind="pytorch", role="solution", status="ok",
                         notes=("changed torch's default dtype: float32 -> float64 (put back ...)", "pipe | here"))
    base = VariantResult(label="base", kind="pytorch", role="solution", status="ok")
    lines = notes_lines([("base", base), ("head", head), ("gone", None)])
    # "->" as "-&gt;": GitHub shows the same arrow (report.markdown.inert)
    assert lines == ["**head notes:** changed torch's default dtype: float32 -&gt; float64 (put back ...); pipe \\| here", ""]
    assert notes_lines([("base", base)]) == []
