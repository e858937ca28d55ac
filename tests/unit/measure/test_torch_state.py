"""torch's global settings changed by user code are put back and noted."""

from __future__ import annotations

import sys
from pathlib import Path

import torch

from kbench_ci.measure.child import run_case
from kbench_ci.measure.torch_state import TorchGlobals
from kbench_ci.results.model import MeasureSettings, VariantResult
from kbench_ci.wire.protocol import CaseJob, SideSpec, VariantDone, WorkerEvent

FIXTURES = Path(__file__).parents[2] / "fixtures" / "global_state"


def test_every_setting_is_put_back_and_named() -> None:
    saved = TorchGlobals.capture()
    torch.set_default_dtype(torch.float64)
    torch.set_grad_enabled(False)
    torch.set_float32_matmul_precision("medium")
    torch.use_deterministic_algorithms(True, warn_only=True)
    torch.backends.cudnn.benchmark = not torch.backends.cudnn.benchmark
    torch.backends.cudnn.deterministic = not torch.backends.cudnn.deterministic
    torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction = False
    changed = saved.restore()
    names = [change.split(":")[0] for change in changed]
    # allow_tf32 followed the matmul precision there and back: not a change of its own.
    assert names == ["default dtype", "grad mode", "float32 matmul precision", "deterministic algorithms",
                     "cuda.matmul.allow_fp16_reduced_precision_reduction", "cudnn.benchmark", "cudnn.deterministic"]
    assert "default dtype: float32 -> float64" in changed
    assert TorchGlobals.capture() == saved
    assert torch.get_default_dtype() == torch.float32 and torch.is_grad_enabled()
    assert saved.restore() == ()  # nothing left to put back


def test_a_default_device_set_by_user_code_is_removed_again() -> None:
    saved = TorchGlobals.capture()
    torch.set_default_device("meta")
    assert saved.restore() == ("default device: cpu -> meta",)
    assert torch.empty(1).device == torch.device("cpu")


def _run(solution: str) -> dict[str, VariantResult]:
    side = SideSpec(label="solution", solution=str(FIXTURES / solution), ref=str(FIXTURES / "ref.py"), implementation="pytorch")
    settings = MeasureSettings(device="cpu", seed=42, correctness_trials=2, timing_method="host_time", num_warmup=1,
                               trials_per_round=3, discard_first=0, rounds=2, flush_l2=False)
    events: list[WorkerEvent] = []
    run_case(CaseJob(case_id="k[N=64]", dims={"N": 64}, sides=(side,), baselines=("pytorch-eager",), settings=settings),
             events.append)
    return {e.result.label: e.result for e in events if isinstance(e, VariantDone)}


def _reference_module_seen() -> list[torch.dtype]:
    path = str(FIXTURES / "ref.py")
    module = next(m for m in list(sys.modules.values()) if getattr(m, "__file__", None) == path)
    seen: list[torch.dtype] = module.SEEN
    return seen


def test_a_solution_that_sets_float64_leaves_the_reference_and_the_baseline_in_float32() -> None:
    results = _run("changes_dtype.py")
    assert results["solution"].status == "ok" and results["pytorch-eager"].status == "ok"
    seen = _reference_module_seen()
    assert len(seen) > 10  # correctness, the eager baseline's timed calls, the re-check
    assert set(seen) == {torch.float32}, "a reference call ran in the solution's default dtype"
    assert any("default dtype: float32 -> float64" in note for note in results["solution"].notes)
    assert not any("torch's" in note for note in results["pytorch-eager"].notes)
    assert torch.get_default_dtype() == torch.float32


def test_settings_changed_at_import_are_put_back_and_noted() -> None:
    results = _run("changes_at_import.py")
    notes = " ".join(results["solution"].notes)
    assert "deterministic algorithms: False/False -> True/False" in notes
    assert "float32 matmul precision: highest -> high" in notes
    assert not torch.are_deterministic_algorithms_enabled()
    assert torch.get_float32_matmul_precision() == "highest"
