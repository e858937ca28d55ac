"""The commands' work: run cases (``execute``), judge them (``verdicts``), and the three
pipelines ``bench``, ``run`` and ``compare``, each writing results.json and benchmark.md."""

from kbench_ci.gate.bench import BenchOutcome, BenchRequest, parse_dimension_args, run_bench
from kbench_ci.gate.compare import run_compare
from kbench_ci.gate.run import run_suite

__all__ = ["BenchOutcome", "BenchRequest", "parse_dimension_args", "run_bench", "run_compare", "run_suite"]
