"""The reproduce line of an ``incorrect`` judged case, run locally, fails on the same contents.

The head's kernel is wrong only on some contents (where the first input element is above -0.5:
about 7 seeds in 10), so whether it fails depends on the seeds the judge draws. A judged
compare reads it ``incorrect``; the report's reproduce line gives back the seeds of the trials
that failed (``--seeds``), and running that line fails at those seeds with the very same
mismatch. A seed whose contents it gets right passes its trial. Under both engines: the judge
and one process make a seed's contents alike (the trusted setup() at that seed).
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from kbench_ci.measure.setup_inputs import inputs_from_setup
from tests.support.suite_repo import TempRepo, make_suite_repo

ROOT = Path(__file__).resolve().parents[3]
_SHIM = "import sys; sys.argv[0] = 'kbench-ci'; from kbench_ci.cli.app import main; main()"
SHAPE = {"N": 64}
#: enough trials that a kernel wrong on 7 contents in 10 fails at least one (all pass: 0.3^8)
TRIALS = 8
KERNELS = [{"name": "scale", "kind": "pytorch", "shapes": [SHAPE]}]
WRONG_SOMETIMES = '''\
import torch


def setup(N, **_):
    x = torch.randn(N, dtype=torch.float32)
    out = torch.empty(N, dtype=torch.float32)
    return {"inputs": {"x": x, "out": out}, "outputs": ["out"]}


def run_kernel(x, out, **_):
    torch.mul(x, 2.0, out=out)
    if x[0].item() > -0.5:  # wrong only on these contents
        out[0] += 1.0
'''


def kbench(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    environment = {**os.environ}
    environment.pop("CUDA_VISIBLE_DEVICES", None)
    environment["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), environment.get("PYTHONPATH")]))
    return subprocess.run([sys.executable, "-c", _SHIM, *args], cwd=cwd, capture_output=True, text=True, timeout=600,
                          env=environment)


def _head(out: Path) -> dict:
    data = json.loads((out / "results.json").read_text())
    (case,) = data["cases"]
    return {"verdict": case["verdict"], **case["head"]}


def _trials(head: dict) -> list[dict]:
    return head["correctness"]["trials"]


def _mismatch(trial: dict) -> list[dict]:
    return [{key: value for key, value in output.items() if key != "tolerance_source"} for output in trial["outputs"]]


def _passed(trial: dict) -> bool:
    return trial["error"] is None and not trial["modified_inputs"] and all(o["passed"] for o in trial["outputs"])


@pytest.fixture(scope="module")
def judged(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    """A judged compare in CI: main honest, the head wrong on some contents."""
    root = tmp_path_factory.mktemp("seeds")
    repo = make_suite_repo(root / "repo", KERNELS, defaults={"correctness_trials": TRIALS})
    repo.git("checkout", "-q", "-b", "feature")
    repo.commit({"kernels/scale.py": WRONG_SOMETIMES}, "a kernel wrong on some contents")
    out = root / "ci"
    done = kbench(repo.root, "compare", "--base", "main", "--device", "cpu", "--isolation", "judge", "--no-cache",
                  "--output-dir", str(out))
    assert done.returncode == 1, done.stderr[-3000:]
    return {"repo": repo, "out": out, "head": _head(out), "report": (out / "benchmark.md").read_text()}


def _reproduce_line(report: str) -> list[str]:
    section = report.split("## Reproduce locally")[1].split("\n## ")[0]
    (line,) = [line for line in section.splitlines() if line.startswith("kbench-ci compare")]
    return shlex.split(line.split("  # ")[0])


def _local(judged: dict[str, object], name: str, *args: str) -> dict:
    repo, out = judged["repo"], Path(str(judged["out"])).parent / name
    assert isinstance(repo, TempRepo)
    done = kbench(repo.root, *args, "--device", "cpu", "--no-cache", "--output-dir", str(out))
    assert done.returncode in (0, 1), done.stderr[-3000:]
    return {**_head(out), "report": (out / "benchmark.md").read_text()}


def _passing_seed() -> int:
    """A seed whose contents the head gets right, made by the code that makes them for both
    engines (the trusted setup() at that seed)."""
    spec = importlib.util.spec_from_loader("wrong_sometimes", loader=None)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    exec(WRONG_SOMETIMES, module.__dict__)  # noqa: S102  (the test's own fixture source)
    for seed in range(1000, 2000):
        inputs = inputs_from_setup(module.setup, SHAPE, seed=seed, device=torch.device("cpu"), where="setup()")
        if inputs.kwargs["x"][0].item() <= -0.5:
            return seed
    raise AssertionError("no seed in 1000..1999 gives contents the kernel gets right")


def test_the_judge_records_the_seeds_it_drew_and_which_failed(judged: dict[str, object]) -> None:
    head = judged["head"]
    assert isinstance(head, dict)
    print(head["verdict"], head["message"], [(t["seed"], _passed(t)) for t in _trials(head)])
    assert head["verdict"] == "incorrect" and head["status"] == "incorrect"
    seeds = [trial["seed"] for trial in _trials(head)]
    assert len(seeds) == TRIALS and len(set(seeds)) == TRIALS  # drawn, not seed + k
    assert seeds != list(range(seeds[0], seeds[0] + TRIALS))
    assert any(not _passed(trial) for trial in _trials(head))


def test_the_reproduce_line_carries_the_isolation_and_the_failed_seeds(judged: dict[str, object]) -> None:
    head, report = judged["head"], judged["report"]
    assert isinstance(head, dict) and isinstance(report, str)
    words = _reproduce_line(report)
    failed = [trial["seed"] for trial in _trials(head) if not _passed(trial)]
    assert words[words.index("--isolation") + 1] == "judge"
    assert words[words.index("--seeds") + 1] == ",".join(map(str, failed))


@pytest.mark.parametrize("isolation", ["judge", "process"])
def test_the_reproduce_line_run_locally_fails_on_the_same_contents(judged: dict[str, object], isolation: str) -> None:
    head, report = judged["head"], judged["report"]
    assert isinstance(head, dict) and isinstance(report, str)
    words = _reproduce_line(report)
    words[words.index("--isolation") + 1] = isolation  # the line as given, then the other engine
    local = _local(judged, f"local-{isolation}", *words[1:])
    failed = {trial["seed"]: trial for trial in _trials(head) if not _passed(trial)}
    print(isolation, local["verdict"], local["message"])
    assert local["verdict"] == "incorrect"
    assert [trial["seed"] for trial in _trials(local)] == list(failed)  # one trial a seed, in the line's order
    for trial in _trials(local):
        assert not _passed(trial)
        # the same contents: the same mismatch, element and values, as in CI (the tolerance's
        # source is worded per engine)
        assert _mismatch(trial) == _mismatch(failed[trial["seed"]])
    assert str(next(iter(failed))) in local["message"]
    if isolation == "judge":
        assert "Seeds chosen" in local["report"] and "not drawn by the judge" in local["report"]


@pytest.mark.parametrize("isolation", ["judge", "process"])
def test_a_seed_whose_contents_it_gets_right_passes_its_trial(judged: dict[str, object], isolation: str) -> None:
    """Its trial at that seed passes. (Its timed calls are still checked on other contents, on
    which it may well fail: only the correctness trials' seeds are given.)"""
    seed = _passing_seed()
    local = _local(judged, f"passing-{isolation}", "compare", "--base", "main", "--kernel", "scale",
                   "--isolation", isolation, "--seeds", str(seed))
    print(isolation, local["verdict"], local["message"])
    assert [(trial["seed"], _passed(trial)) for trial in _trials(local)] == [(seed, True)]
    if local["verdict"] == "incorrect":
        assert re.search(r"timed call|after timing|re-?checked", local["message"]), local["message"]
