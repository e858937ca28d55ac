"""Why does a 5 us kernel read a few percent apart in two side workers of one judge (A/A under
``--isolation judge``: cvadd 2^20 read -9% and +4% in two runs on the H200)? Does the bias follow
the process (its CUDA context) or the buffer (its place in memory)?

A judge process hands calls over, as kbench_ci.judge.handoff does (hold, stage, flush, go word,
the worker's events, done word), to W worker processes, each of which maps all A arenas (a probe:
the product never lends an arena to two sides). Every round each worker times K calls on one
arena; with ``--rotate`` worker w uses arena (w + round) % A, so every worker meets every arena.
Printed: the median time per worker, per arena, and per (worker, arena); then the same with
fresh worker processes, ``--repeats`` times. A bias that follows the worker row is the
process's; one that follows the arena column is the placement's.

``--variants plain,touch,copy,settle,both`` takes what each call does between the go and its start
event in turn inside the same workers (nothing; a read of one byte per 64 KiB of its arena by a
sum, as the product did until 2026-12-05; the same bytes by an elementwise copy, as it does now;
a spin of ``--settle-us``; sum and spin), so a variant that takes the workers' spread away shows it in
the same processes that keep it under another. ``--pin-numa`` runs the workers on the GPU's
NUMA node (a stream's commands live in host memory; the probe prints each worker's CPU and node).
``--streams S`` times each worker's calls on S streams of its own in turn (its current stream and
S-1 new ones), and prints the median per (worker, stream): a spread between one process's streams
as wide as between the workers says the bias is the stream's (its hardware channel), which more
streams per side, drawn per round, would average; none says it is the context's.
``--sizes 18,20,22`` takes the add at 2^18, 2^20 and 2^22 floats in turn (a round each) in the
same workers and prints each worker's offset from the median in us too: an offset the same in
us at every size is a fixed cost of the process's call (which a trusted calibration call before
any user code loads could measure and take out); one the same in percent is a slower process.
Each variant's lead-in (from an event after the go to the start event) is printed beside it.
``warm`` runs the timed kernel itself on 256 floats of the worker's own, then the copy: a
diagnosis (a side's kernel cannot be run before its start event in the product: that is work in
the lead-in), saying whether what is cold is the kernel's own module.
``empty`` times torch's empty kernel (a spin of 0 cycles) after the copy instead of the add, in
the same workers: if a worker's offset on it follows its offset on the add, the process's cost is
one of any call it makes, which a trusted call of each worker could measure and take out.
``--kernel so`` times the add of a CUDA C++ library of its own (nvcc, loaded with ctypes, launched
with ``<<<>>>`` on the default stream), as a suite's cuda-cpp kernel is, instead of torch's add:
in a compare, that kernel's two processes still read 6-8% apart with the page reads (H100,
2026-12-05), where torch's add did not; is it the kernel's own module (its code's translations,
which the page reads do not bring in)?

    python3 scripts/probes/process_bias_probe.py --workers 2 --arenas 4 --rounds 40 --repeats 3 --rotate
    python3 scripts/probes/process_bias_probe.py --workers 2 --rounds 60 --repeats 4 --rotate --variants plain,touch,settle,both
    python3 scripts/probes/process_bias_probe.py --workers 2 --rounds 60 --repeats 3 --rotate --streams 4
    python3 scripts/probes/process_bias_probe.py --workers 2 --rounds 60 --repeats 3 --rotate --sizes 18,20,22
    python3 scripts/probes/process_bias_probe.py --workers 2 --rounds 60 --repeats 3 --rotate --kernel so --variants plain,copy,settle
"""

from __future__ import annotations

import argparse
import ctypes
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import torch
import torch.multiprocessing as mp

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from kbench_ci.judge.clock import GpuClock  # noqa: E402
from kbench_ci.wire.streamops import StreamOps  # noqa: E402

MAILBOX_BYTES = 256


