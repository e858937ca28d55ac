"""What the numbers were measured on: GPU, driver, CUDA, library versions, clocks and throttling."""

from __future__ import annotations

import functools
import importlib
import platform
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib import metadata
from typing import Any

import torch

# NVML's clocks_throttle_reasons bits that mean the GPU was slowed by something other than idling.
_THROTTLE_FIELDS = (
    "clocks_throttle_reasons.hw_slowdown",
    "clocks_throttle_reasons.hw_thermal_slowdown",
    "clocks_throttle_reasons.hw_power_brake_slowdown",
    "clocks_throttle_reasons.sw_thermal_slowdown",
    "clocks_throttle_reasons.sw_power_cap",
)


@dataclass(frozen=True, slots=True)
class GpuState:
    """Clock, temperature and throttle state read with nvidia-smi at one moment."""

    sm_clock_mhz: float | None
    memory_clock_mhz: float | None
    temperature_c: float | None
    power_w: float | None
    throttle_reasons: tuple[str, ...] = ()

    @property
    def throttled(self) -> bool:
        return bool(self.throttle_reasons)


@dataclass(frozen=True, slots=True)
class Environment:
    device: str
    gpu_name: str | None
    arch: str | None
    sm_count: int | None
    l2_cache_bytes: int | None
    driver_version: str | None
    cuda_runtime: str | None
    torch_version: str
    triton_version: str | None
    python_version: str
    hostname: str
    libraries: dict[str, str] = field(default_factory=dict)


def library_version(name: str) -> str | None:

    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def capture_environment(device: torch.device) -> Environment:
    triton_version = library_version("triton")
    libraries = {
        name: version
        for name in ("nvidia-cutlass-dsl", "flashinfer-python", "nvidia-cutlass", "numpy")
        if (version := library_version(name))
    }
    if device.type != "cuda":
        return Environment(
            device="cpu", gpu_name=None, arch=None, sm_count=None, l2_cache_bytes=None,
            driver_version=None, cuda_runtime=None, torch_version=torch.__version__,
            triton_version=triton_version, python_version=platform.python_version(),
            hostname=platform.node(), libraries=libraries,
        )
    properties = torch.cuda.get_device_properties(device)
    return Environment(
        device=str(device),
        gpu_name=properties.name,
        arch=f"sm_{properties.major}{properties.minor}",
        sm_count=properties.multi_processor_count,
        l2_cache_bytes=int(getattr(properties, "L2_cache_size", 0) or 0) or None,
        driver_version=_driver_version(device),
        cuda_runtime=torch.version.cuda,
        torch_version=torch.__version__,
        triton_version=triton_version,
        python_version=platform.python_version(),
        hostname=platform.node(),
        libraries=libraries,
    )


@functools.cache
def _nvml() -> Any:
    """pynvml (nvidia-ml-py), initialised once; None where it is not installed or NVML cannot
    start (no driver): then nvidia-smi answers."""
    try:
        pynvml = importlib.import_module("pynvml")
        pynvml.nvmlInit()
    except Exception:
        return None
    return pynvml


def _driver_version(device: torch.device) -> str | None:
    pynvml = _nvml()
    if pynvml is not None:
        try:
            version = pynvml.nvmlSystemGetDriverVersion()
            return version.decode() if isinstance(version, bytes) else str(version)
        except pynvml.NVMLError:
            pass
    return _nvidia_smi_query(_smi_id(device, device_uuid(device)), ("driver_version",)).get("driver_version")


def read_gpu_state(device: torch.device) -> GpuState | None:
    """Clocks, temperature, power and active throttle reasons of the GPU that ``device`` is.

    Found by the UUID torch reports, never by its index: with ``CUDA_VISIBLE_DEVICES`` holding
    UUIDs, MIG ids or a reordered list, torch's index 0 is not nvidia-smi's GPU 0. Read through
    NVML (nvidia-ml-py); for a MIG device, the clocks of its parent GPU. Where NVML cannot
    answer, nvidia-smi ``--id=<UUID>``; None where neither can.
    """
    uuid = device_uuid(device)
    state = _nvml_state(uuid) if uuid is not None else None
    if state is not None:
        return state
    fields = ("clocks.sm", "clocks.mem", "temperature.gpu", "power.draw", *_THROTTLE_FIELDS)
    values = _nvidia_smi_query(_smi_id(device, uuid), fields)
    if not values:
        return None
    throttles = tuple(
        name.rsplit(".", 1)[1] for name in _THROTTLE_FIELDS if values.get(name, "").strip().lower() == "active"
    )
    return GpuState(
        sm_clock_mhz=_number(values.get("clocks.sm")),
        memory_clock_mhz=_number(values.get("clocks.mem")),
        temperature_c=_number(values.get("temperature.gpu")),
        power_w=_number(values.get("power.draw")),
        throttle_reasons=throttles,
    )


