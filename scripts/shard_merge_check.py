#!/usr/bin/env python3
"""A real suite compared in N shards, one after another, then merged.

    python scripts/shard_merge_check.py                  # on a GPU machine: 2 shards, ~1.5 min on an H200
    python scripts/shard_merge_check.py --shards 3 --smoke   # on a CPU: the Triton kernels at tiny sizes

It builds the throw-away repository of scripts/acceptance/aa_and_regression.py (main, and `slower`: the
vector adds doing 2% more work), runs ``compare --base main --head slower --shard K/N`` once per
shard, each into its own folder as the jobs of a runner matrix would, and ``kbench-ci merge`` of
those folders. It prints each shard's cases and wall time and the merged gate, and checks that
every case of the suite is in exactly one shard and that the merged report holds them all with
the verdicts the shards gave. Exit 0 only when it does.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent / "acceptance"))
from aa_and_regression import CLI_SHIM, REPO, make_repo  # noqa: E402


def kbench(repo: Path, *args: str) -> tuple[int, str, float]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", CLI_SHIM, *args], cwd=repo, env=env, capture_output=True, text=True)
    return done.returncode, done.stdout + done.stderr, time.perf_counter() - started


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shards", type=int, default=2)
    parser.add_argument("--smoke", action="store_true", help="CPU, tiny sizes (Triton kernels only)")
    parser.add_argument("--threshold", default="0.01")
    parser.add_argument("--time-budget", default="5")
    args = parser.parse_args(argv)
    workdir = Path(tempfile.mkdtemp(prefix="kbench-shards-"))
    repo = workdir / "repo"
    make_repo(repo, smoke=args.smoke, slowdown=0.02)
    device = "cpu" if args.smoke else "auto"
    folders = []
    shard_cases: dict[str, list[str]] = {}
    ok = True
    for k in range(1, args.shards + 1):
        out = workdir / f"shard-{k}"
        code, text, wall = kbench(repo, "compare", "--base", "main", "--head", "slower", "--device", device,
                                  "--threshold", args.threshold, "--time-budget", args.time_budget,
                                  "--shard", f"{k}/{args.shards}", "--output-dir", str(out))
        if code not in (0, 1):
            print(f"shard {k}/{args.shards}: compare exited {code}\n{text[-3000:]}")
            return 1
        data = json.loads((out / "results.json").read_text())
        shard_cases[f"{k}/{args.shards}"] = [f"{c['case_id']}: {c['verdict']}" for c in data["cases"]]
        print(f"shard {k}/{args.shards}: {len(data['cases'])} cases, {wall:.1f} s, {data['gate']['summary']}")
        for line in shard_cases[f"{k}/{args.shards}"]:
            print(f"    {line}")
        folders.append(str(out))
    merged = workdir / "merged"
    code, text, wall = kbench(repo, "merge", *folders, "--output-dir", str(merged))
    if code not in (0, 1):
        print(f"merge exited {code}\n{text[-3000:]}")
        return 1
    data = json.loads((merged / "results.json").read_text())
    merged_cases = sorted(f"{c['case_id']}: {c['verdict']}" for c in data["cases"])
    sharded = sorted(line for lines in shard_cases.values() for line in lines)
    print(f"merged ({wall:.1f} s, exit {code}): {len(merged_cases)} cases, {data['gate']['summary']}")
    ids = [line.split(":")[0] for line in sharded]
    if len(set(ids)) != len(ids):
        print("NO: a case was measured by two shards")
        ok = False
    if merged_cases != sharded:
        print(f"NO: the merged cases differ from the shards'\n  merged {merged_cases}\n  shards {sharded}")
        ok = False
    print((merged / "benchmark.md").read_text()[:3000])
    shutil.rmtree(workdir, ignore_errors=True)
    print(f"\nshards and merge: {'PASSED' if ok else 'FAILED'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
