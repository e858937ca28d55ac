"""What reaches the results from a judge, and nothing else.

The judge's events file carries a mark on every line (an HMAC under a key made for the case
and sent on the lifeline, which no side holds): where no sandbox keeps a side from writing the
parent's events file (no Landlock), a line it adds, changes, moves or replays fails the case
instead of entering the results."""

from __future__ import annotations

import secrets
from pathlib import Path

import pytest

from kbench_ci.measure.parent import WorkerOutcome, _Cursor, _drain
from kbench_ci.results.model import VariantResult
from kbench_ci.wire.protocol import (
    CaseFinished,
    CaseStarted,
    EventSigner,
    ForgedEvent,
    JobTicket,
    VariantDone,
    encode_event,
)

FORGED = VariantDone(VariantResult("head", "pytorch", "solution", "ok", rounds_ms=((0.001,) * 9,) * 4))


def _signed(key: bytes, *events: object) -> list[str]:
    signer = EventSigner(key)
    return [signer.sign(encode_event(event)) for event in events]  # type: ignore[arg-type]


def test_the_judges_own_lines_are_read() -> None:
    key = secrets.token_bytes(32)
    events = (CaseStarted(1, 0), CaseFinished())
    lines = _signed(key, *events)
    checker = EventSigner(key)
    assert [checker.check(line) for line in lines] == [encode_event(event) for event in events]


@pytest.mark.parametrize("tamper", ["added", "changed", "moved", "other case", "unmarked", "not ascii"])
def test_a_line_the_judge_did_not_write_fails_the_drain(tmp_path: Path, tamper: str) -> None:
    key = secrets.token_bytes(32)
    lines = _signed(key, CaseStarted(1, 0), CaseFinished())
    if tamper == "added":
        lines.insert(1, f"{'0' * 64} {encode_event(FORGED)}")
    elif tamper == "changed":
        mark, _, text = lines[0].partition(" ")
        lines[0] = f"{mark} {text.replace('0', '1', 1)}"
    elif tamper == "moved":
        lines.reverse()
    elif tamper == "other case":
        lines = _signed(secrets.token_bytes(32), CaseStarted(1, 0), CaseFinished())
    elif tamper == "not ascii":
        lines.insert(1, f"\u00e9{'0' * 63} {encode_event(FORGED)}")
    else:
        lines.insert(1, encode_event(FORGED))
    events = tmp_path / "events.jsonl"
    events.write_text("\n".join(lines) + "\n")
    outcome = WorkerOutcome()
    with pytest.raises(ForgedEvent):
        _drain(events, 0, outcome, _Cursor(), None, EventSigner(key))
    assert "head" not in outcome.variants


def test_the_in_process_worker_gets_no_key_and_the_judge_a_new_one_each_case() -> None:
    assert JobTicket.decode(JobTicket("/j", "/e").encode()).key == ""
    ticket = JobTicket("/j", "/e", secrets.token_bytes(32).hex())
    assert JobTicket.decode(ticket.encode()) == ticket


def test_the_judge_refuses_a_job_file_that_is_not_the_one_the_parent_wrote(tmp_path: Path) -> None:
    """Where no sandbox holds a side, it could rewrite the case's job file (time the head's
    solution as the base, say). The ticket carries the file's SHA-256; the judge checks it
    and ends (the parent reads that as the judge's failure, which blames no side)."""
    import hashlib
    import os
    import subprocess
    import sys

    job = tmp_path / "job.json"
    job.write_text('{"tampered": true}')
    ticket = JobTicket(str(job), str(tmp_path / "events.jsonl"), secrets.token_bytes(32).hex(),
                       hashlib.sha256(b'{"as": "written"}').hexdigest())
    read, write = os.pipe()
    try:
        judge = subprocess.Popen([sys.executable, "-m", "kbench_ci.judge.main", str(read)], pass_fds=(read,),
                                 stderr=subprocess.PIPE, text=True,
                                 env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[3])})
        os.close(read)
        os.write(write, ticket.encode())
        _, stderr = judge.communicate(timeout=120)
    finally:
        os.close(write)
    assert judge.returncode == 1, stderr
    assert "is not the one the parent wrote" in stderr
    assert not (tmp_path / "events.jsonl").exists() or not (tmp_path / "events.jsonl").read_text()


def test_a_stopped_worker_takes_what_left_its_process_group_with_it(tmp_path: Path) -> None:
    """A process a side started in a session of its own (setsid) is not in the worker's process
    group: when the worker was ended it went on, re-parented to kbench-ci, outside the next
    judge's tree and its pauses. It is looked up before and ended too."""
    import subprocess
    import sys
    import time

    from kbench_ci.measure.parent import _Worker
    from kbench_ci.procgroup import state

    marker = tmp_path / "daemon.pid"
    script = (
        "import os, sys, time\n"
        "if os.fork() == 0:\n"
        "    os.setsid()\n"
        f"    open({str(marker)!r}, 'w').write(str(os.getpid()))\n"
        "    time.sleep(600)\n"
        "time.sleep(600)\n"
    )
    process = subprocess.Popen([sys.executable, "-c", script], start_new_session=True)
    deadline = time.monotonic() + 30
    while not (marker.is_file() and marker.read_text()) and time.monotonic() < deadline:
        time.sleep(0.05)
    daemon = int(marker.read_text())
    assert state(daemon) not in (None, "Z")
    _Worker(process, -1, tmp_path / "stderr", "cpu").stop()  # type: ignore[arg-type]
    deadline = time.monotonic() + 10
    while state(daemon) not in (None, "Z") and time.monotonic() < deadline:
        time.sleep(0.05)
    assert state(daemon) in (None, "Z")