def device_uuid(device: torch.device) -> str | None:
    """The device's UUID as torch reports it (no "GPU-" prefix), or None."""
    uuid = getattr(torch.cuda.get_device_properties(device), "uuid", None)
    text = str(uuid) if uuid is not None else ""
    return text or None


def _nvml_handle(pynvml: Any, uuid: str) -> Any:
    """The NVML handle of the GPU with this UUID: a full GPU, or a MIG instance's parent."""
    for prefix in ("GPU-", "MIG-", ""):
        try:
            handle = pynvml.nvmlDeviceGetHandleByUUID(f"{prefix}{uuid}".encode())
        except pynvml.NVMLError:
            continue
        try:
            if pynvml.nvmlDeviceIsMigDeviceHandle(handle):
                handle = pynvml.nvmlDeviceGetDeviceHandleFromMigDeviceHandle(handle)
        except pynvml.NVMLError:
            pass  # a driver without MIG support: a full GPU
        return handle
    return None


def _nvml_state(uuid: str) -> GpuState | None:
    pynvml = _nvml()
    if pynvml is None:
        return None
    handle = _nvml_handle(pynvml, uuid)
    if handle is None:
        return None

    def read(query: Callable[[], float]) -> float | None:
        try:
            return float(query())
        except pynvml.NVMLError:
            return None

    reasons = read(lambda: pynvml.nvmlDeviceGetCurrentClocksEventReasons(handle))
    power_mw = read(lambda: pynvml.nvmlDeviceGetPowerUsage(handle))
    return GpuState(
        sm_clock_mhz=read(lambda: pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_SM)),
        memory_clock_mhz=read(lambda: pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_MEM)),
        temperature_c=read(lambda: pynvml.nvmlDeviceGetTemperature(handle, pynvml.NVML_TEMPERATURE_GPU)),
        power_w=power_mw / 1000.0 if power_mw is not None else None,
        throttle_reasons=tuple(
            name for name, bit in _nvml_throttle_bits(pynvml) if reasons is not None and int(reasons) & bit
        ),
    )


def _nvml_throttle_bits(pynvml: Any) -> tuple[tuple[str, int], ...]:
    """NVML's bits for the reasons of _THROTTLE_FIELDS, named as nvidia-smi names them."""
    return (
        ("hw_slowdown", pynvml.nvmlClocksEventReasonHwSlowdown),
        ("hw_thermal_slowdown", pynvml.nvmlClocksEventReasonHwThermalSlowdown),
        ("hw_power_brake_slowdown", pynvml.nvmlClocksEventReasonHwPowerBrakeSlowdown),
        ("sw_thermal_slowdown", pynvml.nvmlClocksEventReasonSwThermalSlowdown),
        ("sw_power_cap", pynvml.nvmlClocksEventReasonSwPowerCap),
    )


def _smi_id(device: torch.device, uuid: str | None) -> str:
    """nvidia-smi's --id for ``device``: its UUID; the index only where torch gives no UUID."""
    if uuid is not None:
        return uuid if uuid.startswith(("GPU-", "MIG-")) else f"GPU-{uuid}"
    return str(device.index or 0)


def _nvidia_smi_query(gpu_id: str, fields: tuple[str, ...]) -> dict[str, str]:
    executable = shutil.which("nvidia-smi")
    if executable is None:
        return {}
    try:
        completed = subprocess.run(
            [executable, f"--id={gpu_id}", f"--query-gpu={','.join(fields)}", "--format=csv,noheader,nounits"],
            capture_output=True, text=True, timeout=10, check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return {}
    if completed.returncode != 0:
        return {}
    parts = [p.strip() for p in completed.stdout.strip().split(",")]
    if len(parts) != len(fields):
        return {}
    return dict(zip(fields, parts, strict=True))


def _number(text: str | None) -> float | None:
    try:
        return float(text) if text not in (None, "", "[N/A]", "N/A") else None
    except ValueError:
        return None
