"""What the judge and a side's worker say to each other (``--isolation judge``): frozen value
objects, one JSON line each, over a socket pair the judge made.

The two directions are not alike. The judge trusts nothing a side sends: a side's worker runs
pull-request code, which owns its process and can write any bytes to the socket. So replies
(:class:`Loaded`, :class:`Called`) are plain JSON, size-capped and checked field by field, and a
reply that does not parse is that side's failure, never the judge's. Requests flow the other
way and may carry what only a trusting reader should unpickle: the handle of a CUDA buffer the
judge lends (torch's IPC reduction), which the side's worker rebuilds.
"""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass, field
from typing import Any

from kbench_ci.wire.protocol import SideSpec

#: environment: the device a side's worker creates its context on as soon as it starts
SIDE_DEVICE_ENV = "KBENCH_CI_SIDE_DEVICE"
#: environment: modules it imports then too (comma-separated: ``triton``)
SIDE_PRELOAD_ENV = "KBENCH_CI_SIDE_PRELOAD"
#: the longest reply line the judge reads from a side; anything longer fails that side
MAX_REPLY_BYTES = 1 << 20


class BadReply(Exception):
    """A side sent something that is not a well-formed reply: it fails, with this message."""


# --------------------------------------------------------------------------------------------
# Requests: judge -> side
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class LoadRequest:
    """Load one side's solution (``side``) or one baseline (``baseline`` over ``ref``)."""

    device: str
    dims: dict[str, Any]
    timing_method: str
    num_warmup: int
    event_overhead_ms: float | None
    side: SideSpec | None = None
    baseline: str | None = None
    ref: str | None = None
    #: bytes between the reads that bring a lent GPU arena's address translations in after the
    #: go word and before the start event of a handed-over call (0: none; suite.settings)
    touch_stride: int = 0
    #: us its stream spins after those reads, before the start event (suite.settings)
    settle_us: float = 0.0
    #: flush its cache between the calls of a batch (CallRequest.batch), as the judge flushes
    #: before the first: the case's flush setting
    flush_l2: bool = False


@dataclass(frozen=True, slots=True)
class LentTensor:
    """One argument the judge lends: a view of an arena the judge owns."""

    name: str
    dtype: str
    size: tuple[int, ...]
    stride: tuple[int, ...]
    #: where the view's storage starts in the arena, in bytes (aligned)
    byte_offset: int
    #: elements from that start to the view's first element (setup()'s storage offset)
    storage_offset: int


@dataclass(frozen=True, slots=True)
class LendRequest:
    """The buffers of one placement (``slot``): the arena (on the CPU kind :data:`ARENA_FD`, a
    descriptor of shared memory that travels with this request's line over the socket,
    ``SCM_RIGHTS``; on a GPU a pickled CUDA IPC handle, base64), the views, and the scalar
    arguments."""

    slot: int
    arena_kind: str
    arena: str
    arena_bytes: int
    tensors: tuple[LentTensor, ...]
    scalars: dict[str, Any]
    output_names: tuple[str, ...]
    #: where the arena's two signal words lie (bytes; GPU only, -1 none): the judge's "go" at
    #: this offset, the side's "done" :data:`DONE_OFFSET` bytes further (kbench_ci.judge.clock)
    mailbox_byte_offset: int = -1


#: the kind of a CPU arena: a memfd handed to its side alone, with the request's line (no path:
#: a file in a side's folder was open to the other side, the same user)
ARENA_FD = "fd"
#: bytes from the judge's "go" word to the side's "done" word in a mailbox
DONE_OFFSET = 64
#: how a side's reply starts where it could not map a placement the judge lent it
LEND_FAILED = "could not map the buffers the judge lent it for placement"


@dataclass(frozen=True, slots=True)
class CallRequest:
    """Time ``count`` calls on placement ``slot`` (after ``warm_up`` untimed ones), as staged.

    ``token`` (not 0): one call handed over through the arena's mailbox on a GPU: the side's
    stream waits until the judge writes ``token`` into the "go" word, runs the call between its
    own events, then writes ``token`` into the "done" word (kbench_ci.judge.clock).

    ``batch`` (with a token): the placements of a batch of handed-over calls, ``slot`` first,
    each staged by the judge with contents of its own. The side runs them back to back after the
    one go (``slot``'s mailbox), flushing its cache between them, each between its own events,
    and writes one done word after the last (kbench_ci.judge.handoff.Handoff.batch)."""

    slot: int
    count: int = 1
    warm_up: int = 0
    token: int = 0
    batch: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class MakeRequest:
    """Make the inputs with the side's own setup() at ``seed`` and copy them into the buffers of
    placement ``slot`` (lent for the purpose): only where no trusted setup() exists, and the
    report then says that the solution chose its inputs."""

    seed: int
    slot: int


