"""The ``kbench-ci`` app: one Typer app and the table of its commands.

Each command lives in its own module (:mod:`~kbench_ci.cli.bench`, :mod:`~kbench_ci.cli.build`,
:mod:`~kbench_ci.cli.comment`, :mod:`~kbench_ci.cli.run`, :mod:`~kbench_ci.cli.compare`, :mod:`~kbench_ci.cli.merge`); none of
them imports this one. Start-up imports no torch, so ``kbench-ci --help`` is instant.
"""

from __future__ import annotations

from typing import Annotated

import typer

from kbench_ci import __version__
from kbench_ci.cli import bench, build, comment, compare, history, merge, run
from kbench_ci.cli.console import configure_logging
from kbench_ci.cli.help_format import Command, Group, focused
from kbench_ci.procgroup import become_subreaper, end_strays

__all__ = ["app", "main"]

_HELP = "A CI regression gate for GPU kernels: correct first, timed truthfully, judged with statistics."

# -h as well as --help, on every command (Click hands the names down to each command's context);
# --install-completion / --show-completion from Typer for bash, zsh, fish and PowerShell.
app = typer.Typer(
    add_completion=True, no_args_is_help=True, help=_HELP, pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]}, cls=Group,
)


def _print_version(value: bool) -> None:
    if value:
        typer.echo(f"kbench-ci {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool,
        typer.Option("--version", "-V", metavar="", is_eager=True, callback=_print_version, help="print the version and exit"),
    ] = False,
) -> None:
    """A CI regression gate for GPU kernels: correct first, timed truthfully, judged with statistics."""


app.command("bench", help=bench.HELP, context_settings=bench.CONTEXT_SETTINGS, cls=Command)(bench.bench)
app.command("build", help=build.HELP, cls=Command)(build.build)
app.command("comment", help=comment.HELP, cls=Command)(comment.comment)
app.command("run", help=run.HELP, cls=focused(*run.ADVANCED))(run.run)
app.command("compare", help=compare.HELP, cls=focused(*compare.ADVANCED))(compare.compare)
app.command("merge", help=merge.HELP, cls=Command)(merge.merge)
app.add_typer(history.app, name="history", help=history.HELP)


def main() -> None:
    """The ``kbench-ci`` console script and ``python -m kbench_ci``."""
    configure_logging()
    # What a kernel double-forks away from its worker is re-parented here, not to init, and
    # ended when the command ends: no process that pull-request code started outlives it.
    become_subreaper()
    try:
        app()
    finally:
        end_strays()


if __name__ == "__main__":
    main()
