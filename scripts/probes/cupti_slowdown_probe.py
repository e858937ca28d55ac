"""Does CUPTI tracing slow many-block kernels? amortized event loops, traced vs untraced."""
import ctypes
import statistics
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
import torch

from kbench_ci.measure.cupti import ActivityTrace
from kbench_ci.measure.timing import CudaEventTimer

dev = torch.device("cuda", 0)
here = Path(__file__).parent
so = here / "vadd_probe.so"
subprocess.run(["nvcc", "-shared", "-O3", "-arch=sm_90", "-Xcompiler", "-fPIC", "-o", str(so), str(here / "vadd.cu")], check=True)
lib = ctypes.CDLL(str(so))
for f in (lib.solve, lib.solve_gs):
    f.argtypes = [ctypes.c_void_p] * 3 + [ctypes.c_long]
def loop_us(fn, n=200):
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda._sleep(20_000_000)
    s.record()
    for _ in range(n): fn()
    e.record(); e.synchronize()
    return s.elapsed_time(e) * 1e3 / n
def case(p, gs):
    n = 2 ** p
    a, b, c = (torch.randn(n, device=dev) for _ in range(3))
    f = lib.solve_gs if gs else lib.solve
    return lambda: f(a.data_ptr(), b.data_ptr(), c.data_ptr(), n)
mode = sys.argv[1] if len(sys.argv) > 1 else "all"
if mode == "ncu":
    for p in (20, 24, 26):
        fn = case(p, False)
        for _ in range(3): fn()
    torch.cuda.synchronize(); sys.exit(0)
timer = CudaEventTimer(dev, flush_l2=True)
for p in (20, 24, 26):
    for gs in (False, True):
        fn = case(p, gs)
        for _ in range(50): fn()
        un = statistics.median(loop_us(fn) for _ in range(5))
        with ActivityTrace() as tr:
            tr_loop = statistics.median(loop_us(fn) for _ in range(5))
        k = sorted((e.end_ns - e.start_ns) / 1e3 for e in tr.events if e.on_gpu and "vadd" in e.name)
        # cold: flush+hold+events, untraced and traced
        timer.warm_up(fn, 10)
        timer.hold_us = 60
        raw = statistics.median(timer.measure_raw(fn, 100)) * 1e3
        with ActivityTrace() as tr2:
            raw_t = statistics.median(timer.measure_raw(fn, 100)) * 1e3
        k2 = sorted((e.end_ns - e.start_ns) / 1e3 for e in tr2.events if e.on_gpu and "vadd" in e.name)
        print(f"vadd{'_gs' if gs else '   '} 2^{p}: warm back-to-back untraced {un:8.2f} traced {tr_loop:8.2f} cupti kernel {statistics.median(k):8.2f} | "
              f"cold timed raw {raw:8.2f} traced raw {raw_t:8.2f} cupti {statistics.median(k2):8.2f} raw-3.2={raw-3.2:8.2f}", flush=True)
