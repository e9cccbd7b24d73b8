"""The SmolLM2 recipes: the tiny recipe's env and splits with a real model, kept out of the suite's learning runs.

The runs themselves are benchmarks (``python benchmarks/learning.py --env sokoban_smollm2 --algo turn-ppo st-ppo``);
what a test can check cheaply is that the recipe measures what it says: the same test levels as the tiny model's
recipe, a zero-shot row on those levels, and a real model by name.
"""

from __future__ import annotations

from reference_trainer.recipes import RECIPES
from reference_trainer.tasks import eval_group, task_keys


def test_the_smollm2_sokoban_recipe_plays_the_tiny_recipes_env_and_splits_with_smollm2():
    real, tiny = RECIPES["sokoban_smollm2"], RECIPES["sokoban"]
    cfg, tiny_cfg = real.build("st-ppo", out="unused"), tiny.build(out="unused")
    assert cfg.model.model == "smollm2-135m-instruct" and cfg.algo.algo == "st-ppo" and cfg.algo.clip_bias_correction == "max1"
    assert cfg.rollout.env_kwargs == tiny_cfg.rollout.env_kwargs  # the same env, prompt and reward settings
    for field in ("eval_env_kwargs", "val_env_kwargs", "eval_seed", "val_metric"):
        assert getattr(cfg.train, field) == getattr(tiny_cfg.train, field), field
    assert real.metric == tiny.metric == "success" and cfg.train.sft_validate_every > 0
    assert not real.suite_learning and tiny.suite_learning  # the suite runs only the tiny model's recipes


def test_the_zero_shot_row_plays_the_first_test_levels_with_the_full_instructions():
    recipe = RECIPES["sokoban_smollm2"]
    cfg = recipe.build(out="unused")
    n = recipe.zero_shot["tasks"]
    test = eval_group(cfg, n=n)
    zero = eval_group(cfg, n=n, env_kwargs={**cfg.train.eval_env_kwargs, **recipe.zero_shot["env_kwargs"]})
    assert zero["env_kwargs"]["prompt_style"] == "full" and test["env_kwargs"]["prompt_style"] == "compact"
    assert task_keys(zero) == task_keys(test)  # the same levels, only the prompt differs
