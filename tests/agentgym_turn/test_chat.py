"""ChatView: the system prompt apart from the state, messages with a history window, reward lines."""

from __future__ import annotations

import gymnasium as gym
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import agentgym_turn
from agentgym_turn.chat import DEFAULT_REWARD_TEMPLATE, ChatView, split_first_message
from support.toy_envs import GuessNumberEnv

ALL_IDS = agentgym_turn.env_ids()


def _play(view: ChatView, seed: int, turns: int):
    """Reset, then play ``turns`` turns (expert, garbage, expert, ...); returns the raw steps."""
    messages, _ = view.reset(seed=seed)
    steps = []
    for k in range(turns):
        action = view.unwrapped.expert_action() if k % 2 == 0 else "no idea"
        messages, reward, terminated, truncated, info = view.step(action)
        steps.append((action, reward, terminated, truncated, messages))
        if terminated or truncated:
            break
    return steps


@pytest.mark.parametrize("env_id", ALL_IDS)
def test_chat_view__first_message_is_system_prompt_then_state_with_nothing_lost(env_id):
    raw = gym.make(env_id)
    observation, _ = raw.reset(seed=3)
    view = ChatView(gym.make(env_id))
    messages, _ = view.reset(seed=3)
    assert [m["role"] for m in messages] == ["system", "user"]
    system, state = messages[0]["content"], messages[1]["content"]
    assert system and state and system == view.instructions and state == view.first_state
    # the original message is the prompt, whitespace, then the state
    assert observation.startswith(system) and observation.endswith(state)
    assert observation[len(system) : len(observation) - len(state)].strip() == ""
    # the state part holds the board/page/question, the prompt part does not
    first_line = raw.unwrapped._state_text().strip("\n").split("\n", 1)[0]
    assert first_line in state and first_line not in system
    assert view.observation_space.contains(messages)


@pytest.mark.parametrize("env_id", ALL_IDS)
def test_chat_view__steps_alternate_assistant_and_user_and_pass_rewards_through(env_id):
    raw = gym.make(env_id)
    raw.reset(seed=5)
    view = ChatView(gym.make(env_id))
    steps = _play(view, seed=5, turns=4)
    assert steps
    for k, (action, reward, terminated, truncated, messages) in enumerate(steps):
        expected = raw.step(action)
        assert (reward, terminated, truncated) == expected[1:4]
        assert messages[-1] == {"role": "user", "content": expected[0]}
        assert messages[-2] == {"role": "assistant", "content": action}
        assert [m["role"] for m in messages[1:]] == ["user"] + ["assistant", "user"] * (k + 1)
        assert view.observation_space.contains(messages)


@pytest.mark.parametrize("style", ["full", "compact", "ragen"])
def test_chat_view__sokoban_styles_split_where_the_state_begins(style):
    view = ChatView(gym.make("TurnSokoban-v0", prompt_style=style))
    messages, _ = view.reset(seed=0)
    grid = view.unwrapped._grid()
    assert grid in view.first_state and grid not in view.system_prompt
    if style == "compact":  # the compact style has no instructions: no system message
        assert [m["role"] for m in messages] == ["user"]
    if style == "ragen":  # RAGEN's prefix is the prompt; "Turn 1:\nState:" belongs to the state
        assert view.first_state.startswith("Turn 1:\nState:\n")
        assert view.system_prompt.startswith("You are solving the Sokoban puzzle.")


def test_chat_view__history_window_keeps_system_and_last_k_user_messages():
    view = ChatView(gym.make("TurnSokoban-v0", max_episode_steps=20, max_actions_per_episode=None), history_window=2)
    view.reset(seed=1)
    for k in range(4):
        messages, *_ = view.step("garbage")
    full = view.messages
    assert len(full) == 1 + 1 + 2 * 4
    assert messages == [full[0]] + full[-3:]  # system, user, assistant, user
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "user"]
    markov = ChatView(gym.make("TurnSokoban-v0"), history_window=1)
    markov.reset(seed=1)
    messages, *_ = markov.step("garbage")
    assert [m["role"] for m in messages] == ["system", "user"] and messages[1] == markov.messages[-1]


@settings(max_examples=25, deadline=None)
@given(window=st.one_of(st.none(), st.integers(1, 6)), turns=st.integers(0, 6))
def test_chat_view__window_is_the_tail_of_the_full_conversation(window, turns):
    view = ChatView(
        gym.make("TurnSokoban-v0", max_episode_steps=10, max_actions_per_episode=None), history_window=window
    )
    messages, _ = view.reset(seed=2)
    for _ in range(turns):
        messages, *_ = view.step("<answer>Up</answer>")
    full = view.messages
    users = sum(m["role"] == "user" for m in messages)
    assert messages[0] == full[0] and messages[1:] == full[len(full) - len(messages) + 1 :]
    assert users == (turns + 1 if window is None else min(window, turns + 1))
    assert messages[1]["role"] == "user" and messages[-1]["role"] == "user"


def test_chat_view__reward_template_puts_the_turn_reward_before_the_observation():
    view = ChatView(gym.make("TurnSokoban-v0"), reward_template=DEFAULT_REWARD_TEMPLATE)
    view.reset(seed=0)
    messages, reward, *_ = view.step("garbage")
    assert reward == -0.1 and messages[-1]["content"].startswith("Reward: -0.1\nInvalid answer")
    custom = ChatView(gym.make("TurnSokoban-v0"), reward_template="[r={reward:+.2f}] ")
    custom.reset(seed=0)
    messages, *_ = custom.step("garbage")
    assert messages[-1]["content"].startswith("[r=-0.10] Invalid")


