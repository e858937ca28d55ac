"""A side's worker loop: load one solution or baseline, map the buffers the judge lends, and time
the calls it is asked for, case after case, until the judge closes the socket.

What it may do is narrow on purpose: it makes no input contents for the case (the judge stages
them into the lent buffers before every call), it never sees what the outputs should be, and
its times are only its own account (the judge's other checks do not rest on them).
"""

from __future__ import annotations

import base64
import collections
import gc
import os
import pickle
import socket
import sys
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import torch
import torch.multiprocessing  # noqa: F401  (registers the reductions that rebuild a lent CUDA buffer)

from kbench_ci.errors import KbenchError
from kbench_ci.measure import baselines as baseline_registry
from kbench_ci.measure.impls import COMPILED_KINDS, Kernel, Solution
from kbench_ci.measure.impls.cuda_solution import load_cuda_solution
from kbench_ci.measure.impls.python_solution import load_python_solution
from kbench_ci.measure.inputs import InputSet
from kbench_ci.measure.isolation import ProcessBaseline, private_libraries
from kbench_ci.measure.setup_inputs import SetupFailed, setup_blame
from kbench_ci.measure.timing import CacheFlush, Timer, make_timer
from kbench_ci.measure.usercode import load_problem
from kbench_ci.measure.variant import describe_error, sync
from kbench_ci.results.model import MeasureSettings
from kbench_ci.wire.lending import lent_view, map_shared
from kbench_ci.wire.protocol import CaseJob
from kbench_ci.wire.sideproto import (
    ARENA_FD,
    DONE_OFFSET,
    LEND_FAILED,
    Called,
    CallRequest,
    EndRequest,
    LendRequest,
    LentTensor,
    Loaded,
    LoadRequest,
    Made,
    MakeRequest,
    Reply,
    decode_request,
    encode_reply,
)
from kbench_ci.wire.streamops import StreamOps

#: intra-op threads on the CPU (as the in-process worker: a busy core made times swing 2x)
CPU_THREADS = 1


@dataclass(slots=True)
class _Case:
    kernel: Kernel
    device: torch.device
    timer: Timer
    num_warmup: int
    slots: dict[int, dict[str, Any]] = field(default_factory=dict)
    output_names: tuple[str, ...] = ()
    arenas: list[torch.Tensor] = field(default_factory=list)
    warmed: bool = False
    #: its own setup() (a solution's; None for a baseline), for a MakeRequest
    make_inputs: Callable[[int], InputSet] | None = None
    #: per placement, the device address of the judge's "go" word (handed-over calls)
    mailboxes: dict[int, int] = field(default_factory=dict)
    stream_ops: StreamOps | None = None
    #: bytes between the page reads before a handed-over call's start event (0: none)
    touch_stride: int = 0
    #: us the stream spins after those reads, before the start event (0: none)
    settle_us: float = 0.0
    #: per placement, one byte of every ``touch_stride`` of its arena (a strided view)
    pages: dict[int, torch.Tensor] = field(default_factory=dict)
    #: per placement, where those bytes are copied (nothing reads it: the reads are what counts)
    page_copies: dict[int, torch.Tensor] = field(default_factory=dict)
    #: per placement this process could not map (CUDA IPC refused, no descriptor with a CPU arena): why
    lend_errors: dict[int, str] = field(default_factory=dict)
    #: its own cache flush between the calls of a batch (None: the case flushes nothing)
    flush: CacheFlush | None = None


def make_context(device: str) -> None:
    """The CUDA context (on an H100 host 1-2 s of a new worker's start). Never fails: the load
    reports a broken device."""
    if device.startswith("cuda"):
        try:
            torch.cuda.set_device(torch.device(device))
            torch.empty(1, device=device)
        except Exception:  # noqa: BLE001, S110  (see above)
            pass


