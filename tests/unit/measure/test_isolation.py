"""What a case leaves behind in a warm worker is taken away before the next:
measure/isolation.py in this process, and the job and event types that frame a case."""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

import pytest
import torch

from kbench_ci.measure.compiled import cuda_kernels
from kbench_ci.measure.isolation import ProcessBaseline, _clear_triton_caches, private_libraries
from kbench_ci.results.model import MeasureSettings
from kbench_ci.wire.protocol import (
    CaseFinished,
    CaseJob,
    CaseStarted,
    JobTicket,
    SideSpec,
    decode_event,
    encode_event,
)


def _import_user_module(path: Path, name: str) -> object:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def test_after_a_case_the_process_is_as_before_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "user_kernel_for_isolation.py").write_text("COUNT = 0\n")
    baseline = ProcessBaseline.capture()
    before = frozenset(sys.modules)
    path_before, cwd_before = list(sys.path), os.getcwd()
    try:
        # What a case might do:
        torch.set_default_dtype(torch.float64)
        torch.set_grad_enabled(False)
        sys.path.insert(0, str(tmp_path))
        os.environ["KBENCH_ISOLATION_TEST"] = "left behind"
        (tmp_path / "elsewhere").mkdir()
        os.chdir(tmp_path / "elsewhere")
        module = _import_user_module(tmp_path / "user_kernel_for_isolation.py", "kbench_user_isolation_probe")
        module.COUNT += 1  # type: ignore[attr-defined]
        import json.tool  # noqa: F401  (a library module the case imported: it stays)
        assert "kbench_user_isolation_probe" in sys.modules

        reason = baseline.after_case(before, torch.device("cpu"))
        assert reason is None
        assert torch.get_default_dtype() == torch.float32 and torch.is_grad_enabled()
        assert sys.path == path_before
        assert "KBENCH_ISOLATION_TEST" not in os.environ
        assert os.getcwd() == cwd_before
        assert "kbench_user_isolation_probe" not in sys.modules
        assert "json.tool" in sys.modules
    finally:
        torch.set_default_dtype(torch.float32)
        torch.set_grad_enabled(True)
        os.environ.pop("KBENCH_ISOLATION_TEST", None)
        sys.modules.pop("kbench_user_isolation_probe", None)


def test_a_module_from_the_users_tree_is_not_a_library_even_beside_kbench_ci(tmp_path: Path) -> None:
    """An editable install of kbench_ci lives in a checkout that may hold the user's kernels: its
    package folder counts as installed code, its parent does not."""
    baseline = ProcessBaseline.capture()
    import kbench_ci

    checkout = Path(kbench_ci.__file__).resolve().parents[1]
    fake = type(sys)("probe")
    fake.__file__ = str(checkout / "user_kernels" / "some_kernel.py")
    assert not baseline.is_library(fake)
    fake.__file__ = str(Path(torch.__file__).parent / "nn" / "functional.py")
    assert baseline.is_library(fake)


def test_triton_kernels_of_a_dropped_module_lose_their_compiled_kernels() -> None:
    triton = pytest.importorskip("triton")
    from triton.runtime.autotuner import Autotuner
    from triton.runtime.jit import JITFunction

    def body(x):  # pragma: no cover - never compiled here
        pass

    jitted = JITFunction(body)
    jitted.device_caches[0] = ({"key": "compiled kernel"}, None, None, None, None)
    tuned = Autotuner(jitted, ["x"], [triton.Config({})], key=[], reset_to_zero=None, restore_value=None)
    tuned.cache[("shape",)] = "best config"
    _clear_triton_caches(tuned)
    assert tuned.cache == {} and len(jitted.device_caches) == 0
    _clear_triton_caches({"not": "triton"})  # anything else is left alone


def _job(*sides: SideSpec) -> CaseJob:
    settings = MeasureSettings(device="cpu", seed=1, correctness_trials=1, timing_method="host_time", num_warmup=1,
                               trials_per_round=1, discard_first=0, rounds=1, flush_l2=False)
    return CaseJob(case_id="k[N=1]", dims={"N": 1}, sides=sides, baselines=(), settings=settings)


def test_each_case_loads_each_sides_library_from_a_path_of_its_own(tmp_path: Path) -> None:
    built = tmp_path / "staging" / "head" / "k"
    built.mkdir(parents=True)
    (built / "k.cu").write_text("// source")
    (built / "k.so").write_bytes(b"library")
    head = SideSpec("head", str(built / "k.cu"), str(tmp_path / "ref.py"), "cuda-cpp")
    triton_side = SideSpec("base", str(tmp_path / "k.py"), str(tmp_path / "ref.py"), "triton")
    one = private_libraries(_job(triton_side, head), tmp_path / "case-1")
    two = private_libraries(_job(triton_side, head), tmp_path / "case-2")
    assert one.sides[0] == triton_side  # nothing to load for a Python kernel
    first, second = Path(one.sides[1].solution), Path(two.sides[1].solution)
    assert first != second and first.parent != built
    assert first.with_suffix(".so").read_bytes() == b"library" == second.with_suffix(".so").read_bytes()
    # ptxas's figures travel with the library: the worker reports them from the private copy.
    assert not Path(str(first.with_suffix(".so")) + ".ptxas.json").exists()
    (built / "k.so.ptxas.json").write_text('[{"symbol": "k", "registers": 12}]')
    three = Path(private_libraries(_job(head), tmp_path / "case-4").sides[0].solution)
    assert [k.registers for k in cuda_kernels(three)] == [12]
    # A side without a built library keeps its path, so the loader's message names it.
    (built / "k.so").unlink()
    assert private_libraries(_job(head), tmp_path / "case-3").sides[0] == head


def test_case_frames_and_tickets_survive_their_encoding() -> None:
    for event in (CaseStarted(worker_pid=42, served_before=3), CaseFinished(), CaseFinished(True, "a CUDA error")):
        assert decode_event(encode_event(event)) == event
    ticket = JobTicket("/tmp/case-1/job.json", "/tmp/case-1/events.jsonl")
    line = ticket.encode()
    assert line.endswith(b"\n") and line.count(b"\n") == 1
    assert JobTicket.decode(line) == ticket
