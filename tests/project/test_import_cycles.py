"""No module of the project imports itself in a circle, counting every import: at module level, inside
functions and under ``if TYPE_CHECKING``.

An edge is an explicit import: ``import a.b`` and ``from a import b`` (``b`` a module) point at ``a.b``;
``from a import name`` (``name`` not a module) points at ``a``, whose ``__init__`` defines or re-exports it.
The parents a submodule import runs implicitly are not edges: Python finishes them first either way.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from support.paths import ROOT

PACKAGES = ("agentgym_turn", "reference_trainer")


def _modules() -> dict[str, Path]:
    found = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = path.relative_to(ROOT).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            found[".".join(parts)] = path
    return found


def _imports(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The project modules that ``name`` (at ``path``) imports anywhere in its body."""
    is_package = path.name == "__init__.py"
    targets: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            targets.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = name.split(".") if is_package else name.split(".")[:-1]
                base = base[: len(base) - (node.level - 1)]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            for alias in node.names:
                full = f"{source}.{alias.name}"
                targets.add(full if full in modules else source)
    return {t for t in targets if t in modules and t != name}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
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
    return found


def import_graph() -> dict[str, set[str]]:
    modules = _modules()
    return {name: _imports(name, path, modules) for name, path in modules.items()}


def test_the_cycle_finder_finds_a_cycle_through_a_type_checking_import(tmp_path):
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _cycles(graph) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []
    probe = tmp_path / "checkpoint.py"
    probe.write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .trainer import Trainer\n\n"
        "def load():\n    from . import policy\n"
    )
    modules = {name: Path() for name in ("pkg.checkpoint", "pkg.trainer", "pkg.policy")}
    assert _imports("pkg.checkpoint", probe, modules) == {"pkg.trainer", "pkg.policy"}


@pytest.mark.parametrize("package", PACKAGES)
def test_no_module_of_the_package_imports_in_a_circle(package):
    graph = import_graph()
    cycles = [c for c in _cycles(graph) if c[0].split(".")[0] == package]
    assert not cycles, "import cycles:\n" + "\n".join(" <-> ".join(c) for c in cycles)


def wing_graph(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """``graph`` with each module folded into its wing: the subpackage or module right under its package
    (``agentgym_turn.webshop.server`` -> ``agentgym_turn.webshop``); arrows inside a wing are dropped."""

    def wing(name: str) -> str:
        return ".".join(name.split(".")[:2])

    folded: dict[str, set[str]] = {}
    for name, targets in graph.items():
        folded.setdefault(wing(name), set()).update(wing(t) for t in targets if wing(t) != wing(name))
    return folded


def test_the_wing_folding_turns_a_back_arrow_between_subpackages_into_a_cycle():
    graph = {"p.tokens.audit": {"p.chat"}, "p.chat": {"p.tokens.assembly"}, "p.tokens.assembly": set()}
    assert _cycles(graph) == []  # no module cycle ...
    assert _cycles(wing_graph(graph)) == [["p.chat", "p.tokens"]]  # ... but the wings import each other


@pytest.mark.parametrize("package", PACKAGES)
def test_no_wing_of_the_package_imports_back_from_a_wing_that_imports_it(package):
    """Wings (core, tokens, webshop, remote, the CLI...) form layers: no arrow runs back up, even through lazy imports."""
    cycles = [c for c in _cycles(wing_graph(import_graph())) if c[0].split(".")[0] == package]
    assert not cycles, "wings that import each other:\n" + "\n".join(" <-> ".join(c) for c in cycles)
