"""How ``-h``/``--help`` renders: a flag shows no value placeholder.

Typer writes a type placeholder after every option (``<int>``, ``<path>``), and ``<bool>`` after
a flag, which reads as if ``--help`` or ``--install-completion`` took a value. The help option
is made by Click on demand and the completion options by Typer, so the command and group
classes here blank every flag's placeholder as the parameters are listed.
"""

from __future__ import annotations

from typing import Any

from typer.core import TyperCommand, TyperGroup

__all__ = ["Command", "Group"]


class Command(TyperCommand):
    def get_params(self, ctx: Any) -> list[Any]:
        return _flags_bare(super().get_params(ctx))

    def get_help_option(self, ctx: Any) -> Any:
        return _flag_bare(super().get_help_option(ctx))


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
