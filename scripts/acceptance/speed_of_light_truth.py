"""Speed of light: does kbench-ci's "% of peak" (speed of light) read what an independent
measurement reads?

For each kernel (a CUDA C++ vector add at N=2^24 fp32, the CUTLASS GEMM example at 4096^3, a
Triton softmax at 4096x4096):

  kbench-ci    `kbench-ci bench` (the product, end to end, its own worker), read from its
               results.json: the work per call (declared, or inferred as every input read once and
               every output written once) over the timed median, as a share of the copy bandwidth
               it measured (a 512 MiB ``copy_``), exactly as its report computes it
               (results.schema.speed_of_light_from_json(...).bandwidth_fraction)
  independent  a small probe (this script, ``--probe NAME``) loads the same kernel on the same
               inputs and calls it with a cold L2 before every call (staged as kbench-ci stages a
               timed call: another content copied into the inputs, outputs poisoned, L2 flushed):
                 - under ``ncu --clock-control none --cache-control all`` (DRAM bytes read and
                   written per launch, median over the profiled launches; ncu's own kernel time
                   is printed for reference only: ncu serialises and replays);
                 - in a separate run without ncu, under CUPTI (kbench_ci.measure.cupti.ActivityTrace):
                   the median span of the kernel's own launches per call.
               independent % = (ncu DRAM bytes / CUPTI median time) / the copy ceiling kbench-ci used
               (results.json's ``copy_bytes_per_s``; else kbench-ci's ceilings cache)

The difference is printed in percentage points, with its two parts: the bytes (kbench-ci's
declared/inferred count against what DRAM saw) and the time (kbench-ci's median against CUPTI's).
DRAM writes that are still dirty in L2 when a kernel ends are written back after it and are not
counted by ncu for that kernel, so a kernel whose output is a sizeable part of L2 (50-60 MB on an
H200) reads low on writes; reads and writes are printed apart for that reason.

Usage (GPU machine, repository root; about 2 minutes on an H200, the CUTLASS build included):
    python3 scripts/acceptance/speed_of_light_truth.py [--out DIR] [--only NAME] [--ncu PATH]
    python3 scripts/acceptance/speed_of_light_truth.py --selftest        # no GPU: the ncu CSV parser and the arithmetic
Needs: a CUDA torch, triton, nvcc, ncu (Nsight Compute; counters readable: root, or
NVreg_RestrictProfilingToAdminUsers=0), and for the CUTLASS kernel the nvidia-cutlass headers
(the wheel on PYTHONPATH or in --site, or CUTLASS_PATH); without them that row reads "skipped".
"""

from __future__ import annotations

import argparse
import csv
import glob
import io
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from kbench_ci.results.schema import speed_of_light_from_json  # noqa: E402 - torch-free

T = ROOT / "tests" / "fixtures" / "truth"
G = ROOT / "examples" / "gemm_cutlass"


@dataclass(frozen=True)
class Kernel:
    name: str  # for --only and --probe
    title: str
    solution: Path
    ref: Path
    implementation: str
    dims: dict[str, int]
    #: the solution's own launches, by kernel name: ncu's -k (function name: "device_kernel" for
    #: CUTLASS 3), the CSV's "Kernel Name" (demangled) and CUPTI's names (demangled), searched
    regex: str
    #: `kbench-ci build` arguments before the source
    build_args: tuple[str, ...] = ()
    #: FLOPs per call, for a FLOP-rate share printed beside the bandwidth share
    flops: int | None = None


KERNELS = [
    Kernel("vadd", "CUDA vadd N=2^24 fp32", T / "vadd.cu", T / "vadd_ref.py", "cuda-cpp", {"N": 2**24},
           r"vadd_kernel", build_args=()),
    Kernel("cutlass_gemm", "CUTLASS GEMM 4096^3 fp16", G / "gemm.cu", G / "ref.py", "cutlass", {"M": 4096, "N": 4096, "K": 4096},
           r"device_kernel|GemmUniversal", build_args=("--cutlass",), flops=2 * 4096**3),
    Kernel("triton_softmax", "Triton softmax 4096x4096 fp32", T / "softmax.py", T / "softmax_ref.py", "triton",
           {"M": 4096, "N": 4096}, r"softmax_kernel"),
]
NCU_METRICS = ("dram__bytes_read.sum", "dram__bytes_write.sum", "gpu__time_duration.sum")
#: launches before the profiled ones (their rows are dropped; Triton compiles on the first call)
WARMUP = 3
#: launches profiled under ncu, and calls traced under CUPTI
NCU_CALLS = 20
CUPTI_CALLS = 50
#: kernels of the harness around each call (staging copies, poisoning fills, the L2 flush, the hold)
HARNESS = ("elementwise", "fill", "copy", "memcpy", "memset", "spin_kernel")
HOLD = "spin_kernel"
_NO_PERMISSION = ("ERR_NVGPUCTRPERM", "LibraryNotLoaded")


# --------------------------------------------------------------------------- ncu's CSV

