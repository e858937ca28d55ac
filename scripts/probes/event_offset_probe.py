"""Issue 28 probe: raw event time, CUPTI span and the hold-to-kernel gap per kernel, timed vs audited calls (docs/acceptance.md)."""
"""Where does the event-vs-CUPTI offset come from? (issue 28 experiment)"""
import ctypes
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
import torch
import triton
import triton.language as tl

from kbench_ci.measure.cupti import ActivityTrace
from kbench_ci.measure.escape import audit_escapes
from kbench_ci.measure.timing import CudaEventTimer

dev = torch.device("cuda", 0)
here = Path(__file__).parent
so = here / "vadd_probe.so"
subprocess.run(["nvcc", "-shared", "-O3", "-arch=sm_90", "-Xcompiler", "-fPIC", "-o", str(so), str(here / "vadd.cu")], check=True)
lib = ctypes.CDLL(str(so))
lib.solve.argtypes = [ctypes.c_void_p] * 3 + [ctypes.c_long]

@triton.jit
def softmax_kernel(out_ptr, in_ptr, in_row_stride, out_row_stride, n_rows, n_cols, BLOCK_SIZE: tl.constexpr, num_stages: tl.constexpr):
    row_start = tl.program_id(0)
    row_step = tl.num_programs(0)
    for row_idx in tl.range(row_start, n_rows, row_step, num_stages=num_stages):
        row_start_ptr = in_ptr + row_idx * in_row_stride
        col_offsets = tl.arange(0, BLOCK_SIZE)
        mask = col_offsets < n_cols
        row = tl.load(row_start_ptr + col_offsets, mask=mask, other=-float('inf'))
        row_minus_max = row - tl.max(row, axis=0)
        numerator = tl.exp(row_minus_max)
        denominator = tl.sum(numerator, axis=0)
        tl.store(out_ptr + row_idx * out_row_stride + col_offsets, numerator / denominator, mask=mask)

def softmax(x, y):
    n_rows, n_cols = x.shape
    BLOCK_SIZE = triton.next_power_of_2(n_cols)
    num_warps = 8
    grid = min(n_rows, 132 * 4)
    softmax_kernel[(grid,)](y, x, x.stride(0), y.stride(0), n_rows, n_cols, BLOCK_SIZE=BLOCK_SIZE, num_stages=4, num_warps=num_warps)

@triton.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, sam, sak, sbk, sbn, scm, scn,
                  BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GM: tl.constexpr):
    pid = tl.program_id(0)
    num_pid_m = tl.cdiv(M, BM); num_pid_n = tl.cdiv(N, BN)
    num_pid_in_group = GM * num_pid_n
    group_id = pid // num_pid_in_group
    first_pid_m = group_id * GM
    group_size_m = min(num_pid_m - first_pid_m, GM)
    pid_m = first_pid_m + ((pid % num_pid_in_group) % group_size_m)
    pid_n = (pid % num_pid_in_group) // group_size_m
    offs_am = (pid_m * BM + tl.arange(0, BM)) % M
    offs_bn = (pid_n * BN + tl.arange(0, BN)) % N
    offs_k = tl.arange(0, BK)
    a_ptrs = a_ptr + (offs_am[:, None] * sam + offs_k[None, :] * sak)
    b_ptrs = b_ptr + (offs_k[:, None] * sbk + offs_bn[None, :] * sbn)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BK)):
        a = tl.load(a_ptrs); b = tl.load(b_ptrs)
        acc = tl.dot(a, b, acc)
        a_ptrs += BK * sak; b_ptrs += BK * sbk
    c = acc.to(tl.float16)
    offs_cm = pid_m * BM + tl.arange(0, BM); offs_cn = pid_n * BN + tl.arange(0, BN)
    tl.store(c_ptr + scm * offs_cm[:, None] + scn * offs_cn[None, :], c)

def tmm(a, b, c):
    M, K = a.shape; _, N = b.shape
    grid = (triton.cdiv(M, 128) * triton.cdiv(N, 256),)
    matmul_kernel[grid](a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1),
                        BM=128, BN=256, BK=64, GM=8, num_warps=8, num_stages=3)

