"""Hints read as one sentence. "set GITHUB_TOKEN (in a workflow: ${{
github.token }}))" nested one parenthesis in another; every hint's literal text is scanned for
that (a call's empty "()" is not a parenthesis of the sentence)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

PACKAGE = Path(__file__).parents[2] / "kbench_ci"
NESTED = re.compile(r"\([^()]*\([^()]+\)[^()]*\)")


def _hints() -> list[tuple[str, int, str]]:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.Call):
                continue
            for keyword in node.keywords:
                if keyword.arg == "hint":
                    text = "".join(part.value for part in ast.walk(keyword.value)
                                   if isinstance(part, ast.Constant) and isinstance(part.value, str))
                    found.append((path.name, node.lineno, text))
    return found


def test_no_hint_nests_parentheses() -> None:
    hints = _hints()
    assert len(hints) > 50  # the scan reaches the package's hints
    nested = [hint for hint in hints if NESTED.search(hint[2])]
    assert nested == []


def test_the_token_hint_says_where_the_token_comes_from_in_one_sentence() -> None:
    texts = [text for _, _, text in _hints() if "GITHUB_TOKEN" in text]
    assert texts and all(NESTED.search(text) is None and "${{ github.token }}" in text for text in texts)
