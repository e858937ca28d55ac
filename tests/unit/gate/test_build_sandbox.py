"""A compare's head under ``--isolation judge`` may bring its own ``build`` command: pull-request
code, run in the side's sandbox (red team, 2026-12-05: it ran as the runner's user, able to
rewrite the base's ref.py, which the judge loads). It writes its library and its own tree, and
nothing else; the base's build command (trusted) runs as before."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from kbench_ci.gate.builds import BuildRequest, SideBuilder
from kbench_ci.side.harden import landlock_abi
from kbench_ci.suite.model import KernelSpec

#: writes the library, and then tries what a head's build should not: the base's reference
BUILD = "printf lib > {out} && echo built >> own.log && (echo 'ran = 1' >> {victim} || true)"


def _kernel(tree: Path, victim: Path) -> KernelSpec:
    source = tree / "k.cu"
    tree.mkdir(parents=True, exist_ok=True)
    source.write_text('extern "C" void solve(const float* x, float* y, int N) {}\n')
    (tree / "ref.py").write_text("def reference(x, **_):\n    return x\n")
    return KernelSpec(name="k", solution=source, ref=tree / "ref.py", implementation="cuda-cpp", shapes=({"N": 1},),
                      build=BUILD.replace("{victim}", str(victim)))


@pytest.mark.skipif(landlock_abi() < 1, reason="this kernel offers no Landlock")
@pytest.mark.parametrize("label", ["head", "base"])
def test_a_heads_build_command_writes_only_its_tree_and_its_library(tmp_path: Path, label: str) -> None:
    victim = tmp_path / "base-tree" / "ref.py"
    victim.parent.mkdir()
    victim.write_text("def reference(x, **_):\n    return x\n")
    tree = tmp_path / f"{label}-tree"
    kernel = _kernel(tree, victim)
    with SideBuilder(tmp_path / "staging", sandboxed=("head",)) as builder:
        builder.start([BuildRequest(kernel, label, "cuda-cpp", tree)])
        spec, outcome = builder.side(kernel, label=label, kind="cuda-cpp", cwd=tree)
    assert outcome is not None and outcome.ok, outcome
    assert spec is not None and Path(spec.solution).with_suffix(".so").read_text() == "lib"
    assert (tree / "own.log").read_text() == "built\n"  # its own tree: writable
    tampered = "ran = 1" in victim.read_text()
    assert tampered == (label == "base"), victim.read_text()  # only the trusted base's command may


def test_without_a_sandbox_the_same_command_runs_as_before(tmp_path: Path) -> None:
    victim = tmp_path / "elsewhere.txt"
    victim.write_text("")
    tree = tmp_path / "tree"
    kernel = replace(_kernel(tree, victim))
    with SideBuilder(tmp_path / "staging") as builder:
        builder.start([BuildRequest(kernel, "head", "cuda-cpp", tree)])
        _, outcome = builder.side(kernel, label="head", kind="cuda-cpp", cwd=tree)
    assert outcome is not None and outcome.ok and "ran = 1" in victim.read_text()
