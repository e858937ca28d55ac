"""The GPU list from the CUDA driver (no torch in the parent): a stand-in libcuda answers
through the same ctypes calls, so numbering, names, capabilities and failures are checked
without a GPU."""

from __future__ import annotations

import ctypes
from pathlib import Path
from typing import Any

import pytest

from kbench_ci.cli import options
from kbench_ci.cuda import driver
from kbench_ci.cuda.driver import CudaDevice, query_devices
from kbench_ci.errors import EnvironmentProblem, UsageError

CUDA_ERROR_NO_DEVICE = 100
CUDA_ERROR_STUB_LIBRARY = 34


class FakeLibcuda:
    """The five driver calls query_devices makes, writing through the pointers it passes."""

    def __init__(self, devices: list[tuple[str, int, int]], *, init: int = 0, fail_name_of: int | None = None) -> None:
        self.devices = devices
        self.init = init
        self.fail_name_of = fail_name_of
        self.calls: list[str] = []

    def cuInit(self, flags: int) -> int:  # noqa: N802  (the driver's own names)
        self.calls.append("cuInit")
        return self.init

    def cuDeviceGetCount(self, count: Any) -> int:  # noqa: N802
        count._obj.value = len(self.devices)
        return 0

    def cuDeviceGet(self, handle: Any, ordinal: int) -> int:  # noqa: N802
        handle._obj.value = 100 + ordinal  # a handle is not the ordinal: query_devices must pass it on
        return 0

    def cuDeviceGetName(self, buffer: Any, length: int, handle: ctypes.c_int) -> int:  # noqa: N802
        ordinal = handle.value - 100
        if ordinal == self.fail_name_of:
            return 1
        name = self.devices[ordinal][0].encode()
        assert len(name) < length
        buffer.value = name
        return 0

    def cuDeviceGetAttribute(self, value: Any, attribute: int, handle: ctypes.c_int) -> int:  # noqa: N802
        _, major, minor = self.devices[handle.value - 100]
        value._obj.value = {75: major, 76: minor}[attribute]
        return 0


def test_devices_in_the_drivers_order_with_names_and_arch() -> None:
    library = FakeLibcuda([("NVIDIA H200", 9, 0), ("NVIDIA L40S", 8, 9)])
    devices = query_devices(library)
    assert devices == (CudaDevice(0, "NVIDIA H200", 9, 0), CudaDevice(1, "NVIDIA L40S", 8, 9))
    assert [device.arch for device in devices] == ["sm_90", "sm_89"]


@pytest.mark.parametrize("init", [CUDA_ERROR_NO_DEVICE, CUDA_ERROR_STUB_LIBRARY])
def test_a_driver_that_cannot_start_means_no_gpu(init: int) -> None:
    assert query_devices(FakeLibcuda([("NVIDIA H200", 9, 0)], init=init)) == ()


def test_a_device_that_cannot_be_read_means_no_gpu() -> None:
    # half a list would renumber the GPUs the worker sees: nothing rather than a wrong index
    assert query_devices(FakeLibcuda([("NVIDIA H200", 9, 0), ("NVIDIA H200", 9, 0)], fail_name_of=1)) == ()


def test_no_driver_library_means_no_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(driver, "_load_driver", lambda: None)
    driver.cuda_devices.cache_clear()
    try:
        assert driver.cuda_devices() == ()
    finally:
        driver.cuda_devices.cache_clear()


# --------------------------------------------------------------------------- --device / --gpu


@pytest.fixture
def two_h200(monkeypatch: pytest.MonkeyPatch) -> None:
    devices = (CudaDevice(0, "NVIDIA H200", 9, 0), CudaDevice(1, "NVIDIA H200", 9, 0))
    monkeypatch.setattr(options, "cuda_devices", lambda: devices)
    monkeypatch.setattr(options, "torch_cuda_build", lambda: "13.0")


def test_auto_and_cuda_pick_the_gpu_the_driver_lists(two_h200: None) -> None:
    assert options.resolve_device("auto", None) == "cuda:0"
    assert options.resolve_device("CUDA", 1) == "cuda:1"
    assert options.resolve_device("cpu", None) == "cpu"
    assert options.cuda_device_names() == ["NVIDIA H200", "NVIDIA H200"]
    with pytest.raises(UsageError, match="--gpu 2 does not exist; this machine has 2"):
        options.resolve_device("auto", 2)


def test_a_cpu_only_torch_has_no_usable_gpu(two_h200: None, monkeypatch: pytest.MonkeyPatch,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    # the driver sees GPUs, but a worker with this torch could not use them
    monkeypatch.setattr(options, "torch_cuda_build", lambda: None)
    assert options.resolve_device("auto", None) == "cpu"
    assert "no CUDA device found; running on CPU" in capsys.readouterr().err
    with pytest.raises(EnvironmentProblem, match="--device cuda was asked for but no CUDA device"):
        options.resolve_device("cuda", None)
    assert options.cuda_device_names() == []


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("__version__ = '2.11.0+cu130'\ncuda: Optional[str] = '13.0'\nhip: Optional[str] = None\n", "13.0"),
        ("__version__ = '2.13.0+cpu'\ncuda: Optional[str] = None\n", None),
        # a CPU build whose version says nothing of it (conda-forge, aarch64 wheels, USE_CUDA=0)
        ("__version__ = '2.5.1'\ncuda = None\n", None),
        ('cuda = "12.4"\n', "12.4"),
        ("__version__ = '9.9'\n", "unknown"),  # cannot tell: the worker will
    ],
)
def test_torchs_cuda_build_is_read_from_its_version_file(tmp_path: Path, text: str, expected: str | None) -> None:
    version_file = tmp_path / "version.py"
    version_file.write_text(text)
    assert options.torch_cuda_build(version_file) == expected


def test_the_installed_torch_is_read_without_importing_it() -> None:
    # this machine's torch: a CPU build in CI, a CUDA build on a GPU machine; either way read
    # from its file, and the same answer torch itself gives
    import torch

    assert options.torch_cuda_build() == torch.version.cuda
