"""No import cycles among the runtime library (``functions/``), ``vigil_tools``, the CDK constructs
(``infra``) and the docs generator (``docsgen``).

A cycle of imports made when a module loads works only in the order the modules happen to be first
imported: start from the other end and one of them sees the other half-initialised (an ImportError
or an AttributeError at import time, often only in a container or a fresh process). So the graph is
read from the sources with ``ast`` (nothing is imported, the test costs a fraction of a second) and
must have no cycle.

What counts as an edge:

- an import a module makes while it loads: at module level, in a class body, under ``if``/``try``
  at module level; not under ``if TYPE_CHECKING:`` (never runs);
- ``from a.b import c`` is an edge to ``a.b.c`` when that is a module, else to ``a.b``; importing
  a module also runs its parent packages' ``__init__``, so those are edges too, except the
  importer's own parents (already loading by the time it runs, whatever the order);
- an import inside a function runs when the function is called, once everything is loaded, so it
  cannot fail that way; it is often there for cost (a module pays for a heavy import only when it
  is used). But one that closes a circle hides one: the two halves still need each other and cannot
  be read, tested or moved apart. So a second test counts those imports too, except the few listed
  in :data:`DEFERRED_BY_DESIGN` with their reason.

``python tests/packaging/test_import_graph.py`` prints the cycles with and without them.
"""

from __future__ import annotations

import ast
import functools
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SOURCES = (ROOT / "functions", ROOT)
"""Import roots, as Lambda and the suite see them; under ``ROOT`` only these packages are read."""
PACKAGES_UNDER_ROOT = ("vigil_tools", "infra", "docsgen")

DEFERRED_BY_DESIGN = {
    ("vigil.fenced_write", "vigil.effects"): (
        "fenced_write is what the guards know of the effects without loading them; its once() "
        "loads the journal on first use, and the journal takes RunRecordSite from it. To break: "
        "RunRecordSite in a module of its own (left while issue 17's ctx.once edits both)."
    ),
}
"""Imports in a function that close a circle on purpose: (importer, imported) -> why."""


@dataclass(frozen=True)
class Edge:
    source: str
    target: str
    line: int
    deferred: bool
    """Made inside a function (runs when it is called, not when the module loads)."""


def modules() -> dict[str, Path]:
    """Module name -> file, for every module under the import roots."""
    found: dict[str, Path] = {}
    for base in SOURCES:
        tops = PACKAGES_UNDER_ROOT if base == ROOT else _packages(base)
        for top in tops:
            for path in sorted((base / top).rglob("*.py")):
                parts = path.relative_to(base).with_suffix("").parts
                if parts[-1] == "__init__":
                    parts = parts[:-1]
                found[".".join(parts)] = path
    return found


def _packages(base: Path) -> list[str]:
    """Every folder of Python modules (``handlers`` is a namespace package: no ``__init__``)."""
    return sorted(p.name for p in base.iterdir() if p.is_dir() and any(p.glob("*.py")))


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(tree: ast.Module) -> Iterator[tuple[ast.Import | ast.ImportFrom, bool]]:
    """Every import statement, with whether it sits inside a function."""

    def walk(node: ast.AST, deferred: bool) -> Iterator[tuple[ast.Import | ast.ImportFrom, bool]]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.Import | ast.ImportFrom):
                yield child, deferred
            elif isinstance(child, ast.If) and _is_type_checking(child.test):
                for orelse in child.orelse:
                    yield from walk(ast.Module(body=[orelse], type_ignores=[]), deferred)
            else:
                inside = isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda)
                yield from walk(child, deferred or inside)

    return walk(tree, False)


def _absolute(statement: ast.ImportFrom, name: str, is_package: bool) -> str:
    if not statement.level:
        return statement.module or ""
    package = name.split(".") if is_package else name.split(".")[:-1]
    base = package[: len(package) - statement.level + 1]
    return ".".join([*base, *([statement.module] if statement.module else [])])


