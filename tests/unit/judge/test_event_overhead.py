"""The judge's one event-overhead figure (kbench_ci.judge.case.Judge.event_overhead_ms), where no
GPU is needed to see it: which figure a case gets, and that every later case gets the same."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import torch

from kbench_ci.judge.case import Judge
from kbench_ci.results.model import MeasureSettings
from kbench_ci.wire.protocol import CaseJob, SideSpec


def _job(timing_method: str = "cuda_event", overhead_ms: float | None = None) -> CaseJob:
    settings = MeasureSettings(device="cuda", seed=42, correctness_trials=1, timing_method=timing_method,  # type: ignore[arg-type]
                               num_warmup=1, trials_per_round=3, discard_first=0, rounds=1, flush_l2=True)
    sides = tuple(SideSpec(label=label, solution="k.cu", ref="ref.py", implementation="cuda-cpp") for label in ("base", "head"))
    return CaseJob(case_id="k[N=1]", dims={"N": 1}, sides=sides, baselines=(), settings=settings,
                   event_overhead_ms=overhead_ms)


def test_the_parents_figure_is_kept_for_every_later_case_of_the_run(tmp_path: Path) -> None:
    """The parent hands on the judge's own figure from the first case; the judge keeps it, and
    a later case that carries another (or none) still gets the first: one figure for the run."""
    judge = Judge(tmp_path, {})
    cuda = torch.device("cuda", 0)
    assert judge.event_overhead_ms(cuda, _job(overhead_ms=0.0029)) == 0.0029
    assert judge.event_overhead_ms(cuda, _job(overhead_ms=None)) == 0.0029
    assert judge.event_overhead_ms(cuda, _job(overhead_ms=0.0031)) == 0.0029
    assert judge.overhead_refused is None


def test_nothing_is_taken_off_without_cuda_events(tmp_path: Path) -> None:
    judge = Judge(tmp_path, {})
    assert judge.event_overhead_ms(torch.device("cpu"), replace(_job(overhead_ms=0.003), settings=replace(
        _job().settings, device="cpu", timing_method="host_time"))) == 0.0
    assert judge.event_overhead_ms(torch.device("cuda", 0), _job(timing_method="host_time", overhead_ms=0.003)) == 0.0
