"""The outside clock's red team, shared by the CPU and GPU tests: a suite whose every case has the honest
kernel of tests/fixtures/judge_clock as its base and one of that folder's heads as its head, one
``compare --isolation judge`` over all of it, and a table of what came out.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.support.suite_repo import FAST_DEFAULTS, TempRepo, suite_toml

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "judge_clock"
#: heads that cheat on time alone: each computes correct outputs (README.md says how each would win)
CHEATS = ("rebind_timer", "replay_seen", "replay_until_new", "skip_flush", "rhythm", "escape_end", "shave")
#: the honest kernel under another name, changed by a comment: the new checks must not cry wolf
CONTROL = "honest_control"
HEADS = (*CHEATS, CONTROL)
#: cheats that need a GPU to play their trick (GPU work left running when a turn ends)
GPU_CHEATS = ("linger", "work_in_lead", "front_load")
#: heads truly slower than the base by what they take off their own clock (slow_shave.py): each
#: must read ``slower`` or ``incorrect``
SLOWER_LIARS = ("slow_shave",)
#: cheats that play their trick on a CPU only (a daemon sharing the lent host memory)
CPU_CHEATS = ("daemon_stage",)
#: modules the heads import (committed beside them in both trees)
HELPERS = ("honest", "memo", "shave_clock")
#: what the judge's defence says of each cheat it names
OUTSIDE_CLOCK = "its process reported less time than"
SEEN_CONTENTS = "faster on contents it had seen"
BACKGROUND_WORK = "GPU work of its own ran while the judge"


def head_text(head: str) -> str:
    if head == CONTROL:
        return (FIXTURES / "honest.py").read_text() + "\n# the head's copy: an honest kernel, changed in nothing but this line\n"
    return (FIXTURES / f"{head}.py").read_text()


@dataclass(frozen=True)
class Judged:
    completed: subprocess.CompletedProcess[str]
    cases: dict[str, dict[str, Any]]
    #: trick name -> how many times it fired (at least), from the heads' marks
    fired: dict[str, int]

    def case(self, name: str) -> dict[str, Any]:
        return self.cases[name]


def make_suite(root: Path, cases: Mapping[str, tuple[str, Mapping[str, int]]], defaults: Mapping[str, Any]) -> TempRepo:
    """``cases``: case name -> (head fixture, shape). Base: the honest kernel under every name."""
    repo = TempRepo(root)
    kernels = [{"name": name, "kind": "pytorch", "shapes": [dict(shape)]} for name, (_, shape) in cases.items()]
    toml = "\n".join(
        'ref = "kernels/ref.py"' if line.startswith("ref = ") else line
        for line in suite_toml(kernels, {**FAST_DEFAULTS, **defaults}).splitlines()
    ) + "\n"
    honest = (FIXTURES / "honest.py").read_text()
    base = {"kbench.toml": toml, "kernels/ref.py": (FIXTURES / "ref.py").read_text()}
    base.update({f"kernels/{helper}.py": (FIXTURES / f"{helper}.py").read_text() for helper in HELPERS})
    base.update({f"kernels/{name}.py": honest for name in cases})
    repo.commit(base, "an honest kernel under every name")
    repo.git("checkout", "-q", "-b", "cheats")
    repo.commit({f"kernels/{name}.py": head_text(head) for name, (head, _) in cases.items()}, "heads that cheat on time")
    return repo


def judge(root: Path, cases: Mapping[str, tuple[str, Mapping[str, int]]], defaults: Mapping[str, Any],
          args: Sequence[str], *, cpu: bool = False, timeout: float = 900, env: Mapping[str, str] | None = None) -> Judged:
    """Run the compare (``cpu``: with no GPU visible to it; ``env``: more variables for it) and
    read what it wrote."""
    repo = make_suite(root / "repo", cases, defaults)
    marks = Path(tempfile.mkdtemp(prefix="kbench-judge-clock-", dir="/dev/shm" if Path("/dev/shm").is_dir() else None))
    environment = {**os.environ, **(env or {}), "KBENCH_JUDGE_CLOCK_MARKS": str(marks)}
    if cpu:
        environment.pop("CUDA_VISIBLE_DEVICES", None)
    out = root / "out"
    completed = subprocess.run(
        [sys.executable, "-m", "kbench_ci", "compare", "--base", "main", "--isolation", "judge", "--output-dir", str(out),
         "--no-cache", *args],
        cwd=repo.root, env=environment, capture_output=True, text=True, timeout=timeout,
    )
    assert (out / "results.json").is_file(), completed.stderr[-4000:]
    results = json.loads((out / "results.json").read_text())
    fired: dict[str, int] = {}
    for path in marks.iterdir():
        trick = path.name.rsplit(".", 1)[0]
        fired[trick] = fired.get(trick, 0) + int(path.read_text().strip() or 0)
    return Judged(completed, {case["kernel"]: case for case in results["cases"]}, fired)


def median_us(variant: Mapping[str, Any]) -> float:
    samples = sorted(s for round_ in variant.get("rounds_ms") or () for s in round_)
    return samples[len(samples) // 2] * 1e3 if samples else float("nan")


def table(judged: Judged) -> str:
    """One line per case: verdict, change, each side's status and median, the head's message;
    then the tricks that fired."""
    lines = [f"{'case':28s} {'verdict':12s} {'change':>8s}  {'base':14s} {'head':14s} message"]
    for name, case in judged.cases.items():
        base, head = case.get("base") or {}, case.get("head") or {}
        ratio = case.get("ratio")
        change = f"{ratio - 1:+.1%}" if isinstance(ratio, (int, float)) else "-"
        lines.append(
            f"{name:28s} {case['verdict']:12s} {change:>8s}  {base.get('status', '-'):4s} {median_us(base):9.1f}"
            f" {head.get('status', '-'):4s} {median_us(head):9.1f} {str(head.get('message') or '')[:200]}"
        )
    lines.append("fired: " + ", ".join(f"{trick} x{count}+" for trick, count in sorted(judged.fired.items())))
    return "\n".join(lines)


def fired(judged: Judged, head: str) -> int:
    """How often ``head``'s tricks fired (its marks: at least this many times)."""
    return sum(count for trick, count in judged.fired.items() if trick.split(".", 1)[0] == head)
