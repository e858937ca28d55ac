"""Stream memory operations through the CUDA driver (``ctypes``; no compiler, no torch
internals): a stream waits, on the GPU, until a 32-bit word holds a value, or writes one.

The judge and a side's worker hand a call back and forth with them (kbench_ci.judge.clock): the
side's stream waits for the judge's "go" word, and the judge's stream waits for the side's
"done" word, so neither waits for a host round trip between the two processes' GPU work.
"""

from __future__ import annotations

import ctypes
from typing import Any

#: cuStreamWaitValue32's flag: wait until the word equals the value
WAIT_EQUAL = 0x1


class StreamOpsUnavailable(Exception):
    """The driver refused something (the message says what)."""


class StreamOps:
    """The driver entry points, bound once per process."""

    def __init__(self) -> None:
        try:
            self.lib = ctypes.CDLL("libcuda.so.1")
        except OSError as exc:
            raise StreamOpsUnavailable(f"libcuda.so.1 did not load: {exc}") from exc
        self._wait = self._entry("cuStreamWaitValue32")
        self._write = self._entry("cuStreamWriteValue32")

    def _entry(self, name: str) -> Any:
        function = getattr(self.lib, f"{name}_v2", None) or getattr(self.lib, name, None)
        if function is None:
            raise StreamOpsUnavailable(f"the driver has no {name}")
        function.argtypes = [ctypes.c_void_p, ctypes.c_uint64, ctypes.c_uint32, ctypes.c_uint]
        return function

    def check(self, result: int, what: str) -> None:
        if result != 0:
            name = ctypes.c_char_p()
            self.lib.cuGetErrorName(result, ctypes.byref(name))
            raise StreamOpsUnavailable(f"{what} failed: {(name.value or b'?').decode()} ({result})")

    def wait_equal(self, stream: int, address: int, value: int) -> None:
        """Enqueue on ``stream`` (a CUstream handle): wait until the word at ``address`` is ``value``."""
        self.check(self._wait(ctypes.c_void_p(stream), ctypes.c_uint64(address), ctypes.c_uint32(value), WAIT_EQUAL),
                   "enqueueing a stream wait")

    def write(self, stream: int, address: int, value: int) -> None:
        """Enqueue on ``stream``: write ``value`` into the word at ``address``."""
        self.check(self._write(ctypes.c_void_p(stream), ctypes.c_uint64(address), ctypes.c_uint32(value), 0),
                   "enqueueing a stream write")
