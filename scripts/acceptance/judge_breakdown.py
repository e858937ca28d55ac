#!/usr/bin/env python3
"""Where a judged command's time went, by step and process, from the file the judge wrote
(``KBENCH_CI_JUDGE_BREAKDOWN``, kbench_ci/judge/breakdown.py):

    KBENCH_CI_ISOLATION=judge KBENCH_CI_JUDGE_BREAKDOWN=/tmp/steps.jsonl kbench-ci compare --base main --output-dir out
    python3 scripts/acceptance/judge_breakdown.py /tmp/steps.jsonl [--results out/results.json] [--command K]

One table a command (a judge process: the file may hold several, each appended in turn; with
``--command K`` only the K-th, from 1): a row a step, a column a process (``judge``; ``workers``
for their starts, all at once; each side and baseline by label), seconds summed over the
command's cases. Each step is the judge's own time in it, the steps inside it left out, so a
command's figures add up to the judge's time on its cases (and its start). With ``--results``
(that command's results.json), the cases' own wall time beside it: what the parent measured
around each case, which the judge's steps leave out only where the handoff of the case's
ticket and events took time.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tabulate import tabulate

from kbench_ci.judge.breakdown import JUDGE, Line


def commands(lines: list[Line]) -> list[list[Line]]:
    """The file's lines by the judge that wrote them, in the order the judges started writing."""
    by_judge: dict[int, list[Line]] = {}
    for line in lines:
        by_judge.setdefault(line.judge, []).append(line)
    return list(by_judge.values())


def table(lines: list[Line]) -> str:
    processes = sorted({line.process for line in lines}, key=lambda name: (name != JUDGE, name != "workers", name))
    seconds: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    counts: dict[str, int] = defaultdict(int)
    for line in lines:
        seconds[line.step][line.process] += line.seconds
        counts[line.step] += line.count
    steps = sorted(seconds, key=lambda step: -sum(seconds[step].values()))
    rows = [[step, counts[step], *(_cell(seconds[step].get(process)) for process in processes),
             f"{sum(seconds[step].values()):.2f}"] for step in steps]
    totals = [sum(seconds[step].get(process, 0.0) for step in steps) for process in processes]
    rows.append(["all steps", "", *(f"{total:.2f}" for total in totals), f"{sum(totals):.2f}"])
    return str(tabulate(rows, headers=["step (s)", "times", *processes, "all"], tablefmt="github", disable_numparse=True))


def _cell(value: float | None) -> str:
    return "" if value is None else f"{value:.2f}"


def case_walls(results: Path) -> dict[str, float]:
    data = json.loads(results.read_text())
    return {case["case_id"]: float((case.get("seconds") or {}).get("total", 0.0)) for case in data.get("cases", [])}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("breakdown", type=Path, help="the file KBENCH_CI_JUDGE_BREAKDOWN named")
    parser.add_argument("--results", type=Path, help="the command's results.json: its cases' wall time beside")
    parser.add_argument("--command", type=int, help="only the K-th command in the file (from 1)")
    args = parser.parse_args()
    if not args.breakdown.is_file():
        parser.error(f"{args.breakdown} is not a file: set KBENCH_CI_JUDGE_BREAKDOWN={args.breakdown} for a judged command")
    if args.results is not None and not args.results.is_file():
        parser.error(f"--results {args.results} is not a file: give the results.json of the command the steps are from")
    lines = [Line.from_json(text) for text in args.breakdown.read_text().splitlines() if text.strip()]
    found = commands(lines)
    if not found:
        parser.error(f"{args.breakdown} holds no steps: was the command run with KBENCH_CI_ISOLATION=judge?")
    if args.command is not None:
        if not 1 <= args.command <= len(found):
            parser.error(f"--command {args.command}: the file holds {len(found)} command(s)")
        found = [found[args.command - 1]]
    for index, command in enumerate(found, start=1):
        cases = list(dict.fromkeys(line.case for line in command))
        steps_s = sum(line.seconds for line in command)
        print(f"command {args.command or index} (judge pid {command[0].judge}): {len(cases)} case(s), {steps_s:.2f} s in the "
              "judge's steps")
        print(table(command))
        if args.results is not None:
            walls = case_walls(args.results)
            per_case: dict[str, float] = defaultdict(float)
            for line in command:
                if not (line.process == JUDGE and line.step.startswith("start")):
                    per_case[line.case] += line.seconds
            rows = [[case, f"{per_case[case]:.2f}", f"{walls[case]:.2f}" if case in walls else "-"] for case in cases]
            print(tabulate(rows, headers=["case", "judge's steps (s)", "case wall (s)"], tablefmt="github",
                           disable_numparse=True))
        print()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
