"""How ``-h``/``--help`` renders: a flag shows no value placeholder, and a command with many
options shows the ones a newcomer uses first, the rest behind ``--help-all``.

Typer writes a type placeholder after every option (``<int>``, ``<path>``), and ``<bool>`` after
a flag, which reads as if ``--help`` or ``--install-completion`` took a value. The help option
is made by Click on demand and the completion options by Typer, so the command and group
classes here blank every flag's placeholder as the parameters are listed.

``compare --help`` ran to 122 lines at 80 columns (21 options in 7 panels, ``--isolation`` under
"Workers and caches"): :func:`focused` makes a command class whose ``-h`` leaves the options it
names out (they still parse), and whose ``--help-all`` shows every option.
"""

from __future__ import annotations

from typing import Annotated, Any

import typer
from typer.core import TyperCommand, TyperGroup

__all__ = ["Command", "Group", "HelpAllOption", "focused"]

#: the context's meta key that asks the help for every option (set by ``--help-all``)
_SHOW_ALL = "kbench_ci.help_all"


class Command(TyperCommand):
    def get_params(self, ctx: Any) -> list[Any]:
        return _flags_bare(super().get_params(ctx))

    def get_help_option(self, ctx: Any) -> Any:
        return _flag_bare(super().get_help_option(ctx))


def focused(*advanced: str) -> type[Command]:
    """A command class whose ``-h`` leaves out the options named (by parameter name: ``rounds``);
    the command's :data:`HelpAllOption` shows them too."""
    names = frozenset(advanced)

    class Focused(Command):
        #: the options ``-h`` leaves out, by parameter name
        advanced = names

        def format_help(self, ctx: Any, formatter: Any) -> None:
            show_all = bool(ctx.meta.get(_SHOW_ALL))
            for param in self.params:
                if param.name in self.advanced:
                    param.hidden = not show_all  # type: ignore[attr-defined]  # every option has it
            super().format_help(ctx, formatter)

    return Focused


def _show_all(ctx: typer.Context, value: bool) -> None:
    if not value or ctx.resilient_parsing:
        return
    ctx.meta[_SHOW_ALL] = True
    typer.echo(ctx.get_help(), color=ctx.color)
    raise typer.Exit()


#: ``--help-all`` of a :func:`focused` command: its help with every option
HelpAllOption = Annotated[
    bool, typer.Option("--help-all", is_eager=True, callback=_show_all, help="show every option, those -h leaves out too"),
]


class Group(TyperGroup):
    def get_params(self, ctx: Any) -> list[Any]:
        return _flags_bare(super().get_params(ctx))

    def get_help_option(self, ctx: Any) -> Any:
        return _flag_bare(super().get_help_option(ctx))


def _flags_bare(params: list[Any]) -> list[Any]:
    for param in params:
        _flag_bare(param)
    return params


def _flag_bare(option: Any) -> Any:
    """Typer brings its own copy of Click, so options are known by what they hold, not by class."""
    if getattr(option, "is_flag", False) and not getattr(option, "count", False):
        option.metavar = ""
    return option
