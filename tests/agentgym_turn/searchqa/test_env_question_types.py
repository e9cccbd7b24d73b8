"""TurnSearchQA's ``question_types``: an opt-in curriculum that draws only questions of some types."""

from __future__ import annotations

import pickle

import gymnasium as gym
import pytest

import agentgym_turn  # noqa: F401  (registers the ids)
from agentgym_turn.testing import check_turn_env


def test_question_types__draws_only_the_chosen_types_and_keeps_their_split():
    every = gym.make("TurnSearchQA-v0").unwrapped
    single = gym.make("TurnSearchQA-v0", question_types=["single_hop"]).unwrapped
    assert {q.type for q in every.questions} == {"single_hop", "bridge", "comparison"}
    assert single.questions == [q for q in every.questions if q.type == "single_hop"]
    for seed in range(20):
        _, info = single.reset(seed=seed)
        assert info["question_type"] == "single_hop" and single.question.type == "single_hop"


def test_question_types__default_is_every_question_and_draws_are_unchanged():
    default = gym.make("TurnSearchQA-v0").unwrapped
    explicit = gym.make("TurnSearchQA-v0", question_types=None).unwrapped
    for seed in range(5):
        assert default.reset(seed=seed) == explicit.reset(seed=seed)


def test_question_types__a_single_string_means_that_type_and_survives_pickling():
    env = gym.make("TurnSearchQA-v0", question_types="bridge").unwrapped
    copy = pickle.loads(pickle.dumps(env))
    assert {q.type for q in copy.questions} == {"bridge"}
    assert copy.reset(seed=7) == env.reset(seed=7)


@pytest.mark.parametrize("bad", [[], ["single-hop"], ["single_hop", "trivia"]])
def test_question_types__unknown_types_are_refused_with_the_parameter_named(bad):
    with pytest.raises(ValueError, match="question_types"):
        gym.make("TurnSearchQA-v0", question_types=bad)


def test_question_types__keeps_the_turn_contract():
    # topk=3 so that every expert episode of the checked seeds finds its evidence (the checker requires success)
    check_turn_env(
        lambda: gym.make("TurnSearchQA-v0", question_types=["single_hop", "comparison"], topk=3),
        episodes=3,
        fuzz_actions=16,
    )
