"""A head that makes the base's own files fail it must never read ``fixed``.

tests/fixtures/base_files/chmod_base.py (30x the base's work) finds the base's temporary
worktree through its own repository's git folder and, at import, sets the base's helper module
to mode 000. Landlock does not cover ``chmod``; the base loads before the head in the first
measurement, so it is the re-measurement's fresh base worker (the head reads ``slower``, which
is measured again) that cannot import its helper. Before the base's files were guarded, that
base failed beside the head and again alone, and the head read ``fixed``: gate passed, exit 0.

Root reads a mode-000 file anyway (``CAP_DAC_OVERRIDE``), and CI runs as root: where the tests
run as root, the compare runs without the two capabilities that ignore mode bits (``setpriv``'s
bounding set), as an unprivileged runner would be (its python, under root's 0700 home here,
stays readable to the same uid).
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from kbench_ci.side.harden import seccomp_available
from tests.support.suite_repo import TempRepo, suite_toml

ROOT = Path(__file__).resolve().parents[3]
FIXTURES = ROOT / "tests" / "fixtures" / "base_files"
SHAPE = {"M": 96, "N": 96, "K": 96}


def _unprivileged() -> list[str]:
    """The command's prefix that takes mode bits' exemption from root (nothing when the tests
    are not root)."""
    if os.geteuid() != 0:
        return []
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.fail("the tests run as root and setpriv (util-linux) is missing: the attack needs mode bits that hold")
    return [setpriv, "--bounding-set=-dac_override,-dac_read_search", "--"]


def _repo(root: Path, base: str = "mm.py", head: str = "chmod_base.py") -> TempRepo:
    repo = TempRepo(root / "repo")
    toml = suite_toml([{"name": "mm", "kind": "pytorch", "shapes": [SHAPE]}], {"correctness_trials": 2, "rounds": 3})
    repo.commit({
        "kbench.toml": toml, "kernels/mm.py": (FIXTURES / base).read_text(),
        **{f"kernels/{name}": (FIXTURES / name).read_text() for name in ("mm_helpers.py", "mm_ref.py")},
    }, "an honest matmul")
    repo.git("checkout", "-q", "-b", "reach-the-base")
    repo.commit({"kernels/mm.py": (FIXTURES / head).read_text()}, "30x slower, and the base's files reached")
    return repo


def _compare(
    root: Path, isolation: str, *, prefix: list[str], repo: TempRepo | None = None, env: dict[str, str] | None = None,
) -> tuple[subprocess.CompletedProcess[str], dict]:
    repo = repo or _repo(root)
    home = root / "home"
    home.mkdir()
    environment = {**os.environ, "HOME": str(home), "TMPDIR": str(home), "XDG_CACHE_HOME": str(home / ".cache"), **(env or {})}
    environment.pop("CUDA_VISIBLE_DEVICES", None)
    out = root / "out"
    completed = subprocess.run(
        [*prefix, sys.executable, "-m", "kbench_ci", "compare", "--base", "main", "--device", "cpu",
         "--isolation", isolation, "--threshold", "0.05", "--output-dir", str(out), "--no-cache"],
        cwd=repo.root, env=environment, capture_output=True, text=True, timeout=600,
    )
    print(completed.stderr[-3000:])
    assert (out / "results.json").is_file(), completed.stderr[-4000:]
    results = json.loads((out / "results.json").read_text())
    helper = stat.S_IMODE((root / "repo" / "kernels" / "mm_helpers.py").stat().st_mode)
    assert helper == 0o644, oct(helper)  # the head's own copy is untouched: only the base's was its target
    return completed, results["cases"][0]


def _without_seccomp(root: Path) -> dict[str, str]:
    """The environment of a run where every process finds a ``pyseccomp`` that fails to import,
    as where libseccomp is not installed: the side's filter is not in force, so an attack it
    would refuse goes through and the defence behind it is what holds."""
    shadow = root / "no-libseccomp"
    shadow.mkdir()
    (shadow / "pyseccomp.py").write_text('raise RuntimeError("Unable to find libseccomp")\n')
    return {"PYTHONPATH": os.pathsep.join(filter(None, [str(shadow), os.environ.get("PYTHONPATH")]))}


@pytest.mark.slow
@pytest.mark.parametrize(("isolation", "seccomp"), [("judge", "absent"), ("judge", "in force"), ("process", "absent")])
def test_a_head_that_chmods_the_base_helper_never_reads_fixed(tmp_path: Path, isolation: str, seccomp: str) -> None:
    """``in force``: the side's seccomp filter refuses the chmod; ``absent`` (in process there is
    no filter at all): the chmod goes through, and the record of the base's files must hold."""
    if seccomp == "in force" and not seccomp_available():
        pytest.skip("libseccomp is not installed here: the filter cannot be in force")
    marks = Path(tempfile.mkdtemp(prefix="kbench-base-files-", dir="/dev/shm")) / "changed"
    env = {"KBENCH_BASE_FILES_MARKS": str(marks), **(_without_seccomp(tmp_path) if seccomp == "absent" else {})}
    try:
        completed, case = _compare(tmp_path, isolation, prefix=_unprivileged(), env=env)
        changed = marks.read_text().split() if marks.is_file() else []
    finally:
        shutil.rmtree(marks.parent, ignore_errors=True)
    head, base = case["head"], case["base"]
    print(isolation, case["verdict"], "| head:", head["status"], head.get("message"), "| base:", base["status"],
          base.get("message"), "| case:", case.get("message"), "| changed:", changed, "| exit", completed.returncode)
    assert case["verdict"] != "fixed", case
    assert completed.returncode != 0, completed.stderr[-2000:]
    if seccomp == "in force":
        # The filter refused the chmod before the record was needed: the slower head is slower,
        # and the base never failed.
        assert changed == [], f"the filter let the head change {changed}"
        assert case["verdict"] in ("slower", "incorrect") and base["status"] == "ok", case
        return
    assert changed, "the head could not change the base's helper: the record was never put to the test"
    assert head["status"] == "incorrect", head
    assert "mm_helpers.py" in (head.get("message") or ""), head
    assert "mode" in (head.get("message") or ""), head
    # The base's file was put back, and the base measured from it
    assert base["status"] == "ok", base


