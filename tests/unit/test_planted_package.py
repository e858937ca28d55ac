"""A pull request that commits a ``kbench_ci/`` package where kbench-ci's own processes start (its
checkout, a side's folder) must not get it imported: ``python -m``
puts the working folder first on ``sys.path``, so the judge, a side before its sandbox, or the
action's steps (with the comment step's token) would have run it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from kbench_ci.procgroup import module_command


def _plant(folder: Path) -> Path:
    mark = folder / "planted.txt"
    package = folder / "kbench_ci"
    for sub in ("", "side", "judge", "github", "measure"):
        (package / sub).mkdir(parents=True, exist_ok=True)
        (package / sub / "__init__.py").write_text(f"open({str(mark)!r}, 'a').write('ran\\n')\n")
    return mark


def test_python_dash_m_would_run_it(tmp_path: Path) -> None:
    """The attack, so that the tests below prove something."""
    mark = _plant(tmp_path)
    subprocess.run([sys.executable, "-m", "kbench_ci.side.sandboxed"], cwd=tmp_path, capture_output=True, timeout=60)
    assert mark.is_file()


def test_kbench_cis_own_processes_start_without_the_working_folder_on_their_path(tmp_path: Path) -> None:
    mark = _plant(tmp_path)
    done = subprocess.run(module_command(sys.executable, "kbench_ci.side.sandboxed", "--", "echo", "ran"), cwd=tmp_path,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout == "ran\n", done.stderr
    assert not mark.exists()


def test_the_actions_console_script_does_not_import_the_checkouts_package(tmp_path: Path) -> None:
    mark = _plant(tmp_path)
    script = Path(sys.executable).with_name("kbench-ci-action")
    assert script.is_file(), "the venv lacks the kbench-ci-action console script: reinstall the package"
    done = subprocess.run([str(script), "no-such-step"], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert done.returncode != 0 and "no-such-step" in done.stdout + done.stderr, done.stdout + done.stderr
    assert not mark.exists()



def test_the_in_process_worker_still_finds_the_users_own_packages(tmp_path: Path) -> None:
    """It runs the user's code in itself anyway (no defence lives there): ``python -m``'s path,
    where a solution's ``from kernels.helpers import ...`` imports from the working folder."""
    (tmp_path / "kernels").mkdir()
    (tmp_path / "kernels" / "__init__.py").write_text("")
    (tmp_path / "kernels" / "helpers.py").write_text("FACTOR = 2\n")
    (tmp_path / "user_probe.py").write_text("from kernels.helpers import FACTOR\nprint(FACTOR)\n")
    done = subprocess.run(module_command(sys.executable, "user_probe", user_code=True), cwd=tmp_path, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0 and done.stdout.strip() == "2", done.stderr
    # and the judge's way does not look there
    done = subprocess.run(module_command(sys.executable, "user_probe"), cwd=tmp_path, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode != 0 and "No module named user_probe" in done.stderr
