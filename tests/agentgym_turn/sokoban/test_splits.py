"""Sokoban's splits are disjoint by content: a level's split is a function of the level, not the seed."""

from __future__ import annotations

import gymnasium as gym
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import agentgym_turn  # noqa: F401
from agentgym_turn.sokoban import SokobanGenerator, builtin_levels_path, load_levels
from agentgym_turn.sokoban.splits import SPLIT_SHARES, SPLITS, level_split


def _levels(split: str | None, seeds: range, **kwargs) -> list[str]:
    env = gym.make("TurnSokoban-v0", split=split, **kwargs)
    texts = []
    for seed in seeds:
        env.reset(seed=seed)
        texts.append(env.unwrapped.level.to_text())
    env.close()
    return texts


def test_level_split__depends_on_the_content_only():
    gen = SokobanGenerator((6, 6), 1)
    level = gen.level(3).level
    renamed = level.with_name("other.txt;9")
    assert level_split(level) == level_split(renamed) in SPLITS


def test_splits__share_no_level_with_each_other():
    """The failure this prevents: with seeds alone, held-out 6x6 levels came up among training seeds."""
    drawn = {split: set(_levels(split, range(150))) for split in SPLITS}
    assert all(drawn.values())
    assert (
        not drawn["train"] & drawn["test"]
        and not drawn["train"] & drawn["validation"]
        and not drawn["validation"] & drawn["test"]
    )
    every = _levels(None, range(150))
    assert len(set(every)) < len(every)  # unsplit draws do repeat levels: the space is small


@settings(max_examples=20, deadline=None)
@given(st.sampled_from(SPLITS), st.integers(0, 2**32 - 1))
def test_a_split_env_plays_only_its_split_and_stays_deterministic(split, seed):
    env = gym.make("TurnSokoban-v0", split=split)
    env.reset(seed=seed)
    level = env.unwrapped.level
    assert level_split(level) == split
    env.reset(seed=seed)
    assert env.unwrapped.level == level
    env.close()


def test_split_shares__near_the_declared_shares_on_generated_levels():
    gen = SokobanGenerator((6, 6), 1)
    splits = [level_split(gen.level(seed).level) for seed in range(2000)]
    for split, share in SPLIT_SHARES.items():
        assert abs(splits.count(split) / len(splits) - share) < 0.03, (split, splits.count(split))


def test_a_level_file_keeps_its_levels_of_the_split():
    path = builtin_levels_path()
    every = list(load_levels(path))
    for split in SPLITS:
        kept = [lv for lv in every if level_split(lv) == split]
        if not kept:
            with pytest.raises(ValueError, match="none of the"):
                gym.make("TurnSokoban-v0", levels=path, split=split)
            continue
        env = gym.make("TurnSokoban-v0", levels=path, split=split)
        assert env.unwrapped.levels == kept
        env.close()


def test_a_level_given_in_options_is_played_whatever_its_split():
    gen = SokobanGenerator((6, 6), 1)
    level = next(g.level for g in map(gen.level, range(100)) if level_split(g.level) == "train")
    env = gym.make("TurnSokoban-v0", split="test")
    env.reset(options={"level": level})
    assert env.unwrapped.level == level
    env.close()


def test_an_unknown_split_fails_at_make_naming_the_splits():
    with pytest.raises(ValueError, match="'test', 'validation', 'train'"):
        gym.make("TurnSokoban-v0", split="eval")


@settings(max_examples=20, deadline=None)
@given(st.sampled_from([None, *SPLITS]), st.sampled_from([None, *SPLITS]), st.integers(0, 2**32 - 1))
def test_a_split_in_reset_options_draws_the_level_an_env_of_that_split_draws(made, asked, seed):
    """One env (a served one) plays a trainer's training and held-out levels: its transcript for one reset is the
    transcript of an env made with the split asked for."""
    env, twin = gym.make("TurnSokoban-v0", split=made), gym.make("TurnSokoban-v0", split=asked)
    first, _ = env.reset(seed=seed, options={"split": asked})
    assert (first, env.unwrapped.level) == (twin.reset(seed=seed)[0], twin.unwrapped.level)
    response = env.unwrapped.expert_action()
    assert env.step(response)[:4] == twin.step(response)[:4]
    env.reset(seed=seed)  # without the option: the env's own split again
    assert made is None or level_split(env.unwrapped.level) == made
    env.close(), twin.close()


def test_a_split_in_reset_options_picks_a_level_files_levels_of_that_split():
    path = builtin_levels_path()
    kept = {lv for lv in load_levels(path) if level_split(lv) == "train"}
    env = gym.make("TurnSokoban-v0", levels=path, split="test")  # the built-in file: 1 test level, 5 training ones
    drawn = set()
    for seed in range(40):
        env.reset(seed=seed, options={"split": "train"})
        drawn.add(env.unwrapped.level)
    assert drawn == kept
    with pytest.raises(ValueError, match="'test', 'validation', 'train'"):
        env.reset(options={"split": "eval"})
    env.close()
