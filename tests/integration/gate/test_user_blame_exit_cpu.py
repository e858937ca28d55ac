"""`run` and `compare` exit 2 when a case failed because of the user's ref.py:
`bench` did, `run` and `compare` reported the right message as a case error but exited 1, the
kernel's code. A kernel that is wrong still exits 1, and 1 wins when both kinds of failure occur
(1: your kernel is wrong; 2: fix your files); --no-fail waives only the 1.

Real suites on the CPU (PyTorch kernels, tiny sizes, see tests/support/suite_repo.py), through
the console script as a user runs it.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.integration.gate.test_compare_cpu import kbench, results
from tests.support.suite_repo import TempRepo, make_suite_repo, suite_files, suite_toml

#: ``scale`` (correct) and ``twice`` (the same kernel): both checked against ``reference``
KERNELS = [
    {"name": "scale", "kind": "pytorch", "shapes": [{"N": 256}]},
    {"name": "twice", "kind": "pytorch", "shapes": [{"N": 256}]},
]

#: a reference that raises on its second call (the second correctness trial): a later call, as
#: a user's reference fails, not the first
REF_RAISES_LATER = '''\
calls = 0


def reference(x, **_):
    global calls
    calls += 1
    if calls > 1:
        raise RuntimeError("the reference is broken on its second call")
    return x * 2.0
'''

BROKEN_REF = {"kernels/scale_ref.py": REF_RAISES_LATER}
WRONG_TWICE = {"kernels/twice.py": suite_files([{**KERNELS[1], "variant": "wrong"}])["kernels/twice.py"]}


@pytest.fixture
def repo(tmp_path: Path) -> TempRepo:
    """main: both kernels correct. feature (checked out): scale's ref.py raises on a later call,
    twice's kernel is wrong (off by one)."""
    repo = make_suite_repo(tmp_path / "repo", KERNELS)
    repo.git("checkout", "-q", "-b", "feature")
    repo.commit({**BROKEN_REF, **WRONG_TWICE}, "feature")
    return repo


def _errors(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("kbench-ci: error:")]


def _assert_blames_scale_ref(completed, out: Path) -> None:  # type: ignore[no-untyped-def]
    assert completed.returncode == 2, completed.stdout + completed.stderr
    (line,) = _errors(completed.stderr)
    assert line.startswith("kbench-ci: error: scale[N=256]: scale_ref.py reference() raised RuntimeError"), line
    assert "the reference is broken on its second call" in line
    assert "Traceback" not in completed.stderr
    # Every case was measured and written: nothing is lost to the exit code.
    assert (out / "results.json").is_file() and (out / "benchmark.md").is_file()


def test_run_exits_2_when_the_reference_raises(repo: TempRepo, tmp_path: Path) -> None:
    out = tmp_path / "out"
    completed = kbench(repo.root, "run", "--device", "cpu", "--output-dir", str(out), "--kernel", "scale",
                       "--json-summary", str(tmp_path / "summary.json"))
    _assert_blames_scale_ref(completed, out)
    (case,) = results(out)["cases"]
    assert case["status"] == "failed" and "scale_ref.py reference() raised" in case["message"]
    assert json.loads((tmp_path / "summary.json").read_text())["exit_code"] == 2


def test_run_exits_1_for_a_wrong_kernel(repo: TempRepo, tmp_path: Path) -> None:
    out = tmp_path / "out"
    completed = kbench(repo.root, "run", "--device", "cpu", "--output-dir", str(out), "--kernel", "twice")
    assert completed.returncode == 1, completed.stdout + completed.stderr
    assert _errors(completed.stderr) == []
    assert [case["status"] for case in results(out)["cases"]] == ["incorrect"]


