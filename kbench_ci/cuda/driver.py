"""The GPUs this process sees, from the CUDA driver itself: no torch in the parent process.

The parent (the command line, the builds) needs the device list, each GPU's model and its
compute capability. Importing torch for them cost 1.5-2.5 s at the start of every run, before
the warm worker (which needs torch) could even be started. The driver API in ``libcuda`` (there
wherever an NVIDIA driver is) answers in a fraction of that, and numbers the devices exactly as
torch does: ``CUDA_VISIBLE_DEVICES`` and ``CUDA_DEVICE_ORDER`` apply to both, which NVML's own
numbering does not follow. ``cuInit`` creates no context: no GPU memory is taken here.
"""

from __future__ import annotations

import ctypes
import functools
from dataclasses import dataclass
from typing import Any

__all__ = ["CudaDevice", "cuda_devices", "query_devices"]

#: CUdevice_attribute values of the driver API (cuda.h), stable across CUDA versions
_ATTRIBUTE_CAPABILITY_MAJOR = 75
_ATTRIBUTE_CAPABILITY_MINOR = 76
_CUDA_SUCCESS = 0
_NAME_BYTES = 256

#: the driver's library names, most specific first (Linux; the versioned name is what a driver
#: install always provides, the bare one only with the development files)
_LIBRARY_NAMES = ("libcuda.so.1", "libcuda.so")


@dataclass(frozen=True, slots=True)
class CudaDevice:
    """One CUDA device as this process numbers it (``cuda:index``)."""

    index: int
    name: str
    major: int
    minor: int

    @property
    def arch(self) -> str:
        """nvcc's ``sm_XY`` for this device."""
        return f"sm_{self.major}{self.minor}"


@functools.cache
def cuda_devices() -> tuple[CudaDevice, ...]:
    """Every CUDA device this process sees, by index; empty where there is no driver, no
    device, or the driver cannot start (asked once per process)."""
    library = _load_driver()
    if library is None:
        return ()
    return query_devices(library)


def query_devices(library: Any) -> tuple[CudaDevice, ...]:
    """The devices ``library`` (``libcuda`` through ctypes, or a stand-in with its functions)
    reports; empty when any call fails: a broken driver means no GPU, as it does for torch."""
    if library.cuInit(0) != _CUDA_SUCCESS:
        return ()  # CUDA_ERROR_NO_DEVICE, a driver/library mismatch, an insufficient driver
    count = ctypes.c_int(0)
    if library.cuDeviceGetCount(ctypes.byref(count)) != _CUDA_SUCCESS:
        return ()
    devices = []
    for index in range(count.value):
        handle = ctypes.c_int(0)
        name = ctypes.create_string_buffer(_NAME_BYTES)
        major, minor = ctypes.c_int(0), ctypes.c_int(0)
        if (
            library.cuDeviceGet(ctypes.byref(handle), index) != _CUDA_SUCCESS
            or library.cuDeviceGetName(name, _NAME_BYTES, handle) != _CUDA_SUCCESS
            or library.cuDeviceGetAttribute(ctypes.byref(major), _ATTRIBUTE_CAPABILITY_MAJOR, handle) != _CUDA_SUCCESS
            or library.cuDeviceGetAttribute(ctypes.byref(minor), _ATTRIBUTE_CAPABILITY_MINOR, handle) != _CUDA_SUCCESS
        ):
            return ()
        devices.append(CudaDevice(index, name.value.decode("utf-8", errors="replace"), major.value, minor.value))
    return tuple(devices)


def _load_driver() -> Any:
    for name in _LIBRARY_NAMES:
        try:
            return ctypes.CDLL(name)
        except OSError:
            continue
    return None