#: ncu's unit names → factor to bytes or nanoseconds (ncu scales with SI prefixes: 1 Kbyte = 1000 bytes)
_UNITS = {
    "byte": 1.0, "Kbyte": 1e3, "Mbyte": 1e6, "Gbyte": 1e9, "Tbyte": 1e12,
    "nsecond": 1.0, "usecond": 1e3, "msecond": 1e6, "second": 1e9,
    "ns": 1.0, "us": 1e3, "ms": 1e6, "s": 1e9,
}


def metric_value(value: str, unit: str) -> float | None:
    """An ncu ``Metric Value`` in bytes (byte units) or nanoseconds (time units); None for "n/a".
    Thousands separators ("67,108,864") are dropped; an unknown unit is an error, never a guess."""
    text = value.strip().replace(",", "")
    if text in ("", "n/a", "N/A", "nan"):
        return None
    if unit.strip() not in _UNITS:
        raise ValueError(f"unknown ncu unit {unit!r} (value {value!r}): add it to _UNITS")
    return float(text) * _UNITS[unit.strip()]


@dataclass(frozen=True)
class NcuLaunch:
    id: int
    name: str
    read_bytes: float | None
    write_bytes: float | None
    time_ns: float | None

    @property
    def dram_bytes(self) -> float | None:
        return None if self.read_bytes is None or self.write_bytes is None else self.read_bytes + self.write_bytes


def parse_ncu_csv(text: str, regex: str) -> list[NcuLaunch]:
    """The launches whose kernel name matches ``regex`` in ncu's ``--csv`` output (one row per
    launch and metric), in launch order; ncu's ``==PROF==`` lines and the program's own output
    around the table are skipped, and names with commas inside quotes are read whole."""
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith('"ID"')), None)
    if start is None:
        return []
    table = "\n".join(line for line in lines[start:] if line.startswith('"'))
    pattern = re.compile(regex)
    launches: dict[int, dict[str, Any]] = {}
    for row in csv.DictReader(io.StringIO(table)):
        if row.get("ID") == "ID" or not (row.get("ID") or "").strip().isdigit():  # a repeated header
            continue
        name = row.get("Kernel Name") or ""
        if not pattern.search(name):
            continue
        entry = launches.setdefault(int(row["ID"]), {"name": name})
        entry[row.get("Metric Name") or ""] = metric_value(row.get("Metric Value") or "", row.get("Metric Unit") or "")
    return [NcuLaunch(id=key, name=entry["name"], read_bytes=entry.get("dram__bytes_read.sum"),
                      write_bytes=entry.get("dram__bytes_write.sum"), time_ns=entry.get("gpu__time_duration.sum"))
            for key, entry in sorted(launches.items())]


