"""The judge's one event-overhead figure (kbench_ci.judge.case.Judge.event_overhead_ms), where no
GPU is needed to see it: which figure a case gets, and that every later case gets the same."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import torch

from kbench_ci.judge.case import Judge
from kbench_ci.measure.protocol import CaseJob, SideSpec
from kbench_ci.results.model import MeasureSettings


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



def test_the_judge_keeps_cuptis_reading_of_the_empty_kernel_from_its_own_calibration(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """Its workers' figures are levelled by it (kbench_ci.judge.calibration); a figure the parent
    handed on comes without one, and none is made up."""
    from kbench_ci.judge import case

    class Timer:
        def __init__(self, device: torch.device, *, flush_l2: bool) -> None:
            self.empty_kernel_ms = None

        def calibrate_overhead(self) -> float:
            self.empty_kernel_ms = 0.0011
            return 0.0029

    monkeypatch.setattr(case, "CudaEventTimer", Timer)
    judge = Judge(tmp_path, {})
    assert judge.event_overhead_ms(torch.device("cuda", 0), _job()) == 0.0029
    assert judge.empty_kernel_ms == {"cuda:0": 0.0011}
    handed_on = Judge(tmp_path, {})
    assert handed_on.event_overhead_ms(torch.device("cuda", 0), _job(overhead_ms=0.003)) == 0.003
    assert handed_on.empty_kernel_ms == {}


def test_with_the_calibration_on_a_judge_handed_the_runs_figure_still_reads_cupti_once(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """A new judge in a run gets the run's overhead from the parent; with the workers'
    calibration on it still needs CUPTI's reading of the empty kernel for the case's level
    (else one run's cases would sit at two levels). It keeps the parent's overhead, and where
    CUPTI gives no reading it does not try again at every case."""
    from kbench_ci.judge import case

    calibrations: list[str] = []

    class Timer:
        reading: float | None = 0.0011

        def __init__(self, device: torch.device, *, flush_l2: bool) -> None:
            self.empty_kernel_ms = None

        def calibrate_overhead(self) -> float:
            calibrations.append("calibrated")
            self.empty_kernel_ms = Timer.reading
            return 0.0025

    monkeypatch.setattr(case, "CudaEventTimer", Timer)
    monkeypatch.setattr(case, "CALIBRATE_CALLS", 200)
    judge = Judge(tmp_path, {})
    cuda = torch.device("cuda", 0)
    assert judge.event_overhead_ms(cuda, _job(overhead_ms=0.003)) == 0.003
    assert judge.empty_kernel_ms == {"cuda:0": 0.0011}
    assert judge.event_overhead_ms(cuda, _job(overhead_ms=0.003)) == 0.003
    assert calibrations == ["calibrated"]
    Timer.reading = None  # no CUPTI
    without = Judge(tmp_path, {})
    for _ in range(3):
        assert without.event_overhead_ms(cuda, _job(overhead_ms=0.003)) == 0.003
    assert without.empty_kernel_ms == {} and calibrations == ["calibrated"] * 2