@dataclass(frozen=True, slots=True)
class EndRequest:
    """The case is over: drop the lent buffers and clean up."""


Request = LoadRequest | LendRequest | CallRequest | MakeRequest | EndRequest
_REQUEST_TAGS: dict[type[Any], str] = {
    LoadRequest: "load", LendRequest: "lend", CallRequest: "call", MakeRequest: "make", EndRequest: "end",
}
_REQUEST_TYPES = {tag: cls for cls, tag in _REQUEST_TAGS.items()}


def encode_request(request: Request) -> bytes:
    return (json.dumps({"op": _REQUEST_TAGS[type(request)], **dataclasses.asdict(request)}, allow_nan=False) + "\n").encode()


def decode_request(line: bytes) -> Request:
    data = json.loads(line)
    cls = _REQUEST_TYPES[data.pop("op")]
    if cls is CallRequest:
        data["batch"] = tuple(int(slot) for slot in data.get("batch", ()))
    if cls is LoadRequest and data.get("side") is not None:
        data["side"] = SideSpec(**data["side"])
    if cls is LendRequest:
        data["tensors"] = tuple(
            LentTensor(**{**t, "size": tuple(t["size"]), "stride": tuple(t["stride"])}) for t in data["tensors"]
        )
        data["output_names"] = tuple(data["output_names"])
    request: Request = cls(**data)
    return request


# --------------------------------------------------------------------------------------------
# Replies: side -> judge (untrusted)
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Loaded:
    """The side loaded (``error`` None) or could not (``error``, and ``exit_code`` 2 for a broken
    user file or setting, 1 for the kernel, 3 for the machine). ``template``: the argument list
    its own setup() gives (name -> "dtype size stride"), to tell a head that moved the
    goalposts; ``notes``: what the loader chose (pointer sizes)."""

    error: str | None = None
    exit_code: int = 1
    hint: str | None = None
    notes: tuple[str, ...] = ()
    template: dict[str, str] = field(default_factory=dict)
    first_call_ms: float | None = None
    compile_ms: float | None = None
    #: its setup()'s tensors as views to lend (byte_offset 0), its other arguments, its outputs
    #: and in-place outputs: the judge's template where no trusted setup() exists
    layout: tuple[LentTensor, ...] = ()
    scalars: dict[str, Any] = field(default_factory=dict)
    outputs: tuple[str, ...] = ()
    inplace: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Made:
    """The side's setup() made the inputs and they are in the lent buffers, or ``error``."""

    error: str | None = None


@dataclass(frozen=True, slots=True)
class Called:
    """The side's own times of the calls it was asked for (ms), or the error that stopped it."""

    samples_ms: tuple[float, ...] = ()
    error: str | None = None
    #: how long the side took to enqueue a handed-over call (us): the judge sizes its hold by it
    enqueue_us: float | None = None
    #: from the go to its start event (its page reads and spin; us): a trusted side's is how much
    #: work a head could hide there (gate.verdicts)
    lead_us: float | None = None


#: the one line the judge sends a worker after its :class:`Ready` and before any request: go on
#: to serve. A worker started for a side gets it at once; a spare (started ahead, for a
#: re-measurement's new processes) only when the judge claims it
WAKE = b"wake\n"


@dataclass(frozen=True, slots=True)
class Ready:
    """The worker has started: hardened, torch and its preloaded modules imported and its CUDA
    context made. Sent once, unasked, before it waits for :data:`WAKE` and reads its first
    request: the judge lets every new worker start at once and pauses none of them before this
    (a worker paused while it imported torch made a fresh pair of workers start one after the
    other)."""


Reply = Loaded | Called | Made | Ready
_REPLY_TAGS: dict[type[Any], str] = {Loaded: "loaded", Called: "called", Made: "made", Ready: "ready"}

#: what a side's layout may claim (its setup()'s tensors): the judge allocates them
MAX_LAYOUT_TENSORS = 64
MAX_LAYOUT_BYTES = 1 << 40


def encode_reply(reply: Reply) -> bytes:
    tag = _REPLY_TAGS[type(reply)]
    return (json.dumps({"reply": tag, **dataclasses.asdict(reply)}, allow_nan=False) + "\n").encode()