def _median(values: list[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return statistics.median(present) if present else None


def ncu_summary(launches: list[NcuLaunch], skip: int) -> dict[str, Any]:
    """Medians over the launches after the first ``skip`` (each profiled launch starts from a
    flushed cache under --cache-control all)."""
    kept = launches[skip:] if len(launches) > skip else launches
    time_ns = _median([launch.time_ns for launch in kept])
    return {
        "launches": len(kept), "names": sorted({launch.name for launch in kept}),
        "dram_bytes": _median([launch.dram_bytes for launch in kept]),
        "read_bytes": _median([launch.read_bytes for launch in kept]),
        "write_bytes": _median([launch.write_bytes for launch in kept]),
        "time_us": time_ns / 1e3 if time_ns is not None else None,
    }


# --------------------------------------------------------------------------- CUPTI spans


def spans_us(events: list[Any], regex: str) -> list[float]:
    """Per call: the span of the kernel's own launches between one hold kernel and the next
    (GPU activities in the order they ran: the probe uses one stream; the harness's copies, fills
    and flush are not the kernel's)."""
    pattern = re.compile(regex)
    gpu = sorted((e for e in events if e.on_gpu), key=lambda e: e.start_ns)
    calls: list[list[Any]] = []
    for event in gpu:
        if HOLD in event.name:
            calls.append([])
        elif calls and pattern.search(event.name):  # the kernel's name first: a CUTLASS name may hold "Copy"
            calls[-1].append(event)
    return [(max(e.end_ns for e in call) - min(e.start_ns for e in call)) / 1e3 for call in calls if call]


# --------------------------------------------------------------------------- the probe (GPU)


def _load(kernel: Kernel) -> tuple[Any, Any, Any]:
    """The kernel as kbench-ci loads it, its inputs at seed 42, and a stager (as the timer stages)."""
    import torch

    from kbench_ci.measure.usercode import load_problem

    device = torch.device("cuda", 0)
    torch.cuda.set_device(device)
    if kernel.implementation in ("cuda-cpp", "cutlass"):
        from kbench_ci.measure.impls.cuda_solution import load_cuda_solution

        loaded = load_cuda_solution(kernel.solution, kind=kernel.implementation, label="solution", problem=load_problem(kernel.ref),
                                    dims=kernel.dims, device=device, ptr_sizes={}, ptr_size=None)
    else:
        from kbench_ci.measure.impls.python_solution import load_python_solution

        loaded = load_python_solution(kernel.solution, kind=kernel.implementation, label="solution", dims=kernel.dims, device=device)
    inputs = loaded.make_inputs(42)
    kwargs = inputs.fresh_copy()
    other = loaded.make_inputs(43).kwargs
    stage = _Staging(kwargs, other, inputs.output_names)
    return device, (lambda: loaded.kernel.call(kwargs)), stage


class _Staging:
    """As kbench-ci stages before every timed call: another content copied in, outputs poisoned."""

    def __init__(self, kwargs: dict, other: Any, outputs: tuple[str, ...]) -> None:
        import torch

        self.kwargs, self.other, self.outputs = kwargs, other, outputs
        self.stash = {k: v.clone() for k, v in kwargs.items() if isinstance(v, torch.Tensor) and k not in outputs}

    def before(self, index: int) -> None:
        source = self.other if index % 2 else self.stash
        for name in self.stash:
            self.kwargs[name].copy_(source[name])
        for name in self.outputs:
            self.kwargs[name].fill_(float("nan"))

    def after(self, index: int) -> None:
        pass


def run_probe(name: str, mode: str, result: Path | None) -> int:
    import torch

    from kbench_ci.measure.timing import CacheFlush

    kernel = next(k for k in KERNELS if k.name == name)
    device, call, stage = _load(kernel)
    if mode == "ncu":  # ncu profiles the launches whose name matches; it flushes the caches itself too
        flush = CacheFlush(device, enabled=True)
        for index in range(WARMUP + NCU_CALLS):
            stage.before(index)
            flush()
            call()
        torch.cuda.synchronize(device)
        return 0
    from kbench_ci.measure import speed_of_light
    from kbench_ci.measure.cupti import ActivityTrace
    from kbench_ci.measure.timing import CudaEventTimer

    timer = CudaEventTimer(device, flush_l2=True)
    timer.warm_up(call, 10)
    untraced = timer.measure_raw(call, CUPTI_CALLS, stage)
    with ActivityTrace() as trace:
        traced = timer.measure_raw(call, CUPTI_CALLS, stage)
    spans = spans_us(trace.events, kernel.regex)
    names = sorted({e.name for e in trace.events if e.on_gpu and re.search(kernel.regex, e.name)})
    key = speed_of_light.device_key(device)
    cached = speed_of_light.load_ceilings(key, speed_of_light.ceilings_dir())
    payload = {
        "kernel": name, "cupti_us": spans, "median_us": statistics.median(spans) if spans else None,
        # CUPTI slows kernels of many blocks (calibration module doc): the event pair's median
        # traced less untraced is how much, so median_us - slowdown_us is the untraced kernel time
        "event_median_us": statistics.median(untraced) * 1e3, "traced_event_median_us": statistics.median(traced) * 1e3,
        "slowdown_us": (statistics.median(traced) - statistics.median(untraced)) * 1e3, "kernel_names": names,
        "device_key": key, "ceilings_dir": str(speed_of_light.ceilings_dir()),
        "ceilings": None if cached is None else {"copy_bytes_per_s": cached.copy_bytes_per_s,
                                                 "matmul_flops_per_s": dict(cached.matmul_flops_per_s)},
    }
    text = json.dumps(payload, indent=1)
    if result is None:
        print(text)
    else:
        result.write_text(text)
    return 0 if spans else 1


# --------------------------------------------------------------------------- the driver


def _tail(text: str, lines: int = 15) -> str:
    return "\n".join(text.strip().splitlines()[-lines:])


def _env(site: Path | None) -> dict[str, str]:
    """The environment of every child: the repository importable, and ``site`` (wheels the caller
    installed with --target, e.g. nvidia-cutlass) last on the path."""
    env = dict(os.environ)
    parts = [str(ROOT), *[p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]]
    if site is not None and site.is_dir() and str(site) not in parts:
        parts.append(str(site))
    env["PYTHONPATH"] = os.pathsep.join(parts)
    env["PYTHONUNBUFFERED"] = "1"
    return env


def find_ncu(explicit: str | None) -> str | None:
    if explicit:
        return explicit
    found = shutil.which("ncu")
    if found:
        return found
    candidates = sorted(glob.glob("/opt/nvidia/nsight-compute/*/ncu")) + sorted(glob.glob("/usr/local/cuda*/bin/ncu"))
    return candidates[-1] if candidates else None


def start_build(kernel: Kernel, env: dict[str, str]) -> subprocess.Popen[str] | None:
    if kernel.implementation not in ("cuda-cpp", "cutlass"):
        return None
    command = [sys.executable, "-m", "kbench_ci", "build", *kernel.build_args, str(kernel.solution)]
    return subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def finish_build(kernel: Kernel, process: subprocess.Popen[str] | None) -> tuple[str | None, str | None]:
    """(why the kernel is skipped, why it failed): both None when built (or nothing to build)."""
    if process is None:
        return None, None
    try:
        output, _ = process.communicate(timeout=420)
    except subprocess.TimeoutExpired:
        process.kill()
        return None, "kbench-ci build ran past 420 s"
    if process.returncode == 0:
        return None, None
    if kernel.implementation == "cutlass" and re.search(r"'nvidia-cutlass'|CUTLASS_PATH|(cutlass/cutlass\.h|cute/tensor\.hpp): No such file", output):
        return (f"CUTLASS headers not found ({_tail(output, 2).replace(chr(10), ' ')}); install the nvidia-cutlass "
                "wheel (e.g. pip install --target /tmp/site) or set CUTLASS_PATH"), None
    return None, f"kbench-ci build failed (rc {process.returncode}):\n{_tail(output)}"


def run_bench(kernel: Kernel, out: Path, env: dict[str, str]) -> dict[str, Any]:
    """kbench-ci's own figures for the kernel, from its results.json."""
    output_dir = out / f"{kernel.name}_bench"
    command = [
        sys.executable, "-m", "kbench_ci", "bench", str(kernel.solution), f"--implementation={kernel.implementation}",
        f"--ref={kernel.ref}", f"--output-dir={output_dir}", *(f"--{k}={v}" for k, v in kernel.dims.items()),
    ]
    results = output_dir / "results.json"
    results.unlink(missing_ok=True)  # never read an earlier run's figures
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, check=False, timeout=420)
    if done.returncode != 0 or not results.is_file():
        raise RuntimeError(f"kbench-ci bench failed (rc {done.returncode}):\n{_tail(done.stdout)}\n{_tail(done.stderr)}")
    return kbench_figures(json.loads(results.read_text()))


def kbench_figures(data: dict[str, Any]) -> dict[str, Any]:
    """The solution's speed of light as kbench-ci reports it (results.json's ``speed_of_light``
    read through results.schema, whose fractions the report and the history print)."""
    variant = next(v for v in data["case"]["variants"] if v["label"] == "solution")
    samples = [s for r in variant.get("rounds_ms", ()) for s in r]
    figures: dict[str, Any] = {
        "status": variant.get("status"), "samples": len(samples),
        "rounds_median_us": statistics.median(samples) * 1e3 if samples else None,
        "notes": [n for n in variant.get("notes", ()) if "speed of light" in n or "floor" in n],
    }
    light = speed_of_light_from_json(variant.get("speed_of_light"))
    if light is None:
        return figures
    figures.update({
        "source": light.source, "bytes": light.bytes, "flops": light.flops, "median_us": light.median_ms * 1e3,
        "copy_bytes_per_s": light.copy_bytes_per_s, "matmul_flops_per_s": light.matmul_flops_per_s,
        "matmul_dtype": light.matmul_dtype, "floor_us": light.floor_ms * 1e3 if light.floor_ms is not None else None,
        "share": light.bandwidth_fraction, "flops_share": light.flops_fraction,
    })
    return figures


def run_ncu(kernel: Kernel, ncu: str | None, out: Path, env: dict[str, str]) -> dict[str, Any]:
    if ncu is None:
        return {"problem": "ncu not found (not on PATH, nor /opt/nvidia/nsight-compute/*/ncu); pass --ncu PATH"}
    command = [
        ncu, "--clock-control", "none", "--cache-control", "all", "--metrics", ",".join(NCU_METRICS), "--csv",
        "--print-units", "base", "--target-processes", "all", "--kernel-name-base", "function",
        "-k", f"regex:{kernel.regex}", "--launch-count", str(WARMUP + NCU_CALLS),
        sys.executable, str(Path(__file__).resolve()), "--probe", kernel.name, "--mode", "ncu",
    ]
    try:
        done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, check=False, timeout=420)
    except subprocess.TimeoutExpired:
        return {"problem": "ncu ran past 420 s"}
    except OSError as exc:
        return {"problem": f"ncu could not start: {exc}"}
    (out / f"{kernel.name}_ncu.csv").write_text(done.stdout)
    (out / f"{kernel.name}_ncu.stderr").write_text(done.stderr)
    output = done.stdout + "\n" + done.stderr
    if any(word in output for word in _NO_PERMISSION):
        return {"problem": "ncu may not read the GPU's counters here (" + next(w for w in _NO_PERMISSION if w in output) + ")"}
    launches = parse_ncu_csv(done.stdout, kernel.regex)
    if done.returncode != 0 or not launches:
        return {"problem": f"ncu rc {done.returncode}, {len(launches)} launches of /{kernel.regex}/ profiled: {_tail(output, 6)}"}
    summary = ncu_summary(launches, WARMUP)
    summary["command"] = " ".join(command)
    return summary


