"""The PR comments of a 3-case and a 40-case compare, exactly as `kbench-ci comment` would post
them, from the synthetic cases of tests/unit/report/test_large_suite_comment.py.

    .venv/bin/python scripts/render_comment_screenshots.py DIR

writes DIR/compare-3.md and DIR/compare-40.md and prints their sizes; docs/screenshots/ holds
them rendered with cmark-gfm and headless Chromium (Debian's chromium, fonts-noto-color-emoji).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kbench_ci.github.comment import compose_body  # noqa: E402
from kbench_ci.report.compare import render_compare  # noqa: E402
from tests.unit.report.test_large_suite_comment import case, outcome  # noqa: E402


def main(out: Path) -> None:
    for name, count in (("compare-3", 3), ("compare-40", 40)):
        cases = [case(index, slower=index % 20 == 0) for index in range(count)]
        folder = out / name
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "benchmark.md").write_text(render_compare(outcome(cases, folder)))
        gate = {"passed": False, "summary": f"2 slower of {count}", "counts": {}}
        (folder / "results.json").write_text(json.dumps({"schema": "kbench-ci/compare", "gate": gate, "cases": []}))
        body, truncated, _ = compose_body(folder, env={})
        (out / f"{name}.md").write_text(body)
        print(f"{name}: {len(body.encode()):,} bytes{' (shortened)' if truncated else ''}")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
