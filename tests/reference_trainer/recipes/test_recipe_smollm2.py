"""The SmolLM2 recipes: the tiny recipes' envs and splits with a real model, kept out of the suite's learning runs.

The runs themselves are benchmarks (``python benchmarks/learning.py --env sokoban_smollm2 --algo turn-ppo st-ppo``);
what a test can check cheaply is that each recipe measures what it says: the same test tasks as the tiny model's
recipe, a zero-shot row on those tasks, and a real model by name.
"""

from __future__ import annotations

import pytest

from reference_trainer.recipes import RECIPES
from reference_trainer.tasks import eval_group, task_keys

#: Each SmolLM2 recipe, the tiny recipe it follows, and the env setting its zero-shot row changes (full instructions).
PAIRS = {"sokoban_smollm2": ("sokoban", "prompt_style"), "searchqa_smollm2": ("searchqa", "prompt_template")}


@pytest.mark.parametrize("name", sorted(PAIRS))
def test_a_smollm2_recipe_plays_its_tiny_recipes_env_and_splits_with_smollm2(name):
    real, tiny = RECIPES[name], RECIPES[PAIRS[name][0]]
    cfg, tiny_cfg = real.build("st-ppo", out="unused"), tiny.build(out="unused")
    assert (
        cfg.model.model == "smollm2-135m-instruct"
        and cfg.algo.algo == "st-ppo"
        and cfg.algo.clip_bias_correction == "max1"
    )
    assert cfg.rollout.env_kwargs == tiny_cfg.rollout.env_kwargs  # the same env, prompt and reward settings
    for field in ("eval_env_kwargs", "val_env_kwargs", "sft_env_kwargs", "eval_seed", "val_metric"):
        assert getattr(cfg.train, field) == getattr(tiny_cfg.train, field), field
    assert real.metric == tiny.metric == "success" and cfg.train.sft_validate_every > 0
    assert not real.suite_learning and tiny.suite_learning  # the suite runs only the tiny model's recipes


def test_the_smollm2_recipes_share_their_rl_settings():
    """The search QA recipe takes the RL settings chosen on Sokoban's validation split, but for the reward scale."""
    sokoban, searchqa = (RECIPES[name].build(out="unused") for name in ("sokoban_smollm2", "searchqa_smollm2"))
    for section in ("algo", "train"):
        a, b = vars(getattr(sokoban, section)), vars(getattr(searchqa, section))
        for field in (
            "lr",
            "critic",
            "critic_lr_ratio",
            "critic_warmup",
            "dtype",
            "recompute_old_logp",
            "sft_lr",
            "sft_batch_size",
        ):
            if field in a:
                assert a[field] == b[field], field
    assert sokoban.algo.reward_scale == 0.1 and searchqa.algo.reward_scale == 1.0


@pytest.mark.parametrize("name", sorted(PAIRS))
def test_the_zero_shot_row_plays_the_first_test_tasks_with_the_full_instructions(name):
    recipe, setting = RECIPES[name], PAIRS[name][1]
    cfg = recipe.build(out="unused")
    n = recipe.zero_shot["tasks"]
    test = eval_group(cfg, n=n)
    zero = eval_group(cfg, n=n, env_kwargs={**cfg.train.eval_env_kwargs, **recipe.zero_shot["env_kwargs"]})
    assert zero["env_kwargs"][setting] != test["env_kwargs"].get(setting)
    assert task_keys(zero) == task_keys(test)  # the same tasks, only the prompt differs