def run_cupti(kernel: Kernel, out: Path, env: dict[str, str]) -> dict[str, Any]:
    result = out / f"{kernel.name}_cupti.json"
    result.unlink(missing_ok=True)
    command = [sys.executable, str(Path(__file__).resolve()), "--probe", kernel.name, "--mode", "cupti", "--result", str(result)]
    try:
        done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, check=False, timeout=300)
    except subprocess.TimeoutExpired:
        return {"problem": "the CUPTI probe ran past 300 s"}
    if done.returncode != 0 or not result.is_file():
        return {"problem": f"CUPTI probe rc {done.returncode}: {_tail(done.stdout + done.stderr, 8)}"}
    return json.loads(result.read_text())


def combine(kernel: Kernel, kb: dict[str, Any], nc: dict[str, Any], cu: dict[str, Any]) -> dict[str, Any]:
    """The independent share, against the ceiling kbench-ci used (results.json, else its cache)."""
    ceiling, ceiling_from = kb.get("copy_bytes_per_s"), "results.json"
    cached = (cu.get("ceilings") or {}).get("copy_bytes_per_s")
    if not ceiling:
        ceiling, ceiling_from = cached, "ceilings cache"
    row: dict[str, Any] = {"ceiling": ceiling, "ceiling_from": ceiling_from if ceiling else None, "cache_ceiling": cached}
    dram, cupti_us = nc.get("dram_bytes"), cu.get("median_us")
    row["independent"] = dram / (cupti_us / 1e6) / ceiling if dram and cupti_us and ceiling else None
    if row["independent"] is not None and kb.get("share") is not None:
        row["points"] = 100 * (kb["share"] - row["independent"])
    if kb.get("bytes") and dram:
        row["bytes_ratio"] = kb["bytes"] / dram
    if kb.get("median_us") and cupti_us:
        row["time_ratio"] = cupti_us / kb["median_us"]
    slowdown = cu.get("slowdown_us")
    if row["independent"] is not None and slowdown is not None and cupti_us - slowdown > 0:
        row["untraced_us"] = cupti_us - slowdown
        row["independent_untraced"] = dram / (row["untraced_us"] / 1e6) / ceiling
        if kb.get("share") is not None:
            row["points_untraced"] = 100 * (kb["share"] - row["independent_untraced"])
    if kernel.flops:  # a FLOP-rate share too, against the matmul ceiling kbench-ci used
        dtype = kb.get("matmul_dtype") or "float16"
        rate = kb.get("matmul_flops_per_s") or ((cu.get("ceilings") or {}).get("matmul_flops_per_s") or {}).get(dtype)
        if rate:
            row["flops_rate"], row["flops_dtype"] = rate, dtype
            row["kbench_flops_share"] = kernel.flops / (kb["median_us"] / 1e6) / rate if kb.get("median_us") else None
            row["cupti_flops_share"] = kernel.flops / (cupti_us / 1e6) / rate if cupti_us else None
    return row


