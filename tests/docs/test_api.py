"""docs/api.md lists exactly what each face exports, and every face's exports exist and are documented."""

from __future__ import annotations

import importlib
import inspect
import sys

import pytest

from support.paths import ROOT

sys.path.insert(0, str(ROOT / "docs"))
import make_api  # noqa: E402


def test_the_page_shows_what_the_faces_export():
    page = (ROOT / "docs" / "api.md").read_text(encoding="utf-8")
    assert make_api.render() in page, "docs/api.md is stale: run python docs/make_api.py"


@pytest.mark.parametrize("face", sorted(make_api.FACES))
def test_every_exported_name_exists_and_its_functions_and_classes_say_what_they_do(face):
    module = importlib.import_module(face)
    names = getattr(module, "__all__", [])
    assert names, f"{face} is a face but exports nothing"
    for name in names:
        obj = getattr(module, name)  # a lazy export imports its module here
        if inspect.isclass(obj) or inspect.isfunction(obj):
            assert (obj.__doc__ or "").strip(), f"{face}.{name} has no docstring"


def _modules_with_all() -> list[str]:
    """Dotted names of the package modules that assign ``__all__`` (read from the source, nothing imported)."""
    import ast

    out = []
    for root in ("agentgym_turn", "reference_trainer"):
        for path in sorted((ROOT / root).rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            if any(
                isinstance(node, (ast.Assign, ast.AnnAssign)) and "__all__" in ast.unparse(node).split("=")[0]
                for node in tree.body
            ):
                parts = path.relative_to(ROOT).with_suffix("").parts
                out.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return out


def test_only_the_faces_say_what_is_public():
    """``__all__`` marks a public surface: a module that is not a face has none, so a reader knows where to import from."""
    modules = _modules_with_all()
    assert set(make_api.FACES) <= set(modules), sorted(set(make_api.FACES) - set(modules))
    assert set(modules) <= set(make_api.FACES), sorted(set(modules) - set(make_api.FACES))
