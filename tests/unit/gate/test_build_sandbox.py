"""A compare's head under ``--isolation judge`` may bring its own ``build`` command: pull-request
code, run in the side's sandbox (it ran as the runner's user, able to
rewrite the base's ref.py, which the judge loads). It writes its library and its own tree, and
nothing else; the base's build command (trusted) runs as before."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from kbench_ci.gate.builds import BuildRequest, SideBuilder
from kbench_ci.side.harden import landlock_abi, seccomp_available
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


@pytest.mark.skipif(not seccomp_available(), reason="libseccomp (libseccomp.so.2) is not installed")
def test_a_heads_build_chmods_and_touches_nothing_and_still_builds(tmp_path: Path) -> None:
    """Landlock governs writes, not a file's mode or times: a head's build could make
    the base's ref.py writable to all, or date it. Under the side's seccomp filter those calls
    succeed doing nothing, so an honest build that chmods or touches what it makes goes on."""
    victim = tmp_path / "base-tree" / "ref.py"
    victim.parent.mkdir()
    victim.write_text("def reference(x, **_):\n    return x\n")
    victim.chmod(0o644)
    mtime = victim.stat().st_mtime_ns
    tree = tmp_path / "head-tree"
    kernel = replace(_kernel(tree, victim), build=(
        f"printf lib > {{out}} && chmod 755 {{out}} && touch -d 2001-01-01 {{out}} && chmod 777 {victim} && "
        f"touch -d 2001-01-01 {victim} && echo built >> own.log"
    ))
    with SideBuilder(tmp_path / "staging", sandboxed=("head",)) as builder:
        builder.start([BuildRequest(kernel, "head", "cuda-cpp", tree)])
        spec, outcome = builder.side(kernel, label="head", kind="cuda-cpp", cwd=tree)
    print(outcome, oct(victim.stat().st_mode & 0o777))
    assert outcome is not None and outcome.ok, outcome
    assert spec is not None and Path(spec.solution).with_suffix(".so").read_text() == "lib"
    assert (tree / "own.log").read_text() == "built\n"
    assert victim.stat().st_mode & 0o777 == 0o644
    assert victim.stat().st_mtime_ns == mtime


def test_without_a_sandbox_the_same_command_runs_as_before(tmp_path: Path) -> None:
    victim = tmp_path / "elsewhere.txt"
    victim.write_text("")
    tree = tmp_path / "tree"
    kernel = replace(_kernel(tree, victim))
    with SideBuilder(tmp_path / "staging") as builder:
        builder.start([BuildRequest(kernel, "head", "cuda-cpp", tree)])
        _, outcome = builder.side(kernel, label="head", kind="cuda-cpp", cwd=tree)
    assert outcome is not None and outcome.ok and "ran = 1" in victim.read_text()


@pytest.mark.skipif(landlock_abi() < 1, reason="this kernel offers no Landlock")
def test_nothing_the_head_commits_runs_before_the_sandbox_and_nothing_outlives_its_build(tmp_path: Path) -> None:
    """Red team: a ``kbench_ci/`` package committed beside kbench.toml ran before the
    sandbox (``python -m`` puts the working folder first), and a daemon the build command
    double-forked lived on beside the judge for the rest of the command."""
    import time

    from kbench_ci.procgroup import state

    victim = tmp_path / "base-tree" / "ref.py"
    victim.parent.mkdir()
    victim.write_text("")
    tree = tmp_path / "head-tree"
    planted = tree / "kbench_ci"
    planted.mkdir(parents=True)
    (planted / "__init__.py").write_text(f"open({str(victim)!r}, 'a').write('planted = 1')\n")
    (planted / "side").mkdir()
    (planted / "side" / "__init__.py").write_text("")
    kernel = replace(_kernel(tree, victim), build=(
        "printf lib > {out} && (setsid sh -c 'echo $$ > " + str(tree / "daemon.pid") + "; exec sleep 600' &) && sleep 0.5"
    ))
    with SideBuilder(tmp_path / "staging", sandboxed=("head",)) as builder:
        builder.start([BuildRequest(kernel, "head", "cuda-cpp", tree)])
        _, outcome = builder.side(kernel, label="head", kind="cuda-cpp", cwd=tree)
    assert outcome is not None and outcome.ok, outcome
    assert victim.read_text() == ""
    pid = int((tree / "daemon.pid").read_text())
    deadline = time.monotonic() + 5
    while state(pid) not in (None, "Z") and time.monotonic() < deadline:
        time.sleep(0.05)
    assert state(pid) in (None, "Z"), f"the build's daemon {pid} outlived its build"
