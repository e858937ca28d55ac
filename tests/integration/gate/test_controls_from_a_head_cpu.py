"""A head whose exception carries a bidi override (U+202E) and an ESC sequence
(``ESC[2J`` clears a terminal). Neither may reach benchmark.md, the PR comment or the job log as
itself (the override would turn a reviewer's line around, ESC would play in the log's viewer):
each is shown as its escape, so the reviewer sees that the head tried."""

from __future__ import annotations

from pathlib import Path

from kbench_ci.github.comment import build_body
from tests.integration.gate.test_compare_cpu import kbench, results
from tests.support.suite_repo import kernel_source, make_suite_repo

KERNELS = [{"name": "boom", "kind": "pytorch", "shapes": [{"N": 512}]}]
#: what the head raises: an override that shows "exe.txt" as "txt.exe", then a screen clear
HOSTILE = "boom \u202etxt.exe \x1b[2J\x1b[31mall kernels passed"
RAW = ("\u202e", "\x1b")


def test_a_heads_bidi_override_and_escape_sequence_reach_no_reader_as_themselves(tmp_path: Path) -> None:
    repo = make_suite_repo(tmp_path / "repo", KERNELS)
    repo.git("checkout", "-q", "-b", "feature")
    # The file holds the escapes as Python source: the exception's text holds the characters.
    raising = kernel_source("pytorch", "raises").replace(
        '"boom: the head kernel is broken"', '"boom \\u202etxt.exe \\x1b[2J\\x1b[31mall kernels passed"')
    repo.commit({"kernels/boom.py": raising}, "head raises with controls")
    out = tmp_path / "out"
    completed = kbench(repo.root, "compare", "--base", "main", "--device", "cpu", "--output-dir", str(out))
    assert completed.returncode == 1, completed.stdout + completed.stderr
    (case,) = results(out)["cases"]
    assert case["verdict"] == "failed" and HOSTILE in case["message"]  # results.json keeps the words as raised

    report = (out / "benchmark.md").read_text(encoding="utf-8")
    body, _ = build_body(report)
    readers = {"benchmark.md": report, "the comment": body, "stderr": completed.stderr, "stdout": completed.stdout}
    assert [name for name, text in readers.items() if any(c in text for c in RAW)] == []
    shown = "boom \\u202etxt.exe \\x1b[2J\\x1b[31mall kernels passed"
    assert shown in report and shown in body
    assert shown in completed.stderr, completed.stderr
