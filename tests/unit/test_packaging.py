"""What pyproject.toml promises."""

from __future__ import annotations

import re
from pathlib import Path

import tomllib
from packaging.requirements import Requirement

PYPROJECT = tomllib.loads((Path(__file__).parents[2] / "pyproject.toml").read_text())


def test_python_3_10_gets_tomli_which_the_suite_loader_falls_back_to() -> None:
    project = PYPROJECT["project"]
    assert project["requires-python"].startswith(">=3.10")
    requirements = [Requirement(text) for text in project["dependencies"]]
    tomli = [r for r in requirements if r.name == "tomli"]
    assert tomli, "Python 3.10 has no tomllib: tomli must be a dependency there"
    marker = tomli[0].marker
    assert marker is not None
    assert marker.evaluate({"python_version": "3.10"}) and not marker.evaluate({"python_version": "3.11"})


def test_gpu_state_library_is_a_dependency() -> None:
    names = {Requirement(text).name for text in PYPROJECT["project"]["dependencies"]}
    assert "nvidia-ml-py" in names


def test_what_kbench_ci_imports_at_its_core_is_declared() -> None:
    """Rich drives the progress bar (cli/console.py); it came only through typer."""
    names = {Requirement(text).name for text in PYPROJECT["project"]["dependencies"]}
    source = (Path(__file__).parents[2] / "kbench_ci" / "cli" / "console.py").read_text()
    assert "from rich" in source and "rich" in names
    assert {"torch", "typer", "tabulate", "gitpython"} <= names


def test_the_license_is_an_spdx_string_not_a_table() -> None:
    """A `project.license` table made setuptools warn twice on every install."""
    license_field = PYPROJECT["project"]["license"]
    assert isinstance(license_field, str) and license_field == "Apache-2.0"
    assert any(Requirement(r).name == "setuptools" and Requirement(r).specifier.contains("77")
               for r in PYPROJECT["build-system"]["requires"])


def test_one_name_for_the_action_everywhere_a_user_copies_it() -> None:
    """The README and docs/action.md said `org/kbench-action@v1` and
    `<owner>/kbench-ci@<tag or sha>`; what a user copies must name one action."""
    root = Path(__file__).parents[2]
    files = [root / "README.md", *sorted((root / "docs").glob("*.md")), *sorted((root / "examples" / "workflows").glob("*.yml"))]
    found: dict[str, set[str]] = {}
    for path in files:
        for line in path.read_text().splitlines():
            for name in re.findall(r"uses:\s*`?([\w.<>-]+/[\w.<>-]+)@", line):
                if "kbench" in name:
                    found.setdefault(name, set()).add(path.name)
    assert set(found) == {"org/kbench-action"}, found
