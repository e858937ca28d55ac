"""Issue 28 probe: does CUPTI's tracing change the event pair of a short kernel's timed call?

For a kernel, in one process, untraced and traced blocks of calls made as the timer makes them
(staging, flush, hold, events, a marker after the end event when traced) alternate; per block the
median event time, and for traced blocks CUPTI's span (kbench-ci's own ``call_spans``), the gap on
the GPU from the hold kernel's end to the call's first kernel, and how many calls were launched
late (the launch API returned after the hold had ended, so host time entered the event pair).
Then kbench-ci's own calibration (``measure_offsets``) and ``kbench-ci bench`` on the same kernel,
whose timing description carries its calibration's CUPTI span and event median.

    python3 scripts/probes/calibration_probe.py      # GPU machine, repo root
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

from cupti_truth import T, kernel_call  # noqa: E402

from kbench_ci.measure import calibration  # noqa: E402
from kbench_ci.measure.cupti import ActivityTrace  # noqa: E402
from kbench_ci.measure.escape import make_marker  # noqa: E402
from kbench_ci.measure.timing import CudaEventTimer  # noqa: E402

BLOCK = 50


def late_and_gaps(events, calls: int) -> tuple[int, float]:
    """Calls whose kernel launch returned after their hold kernel ended; median GPU gap (us)
    from the hold's end to the call's first activity."""
    launches = {e.correlation: e for e in events if not e.on_gpu}
    gpu = sorted((e for e in events if e.on_gpu and e.correlation in launches), key=lambda e: e.start_ns)
    late, gaps = 0, []
    for index, event in enumerate(gpu):
        if "spin_kernel" not in event.name or index + 1 >= len(gpu):
            continue
        following = gpu[index + 1]
        if "spin_kernel" in following.name or calibration.MARKER_NAME in following.name:
            continue
        gaps.append((following.start_ns - event.end_ns) / 1e3)
        if launches[following.correlation].end_ns > event.end_ns:
            late += 1
    return late, statistics.median(gaps) if gaps else float("nan")


def main() -> int:
    device = torch.device("cuda", 0)
    subprocess.run([sys.executable, "-m", "kbench_ci", "build", str(T / "vadd.cu")], cwd=ROOT, check=True, capture_output=True)
    marker = make_marker(device)
    for n, warm in ((2**20, False), (2**20, True), (2**24, False)):
        name = f"vadd 2^{n.bit_length() - 1} {'warm' if warm else 'cold'}"
        call, stage = kernel_call(T / "vadd.cu", T / "vadd_ref.py", "cuda-cpp", {"N": n}, "solution", device)
        timer = CudaEventTimer(device, flush_l2=not warm)
        timer.warm_up(call, 20)
        overhead = timer.calibrate_overhead()
        timer.warm_up(call, 5)
        print(f"== {name}: hold {timer.hold_us:.1f} us, empty-kernel event overhead {overhead * 1e3:.2f} us", flush=True)
        untraced_all, traced_all, spans_all = [], [], []
        for block in range(4):
            untraced = timer.measure_raw(call, BLOCK, stage)
            with ActivityTrace() as trace:
                traced = timer.measure_raw(call, BLOCK, calibration._MarkAfter(stage, marker))
                torch.cuda.synchronize(device)
            traced_calls = calibration.call_spans(trace.events, BLOCK)
            spans = [c.span_ns / 1e3 for c in traced_calls]
            holds = [c.hold_ns / 1e3 for c in traced_calls]
            late, gap = late_and_gaps(trace.events, BLOCK)
            untraced_all += untraced
            traced_all += traced
            spans_all += spans
            print(f"  block {block}: events untraced {statistics.median(untraced) * 1e3:.2f} us, traced "
                  f"{statistics.median(traced) * 1e3:.2f} us, CUPTI span {statistics.median(spans):.2f} us, "
                  f"hold end -> first kernel {gap:.2f} us, late launches {late}/{BLOCK}, hold ran {statistics.median(holds):.1f} us "
                  f"(first {holds[0]:.1f}, max {max(holds):.1f})", flush=True)
            stage.mismatches.clear()
        e_u, e_t, span = (statistics.median(x) for x in (untraced_all, traced_all, spans_all))
        e_u *= 1e3
        e_t *= 1e3
        print(f"  all: untraced {e_u:.2f}, traced {e_t:.2f} (trace adds {e_t - e_u:+.2f} us), span {span:.2f}; "
              f"untraced less (traced - span) = {e_u - (e_t - span):.2f} us", flush=True)
        for idle_s in (0.0, 0.5):
            # As in the worker: host work (the final verdict) leaves the GPU idle before the calibration.
            time.sleep(idle_s)
            offsets = calibration.measure_offsets(timer, {"v": calibration.Subject(call, lambda calls, stage=stage: stage)})
            if isinstance(offsets, str):
                print(f"  measure_offsets: {offsets}")
                continue
            reading = offsets["v"]
            print(f"  measure_offsets after {idle_s} s idle: offset {reading.offset_ms * 1e3:.2f} us, span {reading.span_ms * 1e3:.2f}, "
                  f"events {reading.event_ms * 1e3:.2f}, {reading.calls} calls kept, {reading.late} late, {reading.slow} slow; "
                  f"untraced less this offset = {e_u - reading.offset_ms * 1e3:.2f} us", flush=True)
        held = timer.hold_us
        for factor in (0.5, 1.0, 2.0, 4.0):
            timer.hold_us = max(held * factor, 20.0)
            longer = statistics.median(timer.measure_raw(call, 100, stage)) * 1e3
            print(f"  untraced at a hold of {timer.hold_us:.0f} us: events {longer:.2f} us", flush=True)
        timer.hold_us = held
        stage.mismatches.clear()
        with tempfile.TemporaryDirectory() as out:
            command = [sys.executable, "-m", "kbench_ci", "bench", str(T / "vadd.cu"), "--implementation=cuda-cpp",
                       f"--ref={T / 'vadd_ref.py'}", f"--output-dir={out}", "--num-trials=100", f"--N={n}",
                       *(["--no-flush-l2"] if warm else [])]
            done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=False)
            results = Path(out) / "results.json"
            if not results.exists():
                print(f"  bench failed: {done.stdout[-1500:]} {done.stderr[-1500:]}")
                continue
            data = json.loads(results.read_text())
            case = data["case"]
            variant = next(v for v in case["variants"] if v["label"] == "solution")
            median = statistics.median(s for r in variant["rounds_ms"] for s in r) * 1e3
            shift = (variant.get("timing_shift_ms") or 0.0) * 1e3
            raw = median + shift + (case.get("event_overhead_ms") or 0.0) * 1e3
            print(f"  kbench-ci bench: median {median:.2f} us (raw events {raw:.2f} us); "
                  f"timing: {json.dumps(case.get('timing') or case.get('method') or '')[:600]}", flush=True)
            for key, value in case.items():
                if isinstance(value, str) and "CUPTI" in value:
                    print(f"    {key}: {value[:700]}")
        del call, stage
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
