"""What the judge's wait for a quiet GPU (kbench_ci.judge.quiet) assumes of the GPU, checked on
it: the judge's probe kernel runs within the 200 us bound on an idle GPU, and takes longer while
another process's context keeps the GPU busy (without MPS the GPU time-slices between contexts).
If the second fails, the wait at each change of turn sees nothing, and the docs must say so.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time

import pytest

torch = pytest.importorskip("torch")

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")]

#: another process: its own CUDA context, then a spin of about a second
_BUSY = (
    "import torch; torch.empty(1, device='cuda'); torch.cuda.synchronize(); print('ready', flush=True); "
    "torch.cuda._sleep(2_000_000_000); torch.cuda.synchronize()"
)


def test_the_probe_is_quick_on_an_idle_gpu_and_slow_while_another_process_keeps_it_busy() -> None:
    from kbench_ci.judge.clock import GpuClock
    from kbench_ci.judge.quiet import QUIET_LIMIT_US, wait_quiet

    clock = GpuClock(torch.device("cuda", torch.cuda.current_device()))
    idle = [clock.idle_latency_us() for _ in range(50)]
    print(f"idle: median {statistics.median(idle):.1f} us, max {max(idle):.1f} us")
    assert wait_quiet(clock.idle_latency_us, timeout_s=1.0).quiet

    busy = subprocess.Popen([sys.executable, "-c", _BUSY], stdout=subprocess.PIPE, text=True)
    try:
        assert busy.stdout is not None and busy.stdout.readline().strip() == "ready"
        time.sleep(0.2)  # its spin is on the GPU now
        during = [clock.idle_latency_us() for _ in range(20)]
        found = wait_quiet(clock.idle_latency_us, timeout_s=0.2)
        print(f"busy: median {statistics.median(during):.1f} us, max {max(during):.1f} us; wait_quiet {found}")
        assert not found.quiet and found.slowest_us > QUIET_LIMIT_US
        assert statistics.median(during) > QUIET_LIMIT_US
    finally:
        busy.wait(timeout=60)
    after = wait_quiet(clock.idle_latency_us, timeout_s=1.0)
    print(f"after: {after}")
    assert after.quiet
