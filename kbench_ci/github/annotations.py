"""Per-case annotations: a ``::error file=…::`` workflow command on the kernel's solution file
for every case that fails the gate (slower, incorrect, failed), so a reviewer sees it in the pull
request's Files view and not only in one gate line. ``faster`` cases get a ``::notice``.

GitHub shows at most 10 error and 10 notice annotations per step: the rest are counted in one
more line, and the report lists them all.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from kbench_ci.errors import KbenchError
from kbench_ci.github.workflow_commands import workflow_command
from kbench_ci.report.why import why_line
from kbench_ci.results.schema import variant_from_json
from kbench_ci.suite.loader import find_config, load_suite

#: GitHub's limit of annotations of one kind per step
MAX_PER_KIND = 10
_KIND_OF = {"slower": "error", "incorrect": "error", "failed": "error", "faster": "notice"}


def kernel_files(workspace: Path, config: str | None) -> dict[str, str]:
    """Kernel name → its solution file relative to ``workspace`` (the head's suite); {} when the
    suite cannot be read (the annotations then go without a file)."""
    try:
        path = find_config(workspace, Path(config) if config else None)
        suite = load_suite(path, check_files=False)
    except (KbenchError, OSError):
        return {}
    files = {}
    for kernel in suite.kernels:
        try:
            files[kernel.name] = str(kernel.solution.resolve().relative_to(workspace.resolve()))
        except ValueError:
            continue
    return files


def _detail(case: Mapping[str, Any]) -> str:
    head = case.get("head")
    base = case.get("base")
    why = None
    if case.get("verdict") in ("slower", "faster") and isinstance(head, Mapping) and isinstance(base, Mapping):
        try:
            why = why_line(variant_from_json(base), variant_from_json(head))
        except (KeyError, TypeError, ValueError):
            why = None
    message = case.get("message") or (head.get("message") if isinstance(head, Mapping) else None)
    return "; ".join(text for text in (str(message) if message else None, why) if text) or "see the kbench-ci report"


def case_annotations(results: Mapping[str, Any], files: Mapping[str, str]) -> list[str]:
    """The workflow commands for the cases of a compare's results.json."""
    lines: list[str] = []
    left: dict[str, int] = {}
    shown: dict[str, int] = {}
    cases: Sequence[Mapping[str, Any]] = results.get("cases") or ()
    for case in cases:
        verdict = str(case.get("verdict"))
        kind = _KIND_OF.get(verdict)
        if kind is None or (verdict == "slower" and case.get("accepted")):
            continue
        if shown.get(kind, 0) >= MAX_PER_KIND:
            left[kind] = left.get(kind, 0) + 1
            continue
        shown[kind] = shown.get(kind, 0) + 1
        ratio = case.get("ratio")
        change = f" {(ratio - 1) * 100:+.2f}%" if isinstance(ratio, (int, float)) and verdict in ("slower", "faster") else ""
        title = f"kbench-ci: {case.get('case_id')} {verdict}{change}"
        lines.append(workflow_command(kind, _detail(case), file=files.get(str(case.get("kernel")), ""), title=title))
    for kind, count in sorted(left.items()):
        lines.append(workflow_command(kind, f"{count} more case(s) {'fail the gate' if kind == 'error' else 'changed'}: see the report"))
    return lines