class _Inbox:
    """The judge's requests, a line each, and the descriptors handed over with them (a CPU
    arena's memfd): read with ``recvmsg``, which a buffered file over the socket would drop.
    A descriptor arrives with the first bytes of the line it came with, so the lines that need
    one take them in the order they were sent."""

    def __init__(self, channel: socket.socket) -> None:
        self.channel = channel
        self.buffer = b""
        self.fds: collections.deque[int] = collections.deque()

    def readline(self) -> bytes:
        while b"\n" not in self.buffer:
            data, fds, _, _ = socket.recv_fds(self.channel, 1 << 16, 16)
            self.fds.extend(fds)
            if not data:
                return b""
            self.buffer += data
        line, _, self.buffer = self.buffer.partition(b"\n")
        return line + b"\n"

    def take_fd(self) -> int:
        return self.fds.popleft() if self.fds else -1


def serve(channel: socket.socket, layers: tuple[str, ...]) -> int:
    inbox = _Inbox(channel)
    baseline = ProcessBaseline.capture()
    case: _Case | None = None
    modules_before = frozenset(sys.modules)
    device = torch.device("cpu")
    while True:
        line = inbox.readline()
        if not line:
            return 0
        request = decode_request(line)
        reply: Reply | None
        if isinstance(request, LoadRequest):
            modules_before = frozenset(sys.modules)
            device = torch.device(request.device)
            case, reply = _load(request, layers)
        elif isinstance(request, LendRequest):
            assert case is not None
            _lend(case, request, inbox.take_fd() if request.arena_kind == ARENA_FD else -1)
            reply = None
        elif isinstance(request, CallRequest):
            assert case is not None
            reply = _call(case, request)
        elif isinstance(request, MakeRequest):
            reply = _make(case, request) if case is not None else Made(error="no case is loaded")
        else:
            assert isinstance(request, EndRequest)
            case = None
            gc.collect()
            reason = baseline.after_case(modules_before, device)
            if reason is not None:
                sys.stderr.write(f"retiring: {reason}\n")
                return 0
            reply = None
        if reply is not None:
            channel.sendall(encode_reply(reply))


def _load(request: LoadRequest, layers: tuple[str, ...]) -> tuple[_Case | None, Reply]:
    device = torch.device(request.device)
    try:
        if device.type == "cuda":
            torch.cuda.set_device(device)
        else:
            torch.set_num_threads(CPU_THREADS)
        timer = make_timer(
            request.timing_method, device, flush_l2=False, event_overhead_ms=request.event_overhead_ms,  # type: ignore[arg-type]
        )
        if request.side is not None:
            solution, inputs, first = _load_side(request, device)
            kernel, make_inputs = solution.kernel, solution.make_inputs
            loaded = _describe_inputs(inputs, request.dims)
            notes = solution.notes
        else:
            assert request.baseline is not None and request.ref is not None
            kernel = baseline_registry.load_baseline(request.baseline, load_problem(Path(request.ref)), device)
            make_inputs, loaded, first, notes = None, Loaded(), (None, None), ()
    except KbenchError as exc:
        return None, Loaded(error=exc.one_line(), exit_code=int(exc.exit_code), hint=exc.hint, notes=layers)
    except SetupFailed as exc:
        # Sizes past 64 bits are the settings' and a ref.py's setup() the reference's (exit 2),
        # as in the in-process worker; the solution's own setup() fails it
        ref_name = Path(request.side.ref).name if request.side is not None else "ref.py"
        blamed = setup_blame(exc, request.dims, ref_name)
        if blamed is not None:
            return None, Loaded(error=blamed.one_line(), exit_code=int(blamed.exit_code), hint=blamed.hint, notes=layers)
        return None, Loaded(error=f"loading failed: {exc.where} raised {describe_error(exc.cause)} (seed {exc.seed})",
                            notes=layers)
    except Exception as exc:  # noqa: BLE001  (the side's own failure: the judge reports it)
        return None, Loaded(error=f"loading failed: {describe_error(exc)}", notes=layers)
    case = _Case(kernel, device, timer, request.num_warmup, make_inputs=make_inputs, touch_stride=request.touch_stride,
                 settle_us=request.settle_us, flush=CacheFlush(device, enabled=True) if request.flush_l2 else None)
    return case, replace(loaded, notes=(*layers, *notes), compile_ms=first[0], first_call_ms=first[1])