def _pct(x: float | None) -> str:
    return f"{100 * x:.1f}%" if x is not None else "—"


def _num(x: float | None, fmt: str) -> str:
    return format(x, fmt) if x is not None else "—"


def _one_line(text: str) -> str:
    """An error's first line and its last non-empty one (the cause, for a tool's output)."""
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return (lines[0] + (" ... " + lines[-1] if len(lines) > 1 else ""))[:240] if lines else "?"


def table(rows: list[dict[str, Any]]) -> str:
    head = (f"{'kernel':30s} {'kbench us':>10s} {'kbench bytes/call':>24s} {'kbench %':>9s} "
            f"{'ncu DRAM bytes/call (R+W)':>30s} {'ncu us':>8s} {'CUPTI us':>9s} {'indep %':>8s} {'diff pts':>9s}")
    lines = [head, "-" * len(head)]
    for r in rows:
        if r.get("skipped") or r.get("error"):
            what = f"skipped: {r['skipped']}" if r.get("skipped") else "error: " + _one_line(r["error"])
            lines.append(f"{r['title']:30s} {what}")
            continue
        kb, nc, cu, c = r["kbench"], r["ncu"], r["cupti"], r["combined"]
        kb_bytes = f"{kb['bytes'] / 1e6:,.2f} MB ({kb['source']})" if kb.get("bytes") else "—"
        nc_bytes = (f"{nc['dram_bytes'] / 1e6:,.2f} MB ({nc['read_bytes'] / 1e6:,.1f}+{nc['write_bytes'] / 1e6:,.1f})"
                    if nc.get("dram_bytes") is not None else "n/a: " + str(nc.get("problem", ""))[:22])
        diff = f"{c['points']:+.1f}" if c.get("points") is not None else "—"
        lines.append(f"{r['title']:30s} {_num(kb.get('median_us'), '10.2f')} {kb_bytes:>24s} {_pct(kb.get('share')):>9s} "
                     f"{nc_bytes:>30s} {_num(nc.get('time_us'), '8.2f')} {_num(cu.get('median_us'), '9.2f')} "
                     f"{_pct(c.get('independent')):>8s} {diff:>9s}")
    lines.append("")
    for r in rows:
        if r.get("skipped") or r.get("error"):
            continue
        kb, nc, cu, c = r["kbench"], r["ncu"], r["cupti"], r["combined"]
        parts = [f"ceiling {c['ceiling'] / 1e12:.3f} TB/s from {c['ceiling_from']}" if c.get("ceiling") else "no ceiling"]
        if c.get("cache_ceiling") and c.get("ceiling") and abs(c["cache_ceiling"] - c["ceiling"]) > 1e-6 * c["ceiling"]:
            parts.append(f"(cache now holds {c['cache_ceiling'] / 1e12:.3f} TB/s)")
        if c.get("bytes_ratio"):
            parts.append(f"bytes kbench/ncu {c['bytes_ratio']:.3f}")
        if c.get("time_ratio"):
            parts.append(f"time CUPTI/kbench {c['time_ratio']:.3f}")
        if c.get("independent_untraced") is not None:
            parts.append(f"CUPTI's tracing slows it by {cu['slowdown_us']:+.2f} us (event pair traced - untraced): untraced "
                         f"{c['untraced_us']:.2f} us, indep {_pct(c['independent_untraced'])}, diff {c['points_untraced']:+.1f} pts")
        if c.get("flops_rate"):
            parts.append(f"FLOP rate vs {c['flops_rate'] / 1e12:.0f} TFLOP/s {c['flops_dtype']} matmul: kbench {_pct(c.get('kbench_flops_share'))}, "
                         f"CUPTI {_pct(c.get('cupti_flops_share'))}")
        if nc.get("problem"):
            parts.append(f"ncu: {nc['problem']}")
        if cu.get("problem"):
            parts.append(f"CUPTI: {cu['problem']}")
        parts.append(f"kbench status {kb.get('status')}, {kb.get('samples')} samples")
        parts.extend(f"kbench note: {note}" for note in kb.get("notes") or ())
        lines.append(f"  {r['title']}: " + "; ".join(parts))
    return "\n".join(lines)


