"""The measured recipes of the tiny model, one per env: SFT warm start on ``expert_action()``
episodes, then RL, evaluated on held-out tasks.

``RECIPES[name]`` is a :class:`~reference_trainer.recipes.base.Recipe`; ``make demo``,
``benchmarks/learning.py`` and the learning tests all read their settings from here, and
``docs/experiments.md`` holds the measurements behind each choice. Each module of
this package beside ``base``, ``registry`` and ``runs`` defines one recipe as its module-level ``RECIPE``.
"""

from __future__ import annotations

from .base import Recipe
from .registry import RECIPES
from .runs import learn, rl_from, sft_policy, sft_start, suite_sft_policy, zero_shot
from .sokoban import SOKOBAN_ENV, SOKOBAN_ENV_KWARGS, SOKOBAN_RL_ITERATIONS, sokoban_tiny

__all__ = [
    "RECIPES",
    "Recipe",
    "SOKOBAN_ENV",
    "SOKOBAN_ENV_KWARGS",
    "SOKOBAN_RL_ITERATIONS",
    "learn",
    "rl_from",
    "sft_policy",
    "sft_start",
    "sokoban_tiny",
    "suite_sft_policy",
    "zero_shot",
]