def _describe_inputs(inputs: InputSet, dims: Mapping[str, Any]) -> Loaded:
    """Its own setup()'s arguments: for the goalpost check, and as the judge's template where no
    trusted setup() exists."""
    tensors = {name: value for name, value in inputs.kwargs.items() if isinstance(value, torch.Tensor)}
    template = {name: describe_argument(value) for name, value in tensors.items()}
    template["outputs"] = ",".join(inputs.output_names)
    layout = tuple(
        LentTensor(name=name, dtype=str(value.dtype).removeprefix("torch."), size=tuple(value.shape),
                   stride=tuple(value.stride()), byte_offset=0, storage_offset=int(value.storage_offset()))
        for name, value in tensors.items()
    )
    scalars = {name: value for name, value in inputs.kwargs.items()
               if name not in tensors and name not in dims and isinstance(value, (bool, int, float, str))}
    return Loaded(template=template, layout=layout, scalars=scalars, outputs=inputs.output_names, inplace=inputs.inplace_names)


def _make(case: _Case, request: MakeRequest) -> Made:
    """Its own setup() at the judge's seed, copied into the lent buffers of ``request.slot``."""
    if case.make_inputs is None or request.slot not in case.slots:
        return Made(error="nothing to make the inputs with")
    try:
        inputs = case.make_inputs(request.seed)
        target = case.slots[request.slot]
        for name, view in target.items():
            value = inputs.kwargs.get(name)
            if isinstance(view, torch.Tensor):
                if not isinstance(value, torch.Tensor) or value.shape != view.shape or value.dtype != view.dtype:
                    return Made(error=f"its setup() gave '{name}' another shape or dtype at seed {request.seed}")
                view.copy_(value)
        sync(case.device)
    except Exception as exc:  # noqa: BLE001  (the side's own failure: the judge reports it)
        return Made(error=describe_error(exc))
    return Made()


_Timings = tuple[float | None, float | None]


def _load_side(request: LoadRequest, device: torch.device) -> tuple[Solution, InputSet, _Timings]:
    side = request.side
    assert side is not None
    if side.implementation in COMPILED_KINDS:
        job = CaseJob(case_id="side", dims=request.dims, sides=(side,), baselines=(), settings=_NO_SETTINGS)
        # A folder of this load's own: copying a new library over the path of one this process
        # still maps would change the code under it (a side serves case after case).
        side = private_libraries(job, Path(tempfile.mkdtemp(prefix="libraries-", dir=Path.cwd()))).sides[0]
        solution: Solution = load_cuda_solution(
            Path(side.solution), kind=side.implementation, label=side.label, problem=load_problem(Path(side.ref)),
            dims=request.dims, device=device, ptr_sizes=side.ptr_sizes, ptr_size=side.ptr_size,
        )
    else:
        solution = load_python_solution(Path(side.solution), kind=side.implementation, label=side.label, dims=request.dims, device=device)
    # Its own setup()'s arguments, for the judge to compare with the trusted ones (a head that
    # moved the goalposts), and a first call on them: compile steps and lazy loading stay out
    # of the judged calls. The contents are its own and judge nothing.
    inputs = solution.make_inputs(0)
    kwargs = inputs.fresh_copy()
    compile_ms = None
    if solution.kernel.compile is not None:
        started = time.perf_counter()
        solution.kernel.compile(kwargs)
        sync(device)
        compile_ms = (time.perf_counter() - started) * 1e3
    started = time.perf_counter()
    solution.kernel.call(kwargs)
    sync(device)
    first_ms = (time.perf_counter() - started) * 1e3
    return solution, inputs, (compile_ms, first_ms)


def describe_argument(value: torch.Tensor) -> str:
    """A tensor argument as the goalpost check compares it: dtype, sizes and strides."""
    return f"{str(value.dtype).removeprefix('torch.')} {tuple(value.shape)} {tuple(value.stride())}"


