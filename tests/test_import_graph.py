"""receval's import graph, read from the source: module-level and function-level imports of
receval modules alike (a function-level import hides a cycle from start-up, not from the design).

The anytime package imports one way (its ``__init__`` docstring gives the order); the whole
package has no cycle but the ones listed in :data:`KNOWN_CYCLES`, which may only shrink.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "receval"

#: the anytime modules in their import order: each imports only modules before it
ANYTIME_ORDER = (
    "betting",
    "control",
    "stream",
    "sequences",
    "cells",
    "pairs",
    "f1",
    "method",
    "asymptotic",
)
#: the official census's modules in their import order
OFFICIAL_ORDER = (
    "rules",
    "sql",
    "responses",
    "coded",
    "census",
    "scores",
    "direct",
    "estimator",
)


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@functools.cache
def modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _target(node: ast.ImportFrom, here: str, is_package: bool, known) -> list[str]:
    """The receval modules an ``from … import …`` names (a name that is a submodule counts as
    that submodule)."""
    if node.level:
        base = here.split(".") if is_package else here.split(".")[:-1]
        base = base[: len(base) - node.level + 1]
        module = ".".join([*base, node.module] if node.module else base)
    else:
        module = node.module or ""
    if not module.startswith("receval"):
        return []
    out = []
    for alias in node.names:
        sub = f"{module}.{alias.name}"
        out.append(sub if sub in known else module)
    return out


def import_graph(type_checking: bool = True) -> dict[str, set[str]]:
    """Module -> the receval modules it imports anywhere in its source; ``type_checking``:
    with the imports under ``if TYPE_CHECKING:`` (they name what a module depends on, but
    never run)."""
    known = modules()
    graph: dict[str, set[str]] = {}
    for name, path in known.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        skip = set()
        for node in ast.walk(tree):
            if not type_checking and isinstance(node, ast.If):
                if "TYPE_CHECKING" in ast.unparse(node.test):
                    skip.update(id(n) for b in node.body for n in ast.walk(b))
        edges: set[str] = set()
        for node in ast.walk(tree):
            if id(node) in skip:
                continue
            if isinstance(node, ast.Import):
                edges.update(a.name for a in node.names if a.name.split(".")[0] == "receval")
            elif isinstance(node, ast.ImportFrom):
                edges.update(_target(node, name, path.name == "__init__.py", known))
        graph[name] = {e for e in edges if e in known and e != name}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(out)


def test_the_graph_sees_function_level_imports():
    graph = import_graph()
    # method imports the registry inside a function only (the registry names the methods)
    assert "receval.estimators.registry" in graph["receval.estimators.anytime.method"]
    assert "receval.estimators.anytime.f1" in graph["receval.estimators.anytime.method"]


def _imports_one_way(prefix: str, order: tuple[str, ...]) -> None:
    graph = import_graph()
    names = {prefix + m for m in order}
    assert names == {m for m in graph if m.startswith(prefix)}, "update the order"
    for i, mod in enumerate(order):
        inside = {e for e in graph[prefix + mod] if e.startswith(prefix)}
        later = inside - {prefix + m for m in order[:i]}
        assert not later, f"{mod} imports {sorted(later)}, which come after it"


def test_anytime_imports_one_way():
    _imports_one_way("receval.estimators.anytime.", ANYTIME_ORDER)


def test_official_imports_one_way():
    _imports_one_way("receval.official.", OFFICIAL_ORDER)


def test_engine_does_not_import_the_census_backends():
    graph = import_graph()
    for name, edges in graph.items():
        if name.startswith("receval.engine"):
            used = {e for e in edges if e.startswith("receval.official")}
            assert used <= {"receval.official.rules", "receval.official.sql"}, (name, used)


def test_no_cycle_inside_anytime():
    graph = import_graph()
    inside = {
        k: {e for e in v if e.startswith("receval.estimators.anytime")}
        for k, v in graph.items()
        if k.startswith("receval.estimators.anytime")
    }
    assert cycles(inside) == []


#: the cycles left in the whole package at run time (function-level imports included,
#: ``TYPE_CHECKING`` blocks not); may only shrink
KNOWN_CYCLES: list[list[str]] = []


def test_known_cycles_only():
    assert cycles(import_graph(type_checking=False)) == KNOWN_CYCLES