def main_run(args: argparse.Namespace) -> int:
    started = time.monotonic()
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    selected = [k for k in KERNELS if not args.only or args.only in k.name]
    if not selected:
        print(f"no kernel matches --only {args.only!r}: {', '.join(k.name for k in KERNELS)}", file=sys.stderr)
        return 2
    env = _env(args.site)
    ncu = find_ncu(args.ncu)
    print(f"ncu: {ncu or 'not found'}; out: {out}", flush=True)
    builds = {k.name: start_build(k, env) for k in selected}  # the CUTLASS build runs while the others are measured
    rows: dict[str, dict[str, Any]] = {}
    for kernel in sorted(selected, key=lambda k: k.implementation == "cutlass"):
        t0 = time.monotonic()
        row: dict[str, Any] = {"name": kernel.name, "title": kernel.title}
        rows[kernel.name] = row
        skipped, failed = finish_build(kernel, builds[kernel.name])
        if skipped or failed:
            row["skipped" if skipped else "error"] = skipped or failed
            print(f"{kernel.title}: {'skipped: ' + skipped if skipped else failed}", flush=True)
            continue
        try:
            row["kbench"] = run_bench(kernel, out, env)
        except (RuntimeError, subprocess.TimeoutExpired) as exc:
            row["error"] = str(exc)
            print(f"{kernel.title}: {exc}", flush=True)
            continue
        print(f"  {time.monotonic() - started:6.1f}s {kernel.title}: kbench-ci {row['kbench']}", flush=True)
        row["ncu"] = run_ncu(kernel, ncu, out, env)
        print(f"  {time.monotonic() - started:6.1f}s {kernel.title}: ncu {row['ncu']}", flush=True)
        row["cupti"] = run_cupti(kernel, out, env)
        print(f"  {time.monotonic() - started:6.1f}s {kernel.title}: CUPTI median {row['cupti'].get('median_us')} us "
              f"{row['cupti'].get('problem', '')}", flush=True)
        row["combined"] = combine(kernel, row["kbench"], row["ncu"], row["cupti"])
        row["wall_s"] = time.monotonic() - t0
    ordered = [rows[k.name] for k in selected]
    text = table(ordered)
    print()
    print(text)
    print(f"\nwall time {time.monotonic() - started:.0f} s")
    (out / "sol_truth.json").write_text(json.dumps(ordered, indent=1, default=str))
    (out / "sol_truth.txt").write_text(text + "\n")
    measured = [r for r in ordered if not r.get("skipped")]
    complete = all(not r.get("error") and r.get("combined", {}).get("independent") is not None for r in measured)
    return 0 if complete else 1


# --------------------------------------------------------------------------- --selftest

_HEADER = ('"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size",'
           '"Device","CC","Section Name","Metric Name","Metric Unit","Metric Value"')
_FILL = "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, std::array<char *, 1>>(int, T2, T3)"
_GEMM = ("void cutlass::device_kernel<cutlass::gemm::kernel::GemmUniversal<cute::tuple<int, int, int, int>, "
         "cutlass::gemm::collective::CollectiveMma<cutlass::gemm::MainloopSm90TmaGmmaWarpSpecializedCooperative<7, "
         "cute::tuple<cute::C<2>, cute::C<1>, cute::C<1>>, cutlass::gemm::KernelTmaWarpSpecializedCooperative>, "
         "cute::SM90_TMA_LOAD, cute::SM75_U32x4_LDSM_N, void, cute::identity>, void, void>>(T1::Params)")


def _row(launch: int, name: str, metric: str, unit: str, value: str) -> str:
    return (f'"{launch}","81234","python3","h200-node","{name}","1","7","(256, 1, 1)","(65536, 1, 1)","0","9.0",'
            f'"Command line profiler metrics","{metric}","{unit}","{value}"')