def _lend(case: _Case, request: LendRequest, fd: int) -> None:
    """Map the placement's arena and its views (``fd``: a CPU arena's descriptor, handed over
    with the request, closed once mapped). A mapping that fails (a container that refuses CUDA
    IPC) is said in reply to the placement's next call, which the judge makes at once."""
    try:
        if request.arena_kind == ARENA_FD:
            if fd < 0:
                raise RuntimeError("no descriptor came with the CPU arena")
            try:
                arena = map_shared(fd, request.arena_bytes)
            finally:
                os.close(fd)
        else:
            arena = pickle.loads(base64.b64decode(request.arena))  # noqa: S301  (from the judge, which this process trusts)
    except Exception as exc:  # noqa: BLE001  (said to the judge, which decides whose failure it is)
        case.lend_errors[request.slot] = describe_error(exc)
        return
    case.arenas.append(arena)
    kwargs: dict[str, Any] = dict(request.scalars)
    for lent in request.tensors:
        kwargs[lent.name] = lent_view(arena, lent)
    case.slots[request.slot] = kwargs
    case.output_names = request.output_names
    if request.mailbox_byte_offset >= 0 and arena.is_cuda:
        case.mailboxes[request.slot] = arena.data_ptr() + request.mailbox_byte_offset
        if case.touch_stride > 0:
            pages = arena.view(torch.uint8)[:: case.touch_stride]
            case.pages[request.slot] = pages
            case.page_copies[request.slot] = torch.empty(pages.shape, dtype=pages.dtype, device=pages.device)


def _touch_pages(case: _Case, slot: int) -> None:
    """Read one byte of every page of the placement's arena, on the current stream: the call's
    address translations, cold after the judge's turn on the GPU, come in before the start event,
    as they are in one process (suite.settings.DEFAULT_JUDGE_TOUCH_STRIDE says why). A side that
    skips or stretches this only moves its own time: the judge's clock sees all of it.

    A copy, not a sum: a reduction reads them with few threads, page after page (8.7 to 11.7 us
    a call on an H100 for arenas of 12 to 540 MB), an elementwise copy with a
    thread a byte, all at once. The lead-in is time a head could fill with work the judge's
    clock cannot tell from it, so a gain must pass it (gate.verdicts): it must be short."""
    pages, into = case.pages.get(slot), case.page_copies.get(slot)
    if pages is not None and into is not None:
        into.copy_(pages)


def _call(case: _Case, request: CallRequest) -> Called:
    for slot in (request.slot, *request.batch):
        if slot in case.lend_errors or slot not in case.slots:
            why = case.lend_errors.get(slot, "nothing was lent there")
            return Called(error=f"{LEND_FAILED} {slot}: {why}")
    if request.batch and request.token:
        try:
            return _batch_handed_over(case, request)
        except Exception as exc:  # noqa: BLE001  (the side's own failure: the judge reports it)
            return Called(error=describe_error(exc))
    kwargs = case.slots[request.slot]
    returned: list[object] = [None]

    def call() -> object:
        returned[0] = case.kernel.call(kwargs)
        return returned[0]

    try:
        if request.warm_up:
            case.timer.warm_up(call, request.warm_up, resize_hold=not case.warmed)
            case.warmed = True
            case.timer.ready()
        if request.token:
            return _handed_over(case, request, call, kwargs, returned)
        samples = case.timer.measure(call, request.count) if request.count else []
        if request.count:
            _write_back(case, kwargs, returned[0])
        sync(case.device)
    except Exception as exc:  # noqa: BLE001  (the side's own failure: the judge reports it)
        return Called(error=describe_error(exc))
    return Called(samples_ms=tuple(samples))


