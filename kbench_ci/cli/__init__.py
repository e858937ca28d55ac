"""The ``kbench-ci`` command line: the only place that prints for humans and picks exit codes.

:mod:`~kbench_ci.cli.app` holds the Typer app and its command table, one module per command
holds each command, :mod:`~kbench_ci.cli.console` everything said to the person and the one
error boundary, :mod:`~kbench_ci.cli.options` and :mod:`~kbench_ci.cli.suite_common` what
several commands share.
"""

from kbench_ci.cli.app import app, main

__all__ = ["app", "main"]
