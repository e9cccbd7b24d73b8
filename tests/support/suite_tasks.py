"""The training resets of the suite's run of each recipe: what the held-out check compares with the test
tasks, and what the learning tests check their runs against."""

from __future__ import annotations

from reference_trainer.recipes import RECIPES
from reference_trainer.tasks import rl_task_seeds, training_groups


def suite_training_groups(name: str) -> list[dict]:
    """The training resets of the suite's run of recipe ``name`` (seed 0, its RL budget)."""
    recipe = RECIPES[name]
    cfg = recipe.build(out="unused")
    rl = rl_task_seeds(cfg.train.seed, cfg.train.eval_seed, cfg.rollout.tasks_per_iteration, recipe.rl_iterations)
    return training_groups(cfg, rl)
