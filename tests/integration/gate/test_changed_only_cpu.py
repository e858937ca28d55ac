"""End to end on the CPU: `compare --changed-only` measures the kernels a
change reaches (a kernel's file, a helper module it imports) and lists the rest as not affected;
a change to the suite's settings measures everything; the action turns it on for pull requests."""

from __future__ import annotations

import marshal
import subprocess
from pathlib import Path

import pytest

from kbench_ci.errors import UsageError
from kbench_ci.github.action import changed_only
from tests.integration.gate.test_compare_cpu import kbench, results, verdicts
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


def _import_helper_code() -> str:
    """``from helpers import factor`` as the bytes of a code object, for the marshal loader."""
    return repr(marshal.dumps(compile("from helpers import factor", "<helper>", "exec")))


#: ways a pull request's author would load "double"'s helper (kernels/helpers.py, beside it) so
#: that no import states it, while the solution is imported (its folder is then first on
#: sys.path, each side's own): the test's id -> lines that bind ``factor``
HIDDEN_LOADERS = {
    "importlib": 'import importlib\nfactor = importlib.import_module("help" + "ers").factor\n',
    "pickle": 'import pickle\nfactor = pickle.loads(b"chelpers\\nfactor\\n.")\n',
    "marshal": (f"import marshal\nimport types\n_G = {{}}\ntypes.FunctionType(marshal.loads({_import_helper_code()}), _G)()\n"
                'factor = _G["factor"]\n'),
    "builtins-by-getattr": 'factor = getattr(print.__self__, "__imp" + "ort__")("helpers").factor\n',
    "attrgetter": 'import operator\nfactor = operator.attrgetter("__self__.__imp" + "ort__")(print)("helpers").factor\n',
    "ctypes-pythonapi": (
        "import ctypes\n_load = ctypes.pythonapi.PyImport_ImportModule\n_load.restype = ctypes.py_object\n"
        '_load.argtypes = [ctypes.c_char_p]\nfactor = _load(b"helpers").factor\n'),
}


def hiding(loader: str) -> str:
    """"double" with its helper loaded through ``loader``."""
    return DOUBLE.replace("from kernels.helpers import factor\n", HIDDEN_LOADERS[loader])


@pytest.mark.parametrize("loader", sorted(HIDDEN_LOADERS))
def test_a_helper_loaded_by_a_name_in_data_still_reaches_its_kernel(tmp_path: Path, loader: str) -> None:
    # Red team: with its helper reached through a loader that takes the name as data (a
    # pickle's GLOBAL, a code object, the builtins module found through print), the kernel read
    # "not affected (not measured)" and the gate passed on a broken helper.
    repo = repo_with_helper(tmp_path / "repo")
    repo.commit({"kernels/double.py": hiding(loader)}, f"double loads its helper through {loader}")
    base = repo.git("rev-parse", "HEAD")
    repo.commit({"kernels/helpers.py": "def factor():\n    return 3.0\n"}, "the helper, wrong")
    done = compare_changed_only(repo.root, base, tmp_path / "out")
    data = results(tmp_path / "out")
    assert sorted(data["changed_only"]["not_affected"]) == ["scale", "vadd"], data["changed_only"]
    assert done.returncode == 1, done.stderr[-3000:]
    (case,) = data["cases"]
    assert (case["kernel"], case["base"]["status"], case["head"]["status"]) == ("double", "ok", "incorrect")
    assert case["verdict"] == "incorrect" and data["gate"]["passed"] is False
    assert any("every changed file counts: kernels/double.py:" in reason for reason in data["changed_only"]["reasons"]["double"])


def test_a_helper_unpickled_by_its_kernel_and_made_slower_fails_the_gate_as_slower(tmp_path: Path) -> None:
    # The case: the helper a kernel unpickles gains 3 ms a call. Six rounds are the fewest
    # that can give `slower` (Wilcoxon's p floor is 2/2**6); 2 ms -> 5 ms a call is far beyond
    # any threshold and any noise of a CPU run.
    repo = make_suite_repo(tmp_path / "repo", KERNELS, defaults={"rounds": 6, "timeout": 120})
    helper = "import time\n\n\ndef factor():\n    time.sleep({delay})\n    return 2.0\n"
    repo.commit({"kernels/__init__.py": "", "kernels/helpers.py": helper.format(delay=0.002),
                 "kernels/double.py": hiding("pickle"), "kernels/double_ref.py": DOUBLE_REF}, "double unpickles its helper")
    base = repo.git("rev-parse", "HEAD")
    repo.commit({"kernels/helpers.py": helper.format(delay=0.005)}, "the helper, 3 ms slower")
    done = compare_changed_only(repo.root, base, tmp_path / "out")
    data = results(tmp_path / "out")
    assert sorted(data["changed_only"]["not_affected"]) == ["scale", "vadd"], data["changed_only"]
    assert done.returncode == 1, done.stderr[-3000:]
    assert verdicts(data) == {"double": "slower"}
    assert data["gate"]["passed"] is False
