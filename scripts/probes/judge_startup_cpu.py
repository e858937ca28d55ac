"""Wall time of a small judged compare on the CPU, by phase: a 3-case suite of an honest 64^3
matmul (tests/fixtures/judge_clock), base and head alike, 4 rounds, ``--time-budget 0``.
Prints the run's ``seconds`` and each case's, from results.json.

    python3 scripts/probes/judge_startup_cpu.py                       # --isolation judge
    python3 scripts/probes/judge_startup_cpu.py --isolation process   # the in-process worker
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.support.judge_clock import CONTROL, judge  # noqa: E402


def main() -> None:
    root = Path(tempfile.mkdtemp(prefix="kbench-judge-startup-"))
    began = time.time()
    judge(root, {f"k{i}": (CONTROL, {"M": 64, "N": 64, "K": 64}) for i in range(3)}, {"correctness_trials": 2, "rounds": 4},
          ["--device", "cpu", "--time-budget", "0", *sys.argv[1:]], cpu=True)
    wall = time.time() - began
    results = json.loads((root / "out" / "results.json").read_text())
    print(f"wall {wall:.1f}s", {name: round(value, 2) for name, value in results["seconds"].items()})
    for case in results["cases"]:
        print(case["case_id"], {name: round(value, 2) for name, value in case["seconds"].items()})


if __name__ == "__main__":
    main()
