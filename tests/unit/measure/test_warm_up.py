"""A worker warms up before its first job (issue 11): the CUDA context, the environment report
and the suite's heavy modules, while the parent still sets up. Nothing in it may fail the
worker: the case that needs a broken device or package reports it."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

from kbench_ci.gate.execute import preload_modules
from kbench_ci.measure import child
from kbench_ci.measure.parent import WorkerPool


def test_the_preloaded_modules_are_imported(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delitem(sys.modules, "wave", raising=False)  # a stdlib module nothing here imports
    child.warm_up("cpu", ["wave"])
    assert "wave" in sys.modules


@pytest.mark.parametrize(("device", "preload"), [("cpu", ["no_such_module_kbench"]), ("cuda:7", []), ("tpu", [])])
def test_a_warm_up_that_cannot_be_done_is_left_to_the_case(device: str, preload: list[str]) -> None:
    child.warm_up(device, preload)  # no exception: the case will say what is wrong


def test_the_environment_is_read_once_per_worker(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []

    def capture(device: object) -> dict[str, str]:
        calls.append(str(device))
        return {"device": str(device)}

    monkeypatch.setattr(child, "capture_environment", capture)
    child._environment.cache_clear()
    try:
        import torch

        for _ in range(3):
            assert child._environment(torch.device("cpu")) == {"device": "cpu"}
        assert calls == ["cpu"]
    finally:
        child._environment.cache_clear()


def test_the_suites_kinds_name_the_modules_to_preload() -> None:
    assert preload_modules(["cuda-cpp", "triton", "triton", "pytorch"]) == ("triton",)
    assert preload_modules(["cute-dsl", "triton"]) == ("cutlass", "triton")
    assert preload_modules(["cuda-cpp", "cutlass", "pytorch"]) == ()


def test_a_worker_is_started_with_its_device_and_preload(tmp_path: Path) -> None:
    with WorkerPool(preload=("wave",)) as pool:
        pool.start("cpu")
        worker = pool._worker
        assert worker is not None
        command = Path(f"/proc/{worker.process.pid}/cmdline").read_bytes().split(b"\0")
        assert command[-3:-1] == [b"cpu", b"wave"], command
        deadline = time.monotonic() + 2
        while worker.process.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)  # it warms up and then waits for a job: it must not have exited
        assert worker.process.poll() is None
