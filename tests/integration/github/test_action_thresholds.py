"""Under the action, each kernel is judged by its own threshold in kbench.toml.

The action's own command line (``compare_argv`` with the inputs' defaults) is run through the
real ``kbench-ci compare`` command (option parsing, the request, the verdicts, results.json);
only the measuring is a stand-in: a worker that times the head 5% slower than the base, so a
kernel whose threshold is above 5% reads ``unchanged`` and one below it ``slower``.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from kbench_ci.cli.app import app
from kbench_ci.gate import compare as gate_compare
from kbench_ci.github.action import compare_argv
from kbench_ci.measure.parent import WorkerOutcome
from kbench_ci.results.model import CaseResult, CorrectnessResult, VariantResult
from kbench_ci.wire.protocol import CaseJob
from tests.support.suite_repo import TempRepo

SUITE = """\
[defaults]
rounds = 6
num_trials = 60
time_budget = 0
threshold = "3%"

[[kernels]]
name = "loose"
solution = "k/loose.py"
ref = "k/ref.py"
shapes = [{N = 16}]
threshold = "10%"

[[kernels]]
name = "tight"
solution = "k/tight.py"
ref = "k/ref.py"
shapes = [{N = 16}]
"""


def _samples(median: float, rounds: int, seed: int) -> tuple[tuple[float, ...], ...]:
    rng = random.Random(seed)
    return tuple(tuple(median * (1 + rng.uniform(-0.002, 0.002)) for _ in range(10)) for _ in range(rounds))


class SlowerHead:
    """Every case: correct on both sides, the head 5% slower."""

    def __call__(self, job: CaseJob, *, timeout_s: float, on_event: Any = None) -> tuple[CaseResult, WorkerOutcome]:
        variants = tuple(
            VariantResult(label=side.label, kind="triton", role="solution", status="ok", message=None,
                          correctness=CorrectnessResult(trials=()),
                          rounds_ms=_samples(1.05 if side.label == "head" else 1.0, job.settings.rounds, index))
            for index, side in enumerate(job.sides)
        )
        result = CaseResult(case_id=job.case_id, dims=dict(job.dims), seed=job.settings.seed, variants=variants,
                            timing_method="cuda_event")
        return result, WorkerOutcome(environment={"device": "cuda:0", "gpu_name": "Fake GPU"})


@pytest.fixture
def repo(tmp_path: Path) -> TempRepo:
    repo = TempRepo(tmp_path / "repo")
    repo.commit({"kbench.toml": SUITE, "k/ref.py": "def reference(**_): pass\n",
                 "k/loose.py": "# v1\ndef setup(**_):\n    pass\n\n\ndef run_kernel(**_):\n    pass\n", "k/tight.py": "# v1\ndef setup(**_):\n    pass\n\n\ndef run_kernel(**_):\n    pass\n"}, "base")
    repo.git("checkout", "-q", "-b", "feature")
    repo.commit({"k/loose.py": "# v2\ndef setup(**_):\n    pass\n\n\ndef run_kernel(**_):\n    pass\n", "k/tight.py": "# v2\ndef setup(**_):\n    pass\n\n\ndef run_kernel(**_):\n    pass\n"}, "head")
    return repo


def _run_action_compare(repo: TempRepo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, threshold: str) -> dict[str, Any]:
    real = gate_compare.run_compare

    def measured_by_the_stand_in(request: Any, **kwargs: Any) -> Any:
        kwargs.pop("options", None)
        return real(request, worker=SlowerHead(), **kwargs)

    monkeypatch.setattr(gate_compare, "run_compare", measured_by_the_stand_in)
    monkeypatch.chdir(repo.root)
    report = tmp_path / f"report{threshold or '-none'}"
    runner_temp = tmp_path / "runner-temp"
    runner_temp.mkdir(exist_ok=True)
    env = {"KBENCH_BASE": "main", "KBENCH_HEAD": "feature", "KBENCH_REPORT_DIR": str(report),
           "KBENCH_THRESHOLD": threshold, "RUNNER_TEMP": str(runner_temp), "KBENCH_CACHE": "false"}
    argv = compare_argv(env, "kbench-ci")
    done = CliRunner().invoke(app, [*argv[1:], "--device", "cpu"])
    assert done.exit_code == 0, done.output  # --no-fail: the action's gate step decides
    return json.loads((report / "results.json").read_text())


def test_kernels_are_judged_by_their_own_thresholds_under_the_actions_argv(
    repo: TempRepo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = _run_action_compare(repo, tmp_path, monkeypatch, threshold="")  # the input's default
    cases = {case["kernel"]: case for case in data["cases"]}
    # "loose" has its own 10%; "tight" inherits [defaults] threshold = "3%".
    assert (cases["loose"]["threshold"], cases["loose"]["verdict"]) == (pytest.approx(0.10), "unchanged")
    assert (cases["tight"]["threshold"], cases["tight"]["verdict"]) == (pytest.approx(0.03), "slower")
    assert data["settings"]["threshold_override"] is None


def test_a_set_threshold_input_still_overrides_every_kernel(
    repo: TempRepo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = _run_action_compare(repo, tmp_path, monkeypatch, threshold="8%")
    assert {case["kernel"]: (case["threshold"], case["verdict"]) for case in data["cases"]} == {
        "loose": (pytest.approx(0.08), "unchanged"), "tight": (pytest.approx(0.08), "unchanged")}