def _ancestors(name: str) -> list[str]:
    parts = name.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts))]


def edges(known: dict[str, Path] | None = None) -> list[Edge]:
    """Every import between two known modules."""
    known = modules() if known is None else known
    found: list[Edge] = []
    for name, path in known.items():
        tree = ast.parse(path.read_text(), filename=str(path))
        own = {name, *_ancestors(name)}
        for statement, deferred in _imports(tree):
            if isinstance(statement, ast.Import):
                targets = [alias.name for alias in statement.names]
            else:
                module = _absolute(statement, name, path.name == "__init__.py")
                targets = [
                    f"{module}.{alias.name}" if f"{module}.{alias.name}" in known else module
                    for alias in statement.names
                ]
            for target in targets:
                for reached in (*_ancestors(target), target):
                    if reached in known and reached not in own:
                        found.append(Edge(name, reached, statement.lineno, deferred))
    return found


def cycles(graph: Iterable[Edge]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    adjacent: dict[str, set[str]] = {}
    for edge in graph:
        adjacent.setdefault(edge.source, set()).add(edge.target)
        adjacent.setdefault(edge.target, set())
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(adjacent[node]):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 10_000))
    try:
        for node in sorted(adjacent):
            if node not in index:
                visit(node)
    finally:
        sys.setrecursionlimit(limit)
    return sorted(found)


def describe(component: list[str], graph: Iterable[Edge]) -> str:
    members = set(component)
    lines = [
        f"  {e.source}:{e.line} -> {e.target}{' (in a function)' if e.deferred else ''}"
        for e in graph
        if e.source in members and e.target in members
    ]
    return "\n".join([" <-> ".join(component), *sorted(set(lines))])


@functools.cache
def _project_edges() -> tuple[Edge, ...]:
    """The project's graph, read once for the tests below (~350 files: a fraction of a second)."""
    return tuple(edges())


def test_the_graph_sees_the_modules_and_their_imports() -> None:
    """Guards the reader itself: a test that finds nothing because it reads nothing proves nothing."""
    assert {
        "vigil.observers.main",
        "vigil_tools.cli",
        "handlers.observers_api",
        "infra.observer_fleet.fleet",
        "docsgen.hook",
    } <= set(modules())
    seen = {(e.source, e.target, e.deferred) for e in _project_edges()}
    assert ("vigil_tools.jobs_cli", "vigil_tools.jobs_control_cli", False) in seen
    assert ("vigil.observers.main", "vigil.observers.host_process.entry", True) in seen
    assert ("vigil.observers.host_process.entry", "vigil.observers", False) not in seen  # its own
    assert cycles([Edge("a", "b", 1, False), Edge("b", "a", 1, False)]) == [["a", "b"]]


def _assert_no_cycle(graph: list[Edge]) -> None:
    found = cycles(graph)
    assert not found, "import cycles (break each by moving the shared piece to a module both " + (
        "import):\n" + "\n".join(describe(c, graph) for c in found)
    )


def test_no_import_cycle_among_module_level_imports() -> None:
    _assert_no_cycle([edge for edge in _project_edges() if not edge.deferred])


def test_no_import_cycle_hidden_behind_an_import_in_a_function() -> None:
    graph = _project_edges()
    _assert_no_cycle([e for e in graph if (e.source, e.target) not in DEFERRED_BY_DESIGN])
    used = {(e.source, e.target) for e in graph if e.deferred}
    assert set(DEFERRED_BY_DESIGN) <= used, "listed but no longer imported: remove from the list"


if __name__ == "__main__":
    every = edges()
    for label, graph in (
        ("module-level imports", [e for e in every if not e.deferred]),
        ("with imports inside functions", every),
    ):
        found = cycles(graph)
        print(f"{label}: {len(found)} cycle(s)")
        for component in found:
            print(describe(component, graph))
