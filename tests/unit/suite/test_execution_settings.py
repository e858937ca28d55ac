"""How a suite runs: warm worker and cache folder from the command line, the
environment, kbench.toml and the defaults, in that order."""

from __future__ import annotations

from pathlib import Path

import pytest

from kbench_ci.errors import UsageError
from kbench_ci.suite.settings import (
    Execution,
    ExecutionOptions,
    SuiteSettings,
    default_cache_dir,
    execution,
    parallel_builds,
)


def test_by_default_the_worker_is_warm_and_the_cache_is_in_xdg_cache_home(tmp_path: Path) -> None:
    chosen = execution(SuiteSettings(), environ={"XDG_CACHE_HOME": str(tmp_path)})
    assert chosen == Execution(warm_worker=True, cache_dir=tmp_path / "kbench-ci")
    assert default_cache_dir({"HOME": "/home/ci"}) == Path("/home/ci/.cache/kbench-ci")


def test_the_command_line_beats_the_environment_which_beats_kbench_toml(tmp_path: Path) -> None:
    toml = SuiteSettings(warm_worker=True, cache_dir=tmp_path / "from-toml")
    environ = {"KBENCH_CI_CACHE_DIR": str(tmp_path / "from-env"), "KBENCH_CI_FRESH_WORKER": "0"}
    assert execution(toml, environ={}).cache_dir == tmp_path / "from-toml"
    assert execution(toml, environ=environ) == Execution(True, tmp_path / "from-env")
    cli = ExecutionOptions(fresh_worker=True, cache_dir=tmp_path / "from-cli")
    assert execution(toml, cli, environ=environ) == Execution(False, tmp_path / "from-cli")


def test_the_cache_can_be_turned_off_everywhere(tmp_path: Path) -> None:
    assert execution(SuiteSettings(), ExecutionOptions(no_cache=True), environ={}).cache_dir is None
    assert execution(SuiteSettings(), environ={"KBENCH_CI_NO_CACHE": "1"}).cache_dir is None
    assert execution(SuiteSettings(cache=False), environ={}).cache_dir is None
    assert execution(SuiteSettings(warm_worker=False), environ={}).warm_worker is False


def test_a_switch_that_is_not_one_is_bad_usage() -> None:
    with pytest.raises(UsageError, match="KBENCH_CI_FRESH_WORKER='maybe' is not a switch"):
        execution(SuiteSettings(), environ={"KBENCH_CI_FRESH_WORKER": "maybe"})


def test_workers_get_triton_and_inductor_caches_in_the_cache_folder_unless_set(tmp_path: Path) -> None:
    chosen = Execution(cache_dir=tmp_path)
    assert chosen.worker_environment({}, bytecode=True) == {
        "TRITON_CACHE_DIR": str(tmp_path / "triton"), "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "inductor"),
        "KBENCH_CI_CEILINGS_DIR": str(tmp_path / "ceilings"), "TRITON_CACHE_AUTOTUNING": "1",
        "PYTHONPYCACHEPREFIX": str(tmp_path / "pycache"), "PYTHONDONTWRITEBYTECODE": "",
    }
    mine = {"TRITON_CACHE_DIR": "/mine", "TRITON_CACHE_AUTOTUNING": "0", "PYTHONPYCACHEPREFIX": "/my-pyc"}
    assert chosen.worker_environment(mine, bytecode=True) == {
        "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "inductor"), "KBENCH_CI_CEILINGS_DIR": str(tmp_path / "ceilings"),
        "PYTHONDONTWRITEBYTECODE": "1",  # a prefix of the person's own: no bytecode written at all
    }
    assert Execution(cache_dir=None).worker_environment({}) == {}
    one_run = chosen.worker_environment({}, bytecode=False)  # a folder of one run
    assert "PYTHONPYCACHEPREFIX" not in one_run and one_run["PYTHONDONTWRITEBYTECODE"] == "1"


def test_workers_keep_bytecode_in_the_cache_only_where_torch_has_none_of_its_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import importlib.util
    import sys

    from kbench_ci.suite import settings

    monkeypatch.setattr(sys, "pycache_prefix", None)  # a tester's own prefix would move the bytecode
    package = tmp_path / "site" / "fakepkg"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("VALUE = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    assert settings.installed_without_bytecode("fakepkg") is True
    compiled = Path(importlib.util.cache_from_source(str(package / "__init__.py")))
    compiled.parent.mkdir(parents=True)
    compiled.write_bytes(b"")  # bytecode beside the source, as pip leaves it
    assert settings.installed_without_bytecode("fakepkg") is False
    assert settings.installed_without_bytecode("no_such_module_anywhere") is False

    monkeypatch.setattr(settings, "installed_without_bytecode", lambda module="torch": True)
    assert Execution(cache_dir=tmp_path).worker_environment({})["PYTHONPYCACHEPREFIX"] == str(tmp_path / "pycache")
    monkeypatch.setattr(settings, "installed_without_bytecode", lambda module="torch": False)
    with_its_own = Execution(cache_dir=tmp_path).worker_environment({})
    assert "PYTHONPYCACHEPREFIX" not in with_its_own and with_its_own["PYTHONDONTWRITEBYTECODE"] == "1"


def test_parallel_builds_follow_the_cores_within_bounds() -> None:
    assert parallel_builds(1) == 1
    assert parallel_builds(8) == 8
    assert parallel_builds(256) == 16
    assert parallel_builds(0) == 1


def test_kbench_toml_sets_them_in_defaults(tmp_path: Path) -> None:
    from kbench_ci.errors import ConfigError
    from kbench_ci.suite.loader import load_suite

    (tmp_path / "k.py").write_text("")
    (tmp_path / "r.py").write_text("")
    kernel = '[[kernels]]\nname = "k"\nsolution = "k.py"\nref = "r.py"\nshapes = [{N = 1}]\n'
    config = tmp_path / "kbench.toml"
    config.write_text('[defaults]\nwarm_worker = false\ncache = true\ncache_dir = ".kbench-cache"\n\n' + kernel)
    settings = load_suite(config).settings
    assert (settings.warm_worker, settings.cache, settings.cache_dir) == (False, True, tmp_path / ".kbench-cache")
    assert execution(settings, environ={}) == Execution(False, tmp_path / ".kbench-cache")
    config.write_text('[defaults]\nwarm_worker = "no"\n\n' + kernel)
    with pytest.raises(ConfigError, match="warm_worker"):
        load_suite(config)
