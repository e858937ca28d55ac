"""`kbench-ci compare` and `kbench-ci run` end to end on the CPU: real git repositories, real
worker subprocesses, Triton kernels under the interpreter and PyTorch kernels on CPU tensors.

Sizes, rounds and trials are tiny (see tests/support/suite_repo.FAST_DEFAULTS): with 2 rounds the
Wilcoxon test can never reach p < 0.05, so nothing here can come out `slower` by noise.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from kbench_ci.suite.settings import installed_without_bytecode
from tests.support.suite_repo import TempRepo, make_suite_repo, suite_files

ROOT = Path(__file__).resolve().parents[3]

# The console script's entry point, named as the console script names itself in messages.
_SHIM = "import sys; sys.argv[0] = 'kbench-ci'; from kbench_ci.cli.app import main; main()"

BASE_KERNELS = [
    {"name": "vadd", "kind": "triton", "shapes": [{"N": 1024}]},
    {"name": "scale", "kind": "pytorch", "shapes": [{"N": 4096}]},
    {"name": "boom", "kind": "pytorch", "shapes": [{"N": 512}]},
    {"name": "gone", "kind": "pytorch", "shapes": [{"N": 512}]},
]
HEAD_KERNELS = [
    {"name": "vadd", "kind": "triton", "shapes": [{"N": 1024}], "variant": "wrong"},
    {"name": "scale", "kind": "pytorch", "shapes": [{"N": 4096}]},
    {"name": "boom", "kind": "pytorch", "shapes": [{"N": 512}], "variant": "raises"},
    {"name": "fresh", "kind": "pytorch", "shapes": [{"N": 256}]},
]


def kbench(
    cwd: Path, *args: str, tmpdir: Path | None = None, timeout: float = 240, python_options: tuple[str, ...] = (),
    env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    environment = {**os.environ, **(env or {})}
    environment.pop("CUDA_VISIBLE_DEVICES", None)
    environment["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), environment.get("PYTHONPATH")]))
    if tmpdir is not None:
        environment["TMPDIR"] = str(tmpdir)
    return subprocess.run(
        [sys.executable, *python_options, "-c", _SHIM, *args], cwd=cwd, capture_output=True, text=True, timeout=timeout,
        env=environment,
    )


def results(out: Path) -> dict:
    return json.loads((out / "results.json").read_text())


def verdicts(data: dict) -> dict[str, str]:
    return {case["kernel"]: case["verdict"] for case in data["cases"]}


@pytest.fixture
def history(tmp_path: Path) -> TempRepo:
    """main: four correct kernels. feature (checked out): vadd wrong, boom raises, gone removed,
    fresh added, scale untouched. docs: main plus a README change only."""
    repo = make_suite_repo(tmp_path / "repo", BASE_KERNELS)
    repo.git("checkout", "-q", "-b", "docs")
    repo.commit({"README.md": "docs only\n"}, "docs")
    repo.git("checkout", "-q", "main")
    repo.git("checkout", "-q", "-b", "feature")
    repo.commit({**suite_files(HEAD_KERNELS), "kernels/gone.py": None, "kernels/gone_ref.py": None}, "feature")
    return repo


def test_compare_head_with_regressions(history: TempRepo, tmp_path: Path) -> None:
    """incorrect, failed (others still judged), added, removed; exit 1; nothing left behind."""
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    before = history.status()
    out = tmp_path / "out"
    completed = kbench(history.root, "compare", "--base", "main", "--device", "cpu", "--output-dir", str(out),
                       tmpdir=scratch)
    assert completed.returncode == 1, completed.stdout + completed.stderr
    data = results(out)
    got = verdicts(data)
    assert got["vadd"] == "incorrect"
    assert got["boom"] == "failed"
    assert got["fresh"] == "added"
    assert got["gone"] == "removed"
    assert got["scale"] in ("unchanged", "inconclusive")  # a crash next door does not stop the others
    cases = {case["kernel"]: case for case in data["cases"]}
    assert "boom: the head kernel is broken" in cases["boom"]["message"]
    assert cases["vadd"]["head"]["status"] == "incorrect" and cases["vadd"]["base"]["status"] == "ok"
    assert cases["scale"]["ratio"] > 0 and cases["scale"]["ci_low"] <= cases["scale"]["ci_high"]
    assert len(cases["scale"]["base"]["rounds_ms"]) >= 2 and len(cases["scale"]["head"]["rounds_ms"]) >= 2
    # The gate block the GitHub action reads.
    gate = data["gate"]
    assert gate["passed"] is False and gate["complete"] is True
    assert gate["counts"]["incorrect"] == 1 and gate["counts"]["failed"] == 1 and gate["counts"]["added"] == 1
    assert "gate FAILED" in gate["summary"]
    assert data["schema"] == "kbench-ci/compare" and data["schema_version"] == 1
    assert data["settings"]["timing_method"] == "host_time" and data["settings"]["rounds"] == 2
    report = (out / "benchmark.md").read_text()
    assert gate["summary"] in report and "<details>" in report
    assert gate["summary"] in completed.stdout
    assert "case 1/5" in completed.stderr  # the progress line names the case
    # Worktrees and temporary directories are gone; the user's tree is as it was.
    assert history.worktrees() == [str(history.root)]
    assert list(scratch.iterdir()) == []
    assert history.status() == before


def test_no_fail_reports_but_exits_0(history: TempRepo, tmp_path: Path) -> None:
    out = tmp_path / "out"
    completed = kbench(history.root, "compare", "--base", "main", "--device", "cpu", "--output-dir", str(out),
                       "--kernel", "vadd", "--no-fail", "--json-summary", str(tmp_path / "summary.json"))
    assert completed.returncode == 0, completed.stderr
    assert verdicts(results(out)) == {"vadd": "incorrect"}
    assert results(out)["gate"]["passed"] is False
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["passed"] is False and summary["exit_code"] == 0
    assert next(iter(summary)) == "schema" and summary["schema"] == "kbench-ci/summary"  # the file says whose it is


def test_no_change_exits_0_and_is_never_slower(history: TempRepo, tmp_path: Path) -> None:
    out = tmp_path / "out"
    # --head names a commit: both sides are checked out into worktrees.
    completed = kbench(history.root, "compare", "--base", "main", "--head", "docs", "--device", "cpu",
                       "--output-dir", str(out), "--kernel", "vadd", "--kernel", "scale", "--threshold", "2%")
    assert completed.returncode == 0, completed.stdout + completed.stderr
    data = results(out)
    assert set(verdicts(data).values()) <= {"unchanged", "inconclusive"}
    assert data["gate"]["passed"] is True and data["gate"]["counts"]["slower"] == 0
    assert data["head"]["ref"] == "docs" and data["head"]["tree"] == "worktree"
    assert all(case["threshold"] == 0.02 for case in data["cases"])
    assert history.worktrees() == [str(history.root)]
    # A CPU run's report says nothing of GPUs or CUPTI.
    report = (out / "benchmark.md").read_text()
    for gpu_only in ("CUPTI", "GPU before", "GPU after", "not read (no nvidia-smi"):
        assert gpu_only not in report, gpu_only


def test_the_parent_process_never_imports_torch(history: TempRepo, tmp_path: Path) -> None:
    # The warm worker imports torch; the parent (git, builds, the report) must not, or the
    # worker starts seconds later. -X importtime lists the parent's imports only.
    out = tmp_path / "out"
    completed = kbench(history.root, "compare", "--base", "main", "--device", "auto", "--output-dir", str(out),
                       "--kernel", "scale", "--kernel", "vadd", "--rounds", "3", python_options=("-X", "importtime"),
                       env={"KBENCH_CI_LOG": "debug"})
    assert completed.returncode in (0, 1), completed.stderr[-3000:]
    assert set(verdicts(results(out))) == {"scale", "vadd"}
    imported = [line.rsplit("|", 1)[1].strip() for line in completed.stderr.splitlines() if line.startswith("import time:")]
    assert "kbench_ci.gate.compare" in imported  # the listing is the parent's
    assert [name for name in imported if name == "torch" or name.startswith("torch.")] == []
    assert results(out)["environment"]["torch_version"]  # the worker did import it
    # KBENCH_CI_LOG=debug: the timeline of the run (a Triton kernel in the suite: triton preloaded)
    timeline = [line for line in completed.stderr.splitlines() if line.startswith("kbench-ci ") and " ms kbench_ci." in line]
    assert any(re.search(r"worker \d+ started for cpu \(preload: triton\)", line) for line in timeline), timeline
    assert sum("finished in worker" in line and "taken" in line for line in timeline) >= 2, timeline
    assert "workers stopped" in timeline[-1]


@pytest.mark.parametrize("isolation", ["process", "judge"])
def test_dirty_tree_is_compared_as_it_is(tmp_path: Path, isolation: str) -> None:
    repo = make_suite_repo(tmp_path / "repo", BASE_KERNELS[:2])
    # It imports a helper beside it, as kernels do (the helper's bytecode must not appear either).
    broken = "import scale_helper  # noqa: F401\n" + suite_files([{**BASE_KERNELS[1], "variant": "wrong"}])["kernels/scale.py"]
    repo.write({"kernels/scale.py": broken, "kernels/scale_helper.py": "FACTOR = 2\n"})  # uncommitted
    before = repo.status()
    out = tmp_path / "out"
    cache = tmp_path / "cache"
    without_bytecode = installed_without_bytecode("torch")  # as the compare will find it
    # The caller allows bytecode ("": unset for Python): still none may appear beside a kernel,
    # from the warm worker either (it starts before any case).
    completed = kbench(repo.root, "compare", "--base", "main", "--device", "cpu", "--output-dir", str(out),
                       "--kernel", "scale", "--isolation", isolation,
                       env={"KBENCH_CI_CACHE_DIR": str(cache), "PYTHONDONTWRITEBYTECODE": ""})
    assert completed.returncode == 1, completed.stderr
    data = results(out)
    assert verdicts(data) == {"scale": "incorrect"}
    assert "dirty" in data["head"]["description"]
    # Untouched: the edit is still there, nothing new appeared (no __pycache__, no worktree).
    assert (repo.root / "kernels" / "scale.py").read_text() == broken
    assert repo.status() == before
    assert not list(repo.root.rglob("__pycache__"))
    assert repo.worktrees() == [str(repo.root)]
    # Nor in the cache folder: the user's code is never kept as bytecode.
    assert not list(cache.rglob("scale*.pyc")) and not list(cache.rglob("ref*.pyc"))
    # torch's bytecode is kept there only where torch has none of its own.
    assert (cache / "pycache").exists() == without_bytecode


def test_a_hanging_head_is_failed_after_the_case_timeout(tmp_path: Path) -> None:
    repo = make_suite_repo(tmp_path / "repo", BASE_KERNELS[1:2])
    repo.write({"kernels/scale.py": suite_files([{**BASE_KERNELS[1], "variant": "hangs"}])["kernels/scale.py"]})
    out = tmp_path / "out"
    completed = kbench(repo.root, "compare", "--base", "main", "--device", "cpu", "--output-dir", str(out),
                       "--case-timeout", "8")
    assert completed.returncode == 1, completed.stderr
    (case,) = results(out)["cases"]
    assert case["verdict"] == "failed" and "timed out" in case["message"]
    assert case["base"]["status"] == "ok"  # the base was still checked in a fresh worker
    # ... but not timed: the head failed, so its time would be compared with nothing
    assert case["base"]["rounds_ms"] == [] and case["base"]["not_timed"] == "the head failed"
    assert repo.worktrees() == [str(repo.root)]


def test_bad_base_ref_exits_2(history: TempRepo, tmp_path: Path) -> None:
    completed = kbench(history.root, "compare", "--base", "no-such-branch", "--device", "cpu",
                       "--output-dir", str(tmp_path / "out"))
    assert completed.returncode == 2
    assert 'cannot resolve "no-such-branch"' in completed.stderr
    assert completed.stderr.count("\n") <= 3  # one clear line, no traceback
    assert history.worktrees() == [str(history.root)]


def test_bad_config_exits_2(history: TempRepo, tmp_path: Path) -> None:
    history.write({"kbench.toml": '[[kernels]]\nname = "x"\nshape = [{N = 1}]\n'})
    completed = kbench(history.root, "compare", "--base", "main", "--device", "cpu",
                       "--output-dir", str(tmp_path / "out"))
    assert completed.returncode == 2
    assert "kbench.toml" in completed.stderr and "shape" in completed.stderr
    assert "Traceback" not in completed.stderr
    assert history.worktrees() == [str(history.root)]
    bad_threshold = kbench(history.root, "compare", "--base", "main", "--threshold", "two")
    assert bad_threshold.returncode == 2 and "threshold" in bad_threshold.stderr


def test_run_checks_and_times_the_suite(history: TempRepo, tmp_path: Path) -> None:
    out = tmp_path / "out"
    completed = kbench(history.root, "run", "--device", "cpu", "--output-dir", str(out),
                       "--kernel", "vadd", "--kernel", "scale")
    assert completed.returncode == 1, completed.stderr  # vadd is wrong on this tree
    data = results(out)
    assert data["schema"] == "kbench-ci/run" and data["schema_version"] == 1
    status = {case["kernel"]: case["status"] for case in data["cases"]}
    assert status == {"vadd": "incorrect", "scale": "ok"}
    scale = next(case for case in data["cases"] if case["kernel"] == "scale")
    assert scale["median_ms"] > 0 and scale["n_samples"] == 20
    assert data["gate"]["passed"] is False and data["gate"]["counts"] == {"failed": 0, "incorrect": 1, "ok": 1}
    report = (out / "benchmark.md").read_text()
    assert "| `scale`" in report and "incorrect" in report


def test_acceptance_script_smoke(tmp_path: Path) -> None:
    environment = dict(os.environ)
    environment.pop("CUDA_VISIBLE_DEVICES", None)
    completed = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "acceptance" / "aa_and_regression.py"), "--smoke", "--workdir", str(tmp_path)],
        capture_output=True, text=True, timeout=300, env=environment, cwd=ROOT,
    )
    assert completed.returncode == 0, completed.stdout[-3000:] + completed.stderr[-3000:]
    for needle in ("A/A", "slower", "regression", "build", "correctness", "timing"):
        assert needle in completed.stdout, needle


def test_wall_time_script_smoke(tmp_path: Path) -> None:
    # scripts/acceptance/gate_wall_time.py on the CPU: it runs, splits the wall time
    # and prints the bare worker start it is bounded by
    environment = dict(os.environ)
    environment.pop("CUDA_VISIBLE_DEVICES", None)
    environment["TMPDIR"] = str(tmp_path)
    completed = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "acceptance" / "gate_wall_time.py"), "--smoke", "--modes", "warm",
         "--time-budget", "0.2", "--log-dir", str(tmp_path / "logs")],
        capture_output=True, text=True, timeout=300, env=environment, cwd=ROOT,
    )
    assert completed.returncode == 0, completed.stdout[-3000:] + completed.stderr[-3000:]
    for needle in ("warm, cold cache", "start-up", "correctness", "timing", "report/other", "target:",
                   "a bare process that does what a worker must"):
        assert needle in completed.stdout, needle
    assert "finished in worker" in (tmp_path / "logs" / "out-0.stderr").read_text()


def test_every_config_problem_is_reported_at_once_by_the_cli(history: TempRepo, tmp_path: Path) -> None:
    history.write({"kbench.toml": (
        '[defaults]\nrounsd = 4\n[[kernels]]\nname = "x"\nshape = [{N = 1}]\nsolution = "k/x.py"\n'
    )})
    completed = kbench(history.root, "run", "--device", "cpu", "--output-dir", str(tmp_path / "out"))
    assert completed.returncode == 2, completed.stderr
    lines = completed.stderr.strip().splitlines()
    assert lines == [
        "kbench-ci: error: kbench.toml: 5 problems:",
        '  - kbench.toml: [defaults]: unknown key "rounsd" (did you mean "rounds"?)',
        '  - kbench.toml: kernels[0] ("x"): unknown key "shape" (did you mean "shapes"?)',
        f"  - kbench.toml: kernels[0] (\"x\"): \"solution\" file 'k/x.py' does not exist (looked in {history.root})",
        '  - kbench.toml: kernels[0] ("x"): missing required key "ref"',
        '  - kbench.toml: kernels[0] ("x"): missing required key "shapes"',
    ], completed.stderr
    assert "Traceback" not in completed.stderr


def test_accept_that_names_nothing_exits_2(history: TempRepo, tmp_path: Path) -> None:
    completed = kbench(history.root, "compare", "--base", "main", "--device", "cpu", "--accept", "vaddd",
                       "--output-dir", str(tmp_path / "out"))
    assert completed.returncode == 2, completed.stderr
    assert completed.stderr.strip().splitlines()[-1].startswith(
        "kbench-ci: error: --accept vaddd: no kernel or case of that name in this comparison (did you mean vadd?)")
    assert history.worktrees() == [str(history.root)]


def test_suite_baselines_are_timed_with_the_base(tmp_path: Path) -> None:
    """A suite's baselines are timed in the same rounds as the base, with the base's
    reference, through the command line and real workers."""
    repo = make_suite_repo(tmp_path / "repo", [
        {"name": "scale", "kind": "pytorch", "shapes": [{"N": 4096}], "baselines": ["pytorch-eager"]},
    ])
    out = tmp_path / "out"
    completed = kbench(repo.root, "compare", "--base", "main", "--device", "cpu", "--output-dir", str(out))
    assert completed.returncode == 0, completed.stderr
    (case,) = results(out)["cases"]
    (baseline,) = case["baselines"]
    assert baseline["name"] == "pytorch-eager" and baseline["status"] == "ok"
    # Timed in the same rounds as the head: the suite's 2, or more when the adaptive rounds went
    # on (a busy machine can leave the verdict open after 2).
    assert len(baseline["result"]["rounds_ms"]) == len(case["head"]["rounds_ms"]) == case["n_rounds"] >= 2
    assert baseline["speedup"] > 0
    report = (out / "benchmark.md").read_text()
    assert "head vs baselines" in report and ("× faster than `pytorch-eager`" in report or "× slower than `pytorch-eager`" in report)
    completed = kbench(repo.root, "run", "--device", "cpu", "--output-dir", str(tmp_path / "run"))
    assert completed.returncode == 0, completed.stderr
    (case,) = results(tmp_path / "run")["cases"]
    assert case["baselines"][0]["name"] == "pytorch-eager" and case["baselines"][0]["result"]["rounds_ms"]


MOVED_REF = '''\
def reference(x, **_):
    return x * 2.0 + 1.0
'''


@pytest.fixture
def moved_goalposts(tmp_path: Path) -> TempRepo:
    """main: scale is right. feature: scale adds 1, and its ref.py was changed to agree, with a
    looser atol in kbench.toml: it passes only its own new reference."""
    kernel = {"name": "scale", "kind": "pytorch", "shapes": [{"N": 2048}]}
    repo = make_suite_repo(tmp_path / "repo", [kernel])
    repo.git("checkout", "-q", "-b", "feature")
    repo.commit({**suite_files([{**kernel, "variant": "wrong", "atol": 0.001}]), "kernels/scale_ref.py": MOVED_REF}, "move")
    return repo


def test_a_head_that_passes_only_its_own_changed_reference_is_incorrect(moved_goalposts: TempRepo, tmp_path: Path) -> None:
    """The pull request cannot move the goalposts."""
    out = tmp_path / "out"
    completed = kbench(moved_goalposts.root, "compare", "--base", "main", "--device", "cpu", "--output-dir", str(out))
    assert completed.returncode == 1, completed.stdout + completed.stderr
    (case,) = results(out)["cases"]
    assert case["verdict"] == "incorrect"
    assert case["head"]["correctness"]["passed"] is True  # right by its own new reference
    assert case["head"]["message"].startswith("passes only its own changed ref.py: checked on the base's inputs")
    assert case["goalposts"] == ["scale_ref.py (its reference() or setup())", "atol default → 0.001"]
    assert case["message"].startswith("this pull request changes what `scale` is checked against: scale_ref.py")
    assert "this pull request changes what `scale` is checked against" in (out / "benchmark.md").read_text()


def test_an_accepted_change_of_reference_is_timed_and_noted(moved_goalposts: TempRepo, tmp_path: Path) -> None:
    out = tmp_path / "out"
    completed = kbench(moved_goalposts.root, "compare", "--base", "main", "--device", "cpu", "--output-dir", str(out),
                       "--accept", "scale")
    (case,) = results(out)["cases"]
    assert case["head"]["status"] == "ok", completed.stdout + completed.stderr
    assert any(note.startswith("its ref.py changed and it fails the base's reference() (accepted)")
               for note in case["head"]["notes"])
    assert case["head"]["rounds_ms"]


def test_an_unchanged_reference_is_not_named(history: TempRepo, tmp_path: Path) -> None:
    out = tmp_path / "out"
    kbench(history.root, "compare", "--base", "main", "--device", "cpu", "--output-dir", str(out), "--kernel", "scale")
    (case,) = results(out)["cases"]
    assert case["goalposts"] == [] and "checked against" not in (case["message"] or "")


def test_a_helper_runs_its_source_not_bytecode_planted_beside_it(tmp_path: Path) -> None:
    """A pull request can commit bytecode a reviewer does not read: an "unchecked-hash" .pyc
    (PEP 552) beside a helper is loaded whatever the helper's source says. The workers check
    every hash-based .pyc against its source, so the source the reviewer reads is what runs."""
    import py_compile

    repo = make_suite_repo(tmp_path / "repo", BASE_KERNELS[1:2])
    kernel = suite_files([BASE_KERNELS[1]])["kernels/scale.py"].replace(
        "torch.mul(x, 2.0, out=out)", "torch.mul(x, scale_helper.FACTOR, out=out)")
    assert "scale_helper.FACTOR" in kernel
    helper = repo.root / "kernels" / "scale_helper.py"
    helper.write_text("FACTOR = 3.0  # what the planted bytecode holds\n")
    planted = Path(importlib.util.cache_from_source(str(helper)))
    py_compile.compile(str(helper), cfile=str(planted), doraise=True,
                       invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH)
    repo.write({"kernels/scale.py": "import scale_helper\n" + kernel, "kernels/scale_helper.py": "FACTOR = 2.0\n"})
    assert sys.pycache_prefix is None and planted.exists()  # the plain interpreter would load FACTOR = 3.0
    out = tmp_path / "out"
    completed = kbench(repo.root, "compare", "--base", "main", "--device", "cpu", "--output-dir", str(out),
                       env={"KBENCH_CI_CACHE_DIR": str(tmp_path / "cache")})
    (case,) = results(out)["cases"]
    assert case["head"]["status"] == "ok", (case["head"]["message"], completed.stderr[-2000:])
