"""What the numbers were measured on: GPU, driver, CUDA, library versions, clocks and throttling."""

from __future__ import annotations

import os
import platform
import shutil
import subprocess
from dataclasses import dataclass, field
from importlib import metadata

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
        driver_version=_nvidia_smi_query(device.index or 0, ("driver_version",)).get("driver_version"),
        cuda_runtime=torch.version.cuda,
        torch_version=torch.__version__,
        triton_version=triton_version,
        python_version=platform.python_version(),
        hostname=platform.node(),
        libraries=libraries,
    )


def read_gpu_state(gpu_index: int) -> GpuState | None:
    """Clocks, temperature, power and active throttle reasons; None where nvidia-smi is absent."""
    fields = ("clocks.sm", "clocks.mem", "temperature.gpu", "power.draw", *_THROTTLE_FIELDS)
    values = _nvidia_smi_query(gpu_index, fields)
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


def _nvidia_smi_query(gpu_index: int, fields: tuple[str, ...]) -> dict[str, str]:
    executable = shutil.which("nvidia-smi")
    if executable is None:
        return {}
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    physical = gpu_index
    if visible:
        ids = [v.strip() for v in visible.split(",")]
        if gpu_index < len(ids) and ids[gpu_index].isdigit():
            physical = int(ids[gpu_index])
    try:
        completed = subprocess.run(
            [executable, f"--id={physical}", f"--query-gpu={','.join(fields)}", "--format=csv,noheader,nounits"],
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