def test_run_with_both_exits_1_and_names_the_reference_too(repo: TempRepo, tmp_path: Path) -> None:
    """The kernel's 1 wins (a wrong kernel is never hidden behind a broken file); the broken
    ref.py is named on a line of its own; --no-fail waives the 1 (and there is no 2 left)."""
    out = tmp_path / "out"
    completed = kbench(repo.root, "run", "--device", "cpu", "--output-dir", str(out))
    assert completed.returncode == 1, completed.stdout + completed.stderr
    assert _errors(completed.stderr) == []
    (note,) = [line for line in completed.stderr.splitlines() if line.startswith("kbench-ci: note: also, not the kernel's")]
    assert "scale[N=256]: scale_ref.py reference() raised" in note
    status = {case["kernel"]: case["status"] for case in results(out)["cases"]}
    assert status == {"scale": "failed", "twice": "incorrect"}
    waived = kbench(repo.root, "run", "--device", "cpu", "--output-dir", str(tmp_path / "waived"), "--no-fail")
    assert waived.returncode == 0, waived.stdout + waived.stderr


def test_compare_exits_2_when_the_heads_reference_raises(repo: TempRepo, tmp_path: Path) -> None:
    """--no-fail (as the GitHub action runs compare) waives a kernel's 1, not this 2."""
    out = tmp_path / "out"
    completed = kbench(repo.root, "compare", "--base", "main", "--device", "cpu", "--output-dir", str(out),
                       "--kernel", "scale", "--no-fail", "--json-summary", str(tmp_path / "summary.json"))
    _assert_blames_scale_ref(completed, out)
    (case,) = results(out)["cases"]
    assert case["verdict"] == "failed" and case["base"]["status"] == "ok"
    assert "scale_ref.py reference() raised" in case["head"]["message"]
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["exit_code"] == 2 and summary["passed"] is False
    # The report says what really happens to the job (it said "--no-fail: ... exits 0").
    report = (out / "benchmark.md").read_text()
    assert "kbench-ci compare exits 2: the failing cases failed on their ref.py, setup() or settings" in report
    assert "exits 0" not in report


def test_compare_exits_1_for_a_wrong_head_kernel(repo: TempRepo, tmp_path: Path) -> None:
    out = tmp_path / "out"
    completed = kbench(repo.root, "compare", "--base", "main", "--device", "cpu", "--output-dir", str(out),
                       "--kernel", "twice")
    assert completed.returncode == 1, completed.stdout + completed.stderr
    assert _errors(completed.stderr) == []
    assert [case["verdict"] for case in results(out)["cases"]] == ["incorrect"]


def test_compare_with_both_exits_1_and_names_the_reference_too(repo: TempRepo, tmp_path: Path) -> None:
    out = tmp_path / "out"
    completed = kbench(repo.root, "compare", "--base", "main", "--device", "cpu", "--output-dir", str(out))
    assert completed.returncode == 1, completed.stdout + completed.stderr
    assert _errors(completed.stderr) == []
    (note,) = [line for line in completed.stderr.splitlines() if line.startswith("kbench-ci: note: also, not the kernel's")]
    assert "scale[N=256]: scale_ref.py reference() raised" in note
    verdicts = {case["kernel"]: case["verdict"] for case in results(out)["cases"]}
    assert verdicts == {"scale": "failed", "twice": "incorrect"}


#: each fault of the user's files or settings, and the start of its one line
FAULTS = {
    "returns-a-list": (
        {"kernels/scale_ref.py": "def reference(x, **_):\n    return ['y']\n"},
        "scale[N=256]: scale_ref.py reference() returned a str for 'out', not a tensor",
    ),
    "wrong-dtype": (
        {"kernels/scale_ref.py": "import torch\n\n\ndef reference(x, **_):\n    return (x * 2.0).to(torch.float64)\n"},
        "scale[N=256]: scale_ref.py reference() returned 'out' as float64, but the output buffer 'out' is float32",
    ),
    "shape-past-64-bits": (
        {"kbench.toml": suite_toml([{**KERNELS[0], "shapes": [{"N": 2**63 - 1}]}])},
        "scale[N=9223372036854775807]: N=9223372036854775807 is too large: scale.py setup() cannot make inputs",
    ),
}


@pytest.mark.parametrize("fault", list(FAULTS))
def test_run_exits_2_for_each_fault_of_the_users_files(fault: str, tmp_path: Path) -> None:
    files, line = FAULTS[fault]
    repo = make_suite_repo(tmp_path / "repo", KERNELS[:1])
    repo.write(files)
    out = tmp_path / "out"
    completed = kbench(repo.root, "run", "--device", "cpu", "--output-dir", str(out))
    assert completed.returncode == 2, completed.stdout + completed.stderr
    (error,) = _errors(completed.stderr)
    assert error.startswith(f"kbench-ci: error: {line}"), error
    assert [case["status"] for case in results(out)["cases"]] == ["failed"]


