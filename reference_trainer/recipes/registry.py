"""Every recipe, by name: the module-level ``RECIPE`` of each module of this package beside ``base``, ``registry`` and ``runs``."""

from __future__ import annotations

import importlib
import pkgutil
from pathlib import Path

from .base import Recipe


def _discover() -> dict[str, Recipe]:
    found: dict[str, Recipe] = {}
    for info in sorted(pkgutil.iter_modules([str(Path(__file__).parent)]), key=lambda i: i.name):
        if info.name in ("base", "registry", "runs"):
            continue
        recipe = getattr(importlib.import_module(f"{__package__}.{info.name}"), "RECIPE", None)
        if isinstance(recipe, Recipe):
            found[recipe.name] = recipe
    return found


#: Every recipe, by name (``sokoban``, ``webshop``, ``searchqa``).
RECIPES: dict[str, Recipe] = _discover()