def _unlock(root: Path) -> None:
    """Whatever the head left immutable under ``root`` made removable again (the test's own
    clean-up; the defence's is kbench_ci.basefiles.remove)."""
    chattr = shutil.which("chattr")
    if chattr is not None:
        subprocess.run([chattr, "-R", "-i", str(root)], capture_output=True)


@pytest.mark.slow
@pytest.mark.parametrize("seccomp", ["absent", "in force"])
def test_a_root_head_that_makes_the_base_folder_immutable_never_reads_fixed(tmp_path: Path, seccomp: str) -> None:
    """The root runner's own variant: mode bits hold nothing against root, but ``chattr +i`` does.
    tests/fixtures/base_files/chattr_base.py makes the base worker's folder and caches immutable
    at its load; the base (mm_cwd.py) makes a folder in its working folder as it loads, as a
    compiled base does under the judge. Without the judge reclaiming a trusted worker's folders,
    the re-measurement's base worker (served in the same folder: removing it failed) could not
    load, failed beside the head and alone, and the head read ``fixed``.

    ``absent``: a ``pyseccomp`` that fails to import shadows the real one (a machine without
    libseccomp), so the ioctl goes through and the reclaiming alone must hold; ``in force``: the
    side's seccomp filter refuses the ioctl (``FS_IOC_SETFLAGS``), so nothing is locked."""
    if os.geteuid() != 0:
        pytest.skip("chattr +i is root's (CAP_LINUX_IMMUTABLE): this variant is the root runner's")
    if seccomp == "in force" and not seccomp_available():
        pytest.skip("libseccomp is not installed here: the filter cannot be in force")
    marks = Path(tempfile.mkdtemp(prefix="kbench-base-files-", dir="/dev/shm")) / "locked"
    env = {"KBENCH_BASE_FILES_MARKS": str(marks), **(_without_seccomp(tmp_path) if seccomp == "absent" else {})}
    try:
        repo = _repo(tmp_path, base="mm_cwd.py", head="chattr_base.py")
        completed, case = _compare(tmp_path, "judge", prefix=[], repo=repo, env=env)
    finally:
        _unlock(tmp_path)
    locked = marks.read_text().split() if marks.is_file() else []
    shutil.rmtree(marks.parent, ignore_errors=True)
    head, base = case["head"], case["base"]
    print("root judge", case["verdict"], "| head:", head["status"], head.get("message"), "| base:", base["status"],
          base.get("message"), "| case:", case.get("message"), "| locked:", locked, "| exit", completed.returncode)
    folders = [path for path in locked if Path(path).name == "side-base" and Path(path).parent.name.startswith("kbench-judge-")]
    if seccomp == "in force":
        assert locked == [], f"the filter let the head lock {locked}"
        assert case["verdict"] != "fixed" and base["status"] == "ok", case
        return
    assert folders, f"the head could not lock the base's folder: {locked}"
    # Locked in the first measurement and again in the re-measurement, whose base worker loaded
    # in the folder locked by the first (a first run the CPU's noise ended early proves nothing)
    assert len(folders) == 2 and "remeasured" in (case.get("message") or ""), case
    assert case["verdict"] != "fixed", case
    assert base["status"] == "ok", base
    assert case["verdict"] == "slower", case
