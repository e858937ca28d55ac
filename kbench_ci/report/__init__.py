"""Markdown reports (benchmark.md) of bench, run and compare: functions that return strings and
never print. Reads only ``results`` and ``stats``."""

from kbench_ci.report.bench import render_bench
from kbench_ci.report.compare import render_compare
from kbench_ci.report.run import render_run

__all__ = ["render_bench", "render_compare", "render_run"]
