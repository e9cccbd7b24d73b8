"""The TurnEnv base class keeps the contract for its subclasses."""

import math
import pickle

import pytest
from hypothesis import given

from agentgym_turn.core import COMMON_INFO_KEYS, InvalidAction
from agentgym_turn.testing import strategies as st_turn
from support.toy_envs import GuessNumberEnv


def test_reset__returns_first_message_and_common_info():
    env = GuessNumberEnv()
    obs, info = env.reset(seed=3)
    assert obs.startswith("Guess a number")
    assert set(COMMON_INFO_KEYS) <= set(info) and info["turn"] == 0
    assert info["available_actions"] == [f"<answer>{i}</answer>" for i in range(10)]


def test_invalid_turn__message_penalty_and_state():
    env = GuessNumberEnv(format_penalty=-0.25)
    env.reset(seed=0)
    obs, reward, terminated, truncated, info = env.step("I guess seven")
    assert obs.startswith("Invalid action: No action found") and "[0, 9]" in obs
    assert reward == -0.25 and not terminated and not truncated
    assert info["action_is_valid"] is False and info["action_is_effective"] is False and info["turn"] == 1


def test_non_string_and_overlong_actions_are_invalid_turns():
    env = GuessNumberEnv(max_action_length=20)
    env.reset(seed=0)
    for action in (None, 7, ["<answer>1</answer>"], "x" * 21):
        _, reward, _, _, info = env.step(action)
        assert info["action_is_valid"] is False and reward == -0.1
    _, _, _, _, info = env.step(b"<answer>3</answer>")
    assert info["action_is_valid"] is True


def test_step_after_the_end__is_not_an_exception():
    env = GuessNumberEnv()
    env.reset(seed=0)
    env.step(env.expert_action())
    obs, reward, terminated, _, info = env.step("<answer>1</answer>")
    assert "episode is over" in obs and reward == 0.0 and terminated and not info["action_is_valid"]


def test_render_ansi():
    env = GuessNumberEnv(render_mode="ansi")
    env.reset(seed=0)
    assert env.render() == "The number lies in [0, 9]."
    assert GuessNumberEnv().render() is None


@given(st_turn.responses())
def test_any_response__never_raises_and_stays_in_spaces(response):
    env = GuessNumberEnv()
    env.reset(seed=1)
    obs, reward, terminated, truncated, info = env.step(response)
    assert obs in env.observation_space
    assert math.isfinite(reward) and set(COMMON_INFO_KEYS) <= set(info)


def test_pickle_round_trip_mid_episode():
    env = GuessNumberEnv()
    env.reset(seed=5)
    env.step("<answer>4</answer>")
    clone = pickle.loads(pickle.dumps(env))
    assert clone.step("<answer>2</answer>") == env.step("<answer>2</answer>")


class _EchoEnv(GuessNumberEnv):
    """Quotes the whole response back in the invalid-turn message, as an env may."""

    def parse_action(self, response: str):
        return InvalidAction(f"you wrote <<{response}>>")


@pytest.mark.parametrize(
    "text",
    [
        "10\xa0km",
        "a\u200db\u200cc",
        "hy\xadphen",
        "\ufeffbom",
        "line\u2028sep",
        "para\u2029sep",
        "a\r\nb",
        "a\rb",
        "e\u0301",
        "\ue000",
        "🙂\ufe0f",
    ],
)
def test_observation__ordinary_unicode_in_an_echo_arrives_unchanged(text):
    env = _EchoEnv()
    env.reset(seed=0)
    obs, *_ = env.step(text)
    assert f"<<{text}>>" in obs and obs in env.observation_space


@pytest.mark.parametrize("bad", ["\ud800", "\udfff", "\x00", "\x07", "\x1b", "\x7f", "\x85", "\x9f"])
def test_observation__lone_surrogates_and_controls_become_replacement_characters(bad):
    env = _EchoEnv()
    env.reset(seed=0)
    obs, reward, *_ = env.step(f"x{bad}y")
    assert "<<x\ufffdy>>" in obs and obs in env.observation_space and reward == env.format_penalty
