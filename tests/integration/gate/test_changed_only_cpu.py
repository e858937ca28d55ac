"""Issue 24, item 1, end to end on the CPU: `compare --changed-only` measures the kernels a
change reaches (a kernel's file, a helper module it imports) and lists the rest as not affected;
a change to the suite's settings measures everything; the action turns it on for pull requests."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from kbench_ci.errors import UsageError
from kbench_ci.github.action import changed_only
from tests.integration.gate.test_compare_cpu import kbench, results
from tests.support.suite_repo import make_suite_repo, suite_files, suite_toml

KERNELS = [
    {"name": "vadd", "kind": "triton", "shapes": [{"N": 1024}]},
    {"name": "scale", "kind": "pytorch", "shapes": [{"N": 4096}]},
    {"name": "double", "kind": "pytorch", "shapes": [{"N": 2048}]},
]
#: "double" imports a helper module from the repository
DOUBLE = '''\
import torch

from kernels.helpers import factor


def setup(N, **_):
    x = torch.randn(N, dtype=torch.float32)
    return {"inputs": {"x": x, "out": torch.empty(N, dtype=torch.float32)}, "outputs": ["out"]}


def run_kernel(x, out, **_):
    torch.mul(x, factor(), out=out)
'''
DOUBLE_REF = "def reference(x, **_):\n    return x * 2.0\n"


def repo_with_helper(root: Path):  # type: ignore[no-untyped-def]
    repo = make_suite_repo(root, KERNELS)
    repo.commit({"kernels/__init__.py": "", "kernels/helpers.py": "def factor():\n    return 2.0\n",
                 "kernels/double.py": DOUBLE, "kernels/double_ref.py": DOUBLE_REF}, "double uses a helper")
    return repo


def compare_changed_only(repo_root: Path, base: str, out: Path) -> subprocess.CompletedProcess[str]:
    """``compare --base BASE --changed-only`` on the CPU into ``out``."""
    return kbench(repo_root, "compare", "--base", base, "--changed-only", "--device", "cpu", "--output-dir", str(out))


def measured(out: Path) -> set[str]:
    return {case["kernel"] for case in results(out)["cases"]}


def test_a_change_to_one_kernel_measures_only_it_and_lists_the_others(tmp_path: Path) -> None:
    repo = repo_with_helper(tmp_path / "repo")
    base = repo.git("rev-parse", "HEAD")
    scale = suite_files([{"name": "scale", "kind": "pytorch", "shapes": [{"N": 4096}], "variant": "ok"}])
    repo.commit({"kernels/scale.py": scale["kernels/scale.py"] + "\n# a comment that changes the file\n"}, "touch scale")
    done = compare_changed_only(repo.root, base, tmp_path / "out")
    assert done.returncode == 0, done.stderr[-3000:]
    assert measured(tmp_path / "out") == {"scale"}
    data = results(tmp_path / "out")
    assert sorted(data["changed_only"]["not_affected"]) == ["double", "vadd"]
    assert any("kernels/scale.py" in reason for reason in data["changed_only"]["reasons"]["scale"])
    report = (tmp_path / "out" / "benchmark.md").read_text()
    assert "2 kernel(s) not affected by this change (not measured): `vadd`, `double`." in report
    assert data["gate"]["passed"] is True and data["gate"]["complete"] is True


def test_a_helper_module_reaches_the_kernel_that_imports_it_and_settings_reach_all(tmp_path: Path) -> None:
    repo = repo_with_helper(tmp_path / "repo")
    base = repo.git("rev-parse", "HEAD")
    repo.commit({"kernels/helpers.py": "def factor():\n    return 2.0  # same value, new file\n"}, "helper")
    done = compare_changed_only(repo.root, base, tmp_path / "helper")
    assert done.returncode == 0, done.stderr[-3000:]
    assert measured(tmp_path / "helper") == {"double"}

    head = repo.git("rev-parse", "HEAD")
    repo.commit({"kbench.toml": suite_toml(KERNELS, {"seed": 7})}, "a suite setting")
    done = compare_changed_only(repo.root, head, tmp_path / "settings")
    assert done.returncode == 0, done.stderr[-3000:]
    assert measured(tmp_path / "settings") == {"vadd", "scale", "double"}
    assert "every kernel measured" in (tmp_path / "settings" / "benchmark.md").read_text()


@pytest.mark.parametrize(("event", "value", "expected"), [
    ("pull_request", "", True), ("pull_request", "auto", True), ("pull_request_target", "auto", True),
    ("push", "auto", False), ("pull_request", "false", False), ("push", "true", True),
])
def test_the_action_measures_only_changes_on_pull_requests_by_default(event: str, value: str, expected: bool) -> None:
    assert changed_only({"GITHUB_EVENT_NAME": event, "KBENCH_CHANGED_ONLY": value}) is expected


def test_a_bad_changed_only_input_is_named() -> None:
    with pytest.raises(UsageError, match="KBENCH_CHANGED_ONLY='sometimes'"):
        changed_only({"GITHUB_EVENT_NAME": "push", "KBENCH_CHANGED_ONLY": "sometimes"})


#: "double" as a pull request's author would write it to keep its helper out of the plan: the
#: helper module is loaded by a name no import statement states
DOUBLE_DYNAMIC = DOUBLE.replace("from kernels.helpers import factor\n", "import importlib\n").replace(
    "torch.mul(x, factor(), out=out)", 'torch.mul(x, importlib.import_module("kernels." + "helpers").factor(), out=out)')


def test_a_helper_loaded_by_a_computed_name_still_reaches_its_kernel(tmp_path: Path) -> None:
    # Red team: with the helper loaded through importlib, a pull request that breaks it read
    # "not affected (not measured)" and passed the gate (before 2026-12-05)
    repo = repo_with_helper(tmp_path / "repo")
    repo.commit({"kernels/double.py": DOUBLE_DYNAMIC}, "double loads its helper by name")
    base = repo.git("rev-parse", "HEAD")
    repo.commit({"kernels/helpers.py": "def factor():\n    return 3.0\n"}, "the helper, wrong")
    done = compare_changed_only(repo.root, base, tmp_path / "out")
    assert done.returncode == 1, done.stderr[-3000:]
    assert measured(tmp_path / "out") == {"double"}
    data = results(tmp_path / "out")
    assert data["gate"]["passed"] is False
    assert any("every changed file counts: kernels/double.py:" in reason for reason in data["changed_only"]["reasons"]["double"])


@pytest.mark.parametrize(("source", "found"), [
    ("import triton.language as tl\ndef k(p):\n    return tl.load(p)\n", None),
    ("import torch\ndef f(x):\n    return torch.compile(x)\n", None),
    ("import importlib\n", "1 (import importlib)"),
    ("from torch.utils import cpp_extension\nm = cpp_extension.load('m', ['m.cu'])\n", "2 (cpp_extension.load(...))"),
    ("from pathlib import Path\nsrc = Path(__file__).with_name('k.cu')\n", "2 (__file__)"),
    ("def f():\n    exec(open('impl.py').read())\n", "2 (exec(...))"),
    ("import os\nnames = os.listdir('.')\n", "2 (listdir(...))"),
    ("import sys\nsys.path.insert(0, '/elsewhere')\n", "2 (sys.path)"),
    ("f = getattr(__builtins__, 'ex' + 'ec')\n", "1 (__builtins__)"),
    ("import io\ntext = io.open('t').read()\n", "2 (open(...))"),
    ("import subprocess\n", "1 (import subprocess)"),
    ("load = globals()['__builtins__']['__import__']\n", "1 (globals(...))"),
    ("loaders = ().__class__.__base__.__subclasses__()\n", "1 (.__subclasses__)"),
])
def test_what_counts_as_reaching_files_by_a_computed_name(tmp_path: Path, source: str, found: str | None) -> None:
    from kbench_ci.suite.affected import _dynamic_reach_in
    (tmp_path / "k.py").write_text(source)
    assert _dynamic_reach_in(tmp_path / "k.py") == found