#: what `ncu --csv` printed around a probe run (units as ncu scales them without --print-units base)
NCU_SAMPLE = "\n".join([
    "==PROF== Connected to process 81234 (/opt/torch/.venv/bin/python3.12)",
    '==PROF== Profiling "vadd_kernel" - 0: 0%....50%....100% - 1 pass',
    '==PROF== Profiling "vadd_kernel" - 1: 0%....50%....100% - 1 pass',
    "==PROF== Disconnected from process 81234",
    "probe: 23 calls done",
    _HEADER,
    _row(0, "vadd_kernel", "dram__bytes_read.sum", "byte", "134,217,728"),
    _row(0, "vadd_kernel", "dram__bytes_write.sum", "byte", "67,108,864"),
    _row(0, "vadd_kernel", "gpu__time_duration.sum", "nsecond", "61,344"),
    _row(1, _FILL, "dram__bytes_read.sum", "Kbyte", "1.02"),
    _row(1, _FILL, "dram__bytes_write.sum", "Mbyte", "134.22"),
    _row(1, _FILL, "gpu__time_duration.sum", "usecond", "40.1"),
    _row(2, "vadd_kernel", "dram__bytes_read.sum", "Mbyte", "134.22"),
    _row(2, "vadd_kernel", "dram__bytes_write.sum", "Gbyte", "0.05"),
    _row(2, "vadd_kernel", "gpu__time_duration.sum", "usecond", "62.05"),
    _row(3, "vadd_kernel", "dram__bytes_read.sum", "Kbyte", "134,200.5"),
    _row(3, "vadd_kernel", "dram__bytes_write.sum", "byte", "60,000,000"),
    _row(3, "vadd_kernel", "gpu__time_duration.sum", "msecond", "0.0619"),
    _row(4, "vadd_kernel", "dram__bytes_read.sum", "byte", "134,300,000"),
    _row(4, "vadd_kernel", "dram__bytes_write.sum", "byte", "n/a"),
    _row(4, "vadd_kernel", "gpu__time_duration.sum", "nsecond", "62,500"),
    _row(5, _GEMM, "dram__bytes_read.sum", "byte", "71,303,168"),
    _row(5, _GEMM, "dram__bytes_write.sum", "byte", "8,388,608"),
    _row(5, _GEMM, "gpu__time_duration.sum", "usecond", "201.3"),
])


@dataclass(frozen=True)
class _Event:  # the fields of kbench_ci.measure.cupti.TraceEvent that spans_us reads
    name: str
    on_gpu: bool
    start_ns: int
    end_ns: int
    correlation: int


def _close(a: float | None, b: float, rel: float = 1e-9) -> bool:
    return a is not None and abs(a - b) <= rel * max(abs(b), 1.0)