def test_compare_exits_2_when_the_heads_reference_does_not_load(tmp_path: Path) -> None:
    """The head's ref.py is the second side a compare loads: it reported no error of its own.
    A ref.py without reference() is named from its syntax before any case
    is measured (tests/integration/gate/test_mistakes_early_cpu.py); one that fails to load
    only when imported still reaches the exit code from the worker."""
    repo = make_suite_repo(tmp_path / "repo", KERNELS[:1])
    repo.write({"kernels/scale_ref.py": "raise RuntimeError('cannot load')\n\n\ndef reference(x, **_):\n    return x\n"})
    out = tmp_path / "out"
    completed = kbench(repo.root, "compare", "--base", "main", "--device", "cpu", "--output-dir", str(out))
    assert completed.returncode == 2, completed.stdout + completed.stderr
    (error,) = _errors(completed.stderr)
    assert error.startswith("kbench-ci: error: scale[N=256]: ref scale_ref.py raised RuntimeError while loading"), error
    assert [case["verdict"] for case in results(out)["cases"]] == ["failed"]


def test_run_exits_2_when_the_reference_hangs(tmp_path: Path) -> None:
    """The parent blames a reference that outlives the case timeout (no event of the worker's
    says so): its error reaches run's exit code too."""
    repo = make_suite_repo(tmp_path / "repo", KERNELS[:1])
    repo.write({"kernels/scale_ref.py": "import time\n\n\ndef reference(x, **_):\n    time.sleep(3600)\n"})
    out = tmp_path / "out"
    completed = kbench(repo.root, "run", "--device", "cpu", "--output-dir", str(out), "--case-timeout", "6")
    assert completed.returncode == 2, completed.stdout + completed.stderr
    (error,) = _errors(completed.stderr)
    assert error.startswith(
        "kbench-ci: error: scale[N=256]: scale_ref.py reference() (checking solution) timed out after"
    ), error
    assert [case["status"] for case in results(out)["cases"]] == ["failed"]


def test_merged_shards_exit_as_the_unsharded_command_would(repo: TempRepo, tmp_path: Path) -> None:
    """A case that failed on the user's ref.py keeps its blame through results.json
    (``user_error``), so ``merge`` of the shards exits 2 where the unsharded command does, and
    1 (with the ref.py named in a note) where a kernel is also wrong. It said 1 for both."""
    for command, base in (("run", ()), ("compare", ("--base", "main"))):
        shards = []
        for index in (1, 2):
            out = tmp_path / f"{command}-scale-{index}"
            kbench(repo.root, command, *base, "--device", "cpu", "--output-dir", str(out), "--kernel", "scale",
                   "--shard", f"{index}/2", "--no-fail")
            shards.append(str(out))
        (case,) = [case for shard in shards for case in results(Path(shard))["cases"]]
        assert "scale_ref.py reference() raised" in (case["user_error"] or "")
        merged = kbench(repo.root, "merge", *shards, "--output-dir", str(tmp_path / f"{command}-merged"), "--no-fail",
                        "--json-summary", str(tmp_path / f"{command}-summary.json"))
        assert merged.returncode == 2, merged.stdout + merged.stderr
        (line,) = _errors(merged.stderr)
        assert line.startswith("kbench-ci: error: scale[N=256]: scale_ref.py reference() raised"), line
        assert json.loads((tmp_path / f"{command}-summary.json").read_text())["exit_code"] == 2
    both = []
    for index in (1, 2):
        out = tmp_path / f"both-{index}"
        kbench(repo.root, "compare", "--base", "main", "--device", "cpu", "--output-dir", str(out), "--shard", f"{index}/2")
        both.append(str(out))
    merged = kbench(repo.root, "merge", *both, "--output-dir", str(tmp_path / "both-merged"))
    assert merged.returncode == 1, merged.stdout + merged.stderr
    assert _errors(merged.stderr) == []
    assert any(line.startswith("kbench-ci: note: also, not the kernel's") and "scale_ref.py reference() raised" in line
               for line in merged.stderr.splitlines())
