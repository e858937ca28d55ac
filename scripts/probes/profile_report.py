#!/usr/bin/env python3
"""Print the top functions by cumulative and by own time of each profiled process (profile_site).

    python3 scripts/probes/profile_report.py DIR [--top 40] [--match kbench_ci]
"""

from __future__ import annotations

import argparse
import io
import pstats
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("dir", type=Path)
    parser.add_argument("--top", type=int, default=40)
    parser.add_argument("--match", default="")
    args = parser.parse_args()
    for stats_path in sorted(args.dir.glob("*.pstats"), key=lambda p: p.stat().st_mtime):
        argv = stats_path.with_suffix(".argv")
        head = argv.read_text().strip() if argv.exists() else "?"
        print(f"\n######## {stats_path.name}: {head[:300]}")
        for order in ("cumulative", "tottime"):
            buffer = io.StringIO()
            stats = pstats.Stats(str(stats_path), stream=buffer)
            stats.sort_stats(order).print_stats(args.match, args.top) if args.match else stats.sort_stats(order).print_stats(args.top)
            print(f"--- by {order}")
            print("\n".join(buffer.getvalue().splitlines()[6:]))


if __name__ == "__main__":
    main()