def _views(arena: torch.Tensor, n: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    f = arena[: 3 * 4 * n].view(torch.float32)
    return f[:n], f[n : 2 * n], f[2 * n : 3 * n]


VARIANTS = ("plain", "touch", "copy", "settle", "both", "warm", "empty")

# The compare's cvadd (scripts/aa_and_regression.py), a library of its own like a suite's cuda-cpp kernel
ADD_SO = """
__global__ void add_kernel(const float* x, const float* y, float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = x[i] + y[i];
}
extern "C" void solve(const float* x, const float* y, float* out, int n) {
    add_kernel<<<(n + 255) / 256, 256>>>(x, y, out, n);
}
"""


def build_add_so(folder: Path) -> Path:
    nvcc = shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc"
    major, minor = torch.cuda.get_device_capability(0)
    source, library = folder / "add.cu", folder / "add.so"
    source.write_text(ADD_SO)
    subprocess.run([nvcc, "-shared", "-O3", "-Xcompiler", "-fPIC", f"-arch=sm_{major}{minor}", "-o", str(library), str(source)],
                   check=True)
    return library


def _where() -> str:
    """The CPU this process runs on now and its NUMA node (a CUDA stream's commands live in host
    memory of some node: a process on the GPU's far node may fetch them slower)."""
    fields = Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()
    cpu = int(fields[36])
    nodes = [p.name for p in Path(f"/sys/devices/system/cpu/cpu{cpu}").glob("node*")]
    return f"cpu {cpu} {nodes[0] if nodes else 'node?'}"


def worker(conn, arenas: list[torch.Tensor], mailbox: torch.Tensor, ns: list[int], own: bool = False,  # type: ignore[no-untyped-def]
           settle_us: float = 5.0, pin: list[int] | None = None, streams: int = 1, library: str | None = None) -> None:
    if pin:
        os.sched_setaffinity(0, pin)
    ops = StreamOps()
    go, done = mailbox.data_ptr(), mailbox.data_ptr() + 64
    own_streams = [torch.cuda.current_stream()] + [torch.cuda.Stream() for _ in range(streams - 1)]
    if own:  # buffers of this process's own (no IPC mapping): does the bias follow the mapping?
        arenas = [torch.zeros(3 * 4 * max(ns) + 4096, dtype=torch.uint8, device="cuda") for _ in arenas]
    views = {(index, size): _views(arena, n) for index, arena in enumerate(arenas) for size, n in enumerate(ns)}
    # touch: one byte of every 64 KiB of the call's arena read after the go and before the start
    # event: if the process's bias is the GPU's address translation coming back cold after the
    # context switch, this takes it out of the timed interval. settle: a spin of settle_us after
    # the go, so the GPU's front end has fetched the start event and the launch (commands in this
    # process's host memory) before the start event runs, as a held stream has in one process.
    sparse = [arena.view(torch.uint8)[::65536] for arena in arenas]
    copies = [torch.empty(pages.shape, dtype=torch.uint8, device="cuda") for pages in sparse]
    scratch = torch.empty((), dtype=torch.int64, device="cuda")
    if library is None:
        def add(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor) -> None:
            torch.add(a, b, out=c)
    else:
        solve = ctypes.CDLL(library).solve
        solve.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int]

        def add(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor) -> None:
            solve(a.data_ptr(), b.data_ptr(), c.data_ptr(), a.numel())
    # warm: the same kernel on 256 floats of this process's own, then the copy: it brings in what
    # the kernel's own module needs (its code's translations, its instructions) and next to no data
    tiny = [torch.zeros(256, dtype=torch.float32, device="cuda") for _ in range(3)]
    for a, b, c in views.values():  # load the kernel and map every arena before anything is timed
        add(a, b, c)
    torch.cuda._sleep(1000)
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    torch.cuda._sleep(1_000_000)
    end.record()
    end.synchronize()
    cycles_per_us = 1_000_000 / (start.elapsed_time(end) * 1e3)
    # Where this process mapped each arena: an IPC mapping's address is the importer's choice,
    # and one not aligned to 2 MiB cannot use the GPU's large pages (a suspect for the bias)
    conn.send(([arena.data_ptr() for arena in arenas], _where()))
    while True:
        message = conn.recv()
        if message is None:
            conn.send(_where())
            return
        index, token, variant, stream_index, size = message
        stream = own_streams[stream_index]
        a, b, c = views[index, size]
        led = torch.cuda.Event(enable_timing=True)
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        ops.wait_equal(stream.cuda_stream, go, token)
        with torch.cuda.stream(stream):
            led.record(stream)
            if variant in ("touch", "both"):
                torch.sum(sparse[index], dim=0, out=scratch)
            if variant == "warm":
                add(*tiny)
            if variant in ("copy", "warm"):
                copies[index].copy_(sparse[index])
            if variant in ("settle", "both"):
                torch.cuda._sleep(int(settle_us * cycles_per_us))
            if variant == "empty":
                copies[index].copy_(sparse[index])
            start.record(stream)
            if variant == "empty":
                torch.cuda._sleep(0)
            else:
                add(a, b, c)
            end.record(stream)
        ops.write(stream.cuda_stream, done, token)
        end.synchronize()
        conn.send((start.elapsed_time(end) * 1e3, led.elapsed_time(start) * 1e3))


