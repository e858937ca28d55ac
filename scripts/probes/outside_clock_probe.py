"""Spike for the judge's outside clock (issue 38), on a GPU: does the design hold, and what size
of lie can it see?

A judge process and one worker process (torch.multiprocessing, spawn). Per call the judge
enqueues on its own stream: hold | stamp0 | stage, poison, flush | stamp1 | go-event |
wait-for-token | stamp2 | snapshot | stamp3, then asks the worker, which waits for the go-event,
times its call with its own events and writes the token. Printed per kernel and behaviour:
the worker's reported time, the judge's span, their gap (p10/p50/p90), the judge's own pre and
post segments, the share of calls whose snapshot matched, and the host time per call.

    python3 scripts/probes/outside_clock_probe.py --calls 200
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch
import torch.multiprocessing as mp

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from kbench_ci.judge.clock import GpuClock, spin_rate  # noqa: E402

ARENA_BYTES = 256 << 20
MAILBOX = ARENA_BYTES
SPINS_US = {"spin8": 8, "spin54": 54, "spin185": 185}


def views(arena: torch.Tensor, kind: str) -> dict[str, torch.Tensor]:
    if kind.startswith("vadd"):
        n = 1 << int(kind[4:])
        f = arena[: 3 * 4 * n].view(torch.float32)
        return {"a": f[:n], "b": f[n : 2 * n], "c": f[2 * n : 3 * n]}
    if kind == "mm4096":
        n = 4096 * 4096
        h = arena[: 3 * 2 * n].view(torch.float16)
        return {"a": h[:n].view(4096, 4096), "b": h[n : 2 * n].view(4096, 4096), "c": h[2 * n : 3 * n].view(4096, 4096)}
    return {}


def run(kind: str, v: dict[str, torch.Tensor], rate: float) -> None:
    if kind in SPINS_US:
        torch.cuda._sleep(int(SPINS_US[kind] * rate))
    elif kind.startswith("vadd"):
        torch.add(v["a"], v["b"], out=v["c"])
    else:
        torch.matmul(v["a"], v["b"], out=v["c"])


class ValueGo:
    """The go as a 32-bit value the worker's stream waits for (instead of an IPC event)."""

    def __init__(self, address: int) -> None:
        from kbench_ci.wire.streamops import StreamOps

        self.ops = StreamOps()
        self.address = address
        self.token = 0

    def wait(self, stream: torch.cuda.Stream) -> None:
        self.ops.wait_equal(stream.cuda_stream, self.address, self.token)


