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

    python3 scripts/probes/process_bias_probe.py --workers 2 --arenas 4 --rounds 40 --repeats 3 --rotate
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
from pathlib import Path

import torch
import torch.multiprocessing as mp

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from kbench_ci.judge.clock import GpuClock  # noqa: E402
from kbench_ci.measure.streamops import StreamOps  # noqa: E402

MAILBOX_BYTES = 256


def _views(arena: torch.Tensor, n: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    f = arena[: 3 * 4 * n].view(torch.float32)
    return f[:n], f[n : 2 * n], f[2 * n : 3 * n]


def worker(conn, arenas: list[torch.Tensor], mailbox: torch.Tensor, n: int, own: bool = False,  # type: ignore[no-untyped-def]
           touch: bool = False) -> None:
    ops = StreamOps()
    go, done = mailbox.data_ptr(), mailbox.data_ptr() + 64
    stream = torch.cuda.current_stream()
    if own:  # buffers of this process's own (no IPC mapping): does the bias follow the mapping?
        arenas = [torch.zeros(3 * 4 * n + 4096, dtype=torch.uint8, device="cuda") for _ in arenas]
    views = [_views(arena, n) for arena in arenas]
    # --touch: one float of every 64 KiB of a call's buffers read after the go and before the
    # start event (~200 cache lines): if the process's bias is the GPU's address translation
    # coming back cold after the context switch, this takes it out of the timed interval
    sparse = [[view[::16384] for view in three] for three in views]
    scratch = torch.empty(1, device="cuda")
    for a, b, c in views:  # load the kernel and map every arena before anything is timed
        torch.add(a, b, out=c)
    torch.cuda.synchronize()
    # Where this process mapped each arena: an IPC mapping's address is the importer's choice,
    # and one not aligned to 2 MiB cannot use the GPU's large pages (a suspect for the bias)
    conn.send([arena.data_ptr() for arena in arenas])
    while True:
        message = conn.recv()
        if message is None:
            return
        index, token = message
        a, b, c = views[index]
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        ops.wait_equal(stream.cuda_stream, go, token)
        if touch:
            for view in sparse[index]:
                torch.sum(view, dim=0, keepdim=True, out=scratch)
        start.record(stream)
        torch.add(a, b, out=c)
        end.record(stream)
        ops.write(stream.cuda_stream, done, token)
        end.synchronize()
        conn.send(start.elapsed_time(end) * 1e3)


def one_repeat(args: argparse.Namespace, clock: GpuClock, arenas: list[torch.Tensor], flush: torch.Tensor,
               token: list[int]) -> dict[tuple[int, int], list[float]]:
    ctx = mp.get_context("spawn")
    mailboxes = []
    for _ in range(args.workers):
        pool = torch.cuda.MemPool()
        with torch.cuda.use_mem_pool(pool):
            mailboxes.append((torch.zeros(MAILBOX_BYTES, dtype=torch.uint8, device="cuda"), pool))
    pipes, processes = [], []
    for w in range(args.workers):
        parent, child = ctx.Pipe()
        process = ctx.Process(target=worker, args=(child, arenas, mailboxes[w][0], args.n, args.own_buffers, args.touch))
        process.start()
        pipes.append(parent)
        processes.append(process)
    mapped = [pipe.recv() for pipe in pipes]
    for w, pointers in enumerate(mapped):
        print(f"  worker {w} mapped the arenas at " + ", ".join(f"{p:#x} (mod 2 MiB {p % (2 << 20):#x})" for p in pointers))
    print("  the judge's own: " + ", ".join(f"{a.data_ptr():#x}" for a in arenas))
    source = [_views(torch.randn(3 * args.n, device="cuda").view(torch.uint8), args.n) for _ in range(4)]
    times: dict[tuple[int, int], list[float]] = {}
    rng = random.Random()
    for round_index in range(args.rounds):
        order = list(range(args.workers))
        rng.shuffle(order)
        for w in order:
            arena = (w + round_index) % len(arenas) if args.rotate else w % len(arenas)
            a, b, c = _views(arenas[arena], args.n)
            go = mailboxes[w][0].data_ptr()
            for call in range(args.calls):
                token[0] += 1
                pipes[w].send((arena, token[0]))
                x, y, _ = source[rng.randrange(len(source))]
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
                own_us = pipes[w].recv()
                clock.read()
                if call >= args.discard:
                    times.setdefault((w, arena), []).append(own_us)
    for pipe in pipes:
        pipe.send(None)
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
    parser.add_argument("--hold-us", type=float, default=400.0)
    parser.add_argument("--rotate", action="store_true")
    parser.add_argument("--touch", action="store_true",
                        help="each call first reads one float per 64 KiB of its buffers, before its start event")
    parser.add_argument("--own-buffers", action="store_true",
                        help="each worker computes on buffers of its own, not the judge's arenas (the judge still stages and flushes)")
    args = parser.parse_args()
    torch.cuda.set_device(0)
    clock = GpuClock(torch.device("cuda:0"), capacity=2)
    arenas, pools = [], []
    for _ in range(args.arenas):
        pool = torch.cuda.MemPool()
        with torch.cuda.use_mem_pool(pool):
            arenas.append(torch.zeros(3 * 4 * args.n + 4096, dtype=torch.uint8, device="cuda"))
        pools.append(pool)
    flush = torch.empty(2 * torch.cuda.get_device_properties(0).L2_cache_size, dtype=torch.uint8, device="cuda")
    token = [0]
    print(f"vector add of {args.n} floats; {args.workers} workers x {args.arenas} arenas; {args.rounds} rounds of {args.calls} "
          f"calls; rotate={args.rotate}; own buffers={args.own_buffers}; touch={args.touch}; medians in us")
    for repeat in range(args.repeats):
        times = one_repeat(args, clock, arenas, flush, token)
        everything = statistics.median(t for ts in times.values() for t in ts)
        print(f"repeat {repeat + 1}: all {everything:.3f}")
        for w in range(args.workers):
            mine = [t for (ww, _), ts in times.items() if ww == w for t in ts]
            cells = "  ".join(f"a{a}: {statistics.median(ts):.3f}" for (ww, a), ts in sorted(times.items()) if ww == w)
            print(f"  worker {w}: {statistics.median(mine):.3f} ({statistics.median(mine) / everything - 1:+.2%})   {cells}")
        for a in range(args.arenas):
            theirs = [t for (_, aa), ts in times.items() if aa == a for t in ts]
            if theirs:
                print(f"  arena {a}: {statistics.median(theirs):.3f} ({statistics.median(theirs) / everything - 1:+.2%})")


if __name__ == "__main__":
    main()