def cases():
    for p in (20, 24, 26):
        n = 2 ** p
        a, b, c = (torch.randn(n, device=dev) for _ in range(3))
        yield f"cu vadd 2^{p}", (lambda a=a, b=b, c=c, n=n: lib.solve(a.data_ptr(), b.data_ptr(), c.data_ptr(), n)), "vadd_kernel"
    n = 2 ** 24
    a, b, c = (torch.randn(n, device=dev) for _ in range(3))
    yield "torch.add 2^24", (lambda: torch.add(a, b, out=c)), "elementwise"
    x = torch.randn(4096, 4096, device=dev); y = torch.empty_like(x)
    yield "triton softmax 4096^2", (lambda: softmax(x, y)), "softmax_kernel"
    A = torch.randn(4096, 4096, device=dev, dtype=torch.float16); B = torch.randn(4096, 4096, device=dev, dtype=torch.float16); C = torch.empty_like(A)
    yield "triton matmul 4096^3", (lambda: tmm(A, B, C)), "matmul_kernel"
    yield "cublas mm 4096^3", (lambda: torch.mm(A, B, out=C)), ""  # any non-harness kernel
    yield "empty spin(0)", (lambda: torch.cuda._sleep(0)), "spin_kernel"

HARNESS = ("FillFunctor", "fill", "zero")

def analyse(events, n, sub):
    gpu = sorted((e for e in events if e.on_gpu), key=lambda e: e.start_ns)
    # per call: hold spin, then user kernels until next flush
    calls = []; cur = None; hold_end = None
    for e in gpu:
        if "spin_kernel" in e.name and sub != "spin_kernel" or (sub == "spin_kernel" and "spin_kernel" in e.name and (e.end_ns - e.start_ns) > 5000):
            if cur: calls.append(cur)
            cur = {"hold_end": e.end_ns, "k": []}
            continue
        if any(h in e.name for h in HARNESS) and not (sub and sub in e.name):
            if cur: calls.append(cur); cur = None
            continue
        if cur is not None and (not sub or sub in e.name or True):
            cur["k"].append(e)
    if cur: calls.append(cur)
    rows = []
    for c in calls:
        if not c["k"]:
            continue
        s = min(k.start_ns for k in c["k"]); t = max(k.end_ns for k in c["k"])
        rows.append(((t - s) / 1e3, (s - c["hold_end"]) / 1e3, len(c["k"])))
    return rows

def med(x):
    return statistics.median(x) if x else float("nan")

out = {}
for flush in (True, False):
    timer = CudaEventTimer(dev, flush_l2=flush)
    overhead = timer.calibrate_overhead()
    print(f"\n=== flush_l2={flush}: calibrate_overhead = {overhead*1e3:.3f} us  hold={timer.hold_us:.1f}", flush=True)
    for name, fn, sub in cases():
        timer.warm_up(fn, 20)
        raw = timer.measure_raw(fn, 100)
        with ActivityTrace() as tr:
            raw_tr = timer.measure_raw(fn, 60)
        rows = analyse(tr.events, 60, sub)
        span = [r[0] for r in rows]; gap = [r[1] for r in rows]
        audit = audit_escapes(timer, fn, 9)
        iso_ev = [e + overhead for e in audit.event_ms]
        r = dict(raw=med(raw) * 1e3, raw_traced=med(raw_tr) * 1e3, cupti_span=med(span), gap_hold_to_kernel=med(gap),
                 nk=rows[0][2] if rows else 0, ncalls=len(rows), iso_raw=med(iso_ev) * 1e3, iso_span=med(audit.cupti_span_ms) * 1e3,
                 raw_minus_overhead=med(raw) * 1e3 - overhead * 1e3)
        r["timed_offset"] = r["raw_traced"] - r["cupti_span"]; r["iso_offset"] = r["iso_raw"] - r["iso_span"]
        r["kbench_now_err_pct"] = 100 * ((r["raw_minus_overhead"] - (r["iso_offset"] - overhead*1e3)) / r["cupti_span"] - 1)
        print(f"{name:22s} raw {r['raw']:9.2f} traced {r['raw_traced']:9.2f} cupti {r['cupti_span']:9.2f} (n={r['ncalls']},k={r['nk']}) "
              f"gap {r['gap_hold_to_kernel']:5.2f} | timed off {r['timed_offset']:5.2f} iso off {r['iso_offset']:5.2f} "
              f"iso raw {r['iso_raw']:9.2f} iso span {r['iso_span']:9.2f} | now err {r['kbench_now_err_pct']:+.2f}%", flush=True)
        out[f"{name} flush={flush}"] = r
Path(os.environ.get("OUT", "/tmp")).joinpath("offset_probe.json").write_text(json.dumps(out, indent=1))
