"""The judge reads a side's replies as untrusted data (kbench_ci/wire/sideproto.py)."""

from __future__ import annotations

import json

import pytest

from kbench_ci.wire.protocol import SideSpec
from kbench_ci.wire.sideproto import (
    MAX_REPLY_BYTES,
    BadReply,
    Called,
    CallRequest,
    LendRequest,
    LentTensor,
    Loaded,
    LoadRequest,
    decode_reply,
    decode_request,
    encode_reply,
    encode_request,
)


def test_requests_and_replies_round_trip() -> None:
    load = LoadRequest(device="cpu", dims={"N": 8}, timing_method="host_time", num_warmup=1, event_overhead_ms=None,
                       side=SideSpec(label="head", solution="s.py", ref="r.py", implementation="pytorch"), touch_stride=65536,
                       settle_us=5.0)
    lend = LendRequest(slot=1, arena_kind="file", arena="/dev/shm/x", arena_bytes=512,
                       tensors=(LentTensor("x", "float32", (8,), (1,), 0, 0),), scalars={"N": 8}, output_names=("y",),
                       mailbox_byte_offset=256)
    for request in (load, lend, CallRequest(slot=0, count=1, warm_up=2), CallRequest(slot=1, token=7)):
        assert decode_request(encode_request(request)) == request
    for reply in (Loaded(notes=("not-dumpable",), template={"x": "float32 (8,) (1,)"}, first_call_ms=1.5),
                  Loaded(error="boom", exit_code=2, hint="fix it"), Called(samples_ms=(0.1, 0.2)), Called(error="raised"),
                  Called(samples_ms=(0.1,), enqueue_us=42.0), Called(samples_ms=(0.1,), enqueue_us=42.0, lead_us=6.5)):
        assert decode_reply(encode_reply(reply), type(reply)) == reply


@pytest.mark.parametrize("line", [
    b"not json",
    b'{"reply": "called", "samples_ms": [NaN]}',
    b'{"reply": "called", "samples_ms": [Infinity]}',
    b'{"reply": "called", "samples_ms": [-1.0]}',
    b'{"reply": "called", "samples_ms": ["0.1"]}',
    b'{"reply": "called", "samples_ms": [null]}',
    b'{"reply": "called", "samples_ms": {"a": 1}}',
    b'{"reply": "loaded"}',
    b"[1, 2]",
    b'{"reply": "called", "samples_ms": [0.1], "error": 5}',
    b"[" * 100_000 + b"]" * 100_000,
    b'{"reply": "called", "samples_ms": [0.1], "enqueue_us": -5}',
    b'{"reply": "called", "samples_ms": [0.1], "enqueue_us": "fast"}',
], ids=["text", "nan", "inf", "negative", "string", "null", "object", "other-tag", "array", "error-type", "deep",
        "negative-enqueue", "text-enqueue"])
def test_a_malformed_reply_is_a_bad_reply_never_a_crash(line: bytes) -> None:
    with pytest.raises(BadReply):
        decode_reply(line, Called)


def test_a_reply_past_the_size_cap_is_refused_before_it_is_parsed() -> None:
    line = json.dumps({"reply": "called", "samples_ms": [0.1] * (MAX_REPLY_BYTES // 4)}).encode()
    with pytest.raises(BadReply, match="bytes"):
        decode_reply(line, Called)


def test_a_loaded_reply_cannot_claim_an_exit_code_of_its_choosing() -> None:
    with pytest.raises(BadReply):
        decode_reply(b'{"reply": "loaded", "error": "x", "exit_code": 0}', Loaded)