def decode_reply(line: bytes, expected: type[Reply]) -> Reply:
    """Parse one reply of type ``expected``; anything else raises :class:`BadReply`."""
    if len(line) > MAX_REPLY_BYTES:
        raise BadReply(f"a reply of {len(line)} bytes (at most {MAX_REPLY_BYTES})")
    try:
        data = json.loads(line, parse_constant=_no_constant)
    except (ValueError, RecursionError) as exc:
        raise BadReply(f"a reply that is not JSON ({type(exc).__name__})") from None
    if not isinstance(data, dict):
        raise BadReply("a reply that is not a JSON object")
    tag = data.pop("reply", None)
    if expected is Called and tag == "called":
        return Called(samples_ms=_samples(data.get("samples_ms")), error=_optional_text(data.get("error")),
                      enqueue_us=_optional_number(data.get("enqueue_us")), lead_us=_optional_number(data.get("lead_us")))
    if expected is Loaded and tag == "loaded":
        return Loaded(
            error=_optional_text(data.get("error")),
            exit_code=_exit_code(data.get("exit_code", 1)),
            hint=_optional_text(data.get("hint")),
            notes=tuple(_text(note) for note in _list(data.get("notes", []))),
            template={_text(k): _text(v) for k, v in _dict(data.get("template", {})).items()},
            first_call_ms=_optional_number(data.get("first_call_ms")),
            compile_ms=_optional_number(data.get("compile_ms")),
            layout=_layout(data.get("layout", [])),
            scalars={_text(k): _scalar(v) for k, v in _dict(data.get("scalars", {})).items()},
            outputs=tuple(_text(name) for name in _list(data.get("outputs", []))),
            inplace=tuple(_text(name) for name in _list(data.get("inplace", []))),
        )
    if expected is Made and tag == "made":
        return Made(error=_optional_text(data.get("error")))
    if expected is Ready and tag == "ready":
        return Ready()
    raise BadReply(f"a {tag!r} reply where a {expected.__name__} was due")


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a number")


def _text(value: Any) -> str:
    if not isinstance(value, str) or len(value) > 4000:
        raise BadReply("a text field that is not a short string")
    return value


def _optional_text(value: Any) -> str | None:
    return None if value is None else _text(value)


def _list(value: Any) -> list[Any]:
    if not isinstance(value, list) or len(value) > 100:
        raise BadReply("a list field that is not a short list")
    return value


def _dict(value: Any) -> dict[Any, Any]:
    if not isinstance(value, dict) or len(value) > 256:
        raise BadReply("an object field that is not a small object")
    return value


def _optional_number(value: Any) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        raise BadReply("a time that is not a finite number >= 0")
    return float(value)


def _exit_code(value: Any) -> int:
    if value not in (1, 2, 3):
        raise BadReply("an exit code other than 1, 2 or 3")
    return int(value)


def _samples(value: Any) -> tuple[float, ...]:
    if not isinstance(value, list) or len(value) > 100_000:
        raise BadReply("samples that are not a list")
    samples = tuple(_optional_number(v) for v in value)
    if any(sample is None for sample in samples):
        raise BadReply("a sample that is null")
    return tuple(float(s) for s in samples if s is not None)


_DTYPES = frozenset({
    "float64", "float32", "float16", "bfloat16", "float8_e4m3fn", "float8_e5m2", "complex64", "complex128",
    "int64", "int32", "int16", "int8", "uint8", "uint16", "uint32", "uint64", "bool",
})
_ITEMSIZE = {"float64": 8, "complex64": 8, "complex128": 16, "int64": 8, "uint64": 8, "float32": 4, "int32": 4, "uint32": 4,
             "float16": 2, "bfloat16": 2, "int16": 2, "uint16": 2}


def _layout(value: Any) -> tuple[LentTensor, ...]:
    entries = _list(value)
    if len(entries) > MAX_LAYOUT_TENSORS:
        raise BadReply("a layout of too many tensors")
    layout = []
    total = 0
    for entry in entries:
        item = _dict(entry)
        dtype = _text(item.get("dtype"))
        if dtype not in _DTYPES:
            raise BadReply(f"a tensor of dtype {dtype[:20]!r}")
        size, stride = _ints(item.get("size")), _ints(item.get("stride"))
        offset = _ints([item.get("storage_offset")])[0]
        if len(size) != len(stride) or len(size) > 8:
            raise BadReply("a tensor whose sizes and strides do not match")
        count = offset + (1 + sum((n - 1) * s for n, s in zip(size, stride, strict=True)) if all(size) else 0)
        total += count * _ITEMSIZE.get(dtype, 1)
        layout.append(LentTensor(name=_text(item.get("name")), dtype=dtype, size=size, stride=stride, byte_offset=0,
                                 storage_offset=offset))
    if total > MAX_LAYOUT_BYTES:
        raise BadReply("a layout larger than 1 TiB")
    return tuple(layout)


def _ints(value: Any) -> tuple[int, ...]:
    numbers = _list(value)
    if not all(isinstance(n, int) and not isinstance(n, bool) and 0 <= n < (1 << 40) for n in numbers):
        raise BadReply("sizes, strides or offsets that are not small non-negative integers")
    return tuple(numbers)


def _scalar(value: Any) -> Any:
    if isinstance(value, bool) or (isinstance(value, int) and abs(value) < (1 << 63)) or isinstance(value, str) and len(value) < 200:
        return value
    if isinstance(value, float) and math.isfinite(value):
        return value
    raise BadReply("an argument that is not a number, a bool or a short string")
