"""TurnSearchQA-v0's tiny-model settings (``reference_trainer/recipes/searchqa.py``): a draft.

The draft is not registered (no SFT start within the CPU budget reached the 20-60% held-out
exact match issue 15 asks RL to start from; the measurements are in the module docstring), so
the session fixture ``learning_runs`` does not run it. These tests pin what the draft already
promises: held-out questions from a world training never sees, enough of them for a +-4-point
paired interval, played greedily, on the env's compact options. The learning assertions (SFT
band, +10 points with the interval above 0) join them when the recipe is registered.
"""

import gymnasium as gym

import agentgym_turn  # noqa: F401  (registers the ids)
from reference_trainer.recipes import RECIPES
from reference_trainer.pretrain import PretrainSpec
from reference_trainer.recipes.searchqa import SEARCHQA_DRAFT, SEARCHQA_ENV_KWARGS, SEARCHQA_EVAL_WORLD
from reference_trainer.stats import required_tasks


def test_the_draft_evaluates_on_a_fresh_world_with_enough_questions_greedily():
    cfg = SEARCHQA_DRAFT.build("turn-ppo", seed=0, out="unused")
    train_world = cfg.rollout.env_kwargs.get("world_seed", 0)
    assert cfg.train.eval_env_kwargs["world_seed"] == SEARCHQA_EVAL_WORLD != train_world
    # a +-4-point paired interval holds while up to a quarter of the questions change outcome
    assert cfg.train.eval_episodes >= required_tasks(0.25, 0.04)
    assert cfg.train.eval_temperature == 0.0


def test_the_draft_trains_and_evaluates_on_disjoint_worlds():
    cfg = SEARCHQA_DRAFT.build("turn-ppo", seed=0, out="unused")
    train = gym.make(cfg.train.env, **cfg.rollout.env_kwargs).unwrapped
    held_out = gym.make(cfg.train.env, **{**cfg.rollout.env_kwargs, **cfg.train.eval_env_kwargs}).unwrapped
    seen = {q.question: set(q.golden_answers) for q in train.questions}
    # coined names may collide across worlds (measured: 4 of 8,000 question texts), never with the same answer
    same_text = [q for q in held_out.questions if q.question in seen]
    assert len(same_text) <= len(held_out.questions) // 1000, len(same_text)
    assert not [q for q in same_text if seen[q.question] & set(q.golden_answers)]
    assert not {q.id for q in train.questions} & {q.id for q in held_out.questions}


def test_the_draft_pretrains_on_worlds_that_are_neither_trained_on_nor_held_out():
    cfg = SEARCHQA_DRAFT.build("turn-ppo", seed=0, out="unused")
    spec = PretrainSpec.from_config(cfg.model.tiny_pretrain)
    train_world = cfg.rollout.env_kwargs.get("world_seed", 0)
    assert len(spec.worlds) >= 8 and spec.induction_heads > 0
    assert SEARCHQA_EVAL_WORLD not in spec.worlds and train_world not in spec.worlds
    # a model built from this config starts from the pretrained checkpoint, not a random tiny model
    assert cfg.model.model == "tiny" and cfg.model.tiny_arch == "qwen2"


def test_the_draft_env_settings_play_an_expert_episode_in_the_compact_style():
    env = gym.make("TurnSearchQA-v0", **SEARCHQA_ENV_KWARGS)
    env.reset(seed=0)
    first = env.unwrapped.expert_action()
    assert first.startswith("<search>") and "<think>" not in first
    observation, *_ = env.step(first)
    assert observation.count("Doc ") == 1


def test_the_draft_is_not_registered_until_it_meets_the_bar():
    assert "searchqa" not in RECIPES
