"""GPU state is read from the GPU torch measures on, found by UUID."""

from __future__ import annotations

import os
import stat
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import torch

from kbench_ci.measure import gpu_info


class NVMLError(Exception):
    pass


class FakeNvml:
    """Two physical GPUs and one MIG instance of the second, as NVML would show them."""

    NVMLError = NVMLError
    NVML_CLOCK_SM, NVML_CLOCK_MEM, NVML_TEMPERATURE_GPU = 1, 2, 0
    nvmlClocksEventReasonHwSlowdown = 0x8
    nvmlClocksEventReasonHwThermalSlowdown = 0x40
    nvmlClocksEventReasonHwPowerBrakeSlowdown = 0x80
    nvmlClocksEventReasonSwThermalSlowdown = 0x20
    nvmlClocksEventReasonSwPowerCap = 0x4

    def __init__(self) -> None:
        self.gpus = {
            "GPU-aaaa": {"sm": 1980, "mem": 3201, "temp": 40, "power_mw": 120_000, "reasons": 0},
            "GPU-bbbb": {"sm": 1500, "mem": 2619, "temp": 77, "power_mw": 700_000, "reasons": 0x4 | 0x1},
        }
        self.mig = {"MIG-cccc": "GPU-bbbb"}

    def nvmlDeviceGetHandleByUUID(self, uuid: bytes) -> str:
        name = uuid.decode()
        if name in self.gpus or name in self.mig:
            return name
        raise NVMLError("not found")

    def nvmlDeviceIsMigDeviceHandle(self, handle: str) -> bool:
        return handle in self.mig

    def nvmlDeviceGetDeviceHandleFromMigDeviceHandle(self, handle: str) -> str:
        return self.mig[handle]

    def nvmlDeviceGetClockInfo(self, handle: str, clock: int) -> int:
        return self.gpus[handle]["sm" if clock == self.NVML_CLOCK_SM else "mem"]

    def nvmlDeviceGetTemperature(self, handle: str, sensor: int) -> int:
        return self.gpus[handle]["temp"]

    def nvmlDeviceGetPowerUsage(self, handle: str) -> int:
        return self.gpus[handle]["power_mw"]

    def nvmlDeviceGetCurrentClocksEventReasons(self, handle: str) -> int:
        return self.gpus[handle]["reasons"]


def _torch_reports(monkeypatch: pytest.MonkeyPatch, uuid: str | None) -> None:
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda device: SimpleNamespace(uuid=uuid))


def test_the_gpu_is_found_by_torchs_uuid_not_by_its_index(monkeypatch: pytest.MonkeyPatch) -> None:
    # CUDA_VISIBLE_DEVICES names the second GPU: torch's cuda:0 is nvidia-smi's GPU 1.
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "GPU-bbbb")
    monkeypatch.setattr(gpu_info, "_nvml", lambda: FakeNvml())
    _torch_reports(monkeypatch, "bbbb")
    state = gpu_info.read_gpu_state(torch.device("cuda", 0))
    assert state is not None
    assert (state.sm_clock_mhz, state.memory_clock_mhz, state.temperature_c, state.power_w) == (1500, 2619, 77, 700)
    assert state.throttle_reasons == ("sw_power_cap",)  # 0x1 is "GPU idle": not a slowdown


def test_a_mig_device_reports_its_parent_gpus_clocks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gpu_info, "_nvml", lambda: FakeNvml())
    _torch_reports(monkeypatch, "cccc")
    state = gpu_info.read_gpu_state(torch.device("cuda", 0))
    assert state is not None and state.sm_clock_mhz == 1500


def test_without_nvml_nvidia_smi_is_asked_by_uuid(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    record = tmp_path / "args"
    smi = tmp_path / "nvidia-smi"
    smi.write_text(f'#!/bin/sh\necho "$@" > {record}\necho "1410, 2619, 50, 300.5, Active, Not Active, Not Active, Not Active, Not Active"\n')
    smi.chmod(smi.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setattr(gpu_info, "_nvml", lambda: None)
    _torch_reports(monkeypatch, "bbbb")
    state = gpu_info.read_gpu_state(torch.device("cuda", 0))
    assert "--id=GPU-bbbb" in record.read_text()
    assert state is not None and state.sm_clock_mhz == 1410 and state.throttle_reasons == ("hw_slowdown",)


def test_an_unknown_uuid_falls_back_and_then_says_nothing(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # no nvidia-smi either
    monkeypatch.setattr(gpu_info, "_nvml", lambda: FakeNvml())
    _torch_reports(monkeypatch, "ffff")
    assert gpu_info.read_gpu_state(torch.device("cuda", 0)) is None


def test_the_throttle_names_match_nvidia_smis(monkeypatch: pytest.MonkeyPatch) -> None:
    names: Any = [name for name, _ in gpu_info._nvml_throttle_bits(FakeNvml())]
    assert names == [field.rsplit(".", 1)[1] for field in gpu_info._THROTTLE_FIELDS]
