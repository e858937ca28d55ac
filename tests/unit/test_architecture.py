"""The package's shape is a contract: imports run one way between layers, each side of the trust
boundary imports only what it may, and no module is part of an import cycle. The contracts have
one home, pyproject.toml's import-linter section (`.ci/lint` runs `lint-imports` on it); this test
reads them from there, keeps them in the test run, and adds the cycle check that a layers
contract cannot make (a cycle inside one package is invisible to it)."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

import grimp
import pytest
import tomllib

ROOT = Path(__file__).resolve().parents[2]
CONTRACTS: list[dict[str, Any]] = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["importlinter"]["contracts"]


def _layers() -> list[set[str]]:
    """pyproject's layers, top to bottom, each a set of kbench_ci's top-level packages: a module
    may import only from its own package or the layers below."""
    (contract,) = [contract for contract in CONTRACTS if contract["type"] == "layers"]
    return [{name.strip().removeprefix("kbench_ci.") for name in layer.split("|")} for layer in contract["layers"]]


LAYERS = _layers()
#: pyproject's forbidden contracts: (source, forbidden modules)
FORBIDDEN = [(source, tuple(contract["forbidden_modules"]))
             for contract in CONTRACTS if contract["type"] == "forbidden" for source in contract["source_modules"]]


@pytest.fixture(scope="module")
def graph() -> grimp.ImportGraph:
    return grimp.build_graph("kbench_ci")


def _top(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else None


def _layer(package: str) -> int:
    for index, layer in enumerate(LAYERS):
        if package in layer:
            return index
    raise AssertionError(f"kbench_ci.{package} is in no layer: add it to LAYERS and to pyproject's contract")


def test_every_import_points_down_or_within_its_package(graph: grimp.ImportGraph) -> None:
    wrong = []
    for importer in sorted(graph.modules):
        source = _top(importer)
        if source is None or source == "__main__":
            continue
        for imported in sorted(graph.find_modules_directly_imported_by(importer)):
            target = _top(imported)
            if target is None or target == source:
                continue
            if _layer(target) < _layer(source) or (
                _layer(target) == _layer(source) and target != source
            ):
                wrong.append(f"{importer} -> {imported}")
    assert wrong == [], "imports against the layer order:\n" + "\n".join(wrong)


def test_no_module_is_part_of_an_import_cycle(graph: grimp.ImportGraph) -> None:
    cycles = []
    for importer in sorted(graph.modules):
        for imported in sorted(graph.find_modules_directly_imported_by(importer)):
            back = graph.find_shortest_chain(importer=imported, imported=importer)
            if back is not None:
                cycles.append(" -> ".join((importer, *back)))
    assert cycles == [], "import cycles:\n" + "\n".join(cycles)


def test_measure_never_imports_gate_and_report_never_imports_measure(graph: grimp.ImportGraph) -> None:
    assert graph.find_shortest_chain(importer="kbench_ci.measure", imported="kbench_ci.gate", as_packages=True) is None
    assert graph.find_shortest_chain(importer="kbench_ci.report", imported="kbench_ci.measure", as_packages=True) is None
    assert graph.find_shortest_chain(importer="kbench_ci.report", imported="kbench_ci.gate", as_packages=True) is None


#: the longest a function of gate/ may be (lines from ``def`` to its last line, docstring and
#: nested functions included): the commands there once grew one 168-line function each
#:
GATE_FUNCTION_MAX_LINES = 80
GATE = ROOT / "kbench_ci" / "gate"


def _function_lengths(path: Path) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    return [
        (node.end_lineno - node.lineno + 1, f"{path.name}:{node.lineno} {node.name}")
        for node in ast.walk(tree)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.end_lineno is not None
    ]


def test_no_function_in_gate_is_longer_than_the_limit() -> None:
    lengths = [row for path in sorted(GATE.glob("*.py")) for row in _function_lengths(path)]
    assert lengths, f"no functions found under {GATE}"
    too_long = [f"{where}: {n} lines" for n, where in sorted(lengths, reverse=True) if n > GATE_FUNCTION_MAX_LINES]
    assert too_long == [], f"functions in kbench_ci/gate over {GATE_FUNCTION_MAX_LINES} lines:\n" + "\n".join(too_long)


def test_the_function_length_check_counts_what_it_should(tmp_path: Path) -> None:
    source = tmp_path / "m.py"
    source.write_text("def f():\n    def g():\n        pass\n    return 1\n")
    assert sorted(_function_lengths(source)) == [(2, "m.py:2 g"), (4, "m.py:1 f")]


def test_the_contracts_were_read() -> None:
    assert len(LAYERS) >= 5 and {"judge", "side"} <= LAYERS[1]
    assert {source for source, _ in FORBIDDEN} == {"kbench_ci.judge", "kbench_ci.side"}


@pytest.mark.parametrize(("source", "forbidden"), FORBIDDEN, ids=[source for source, _ in FORBIDDEN])
def test_each_side_of_the_trust_boundary_imports_only_what_it_may(
    graph: grimp.ImportGraph, source: str, forbidden: tuple[str, ...],
) -> None:
    """docs/isolation.md: no pull-request code runs in the judge, so nothing that loads a
    kernel, calls one, or runs in a side's worker may be reachable from it; a side's worker
    reaches neither the judge nor the in-process engine nor the modules that judge a call."""
    reached = []
    for module in forbidden:
        chain = graph.find_shortest_chain(importer=source, imported=module, as_packages=True)
        if chain is not None:
            reached.append(" -> ".join(chain))
    assert reached == [], f"{source} reaches what it may not:\n" + "\n".join(reached)
