"""KBENCH_CI_LOG: kbench-ci's own log records on stderr at the level named, nothing otherwise."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest

from kbench_ci.cli.console import LOG_ENV, configure_logging


@pytest.fixture
def clean_logger() -> Iterator[logging.Logger]:
    logger = logging.getLogger("kbench_ci")
    handlers, level, propagate = list(logger.handlers), logger.level, logger.propagate
    yield logger
    logger.handlers[:] = handlers
    logger.setLevel(level)
    logger.propagate = propagate


def test_debug_shows_kbench_ci_records_with_milliseconds(clean_logger: logging.Logger,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    configure_logging({LOG_ENV: "debug"})
    logging.getLogger("kbench_ci.measure.parent").debug("worker %d started", 7)
    logging.getLogger("git.cmd").debug("Popen(['git', 'status'])")  # a dependency's chatter stays out
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1  # once: not again through a root handler
    assert clean_logger.propagate is False
    assert lines[0].startswith("kbench-ci ") and lines[0].endswith("ms kbench_ci.measure.parent: worker 7 started")


def test_unset_changes_nothing_and_a_bad_level_is_named(clean_logger: logging.Logger,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    before = (list(clean_logger.handlers), clean_logger.level)
    configure_logging({})
    assert (list(clean_logger.handlers), clean_logger.level) == before
    configure_logging({LOG_ENV: "loud"})
    assert "KBENCH_CI_LOG='loud' is not a log level (use debug or info); ignored" in capsys.readouterr().err
    logging.getLogger("kbench_ci.gate").debug("hidden")
    assert capsys.readouterr().err == ""
    configure_logging({LOG_ENV: "20"})  # a number is a level too: info
    logging.getLogger("kbench_ci.gate").debug("hidden")
    logging.getLogger("kbench_ci.gate").info("shown")
    assert capsys.readouterr().err.endswith("kbench_ci.gate: shown\n")
