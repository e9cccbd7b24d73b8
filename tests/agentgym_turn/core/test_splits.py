"""Tasks held out by content in WebShop and search QA: a goal's or question's split follows from its text,
the same in every catalog and world, and every env reports the content of its task (``task_key``)."""

from __future__ import annotations

import gymnasium as gym
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import agentgym_turn  # noqa: F401
from agentgym_turn.core.splits import CONTENT_SPLITS, check_content_split, content_key, content_split, key_split


@given(st.text(max_size=200))
def test_a_split_is_a_function_of_the_normalised_text(text):
    assert content_split(text) in CONTENT_SPLITS
    assert content_split(text) == content_split("  " + text.upper().casefold() + "\n") == key_split(content_key(text))
    assert content_key(content_key(text)) == content_key(text)


def test_the_shares_are_80_10_10():
    splits = [content_split(f"question number {i}") for i in range(20000)]
    for name, share in (("train", 0.8), ("validation", 0.1), ("test", 0.1)):
        assert abs(splits.count(name) / len(splits) - share) < 0.01


def test_an_unknown_split_says_which_exist():
    with pytest.raises(ValueError, match="'validation'"):
        check_content_split("dev", "content_split")


def _keys(env_id, seeds, **kwargs):
    env = gym.make(env_id, **kwargs)
    assert env.unwrapped.task_key() is None  # before any reset
    keys = []
    for seed in seeds:
        env.reset(seed=seed)
        keys.append(env.unwrapped.task_key())
    env.close()
    return keys


@settings(max_examples=4, deadline=None)
@given(catalog=st.integers(0, 10**6), products=st.integers(60, 200), split=st.sampled_from(CONTENT_SPLITS))
def test_webshop_goals_of_a_content_split_are_in_it_in_any_catalog(catalog, products, split):
    try:
        keys = _keys(
            "TurnWebShop-v0",
            range(12),
            num_products=products,
            catalog_seed=catalog,
            goal_split="all",
            content_split=split,
        )
    except ValueError as e:  # a small catalog may hold no goal of a 10% split: said, not drawn from another split
        assert "content_split" in str(e)
        return
    assert all(content_split(k) == split for k in keys)
    assert keys == _keys(
        "TurnWebShop-v0", range(12), num_products=products, catalog_seed=catalog, goal_split="all", content_split=split
    )


def test_webshop_train_and_test_goals_share_no_instruction_across_catalogs():
    train = set(_keys("TurnWebShop-v0", range(300), catalog_seed=3, goal_split="all", content_split="train"))
    test = set(_keys("TurnWebShop-v0", range(300), catalog_seed=4, goal_split="all", content_split="test"))
    assert train and test and not train & test


@settings(max_examples=4, deadline=None)
@given(world=st.integers(0, 10**6), split=st.sampled_from(CONTENT_SPLITS))
def test_searchqa_questions_of_a_content_split_are_in_it_in_any_world(world, split):
    env = gym.make("TurnSearchQA-v0", world_seed=world, world_scale=0.1, split="all", content_split=split)
    assert env.unwrapped.questions and all(content_split(q.question) == split for q in env.unwrapped.questions)
    env.reset(seed=world)
    assert env.unwrapped.task_key() == content_key(env.unwrapped.question.question)
    env.close()


def test_searchqa_the_same_question_text_in_two_worlds_lands_in_one_split():
    texts = {}
    for world in range(4):
        for split in CONTENT_SPLITS:
            env = gym.make("TurnSearchQA-v0", world_seed=world, world_scale=0.1, split="all", content_split=split)
            for q in env.unwrapped.questions:
                texts.setdefault(content_key(q.question), set()).add(split)
            env.close()
    assert any(len(v) == 1 for v in texts.values()) and all(len(v) == 1 for v in texts.values())


def test_sokoban_task_key_is_the_level():
    env = gym.make("TurnSokoban-v0")
    env.reset(seed=5)
    assert env.unwrapped.task_key() == env.unwrapped.level.to_text()
    env.close()
