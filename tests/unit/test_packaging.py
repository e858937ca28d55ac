"""What pyproject.toml promises (issue 13, item 10)."""

from __future__ import annotations

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
