"""Each side of a compare imports its own tree's packages (``from kernels.helpers import ...``).

The base is a worktree of its own, but its solution found ``kernels`` through the working folder,
which is the head's checkout: in process the base ran the head's helper (a head that made the
helper slow slowed the base with it, and a head that made it wrong made the base wrong too), and
under the judge, whose side workers have no working folder on ``sys.path``, neither side could
import it. The suite's root (kbench.toml's folder) is on the path while a side's file loads
(kbench_ci.measure.usercode.import_root)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.integration.gate.test_compare_cpu import kbench, results
from tests.support.suite_repo import make_suite_repo

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


@pytest.mark.parametrize("isolation", ["process", "judge"])
def test_the_base_imports_its_own_trees_helper_not_the_heads(tmp_path: Path, isolation: str) -> None:
    repo = make_suite_repo(tmp_path / "repo", [{"name": "double", "kind": "pytorch", "shapes": [{"N": 2048}]}])
    repo.commit({"kernels/__init__.py": "", "kernels/helpers.py": "def factor():\n    return 2.0\n",
                 "kernels/double.py": DOUBLE, "kernels/double_ref.py": DOUBLE_REF}, "double uses a helper")
    repo.write({"kernels/helpers.py": "def factor():\n    return 3.0\n"})  # the pull request breaks the helper
    out = tmp_path / "out"
    completed = kbench(repo.root, "compare", "--base", "main", "--device", "cpu", "--output-dir", str(out),
                       "--isolation", isolation)
    assert completed.returncode == 1, completed.stdout + completed.stderr
    (case,) = results(out)["cases"]
    assert case["base"]["status"] == "ok", case["base"]
    assert case["head"]["status"] == "incorrect", case["head"]
    assert case["verdict"] == "incorrect", case
