"""The verl-agent package adapter and the TRL environment class, without verl-agent or TRL installed."""

from __future__ import annotations

import gymnasium as gym
import pytest

import agentgym_turn
from agentgym_turn.integrations.trl import TurnEnvironment, trl_environment
from agentgym_turn.integrations.verl_agent import build_envs, text_projection


@pytest.mark.parametrize("env_id", agentgym_turn.env_ids())
def test_verl_agent_envs__groups_share_seeds_and_steps_equal_the_env(env_id):
    envs = build_envs(env_id, seed=1, env_num=2, group_n=3)
    obs, infos = envs.reset()
    assert envs.seeds[:3] == [envs.seeds[0]] * 3 and envs.seeds[3:] == [envs.seeds[3]] * 3
    assert obs[0] == obs[1] == obs[2] and obs[3] == obs[4] == obs[5]
    assert all(0 <= s < 2**16 - 1 for s in envs.seeds) and all("won" in i for i in infos)
    direct = gym.make(env_id)
    direct.reset(seed=envs.seeds[0])
    actions, valids = text_projection([envs.envs[0].unwrapped.expert_action()] + ["no idea"] * 5)
    assert valids == [1] * 6
    out = envs.step(actions)
    expected = direct.step(actions[0])
    assert (out[0][0], out[1][0], out[2][0]) == (expected[0], expected[1], expected[2] or expected[3])
    assert out[3][0]["won"] == expected[4]["success"]
    envs.close()


def test_verl_agent_envs__done_envs_stay_done_and_reset_draws_new_tasks():
    envs = build_envs("TurnSokoban-v0", seed=0, env_num=2, group_n=2, is_train=False)
    envs.reset()
    first = list(envs.seeds)
    assert all(2**16 <= s < 2**32 - 1 for s in first)
    for _ in range(6):  # 5 turns at most: every env is done after that
        obs, rewards, dones, _ = envs.step(["no idea"] * 4)
    assert all(dones) and rewards == [0.0] * 4
    envs.reset()
    assert envs.seeds != first
    again = build_envs("TurnSokoban-v0", seed=0, env_num=2, group_n=2, is_train=False)
    again.reset()
    assert again.seeds == first  # the seed fixes the tasks
    with pytest.raises(ValueError, match="got 3 actions for 4 envs"):
        envs.step(["x"] * 3)


@pytest.mark.parametrize(
    "env_id, tool, args, action",
    [
        ("TurnSokoban-v0", "move", {"moves": "Up || Left"}, "<answer>Up || Left</answer>"),
        ("TurnWebShop-v0", "search", {"query": "red shoes"}, "search[red shoes]"),
        ("TurnSearchQA-v0", "answer", {"answer": "Paris"}, "<answer> Paris </answer>"),
        ("TurnSearchQA-MCQ-v0", "search", {"query": "who"}, "<search> who </search>"),
    ],
)
def test_trl_environment__tool_calls_are_env_turns_and_reward_is_the_return(env_id, tool, args, action):
    environment = trl_environment(env_id)
    environment.history = []
    instance = environment()
    first = instance.reset(seed=7, prompt=[{"role": "user", "content": ""}])  # TRL passes the whole row
    direct = gym.make(env_id)
    assert first == direct.reset(seed=7)[0]
    answer = getattr(instance, tool)(**args)
    obs, reward, terminated, truncated, _ = direct.step(action)
    assert answer.startswith(obs) and instance.episode.actions == [action] and instance.episode.rewards == [reward]
    assert instance.get_reward() == reward and environment.history == [instance.episode]


def test_trl_environment__a_tool_after_the_end_raises_and_names_are_per_id():
    environment = trl_environment("TurnSokoban-v0")
    instance = environment()
    instance.reset(seed=0)
    while not instance.episode.done:
        instance.move("Up")
    with pytest.raises(ValueError, match="The episode is over"):
        instance.move("Up")
    assert environment.__name__ == "TurnSokoban_v0Environment" and issubclass(environment, TurnEnvironment)
    respond = trl_environment("TurnSokoban-v0", tools="respond")()
    respond.reset(seed=0)
    assert respond.respond("<answer>Up</answer>").startswith("You played Up")
    with pytest.raises(ValueError, match="not a registered id"):
        trl_environment("NoSuchEnv-v0")
    with pytest.raises(ValueError, match="tools must be 'auto' or 'respond'"):
        trl_environment("TurnSokoban-v0", tools="json")
