"""Which recipe the learnability hill-climb of an env takes (``agentgym_turn/testing/learnability.py``)."""

from __future__ import annotations

import gymnasium as gym
import pytest

import agentgym_turn  # noqa: F401 - registers the env ids
from agentgym_turn.testing.learnability import _config, family_recipe

pytest.importorskip("torch")


def test_an_id_takes_its_own_recipe_else_that_of_an_id_made_by_the_same_env_class():
    assert family_recipe("TurnSokoban-v0").name == "sokoban"
    assert family_recipe("TurnSokoban-8x8-v0").name == family_recipe("TurnSokoban-10x10-v0").name == "sokoban"
    assert family_recipe("TurnWebShop-v0").name == "webshop" and family_recipe("TurnSearchQA-v0").name == "searchqa"
    # another class, even where it reads the same catalog or corpus: the generic climb
    assert family_recipe("TurnSearchQA-MCQ-v0") is None and family_recipe("TurnWebShopDialog-v0") is None
    assert family_recipe("not-registered-v0") is None


def test_a_family_recipe_plays_the_ids_own_levels_with_the_recipes_settings(tmp_path):
    from agentgym_turn.testing.learnability import LearnBudget

    cfg, metric, sft_max_steps = _config("TurnSokoban-8x8-v0", {}, LearnBudget(), 0, tmp_path)
    own, _, _ = _config("TurnSokoban-v0", {}, LearnBudget(), 0, tmp_path)
    assert cfg.train.env == "TurnSokoban-8x8-v0" and metric == "success" and sft_max_steps == 900
    assert gym.spec(cfg.train.env).kwargs["dim"] == (8, 8)  # the id's registered levels, under the recipe's kwargs
    mine, theirs = cfg.to_dict(), own.to_dict()
    assert {k: v for k, v in mine["train"].items() if k != "env"} == {
        k: v for k, v in theirs["train"].items() if k != "env"
    }
    assert mine["rollout"] == theirs["rollout"] and mine["algo"] == theirs["algo"]