def _gpu_local_cpus() -> list[int] | None:
    """The CPUs of the GPU's own NUMA node (sysfs), None where it does not say."""
    props = torch.cuda.get_device_properties(0)
    try:
        address = f"{props.pci_domain_id:04x}:{props.pci_bus_id:02x}:{props.pci_device_id:02x}.0"
    except AttributeError:  # an older torch
        return None
    for device in [Path(f"/sys/bus/pci/devices/{address}")]:
        try:
            node = int((device / "numa_node").read_text())
            text = Path(f"/sys/devices/system/node/node{node}/cpulist").read_text().strip()
        except (OSError, ValueError):
            continue
        cpus: list[int] = []
        for part in text.split(","):
            low, _, high = part.partition("-")
            cpus.extend(range(int(low), int(high or low) + 1))
        return cpus
    return None


def one_repeat(args: argparse.Namespace, clock: GpuClock, arenas: list[torch.Tensor], flush: torch.Tensor,
               token: list[int], leads: dict[str, list[float]]) -> dict[tuple[int, int, str, int], list[float]]:
    ctx = mp.get_context("spawn")
    mailboxes = []
    for _ in range(args.workers):
        pool = torch.cuda.MemPool()
        with torch.cuda.use_mem_pool(pool):
            mailboxes.append((torch.zeros(MAILBOX_BYTES, dtype=torch.uint8, device="cuda"), pool))
    pipes, processes = [], []
    for w in range(args.workers):
        parent, child = ctx.Pipe()
        process = ctx.Process(target=worker, args=(child, arenas, mailboxes[w][0], args.ns, args.own_buffers, args.settle_us,
                                                   args.pin, args.streams, args.library))
        process.start()
        pipes.append(parent)
        processes.append(process)
    mapped = [pipe.recv() for pipe in pipes]
    for w, (pointers, where) in enumerate(mapped):
        print(f"  worker {w} ({where}) mapped the arenas at " + ", ".join(f"{p:#x} (mod 2 MiB {p % (2 << 20):#x})" for p in pointers))
    print("  the judge's own: " + ", ".join(f"{a.data_ptr():#x}" for a in arenas))
    sources = [torch.randn(3 * max(args.ns), device="cuda").view(torch.uint8) for _ in range(4)]
    times: dict[tuple[int, int, str, int], list[float]] = {}
    rng = random.Random()
    for round_index in range(args.rounds):
        order = list(range(args.workers))
        rng.shuffle(order)
        for w in order:
            arena = (w + round_index) % len(arenas) if args.rotate else w % len(arenas)
            size = round_index % len(args.ns)  # a round's calls all of one size
            a, b, c = _views(arenas[arena], args.ns[size])
            go = mailboxes[w][0].data_ptr()
            for call in range(args.calls):
                token[0] += 1
                # every variant in every round and at every call position, in the same workers
                variant = args.variants[(round_index + call) % len(args.variants)]
                condition = variant if len(args.ns) == 1 else f"{variant}, n={args.ns[size]}"
                stream_index = (round_index + call // len(args.variants)) % args.streams
                pipes[w].send((arena, token[0], variant, stream_index, size))
                x, y, _ = _views(sources[rng.randrange(len(sources))], args.ns[size])
                with torch.cuda.stream(clock.stream):
                    clock.hold(args.hold_us)
                    clock.stamp()
                    clock.write_token(go + 64, 0)
                    a.copy_(x)
                    b.copy_(y)
                    c.fill_(float("nan"))
                    flush.zero_()
                    clock.stamp()
                    clock.write_token(go, token[0])
                    clock.wait_token(go + 64, token[0])
                    clock.stamp()
                    clock.stamp()
                own_us, lead_us = pipes[w].recv()
                clock.read()
                if call >= args.discard:
                    times.setdefault((w, arena, condition, stream_index), []).append(own_us)
                    leads.setdefault(condition, []).append(lead_us)
    for w, pipe in enumerate(pipes):
        pipe.send(None)
        print(f"  worker {w} ended on {pipe.recv()}")
    for process in processes:
        process.join()
    return times


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--arenas", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=40)
    parser.add_argument("--calls", type=int, default=6)
    parser.add_argument("--discard", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--n", type=int, default=1 << 20)
    parser.add_argument("--sizes", default="",
                        help="comma list of powers of two (18,20,22): the add at each of these sizes in turn, a round each; "
                             "overrides --n")
    parser.add_argument("--hold-us", type=float, default=400.0)
    parser.add_argument("--rotate", action="store_true")
    parser.add_argument("--touch", action="store_true", help="as --variants touch")
    parser.add_argument("--variants", default="plain",
                        help=f"comma list of {', '.join(VARIANTS)}: what each call does between the go and its start event, "
                             "taken in turn inside the same workers")
    parser.add_argument("--settle-us", type=float, default=5.0, help="the spin of the settle variants (us)")
    parser.add_argument("--streams", type=int, default=1,
                        help="streams of its own each worker times its calls on, in turn (is the bias the stream's channel?)")
    parser.add_argument("--kernel", choices=("torch", "so"), default="torch",
                        help="torch's add, or the add of a CUDA C++ library of its own (nvcc; a suite's cuda-cpp kernel)")
    parser.add_argument("--pin-numa", action="store_true", help="every worker on the CPUs of the GPU's NUMA node")
    parser.add_argument("--own-buffers", action="store_true",
                        help="each worker computes on buffers of its own, not the judge's arenas (the judge still stages and flushes)")
    args = parser.parse_args()
    args.variants = ["touch"] if args.touch else [v.strip() for v in args.variants.split(",")]
    args.ns = [1 << int(k) for k in args.sizes.split(",")] if args.sizes.strip() else [args.n]
    if not set(args.variants) <= set(VARIANTS):
        parser.error(f"--variants: each of {', '.join(VARIANTS)}")
    if args.kernel == "so" and args.streams != 1:
        parser.error("--kernel so launches on the default stream: --streams 1 only")
    torch.cuda.set_device(0)
    args.library = str(build_add_so(Path(tempfile.mkdtemp(prefix="bias-so-")))) if args.kernel == "so" else None
    args.pin = _gpu_local_cpus() if args.pin_numa else None
    nodes = sorted(p.name for p in Path("/sys/devices/system/node").glob("node[0-9]*"))
    print(f"NUMA nodes: {', '.join(nodes) or 'none listed'}; the GPU's local CPUs: {_gpu_local_cpus()}; pinned: {args.pin}")
    clock = GpuClock(torch.device("cuda:0"), capacity=2)
    arenas, pools = [], []
    for _ in range(args.arenas):
        pool = torch.cuda.MemPool()
        with torch.cuda.use_mem_pool(pool):
            arenas.append(torch.zeros(3 * 4 * max(args.ns) + 4096, dtype=torch.uint8, device="cuda"))
        pools.append(pool)
    flush = torch.empty(2 * torch.cuda.get_device_properties(0).L2_cache_size, dtype=torch.uint8, device="cuda")
    token = [0]
    print(f"{'the library' if args.library else 'torch'}'s vector add of {', '.join(map(str, args.ns))} floats; {args.workers} workers x {args.arenas} arenas; {args.rounds} rounds of {args.calls} "
          f"calls; rotate={args.rotate}; own buffers={args.own_buffers}; variants={','.join(args.variants)}; streams={args.streams} "
          f"(settle {args.settle_us:g} us); medians in us")
    for repeat in range(args.repeats):
        leads: dict[str, list[float]] = {}
        times = one_repeat(args, clock, arenas, flush, token, leads)
        for variant in dict.fromkeys(key[2] for key in times):  # each condition: a variant (at a size)
            mine: dict[tuple[int, int], list[float]] = {}  # by (worker, arena)
            by_stream: dict[tuple[int, int], list[float]] = {}  # by (worker, stream)
            for (w, a, v, si), ts in times.items():
                if v == variant:
                    mine.setdefault((w, a), []).extend(ts)
                    by_stream.setdefault((w, si), []).extend(ts)
            everything = statistics.median(t for ts in mine.values() for t in ts)
            print(f"repeat {repeat + 1}, {variant}: all {everything:.3f} (lead-in {statistics.median(leads[variant]):.2f})")
            medians = []
            for w in range(args.workers):
                own = [t for (ww, _), ts in mine.items() if ww == w for t in ts]
                medians.append(statistics.median(own))
                cells = "  ".join(f"a{a}: {statistics.median(ts):.3f}" for (ww, a), ts in sorted(mine.items()) if ww == w)
                print(f"  worker {w}: {medians[-1]:.3f} ({medians[-1] / everything - 1:+.2%}, "
                      f"{(medians[-1] - everything) * 1e3:+.0f} ns)   {cells}")
                if args.streams > 1:
                    cells = "  ".join(f"s{si}: {statistics.median(ts):.3f} ({statistics.median(ts) / everything - 1:+.2%})"
                                      for (ww, si), ts in sorted(by_stream.items()) if ww == w)
                    print(f"    streams: {cells}")
            if len(medians) > 1:
                print(f"  worker spread ({variant}): {(max(medians) / min(medians) - 1):.2%}")
            for a in range(args.arenas):
                theirs = [t for (_, aa), ts in mine.items() if aa == a for t in ts]
                if theirs:
                    print(f"  arena {a}: {statistics.median(theirs):.3f} ({statistics.median(theirs) / everything - 1:+.2%})")


if __name__ == "__main__":
    main()
