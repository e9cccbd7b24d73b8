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


def test_the_generic_climb_raises_its_context_to_hold_the_longest_expert_episode_and_a_reply():
    from agentgym_turn.testing.learnability import MAX_GENERIC_CONTEXT, fitting_context

    assert fitting_context(700, 32, 1024) == 1024  # fits: the default stays
    assert fitting_context(992, 32, 1024) == 1024  # exactly: 992 + 32 = 1024
    assert fitting_context(993, 32, 1024) == 1280  # one token over: the next multiple of 256
    assert fitting_context(3051, 32, 1024) == 3328  # the dialog env's longest expert episode (3,083 with a reply)
    assert fitting_context(9000, 32, 1024) == MAX_GENERIC_CONTEXT == 4096  # never past the cap


def test_the_generic_climb_raises_its_reply_budget_to_hold_the_experts_longest_reply():
    from agentgym_turn.testing.learnability import MAX_GENERIC_RESPONSE, fitting_response

    assert fitting_response(20, 32) == fitting_response(32, 32) == 32  # fits: the default stays
    assert fitting_response(33, 32) == 40  # one token over: the next multiple of 8
    assert fitting_response(1000, 32) == MAX_GENERIC_RESPONSE == 256  # never past the cap


def test_the_generic_climb_measures_the_demonstrations_it_will_imitate(tmp_path):
    """The dialog env's expert episodes run past the default 1,024 tokens: the measured context holds the longest one
    the climb's SFT will see (its own demonstrations, in the tiny model's tokens) and one more of its longest reply,
    which the reply budget holds too."""
    from agentgym_turn.testing.learnability import LearnBudget, climb_trainer
    from reference_trainer.rollout import longest_input
    from reference_trainer.sft import sft_demonstrations

    trainer, _, _ = climb_trainer("TurnWebShopDialog-v0", {}, LearnBudget(sft_episodes=8), 0, tmp_path)
    try:
        demos, r = sft_demonstrations(trainer.cfg, trainer.fmt, 8), trainer.cfg.rollout
    finally:
        trainer.close()
    longest = max(longest_input(d) for d in demos)
    reply = max(b - a for d in demos for a, b in d.conversation.action_spans)
    assert r.max_new_tokens == max(32, -(-reply // 8) * 8)
    assert r.max_context_tokens % 256 == 0 and 1024 < longest + r.max_new_tokens <= r.max_context_tokens
    assert r.max_context_tokens < longest + r.max_new_tokens + 256
    print(f"longest episode {longest}, longest reply {reply}: context {r.max_context_tokens}, reply {r.max_new_tokens}")


def test_a_served_env_climbs_with_its_recipe_only_when_served_as_the_recipe_plays_it(tmp_path):
    """One served Sokoban plays the recipe's training, SFT and held-out levels, each client with its split; served
    otherwise (its default prompt), the recipe's settings do not apply and the generic climb runs."""
    from agentgym_turn.remote import REMOTE_ENV_ID
    from agentgym_turn.remote.server import EnvServer
    from agentgym_turn.testing.learnability import LearnBudget, served_phases
    from reference_trainer.recipes.sokoban import SOKOBAN_ENV_KWARGS

    as_played = {k: v for k, v in SOKOBAN_ENV_KWARGS.items() if k != "split"}
    recipe_server = EnvServer("TurnSokoban-v0", env_kwargs=as_played, expert=True).start()
    plain_server = EnvServer("TurnSokoban-v0", expert=True).start()
    try:
        recipe, phases = served_phases(recipe_server.base_url)
        assert recipe.name == "sokoban"
        assert phases == {
            "train": {"split": "train"},
            "sft": {"split": "train"},
            "test": {"split": "test"},
            "validation": {"split": "validation"},
        }
        assert served_phases(plain_server.base_url) is None
        url = recipe_server.base_url
        cfg, metric, sft_max_steps = _config(REMOTE_ENV_ID, {"base_url": url}, LearnBudget(), 0, tmp_path)
        own, _, _ = _config("TurnSokoban-v0", {}, LearnBudget(), 0, tmp_path)
        assert (metric, sft_max_steps) == ("success", 900)
        assert cfg.rollout.env_kwargs == {"base_url": url, "reset_options": {"split": "train"}}
        assert cfg.train.eval_env_kwargs == {"reset_options": {"split": "test"}}
        held_out = gym.make(REMOTE_ENV_ID, **{**cfg.rollout.env_kwargs, **cfg.train.eval_env_kwargs})
        local = gym.make("TurnSokoban-v0", **{**own.rollout.env_kwargs, **own.train.eval_env_kwargs})
        assert held_out.reset(seed=10**9) == local.reset(seed=10**9)  # the recipe's first test level, served
        held_out.close()
        mine, theirs = cfg.to_dict(), own.to_dict()
        assert mine["algo"] == theirs["algo"]
        plain, _, _ = _config(REMOTE_ENV_ID, {"base_url": plain_server.base_url}, LearnBudget(), 0, tmp_path)
        assert plain.rollout.tasks_per_iteration == 64  # the generic climb's
    finally:
        recipe_server.stop(), plain_server.stop()
