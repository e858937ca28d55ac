"""kbench-ci's own output folders never make the head "working tree (dirty)"."""

from __future__ import annotations

from pathlib import Path

import pytest

from kbench_ci.gate.compare import run_compare
from kbench_ci.results.outcome import CompareRequest
from tests.support.suite_repo import TempRepo
from tests.unit.gate.test_compare_logic import FakeWorker, fake_nvcc
from tests.unit.gate.test_compare_logic import repo as repo  # noqa: F401  (the fixture)


def test_a_second_compare_into_the_default_folder_is_still_clean(repo: TempRepo, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: F811
    monkeypatch.chdir(repo.root)  # as the CLI runs: the relative --output-dir is under the start folder
    for output in ("bench_out", "bench_out"):
        outcome = run_compare(
            CompareRequest(start=repo.root, base="main", device="cuda:0", output_dir=Path(output), kernels=("same",)),
            worker=FakeWorker(), build_fn=fake_nvcc,
        )
        assert outcome.head.description.startswith("working tree (clean) at "), outcome.head.description
    assert (repo.root / "bench_out" / "results.json").is_file()  # the first run's report was there
    # Another folder this time: the earlier report folder still is no change.
    outcome = run_compare(
        CompareRequest(start=repo.root, base="main", device="cuda:0", output_dir=repo.root / "other", kernels=("same",)),
        worker=FakeWorker(), build_fn=fake_nvcc,
    )
    assert outcome.head.description.startswith("working tree (clean) at ")
    (repo.root / "k" / "same.py").write_text("# edited\ndef setup(**_):\n    pass\n\n\ndef run_kernel(**_):\n    pass\n")
    outcome = run_compare(
        CompareRequest(start=repo.root, base="main", device="cuda:0", output_dir=repo.root / "other", kernels=("same",)),
        worker=FakeWorker(), build_fn=fake_nvcc,
    )
    assert outcome.head.description.startswith("working tree (dirty) at ")
