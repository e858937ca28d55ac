"""The case timeout grows with the variants a worker job times: a case with suite
baselines (torch.compile's first call alone can take a minute) must not be killed as hung at the
timeout meant for its base and head."""

from __future__ import annotations

from pathlib import Path

import pytest

from kbench_ci.gate.jobs import job_timeout_s
from kbench_ci.results.model import MeasureSettings
from kbench_ci.wire.protocol import CaseJob, SideSpec

SETTINGS = MeasureSettings(device="cpu", seed=42, correctness_trials=1, timing_method="host_time", num_warmup=1,
                           trials_per_round=3, discard_first=0, rounds=2, flush_l2=False)


def job(sides: tuple[str, ...], baselines: tuple[str, ...]) -> CaseJob:
    specs = tuple(SideSpec(label=label, solution=str(Path(f"{label}.py")), ref="ref.py", implementation="pytorch")
                  for label in sides)
    return CaseJob(case_id="k[N=1]", dims={"N": 1}, sides=specs, baselines=baselines, settings=SETTINGS)


@pytest.mark.parametrize(
    ("sides", "baselines", "expected"),
    [
        (("base", "head"), (), 600.0),  # the case the timeout is meant for
        (("solution",), (), 600.0),  # one variant never gets less
        (("head",), (), 600.0),  # a case only the head has
        (("base", "head"), ("pytorch-eager",), 900.0),
        (("base", "head"), ("pytorch-eager", "torch-compile"), 1200.0),
        (("solution",), ("pytorch-eager", "torch-compile", "flashinfer"), 1200.0),
    ],
)
def test_each_variant_past_two_adds_half_the_case_timeout(
    sides: tuple[str, ...], baselines: tuple[str, ...], expected: float
) -> None:
    assert job_timeout_s(600.0, job(sides, baselines)) == pytest.approx(expected)
