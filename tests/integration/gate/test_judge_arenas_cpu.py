"""A head must not reach the base's lent buffers: on a CPU they were files in
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


def test_a_heads_files_in_shared_memory_do_not_outlive_the_compare(tmp_path: Path) -> None:
    before = {entry.name for entry in Path("/dev/shm").iterdir()}
    completed, results, marks = _compare(tmp_path, "shm_junk", [{"M": 96, "N": 96, "K": 96}], {})
    log = (marks / "shm_junk.log").read_text() if (marks / "shm_junk.log").is_file() else ""
    print(log, completed.stderr[-1500:])
    pids = {line.split()[0] for line in log.splitlines()}
    assert pids, "the head never ran: this test would prove nothing"
    left = [str(path) for path in Path("/dev/shm").rglob("kbench-junk-*") if path.name.split("-")[-1] in pids]
    assert left == [], left
    assert "wrote /dev/shm/kbench-side-" in log, log  # its own shared-memory folder takes files
    # ... and goes with its worker. Only the folders it wrote to are looked at: another command
    # running on the machine has folders of its own there (the head scans them all)
    written = {Path(line.split("wrote ", 1)[1]).parent for line in log.splitlines() if " wrote /dev/shm/kbench-side-" in line}
    assert written and all(folder.name not in before for folder in written), (written, before)
    assert [str(folder) for folder in written if folder.exists()] == []
    (case,) = results["cases"]
    assert case["head"]["status"] == "ok", case["head"]
