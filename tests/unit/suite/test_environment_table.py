"""docs/config.md's table of environment variables names every ``KBENCH_CI_*`` variable the
package reads, and none it does not: a knob added, or one removed with its experiment, changes
the table in the same commit."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
NAME = re.compile(r"KBENCH_CI_[A-Z0-9_]*[A-Z0-9]")


def _in_package() -> set[str]:
    return {name for path in (ROOT / "kbench_ci").rglob("*.py") for name in NAME.findall(path.read_text(encoding="utf-8"))}


def _in_table() -> set[str]:
    text = (ROOT / "docs" / "config.md").read_text(encoding="utf-8")
    section = text[text.index("## Environment variables"):]
    section = section[:section.index("\n## ", 1)]
    return {match.group(1) for match in re.finditer(r"^\| `(KBENCH_CI_[A-Z0-9_]+)` \|", section, re.MULTILINE)}


def test_the_table_names_every_variable_the_package_reads_and_no_other() -> None:
    package, table = _in_package(), _in_table()
    assert len(package) >= 10, package
    assert package - table == set(), f"read by kbench_ci but not in docs/config.md: {sorted(package - table)}"
    assert table - package == set(), f"in docs/config.md but read nowhere: {sorted(table - package)}"
