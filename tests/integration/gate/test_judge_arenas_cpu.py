"""A head must not reach the base's lent buffers (issue 50, item 7): on a CPU they were files in
``side-base/arenas`` that the head, the same user, could open and copy the base's answers from
(``peek_base_arena``). Asserted: the head opened no arena of another side's, copied no answer,
and is ``incorrect`` (it does no work of its own). Architecture only, no timing bound."""

from __future__ import annotations

from pathlib import Path

from tests.integration.gate.test_judge_worker_channels_cpu import _compare


def test_a_head_cannot_open_the_bases_arenas(tmp_path: Path) -> None:
    completed, results, marks = _compare(tmp_path, "peek_base_arena", [{"M": 96, "N": 96, "K": 96}], {})
    log = (marks / "peek_base_arena.log").read_text() if (marks / "peek_base_arena.log").is_file() else ""
    (case,) = results["cases"]
    print(log[-3000:], case["verdict"], case["head"].get("message"))
    calls = log.count(" copied\n") + log.count(" none\n")
    assert calls > 0, f"the head was never called: this test would prove nothing\n{completed.stderr[-2000:]}"
    assert "opened" not in log, log
    assert " copied\n" not in log, log
    assert case["base"]["status"] == "ok", case["base"]  # the memfd lent to the base maps and serves
    assert case["head"]["status"] == "incorrect", case["head"]
    assert completed.returncode == 1
