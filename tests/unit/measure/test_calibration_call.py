"""The judge's trusted empty call (kbench_ci.measure.sideproto.CALIBRATION_BASELINE): a worker
loads it as a baseline before any side's code, to time its own cost of a call. No user can ask
for it, and it neither computes nor returns anything."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from kbench_ci.errors import UsageError
from kbench_ci.measure.baselines import BASELINES, load_baseline, parse_baselines
from kbench_ci.measure.sideproto import CALIBRATION_BASELINE
from kbench_ci.measure.usercode import load_problem

REF = '''
def reference(x, **_):
    raise AssertionError("the calibration call must not run the reference")
'''


def test_the_calibration_call_is_no_baseline_a_user_can_ask_for() -> None:
    assert CALIBRATION_BASELINE not in BASELINES
    assert CALIBRATION_BASELINE not in parse_baselines("all")
    with pytest.raises(UsageError):
        parse_baselines(CALIBRATION_BASELINE)


def test_the_calibration_call_runs_nothing_of_ref_py_and_returns_no_outputs(tmp_path: Path) -> None:
    ref = tmp_path / "ref.py"
    ref.write_text(REF)
    kernel = load_baseline(CALIBRATION_BASELINE, load_problem(ref), torch.device("cpu"))
    x = torch.zeros(1)
    assert kernel.call({"x": x}) is None
    assert kernel.collect(None, {"x": x}, ()) == {}
    assert kernel.compile is None
