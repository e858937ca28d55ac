"""Every hint names flags that exist: a hint that says "pass --token" or
"pass --repository" sends the person to a flag kbench-ci does not have."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import typer.main

from kbench_ci.cli.app import app

PACKAGE = Path(__file__).resolve().parents[2] / "kbench_ci"
DOCS = [PACKAGE.parent / "README.md", *sorted((PACKAGE.parent / "docs").glob("*.md"))]
_FLAG = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]*")
#: flags of other programs that hints quote in full commands (git fetch, git config, nvcc)
OTHER_TOOLS = {"--depth", "--unshallow", "--global", "--add", "--no-tags", "--expt-relaxed-constexpr"}


def _kbench_flags() -> dict[str, set[str]]:
    root = typer.main.get_command(app)
    flags: dict[str, set[str]] = {}
    for name, command in root.commands.items():  # type: ignore[attr-defined]
        # A group (``history``) has its flags on its subcommands: ``history record --commit``.
        commands = {name: command, **{f"{name} {sub}": c for sub, c in getattr(command, "commands", {}).items()}}
        for full_name, each in commands.items():
            flags[full_name] = {opt for param in each.params for opt in (*param.opts, *param.secondary_opts)}
            flags[full_name] |= {"--help"}
    return flags


def _strings(node: ast.AST) -> list[str]:
    return [n.value for n in ast.walk(node) if isinstance(n, ast.Constant) and isinstance(n.value, str)]


def test_every_flag_a_hint_names_exists() -> None:
    known = set().union(*_kbench_flags().values()) | OTHER_TOOLS
    unknown: list[str] = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.keyword) and node.arg == "hint":
                for text in _strings(node.value):
                    unknown += [f"{path.relative_to(PACKAGE.parent)}: {flag}" for flag in _FLAG.findall(text)
                                if flag not in known]
    assert unknown == []


def test_the_comment_command_has_every_flag_its_messages_and_docs_name() -> None:
    """`kbench-ci comment --x` anywhere in the docs or the package must be a flag of comment."""
    comment_flags = _kbench_flags()["comment"]
    named: list[str] = []
    sources = [p.read_text(encoding="utf-8") for p in (*DOCS, *PACKAGE.rglob("*.py"))]
    for text in sources:
        for match in re.finditer(r"kbench-ci comment((?: +(?:--[a-z-]+(?:[ =][A-Z][A-Z_]*)?|DIR|N))*)", text):
            named += _FLAG.findall(match.group(1))
    assert named, "the docs show kbench-ci comment with flags"
    assert sorted(set(named) - comment_flags) == []
    # The token and the API root come from the environment only: a flag would put a secret in `ps`.
    assert "--token" not in comment_flags and not any("--api-url" in text for text in sources)