def worker(conn, arena: torch.Tensor, go_event: torch.cuda.Event, go_kind: str) -> None:  # type: ignore[no-untyped-def]
    rate = spin_rate(torch.device('cuda'))
    mailbox = arena[MAILBOX : MAILBOX + 4].view(torch.int32)
    value_go = ValueGo(arena[MAILBOX + 64 :].data_ptr()) if go_kind == "value" else None
    side = torch.cuda.Stream()
    main = torch.cuda.current_stream()

    def wait_go(stream: torch.cuda.Stream) -> None:
        if value_go is not None:
            value_go.wait(stream)
        else:
            stream.wait_event(go_event)
    while True:
        msg = conn.recv()
        if msg is None:
            return
        kind, cheat, token = msg
        if value_go is not None:
            value_go.token = token
        v = views(arena, kind)
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        t0 = time.perf_counter()
        if cheat == "prestream":  # its work on another stream at once, before the judge's go
            with torch.cuda.stream(side):
                run(kind, v, rate)
            done = torch.cuda.Event()
            done.record(side)
            wait_go(main)
            start.record(main)
            main.wait_event(done)
            end.record(main)
        elif cheat == "late":  # its work after its own end event, on another stream
            wait_go(main)
            start.record(main)
            end.record(main)
            side.wait_event(end)
            with torch.cuda.stream(side):
                run(kind, v, rate)
        elif cheat == "prefetch":  # reads its inputs into L2 before its start event
            wait_go(main)
            if "a" in v:
                v["a"].sum()
                v["b"].sum()
            start.record(main)
            run(kind, v, rate)
            end.record(main)
        else:
            wait_go(main)
            start.record(main)
            run(kind, v, rate)
            end.record(main)
        mailbox.fill_(token)
        enqueue_us = (time.perf_counter() - t0) * 1e6
        end.synchronize()
        if cheat == "late":
            side.synchronize()
        ms = start.elapsed_time(end)
        conn.send((ms / 2 if cheat == "halve" else ms, enqueue_us))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--hold-us", type=float, default=300.0)
    parser.add_argument("--kinds", default="spin8,spin54,spin185,vadd20,vadd22,vadd24,mm4096")
    parser.add_argument("--cheats", default="honest,halve,prestream,late,prefetch")
    parser.add_argument("--go", choices=("event", "value"), default="event")
    args = parser.parse_args()
    device = torch.device("cuda:0")
    torch.cuda.set_device(device)
    clock = GpuClock(device, capacity=4)
    pool = torch.cuda.MemPool()
    with torch.cuda.use_mem_pool(pool):
        arena = torch.zeros(ARENA_BYTES + 512, dtype=torch.uint8, device=device)
    mailbox = arena[MAILBOX : MAILBOX + 4].view(torch.int32)
    go = torch.cuda.Event(interprocess=True)
    flush_buf = torch.empty(2 * torch.cuda.get_device_properties(device).L2_cache_size, dtype=torch.uint8, device=device)
    rate = spin_rate(torch.device('cuda'))
    ctx = mp.get_context("spawn")
    parent, child = ctx.Pipe()
    proc = ctx.Process(target=worker, args=(child, arena, go, args.go))
    proc.start()
    token = 0
    print(f"go by {args.go}; hold {args.hold_us:.0f} us; {args.calls} calls per row; times in us")
    print(f"{'kernel':8} {'cheat':10} {'reported':>9} {'span':>9} {'gap p10':>8} {'p50':>7} {'p90':>7} {'pre p50':>8} {'p90':>7} "
          f"{'post p50':>8} {'p90':>7} {'correct':>8} {'host/call':>9} {'enq p90':>8} {'judge enq':>9}")
    for kind in args.kinds.split(","):
        v = views(arena, kind)
        versions = []
        for _ in range(2):
            if "a" in v:
                a, b = torch.randn_like(v["a"]), torch.randn_like(v["b"])
                c = torch.add(a, b) if kind.startswith("vadd") else torch.matmul(a, b)
                versions.append((a, b, c))
        snap = torch.empty_like(v["c"]) if "c" in v else None
        for cheat in args.cheats.split(","):
            rows = []
            for call in range(args.calls + 10):
                token += 1
                version = versions[call % 2] if versions else None
                t_enq = time.perf_counter()
                if args.go == "value":  # the worker's stream waits for the go word: ask first
                    parent.send((kind, cheat, token))
                with torch.cuda.stream(clock.stream):
                    torch.cuda._sleep(int(args.hold_us * rate))
                    clock.stamp()
                    mailbox.zero_()
                    if version is not None:
                        v["a"].copy_(version[0])
                        v["b"].copy_(version[1])
                        v["c"].fill_(float("nan"))
                    flush_buf.zero_()
                    clock.stamp()
                    if args.go == "value":
                        clock.write_token(arena[MAILBOX + 64 :].data_ptr(), token)
                    else:
                        go.record(clock.stream)
                    clock.wait_token(mailbox.data_ptr(), token)
                    clock.stamp()
                    if snap is not None:
                        snap.copy_(v["c"])
                    clock.stamp()
                t0 = time.perf_counter()
                judge_enq_us = (t0 - t_enq) * 1e6
                if args.go == "event":  # its wait must come after the judge records the go event
                    parent.send((kind, cheat, token))
                reported_ms, enqueue_us = parent.recv()
                (stamps,) = clock.read()
                host_us = (time.perf_counter() - t0) * 1e6
                ok = True
                if snap is not None and version is not None:
                    ok = bool(torch.allclose(snap.float(), version[2].float(), rtol=1e-2, atol=1e-1))
                if call >= 10:
                    rows.append((reported_ms * 1e3, stamps.span_us, stamps.pre_us, stamps.post_us, ok, host_us, enqueue_us, judge_enq_us))
            rep = [r[0] for r in rows]
            gaps = sorted(r[1] - r[0] for r in rows)
            pre = sorted(r[2] for r in rows)
            post = sorted(r[3] for r in rows)
            q = lambda xs, f: xs[int(f * (len(xs) - 1))]  # noqa: E731
            print(f"{kind:8} {cheat:10} {statistics.median(rep):9.2f} {statistics.median(r[1] for r in rows):9.2f} "
                  f"{q(gaps, .1):8.2f} {q(gaps, .5):7.2f} {q(gaps, .9):7.2f} {q(pre, .5):8.2f} {q(pre, .9):7.2f} "
                  f"{q(post, .5):8.2f} {q(post, .9):7.2f} {sum(r[4] for r in rows) / len(rows):8.2f} "
                  f"{statistics.median(r[5] for r in rows):9.0f} {q(sorted(r[6] for r in rows), .9):8.0f} {q(sorted(r[7] for r in rows), .9):9.0f}", flush=True)
    parent.send(None)
    proc.join()


if __name__ == "__main__":
    main()
