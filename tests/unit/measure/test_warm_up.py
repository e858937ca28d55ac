"""A worker warms up before its first job: the CUDA context, the environment report
and the suite's heavy modules, while the parent still sets up. Nothing in it may fail the
worker: the case that needs a broken device or package reports it."""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from kbench_ci.errors import ExitCode
from kbench_ci.gate.lanes import preload_modules
from kbench_ci.measure import child
from kbench_ci.measure.parent import WorkerPool
from kbench_ci.results.model import MeasureSettings
from kbench_ci.wire.protocol import CaseJob, LoadError, SideSpec, VariantDone


@pytest.fixture(autouse=True)
def no_cached_environment() -> Iterator[None]:
    child._environment_once.cache_clear()
    yield
    child._environment_once.cache_clear()


def test_the_preloaded_modules_are_imported(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delitem(sys.modules, "wave", raising=False)  # a stdlib module nothing here imports
    child.warm_up("cpu", ["wave"])
    assert "wave" in sys.modules


@pytest.mark.parametrize(
    ("device", "preload"),
    [
        ("cpu", ["no_such_module_kbench"]),
        pytest.param("cuda:7", [], marks=pytest.mark.skipif(torch.cuda.is_available(), reason="would make a CUDA context here")),
        ("tpu", []),
    ],
)
def test_a_warm_up_that_cannot_be_done_is_left_to_the_case(device: str, preload: list[str]) -> None:
    child.warm_up(device, preload)  # no exception: the case will say what is wrong


def test_a_package_that_fails_or_exits_on_import_is_taken_out_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # half imported: its submodule loaded, then the package raised; another exits the process
    package = tmp_path / "halfpkg"
    package.mkdir()
    (package / "part.py").write_text("VALUE = 1\n")
    (package / "__init__.py").write_text("from halfpkg import part\nraise ImportError('no GPU library here')\n")
    (tmp_path / "exiting.py").write_text("import sys\nsys.exit(3)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    child.warm_up("cpu", ["halfpkg", "exiting", "wave"])
    assert not any(name == "halfpkg" or name.startswith("halfpkg.") for name in sys.modules)
    assert "exiting" not in sys.modules
    assert "wave" in sys.modules  # the ones after it are still preloaded


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine's torch can use CUDA")
def test_a_gpu_this_torch_cannot_use_stops_the_run_as_the_machines_problem(tmp_path: Path) -> None:
    # The parent thought the GPU usable (say a CPU build its version.py did not show): the
    # worker says so as an environment problem (exit 3) with every variant failed, not a crash.
    settings = MeasureSettings(device="cuda:0", seed=1, correctness_trials=1, timing_method="cuda_event",
                               num_warmup=1, trials_per_round=1, discard_first=0, rounds=1, flush_l2=False)
    sides = (SideSpec("base", str(tmp_path / "k.py"), str(tmp_path / "ref.py"), "pytorch"),
             SideSpec("head", str(tmp_path / "k.py"), str(tmp_path / "ref.py"), "pytorch"))
    job = CaseJob(case_id="k[N=1]", dims={"N": 1}, sides=sides, baselines=("torch-eager",), settings=settings)
    events: list[object] = []
    child.run_case(job, events.append)
    errors = [event for event in events if isinstance(event, LoadError)]
    assert len(errors) == 1 and errors[0].exit_code == int(ExitCode.ENVIRONMENT)
    assert "cannot use cuda:0" in errors[0].message and "CUDA build of torch" in (errors[0].hint or "")
    done = {event.result.label: event.result for event in events if isinstance(event, VariantDone)}
    assert set(done) == {"base", "head", "torch-eager"}
    assert all(result.status == "error" and "cannot use cuda:0" in (result.message or "") for result in done.values())


def test_the_environment_is_read_once_per_worker(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []

    def capture(device: object) -> dict[str, str]:
        calls.append(str(device))
        return {"device": str(device)}

    monkeypatch.setattr(child, "capture_environment", capture)
    first = child._environment(torch.device("cpu"))
    first["device"] = "changed by a caller"  # each caller gets a copy of its own
    for _ in range(2):
        assert child._environment(torch.device("cpu")) == {"device": "cpu"}
    assert calls == ["cpu"]


def test_the_suites_kinds_name_the_modules_to_preload() -> None:
    assert preload_modules(["cuda-cpp", "triton", "triton", "pytorch"]) == ("triton",)
    assert preload_modules(["cute-dsl", "triton"], "cuda:1") == ("cutlass", "triton")
    assert preload_modules(["cute-dsl", "triton"], "cpu") == ("triton",)  # CuTe DSL cases refuse the CPU
    assert preload_modules(["cuda-cpp", "cutlass", "pytorch"]) == ()


def test_a_worker_is_started_with_its_device_and_preload(tmp_path: Path) -> None:
    with WorkerPool(preload=("wave",)) as pool:
        pool.start("cpu")
        worker = pool._worker
        assert worker is not None
        command = list(worker.process.args)  # type: ignore[arg-type]
        assert command[-2:] == ["cpu", "wave"], command
        deadline = time.monotonic() + 2
        while worker.process.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)  # it warms up and then waits for a job: it must not have exited
        assert worker.process.poll() is None


def test_the_builds_gpu_is_the_runs_device() -> None:
    from kbench_ci.gate.lanes import _gpu_index

    assert [_gpu_index(device) for device in ("cuda:1", "cuda:0", "cuda", "cpu")] == [1, 0, None, None]