def selftest() -> int:
    checks: list[tuple[str, bool, str]] = []

    def check(what: str, ok: bool, detail: Any) -> None:
        checks.append((what, ok, str(detail)))

    vadd = parse_ncu_csv(NCU_SAMPLE, KERNELS[0].regex)
    check("vadd launches found (fill kernel with commas in its name left out)", [x.id for x in vadd] == [0, 2, 3, 4],
          [x.id for x in vadd])
    by_id = {x.id: x for x in vadd}
    check("byte with thousands separators", _close(by_id[0].read_bytes, 134_217_728.0), by_id[0].read_bytes)
    check("Mbyte", _close(by_id[2].read_bytes, 134_220_000.0), by_id[2].read_bytes)
    check("Gbyte", _close(by_id[2].write_bytes, 50_000_000.0), by_id[2].write_bytes)
    check("Kbyte with separator and decimals", _close(by_id[3].read_bytes, 134_200_500.0), by_id[3].read_bytes)
    check("nsecond", _close(by_id[0].time_ns, 61_344.0), by_id[0].time_ns)
    check("usecond", _close(by_id[2].time_ns, 62_050.0), by_id[2].time_ns)
    check("msecond", _close(by_id[3].time_ns, 61_900.0), by_id[3].time_ns)
    check("n/a is no value (and no DRAM total)", by_id[4].write_bytes is None and by_id[4].dram_bytes is None, by_id[4])
    summary = ncu_summary(vadd, 1)  # drop launch 0 as a warm-up
    check("median DRAM bytes over launches 2, 3 (4 has no write)", _close(summary["dram_bytes"], (184_220_000 + 194_200_500) / 2),
          summary["dram_bytes"])
    check("median time (us)", _close(summary["time_us"], 62.05), summary["time_us"])
    gemm = parse_ncu_csv(NCU_SAMPLE, KERNELS[1].regex)
    check("CUTLASS kernel found by its demangled name", [x.id for x in gemm] == [5] and _close(gemm[0].dram_bytes, 79_691_776.0),
          [(x.id, x.dram_bytes) for x in gemm])
    check("CUTLASS regex matches ncu's function name", re.search(KERNELS[1].regex, "device_kernel") is not None, KERNELS[1].regex)
    try:
        metric_value("12", "furlong")
        check("unknown unit refused", False, "accepted")
    except ValueError as exc:
        check("unknown unit refused", True, exc)
    check("no table, no launches", parse_ncu_csv("==PROF== ERR_NVGPUCTRPERM", "vadd") == [], "[]")

    # CUPTI: per call, the span of the kernel's own launches after each hold; harness kernels and the
    # flush are not the kernel's; a CUTLASS name holding "Copy" still is.
    events = []
    for call, (start, gemm_name) in enumerate([(1_000, "cutlass::device_kernel<... DefaultCopy ...>"), (5_000, "softmax_kernel")]):
        base = 10 * call
        events += [_Event("elementwise_kernel<FillFunctor>", True, start, start + 100, base + 1),
                   _Event(HOLD, True, start + 200, start + 300, base + 2),
                   _Event(gemm_name, True, start + 400, start + 1_400, base + 3)]
        events += [_Event("cudaLaunchKernel", False, start + i, start + i + 1, base + i) for i in (1, 2, 3)]
    spans = spans_us(events, KERNELS[1].regex + "|softmax_kernel")
    check("CUPTI spans per call (us)", spans == [1.0, 1.0], spans)

    # The arithmetic, on a results.json variant as kbench-ci writes it.
    results = {"case": {"variants": [{
        "label": "solution", "status": "ok", "rounds_ms": [[0.070, 0.072, 0.071]], "notes": [],
        "speed_of_light": {"source": "inferred", "bytes": 201_326_592, "flops": None, "median_ms": 0.071,
                           "copy_bytes_per_s": 4.0e12, "matmul_flops_per_s": 4.0e14, "matmul_dtype": "float32", "floor_ms": 0.0402},
    }]}}
    kb = kbench_figures(results)
    check("kbench-ci's share = bytes / median / ceiling", _close(kb["share"], 201_326_592 / 71e-6 / 4.0e12), kb["share"])
    cu = {"median_us": 70.0, "slowdown_us": 3.5, "ceilings": {"copy_bytes_per_s": 3.9e12}}
    nc = {"dram_bytes": 190_000_000.0}
    combined = combine(KERNELS[0], kb, nc, cu)
    independent = 190_000_000 / 70e-6 / 4.0e12
    check("independent share uses results.json's ceiling, not the cache's", _close(combined["independent"], independent)
          and combined["ceiling_from"] == "results.json", combined)
    check("difference in points", _close(combined["points"], 100 * (kb["share"] - independent)), combined["points"])
    check("untraced time: CUPTI median less its tracing slowdown", _close(combined["untraced_us"], 66.5)
          and _close(combined["independent_untraced"], 190_000_000 / 66.5e-6 / 4.0e12), combined.get("independent_untraced"))
    without = combine(KERNELS[0], {k: v for k, v in kb.items() if k != "copy_bytes_per_s"}, nc, cu)
    check("ceilings cache when results.json has none", without["ceiling_from"] == "ceilings cache", without["ceiling_from"])

    print("ncu CSV sample parsed (vadd_kernel launches):")
    for launch in vadd:
        print(f"  id {launch.id}: read {launch.read_bytes} B, write {launch.write_bytes} B, time {launch.time_ns} ns")
    print(f"  summary after {1} warm-up: {summary}")
    rows = [{"name": "vadd", "title": KERNELS[0].title, "kbench": kb,
             "ncu": {**nc, "read_bytes": 130e6, "write_bytes": 60e6, "time_us": 71.2}, "cupti": cu, "combined": combined},
            {"name": "cutlass_gemm", "title": KERNELS[1].title, "skipped": "CUTLASS headers not found (selftest row)"}]
    print("\nthe table, on made-up figures:")
    print(table(rows))
    print()
    for what, ok, detail in checks:
        print(f"{'ok  ' if ok else 'FAIL'} {what}: {detail}")
    failed = sum(not ok for _, ok, _ in checks)
    print(f"\nselftest: {len(checks) - failed} of {len(checks)} checks passed")
    return 1 if failed else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=Path("/tmp/sol_truth"), help="results, ncu CSVs, bench folders (/tmp/sol_truth)")
    parser.add_argument("--only", default=None, help=f"kernels whose name holds this: {', '.join(k.name for k in KERNELS)}")
    parser.add_argument("--ncu", default=None, help="the ncu binary (default: PATH, then /opt/nvidia/nsight-compute/*/ncu)")
    parser.add_argument("--site", type=Path, default=Path("/tmp/site"),
                        help="a folder of wheels installed with --target (nvidia-cutlass), put last on the children's path")
    parser.add_argument("--selftest", action="store_true", help="parse a recorded ncu CSV sample and check the arithmetic (no GPU)")
    parser.add_argument("--probe", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--mode", choices=("ncu", "cupti"), default="cupti", help=argparse.SUPPRESS)
    parser.add_argument("--result", type=Path, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.selftest:
        return selftest()
    if args.probe:
        return run_probe(args.probe, args.mode, args.result)
    return main_run(args)


if __name__ == "__main__":
    raise SystemExit(main())