def test_chat_view__extra_system_prompt_comes_before_the_env_instructions():
    view = ChatView(gym.make("TurnSokoban-v0", prompt_style="ragen"), system_prompt="You're a helpful assistant.")
    messages, _ = view.reset(seed=0)
    assert messages[0]["content"] == "You're a helpful assistant.\n\n" + view.instructions


def test_chat_view__env_hook_decides_the_split():
    class Hooked(GuessNumberEnv):
        def split_first_message(self, message):
            return "Guess a number.", message

    view = ChatView(Hooked())
    messages, _ = view.reset(seed=0)
    assert messages == [{"role": "system", "content": "Guess a number."}, {"role": "user", "content": view.first_state}]
    assert view.first_state.startswith("Guess a number from 0 to 9")


def test_split_first_message__without_a_state_in_the_message_everything_is_the_state():
    env = GuessNumberEnv()
    observation, _ = env.reset(seed=0)  # its state text ("The number lies in ...") is not in it
    assert split_first_message(env, observation) == ("", observation)
    view = ChatView(GuessNumberEnv())
    messages, _ = view.reset(seed=0)
    assert messages == [{"role": "user", "content": observation}]


def test_chat_view__non_string_actions_are_shown_as_text():
    view = ChatView(gym.make("TurnSokoban-v0"))
    view.reset(seed=0)
    messages, reward, *_ = view.step(12345)
    assert messages[-2] == {"role": "assistant", "content": "12345"} and reward == -0.1


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"history_window": 0}, "history_window must be None, an integer >= 1 or .compact., got 0"),
        ({"history_window": True}, "history_window"),
        ({"reward_template": "Reward: {r}"}, r"reward_template='Reward: \{r\}' must be a str.format template"),
        ({"reward_template": 3}, "reward_template must be a str or None"),
        ({"system_prompt": ["x"]}, "system_prompt must be a str or None"),
    ],
)
def test_chat_view__bad_arguments_are_named(kwargs, match):
    with pytest.raises((ValueError, TypeError), match=match):
        ChatView(gym.make("TurnSokoban-v0"), **kwargs)


def test_chat_view__a_served_env_splits_as_the_local_one():
    from agentgym_turn.remote.server import EnvServer

    with EnvServer("TurnSearchQA-v0", port=0) as server:
        remote = ChatView(gym.make("agentgym_turn/Remote-v0", base_url=server.base_url, env_id="TurnSearchQA-v0"))
        local = ChatView(gym.make("TurnSearchQA-v0"))
        assert remote.reset(seed=4)[0] == local.reset(seed=4)[0]
        assert remote.system_prompt and remote.first_state.startswith("Question:")
        assert remote.step("<search> who </search>")[0] == local.step("<search> who </search>")[0]
        remote.close()


@pytest.mark.parametrize("env_id", ["TurnSearchQA-v0", "TurnSearchQA-MCQ-v0"])
def test_chat_view__the_reward_line_never_scores_an_answer_hidden_in_a_search(env_id):
    """Search-R1 scores the whole sequence, so an <answer> inside <search> moves the turn's reward; the reward
    line shows only the format part until the episode ends, so enumerating answers learns nothing mid-episode."""
    env = gym.make(env_id)
    view = ChatView(env, reward_template=DEFAULT_REWARD_TEMPLATE)
    view.reset(seed=0)
    gold = (
        env.unwrapped.question.answer_letter if env_id.endswith("MCQ-v0") else env.unwrapped.question.golden_answers[0]
    )
    messages, reward, terminated, truncated, _ = view.step(f"<search> x <answer>{gold}</answer> </search>")
    assert not (terminated or truncated) and reward == 1.0  # the env's reward is Search-R1's, unchanged
    assert messages[-1]["content"].startswith(DEFAULT_REWARD_TEMPLATE.format(reward=0.0)), messages[-1]["content"][:40]
    messages, reward, terminated, _, _ = view.step(f"<answer>{gold}</answer>")
    assert terminated and messages[-1]["content"].startswith(DEFAULT_REWARD_TEMPLATE.format(reward=reward))


def test_chat_view__over_a_served_env_the_reward_line_is_the_one_the_local_env_shows():
    """The server sends what the env lets an agent see (``shown_reward`` in the step's info, which the client takes
    out), so the remote view's reward line
    equals the local one's, also for an answer hidden in a search (the env's own reward moves; the line does not)."""
    from agentgym_turn.remote.server import EnvServer

    with EnvServer("TurnSearchQA-v0", port=0, expert=True) as server:  # expert: the client may read the gold answer
        env = gym.make("agentgym_turn/Remote-v0", base_url=server.base_url, env_id="TurnSearchQA-v0")
        remote = ChatView(env, reward_template=DEFAULT_REWARD_TEMPLATE)
        local_env = gym.make("TurnSearchQA-v0")
        local = ChatView(local_env, reward_template=DEFAULT_REWARD_TEMPLATE)
        remote.reset(seed=0)
        local.reset(seed=0)
        gold = local_env.unwrapped.question.golden_answers[0]
        for action in (f"<search> x <answer>{gold}</answer> </search>", "no tags", f"<answer>{gold}</answer>"):
            mine, theirs = remote.step(action), local.step(action)
            assert mine[0][-1] == theirs[0][-1] and mine[1] == theirs[1], action
            assert (
                env.unwrapped.shown_reward(*mine[1:]) == local_env.unwrapped.shown_reward(*theirs[1:])
                and mine[4] == theirs[4]
            )
        assert mine[2]  # the answer ended the episode on both sides
        remote.close()
