"""The compare step's guard around pull-request code: a kernel that appends
``BASH_ENV=...`` to the runner's file-command files, or plants code in the action's venv, must
not run code of its own in the job's later steps. The step puts the file commands back and
fails on a changed venv, with ``tampered=true`` for action.yml's later steps.

The "kernel" here is a stand-in for `kbench-ci compare` that does what a kernel it runs could
do (in process isolation, where no Landlock sandbox holds it).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from ruamel.yaml import YAML

from kbench_ci.github.action import compare
from tests.integration.github.test_action_steps import read_outputs

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture
def runner(tmp_path: Path) -> dict[str, str]:
    """The runner's own layout: the step's file-command files in RUNNER_TEMP/_runner_file_commands."""
    temp = tmp_path / "runner" / "temp"
    commands = temp / "_runner_file_commands"
    commands.mkdir(parents=True)
    files = {name: commands / f"{name.lower()}_0f1e" for name in ("GITHUB_ENV", "GITHUB_OUTPUT", "GITHUB_PATH",
                                                                 "GITHUB_STEP_SUMMARY")}
    for path in files.values():
        path.write_text("")
    (files["GITHUB_ENV"]).write_text("EARLIER=1\n")
    return {**{name: str(path) for name, path in files.items()}, "RUNNER_TEMP": str(temp), "GITHUB_REPOSITORY": "o/r",
            "KBENCH_REPORT_DIR": str(tmp_path / "report"), "KBENCH_BASE": "main", "KBENCH_HEAD": "HEAD"}


def _fake_compare(tmp_path: Path, body: str) -> Path:
    fake = tmp_path / "bin" / "kbench-ci"
    fake.parent.mkdir(exist_ok=True)
    fake.write_text(f"#!{sys.executable}\nimport glob, os, sys\n{body}\nsys.exit(0)\n")
    fake.chmod(0o755)
    return fake


def _venv(tmp_path: Path) -> Path:
    venv = tmp_path / "venv"
    (venv / "lib" / "site-packages" / "kbench_ci").mkdir(parents=True)
    (venv / "lib" / "site-packages" / "kbench_ci" / "__init__.py").write_text("# kbench-ci\n")
    return venv


def test_a_kernel_that_appends_to_the_runners_file_commands_is_undone(tmp_path: Path, runner: dict[str, str]) -> None:
    # The step hands compare no runner variables: a kernel finds the folder by looking for it.
    commands = Path(runner["GITHUB_ENV"]).parent
    fake = _fake_compare(tmp_path, f"""
for path in glob.glob(os.path.join({str(commands)!r}, "*")):
    with open(path, "a") as handle:
        handle.write("BASH_ENV=/tmp/evil.sh\\n")
with open(os.path.join({str(commands)!r}, "set_env_new"), "w") as handle:
    handle.write("BASH_ENV=/tmp/evil.sh\\n")
""")
    env = {**runner, "KBENCH_CLI": str(fake)}
    result = compare(env, tmp_path, venv=_venv(tmp_path))
    assert "BASH_ENV" not in "".join(path.read_text() for path in commands.iterdir())
    assert Path(runner["GITHUB_ENV"]).read_text() == "EARLIER=1\n"
    assert not (commands / "set_env_new").exists()
    assert read_outputs(Path(runner["GITHUB_OUTPUT"])) == {"exit-code": "0", "tampered": "false"}
    text = "\n".join(result.lines)
    assert "was changed (put back as it was)" in text and "appeared" in text
    assert result.exit_code == 0  # nothing left that a later step would run


def test_a_kernel_that_plants_code_in_the_actions_venv_fails_the_step(tmp_path: Path, runner: dict[str, str]) -> None:
    venv = _venv(tmp_path)
    target = venv / "lib" / "site-packages" / "kbench_ci" / "__init__.py"
    fake = _fake_compare(tmp_path, f"""
with open({str(target)!r}, "a") as handle:
    handle.write("import os; os.system('curl evil')\\n")
os.utime({str(target)!r}, (0, 0))  # and back-dated: the ctime still moves
open({str(venv / "lib" / "site-packages" / "sitecustomize.py")!r}, "w").write("print('owned')\\n")
""")
    result = compare({**runner, "KBENCH_CLI": str(fake)}, tmp_path, venv=venv)
    assert result.exit_code == 1
    assert read_outputs(Path(runner["GITHUB_OUTPUT"]))["tampered"] == "true"
    text = "\n".join(result.lines)
    assert "the action's venv" in text and "sitecustomize.py" in text


def test_an_honest_compare_changes_nothing_and_says_nothing(tmp_path: Path, runner: dict[str, str]) -> None:
    fake = _fake_compare(tmp_path, "os.makedirs(os.environ.get('KBENCH_OUT', '.'), exist_ok=True)")
    result = compare({**runner, "KBENCH_CLI": str(fake)}, tmp_path, venv=_venv(tmp_path))
    assert result.exit_code == 0
    assert result.lines == ()
    assert read_outputs(Path(runner["GITHUB_OUTPUT"])) == {"exit-code": "0", "tampered": "false"}


def test_the_later_steps_do_not_run_after_tampering() -> None:
    """action.yml: summary, comment and history are skipped on `tampered`, and the gate fails
    before it runs the venv's Python."""
    steps = {step.get("id", step["name"]): step for step in YAML(typ="safe").load((ROOT / "action.yml").read_text())["runs"]["steps"]}
    for step_id in ("summary", "comment", "history"):
        assert "steps.compare.outputs.tampered != 'true'" in steps[step_id]["if"], step_id
    gate = steps["Gate"]
    assert gate["env"]["KBENCH_TAMPERED"] == "${{ steps.compare.outputs.tampered }}"
    assert gate["run"].index('"$KBENCH_TAMPERED" = "true"') < gate["run"].index("kbench-ci-action")


def test_the_step_runs_compare_without_writing_bytecode(tmp_path: Path, runner: dict[str, str]) -> None:
    """A .pyc of compare's own in the venv would read as tampering."""
    seen = tmp_path / "seen"
    fake = _fake_compare(tmp_path, f"open({str(seen)!r}, 'w').write(os.environ.get('PYTHONDONTWRITEBYTECODE', ''))")
    compare({**runner, "KBENCH_CLI": str(fake)}, tmp_path, venv=_venv(tmp_path))
    assert seen.read_text() == "1"
