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
