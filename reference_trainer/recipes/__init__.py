"""The measured recipes of the tiny model, one per env: SFT warm start on ``expert_action()``
episodes, then RL, evaluated on held-out tasks.

``RECIPES[name]`` is a :class:`~reference_trainer.recipes.base.Recipe`; ``make demo``,
``benchmarks/learning.py`` and the learning tests all read their settings from here, and
``docs/experiments.md`` holds the measurements behind each choice. Each module of
this package beside ``base`` defines one recipe as its module-level ``RECIPE``.
"""

from __future__ import annotations

import importlib
import pkgutil

from .base import Recipe, learn, rl_from, sft_policy, sft_start, suite_sft_policy
from .sokoban import SOKOBAN_ENV, SOKOBAN_ENV_KWARGS, SOKOBAN_RL_ITERATIONS, sokoban_tiny

__all__ = ["RECIPES", "Recipe", "SOKOBAN_ENV", "SOKOBAN_ENV_KWARGS", "SOKOBAN_RL_ITERATIONS", "learn", "rl_from", "sft_policy", "sft_start", "sokoban_tiny",
           "suite_sft_policy"]


def _discover() -> dict[str, Recipe]:
    found: dict[str, Recipe] = {}
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda i: i.name):
        if info.name == "base":
            continue
        recipe = getattr(importlib.import_module(f"{__name__}.{info.name}"), "RECIPE", None)
        if isinstance(recipe, Recipe):
            found[recipe.name] = recipe
    return found


#: Every recipe, by name (``sokoban``, ``webshop``, ``searchqa``).
RECIPES: dict[str, Recipe] = _discover()