def _handed_over(
    case: _Case, request: CallRequest, call: Callable[[], object], kwargs: dict[str, Any], returned: list[object]
) -> Called:
    """One call the judge hands over (kbench_ci.judge.clock). On a GPU the stream waits for the
    judge's go word and writes the done word after the call's end event. Outputs the call
    returns are copied into the lent ones before that end event: the judge's clock cannot tell
    that copy from work, so a side that returns its outputs is timed with it (docs/isolation.md).
    Raises what the call raises."""

    def call_and_write_back() -> None:
        call()
        _write_back(case, kwargs, returned[0])

    go = case.mailboxes.get(request.slot)
    if go is None:  # a CPU side: the judge's monotonic clock is around the request
        return Called(samples_ms=(case.timer.measure(call_and_write_back, 1)[0],))
    wait_for_go, signal_done = _gates(case, go, request.token)

    def touch() -> None:
        _touch_pages(case, request.slot)

    gated = case.timer.measure_gated(call_and_write_back, before=wait_for_go, after=signal_done,
                                     lead_in=touch if request.slot in case.pages else None, settle_us=case.settle_us)
    sync(case.device)
    return Called(samples_ms=(gated.sample_ms,), enqueue_us=gated.enqueue_us,
                  lead_us=None if gated.lead_ms is None else gated.lead_ms * 1e3)


def _batch_handed_over(case: _Case, request: CallRequest) -> Called:
    """A batch the judge hands over (kbench_ci.judge.handoff.Handoff.batch): the calls on
    ``request.batch``'s placements one after the other, after one go (on a GPU, ``slot``'s
    mailbox, which is the batch's first), the cache flushed between them, one done word after
    the last. Returns every call's own time; the judge holds their sum to its span."""
    calls = [_bound_call(case, case.slots[slot]) for slot in request.batch]
    flush = case.flush if case.flush is not None else _no_flush
    go = case.mailboxes.get(request.slot)
    if go is None:  # a CPU side: the judge's monotonic clock is around the request
        timed = case.timer.measure_batch(calls, before=_no_stream, after=_no_stream, flush=flush)
        return Called(samples_ms=timed.samples_ms)
    wait_for_go, signal_done = _gates(case, go, request.token)
    # No page reads before the first call: they would be a lead-in a head could fill with work
    # (the gain a head must pass), and only the first call of a batch follows the switch of the
    # GPU to this context
    timed = case.timer.measure_batch(calls, before=wait_for_go, after=signal_done, flush=flush)
    sync(case.device)
    return Called(samples_ms=timed.samples_ms, enqueue_us=timed.enqueue_us,
                  lead_us=None if timed.lead_ms is None else timed.lead_ms * 1e3)


def _gates(case: _Case, go: int, token: int) -> tuple[Callable[[int], None], Callable[[int], None]]:
    """A handed-over request's two stream operations: wait until the judge's go word (device
    address ``go``) holds ``token``, and write ``token`` into the done word after it."""
    if case.stream_ops is None:
        case.stream_ops = StreamOps()
    ops = case.stream_ops

    def wait_for_go(stream: int) -> None:
        ops.wait_equal(stream, go, token)

    def signal_done(stream: int) -> None:
        ops.write(stream, go + DONE_OFFSET, token)

    return wait_for_go, signal_done


def _bound_call(case: _Case, kwargs: dict[str, Any]) -> Callable[[], None]:
    """One call on ``kwargs`` with its returned outputs written back into the lent ones (timed
    with it: the judge's clock cannot tell that copy from work)."""

    def call() -> None:
        _write_back(case, kwargs, case.kernel.call(kwargs))

    return call


def _no_flush() -> None:
    """The case flushes nothing."""


def _no_stream(stream: int) -> None:
    """A CPU batch: the judge's clock is around the request, nothing is gated on a stream."""


def _write_back(case: _Case, kwargs: dict[str, Any], returned: object) -> None:
    """A baseline (or a solution's ``collect``) that returns its outputs: into the lent outputs,
    after the timed call, where the judge reads them."""
    outputs = case.kernel.collect(returned, kwargs, case.output_names)
    for name, value in outputs.items():
        target = kwargs.get(name)
        if isinstance(value, torch.Tensor) and isinstance(target, torch.Tensor) and value is not target:
            target.copy_(value)


#: the settings a one-side job needs to be a CaseJob (private_libraries reads only its sides)
_NO_SETTINGS = MeasureSettings(
    device="cpu", seed=0, correctness_trials=0, timing_method="host", num_warmup=0, trials_per_round=0, discard_first=0,
    rounds=0, flush_l2=False,
)
