"""The judge's outside-clock figures in every results.json under a folder: per case
and side, the median gap (span less the side's own time), the trusted sides' gap, the excess,
the resolution, the judge's pre and post segments, and the case's verdict.

    python3 scripts/acceptance/clock_figures.py /tmp/kb_out/judge_aa
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any


def _variants(node: Any, case: dict[str, Any] | None) -> Iterator[tuple[dict[str, Any] | None, dict[str, Any]]]:
    """Every variant with an outside_clock, with the nearest enclosing object that has a case_id."""
    if isinstance(node, dict):
        if "case_id" in node:
            case = node
        if isinstance(node.get("outside_clock"), dict):
            yield case, node
        for value in node.values():
            yield from _variants(value, case)
    elif isinstance(node, list):
        for value in node:
            yield from _variants(value, case)


def main() -> None:
    root = Path(sys.argv[1])
    excesses = []
    print(f"{'case':34} {'side':6} {'status':9} {'calls':>5} {'own us':>8} {'gap':>7} {'ref gap':>7} {'excess':>7} {'res':>5} "
          f"{'pre':>6} {'post':>6} verdict")
    results = [(path, json.loads(path.read_text())) for path in sorted(root.rglob("results.json"))]
    for _, data in results:
        for case, variant in _variants(data, None):
            clock = variant["outside_clock"]
            verdict = str((case or {}).get("verdict", ""))
            own = sorted(clock["reported_us"])[len(clock["reported_us"]) // 2] if clock["reported_us"] else float("nan")
            ref = clock.get("reference_gap_us")
            excess = clock["gap_us"] - ref if ref is not None else None
            if excess is not None:
                excesses.append(excess)
            print(f"{str((case or {}).get('case_id', '?'))[:34]:34} {variant['label'][:6]:6} {variant['status'][:9]:9} "
                  f"{clock['calls']:5d} {own:8.2f} {clock['gap_us']:7.2f} {ref if ref is not None else float('nan'):7.2f} "
                  f"{excess if excess is not None else float('nan'):7.2f} {clock.get('resolution_us') or float('nan'):5.2f} "
                  f"{clock['pre_us']:6.1f} {clock['post_us']:6.1f} {verdict}")
    if excesses:
        excesses.sort()
        print(f"excess over {len(excesses)} judged sides: min {excesses[0]:.2f} median {excesses[len(excesses) // 2]:.2f} "
              f"max {excesses[-1]:.2f} us")


if __name__ == "__main__":
    main()
