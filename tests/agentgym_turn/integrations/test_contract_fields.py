"""The TRL and verl-agent adapters hand over the turn contract's fields: reward components, exit status, reward validity;
a faulted episode is flagged, never scored as the policy's."""

from __future__ import annotations

import math
from typing import Any

import gymnasium as gym
import pytest

from agentgym_turn.core import InfraError
from agentgym_turn.integrations.trl import trl_environment
from agentgym_turn.integrations.verl_agent import build_envs
from support.toy_envs import GuessNumberEnv

FAULTY_ID = "ContractToyFaultyGuess-v0"


class FaultyGuessEnv(GuessNumberEnv):
    """Guess the number; a response containing ``CRASH`` makes the env's service fail (an :class:`InfraError` in the turn)."""

    def parse_action(self, response: str) -> Any:
        if "CRASH" in response:
            raise InfraError("the number service is down")
        return super().parse_action(response)


if FAULTY_ID not in gym.registry:
    gym.register(id=FAULTY_ID, entry_point=FaultyGuessEnv, max_episode_steps=4)


def _sums_to(components: dict[str, float], reward: float) -> bool:
    return math.isclose(sum(components.values()), reward, abs_tol=1e-9)


# ---------------------------------------------------------------------- verl-agent
@pytest.mark.parametrize("env_id", ["TurnSokoban-v0", FAULTY_ID])
def test_verl_agent_infos_carry_the_contract_fields_and_components_sum_to_each_reward(env_id):
    envs = build_envs(env_id, seed=2, env_num=1, group_n=2)
    _, infos = envs.reset()
    assert all(
        i["exit_status"] == "ok" and i["reward_valid"] is True and _sums_to(i["reward_components"], 0.0) for i in infos
    )
    expert = envs.envs[0].unwrapped.expert_action()
    for _ in range(5):  # past the turn limit: done envs repeat their last info with reward 0
        _, rewards, dones, infos = envs.step([expert, "no idea"])
        assert all(_sums_to(i["reward_components"], r) for i, r in zip(infos, rewards))
        assert all(
            i["reward_valid"] is True and i["exit_status"] in ("ok", "invalid_action", "truncated") for i in infos
        )
        expert = envs.envs[0].unwrapped.expert_action() if not dones[0] else expert
    assert infos[1]["exit_status"] in ("invalid_action", "truncated") and envs.faulted == [False, False]
    envs.close()


def test_verl_agent_a_faulted_turn_ends_the_episode_and_flags_it_until_the_next_reset():
    envs = build_envs(FAULTY_ID, seed=0, env_num=1, group_n=2)
    envs.reset()
    _, rewards, dones, infos = envs.step(["<answer>0</answer>", "CRASH"])
    assert (
        infos[1]["exit_status"] == "infra_error"
        and infos[1]["reward_valid"] is False
        and dones[1]
        and rewards[1] == 0.0
    )
    assert infos[0]["reward_valid"] is True and envs.faulted == [False, True]
    _, rewards, dones, infos = envs.step(["<answer>1</answer>", "<answer>1</answer>"])
    assert (
        dones[1]
        and rewards[1] == 0.0
        and infos[1]["exit_status"] == "infra_error"
        and infos[1]["reward_valid"] is False
    )
    assert _sums_to(infos[1]["reward_components"], 0.0)
    envs.reset()
    assert envs.faulted == [False, False]
    envs.close()


# ---------------------------------------------------------------------- TRL
def test_trl_records_carry_each_turns_components_and_the_last_exit_status():
    environment = trl_environment(FAULTY_ID)
    environment.history = []
    instance = environment()
    instance.reset(seed=3)
    instance.respond("no idea")
    instance.respond("<answer>0</answer>")
    episode = instance.episode
    assert len(episode.reward_components) == len(episode.rewards) == 2
    assert all(_sums_to(c, r) for c, r in zip(episode.reward_components, episode.rewards))
    assert episode.rewards[0] < 0 and math.isclose(
        episode.reward_components[0]["format"], episode.rewards[0]
    )  # the format penalty
    assert episode.exit_status in ("ok", "invalid_action") and episode.reward_valid
    assert math.isclose(sum(episode.component_returns.values()), episode.episode_return, abs_tol=1e-9)
    assert math.isclose(instance.get_reward(), episode.episode_return) and environment.history == [episode]


def test_trl_a_faulted_episode_ends_and_get_reward_leaves_it_unscored_or_gives_the_fault_reward():
    environment = trl_environment(FAULTY_ID)
    environment.history = []
    instance = environment()
    instance.reset(seed=3)
    instance.respond("no idea")  # a penalised turn first: the return is not 0, and still not the policy's
    answer = instance.respond("CRASH")
    episode = instance.episode
    assert answer.endswith("(The episode is over.)") and episode.done
    assert episode.exit_status == "infra_error" and not episode.reward_valid and episode.episode_return < 0
    assert instance.get_reward() is None and environment.history == [episode]
    with pytest.raises(ValueError, match="The episode is over"):
        instance.respond("<answer>1</answer>")
    flagged = type("Flagged", (environment,), {"fault_reward": 0.0})()
    flagged.reset(seed=3)
    flagged.respond("CRASH")
    assert flagged.get_reward() == 0.0 and not flagged.episode.reward_valid
    instance.reset(seed=4)  # a new episode starts valid again
    assert instance.episode.reward_valid and instance.episode.exit_status == "ok"


class _RaisingEnv(gym.Env):
    """A third-party text env outside the turn contract: its step raises on ``boom``."""

    observation_space = action_space = gym.spaces.Text(64)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return "say anything", {}

    def step(self, action):
        if "boom" in action:
            raise RuntimeError("a bug in a user's env")
        return "again", 0.5, False, False, {}


RAISING_ID = "ContractToyRaising-v0"
if RAISING_ID not in gym.registry:
    gym.register(id=RAISING_ID, entry_point=_RaisingEnv, max_episode_steps=4)


def test_both_adapters_turn_an_env_that_raises_into_a_faulted_episode_not_an_exception():
    envs = build_envs(RAISING_ID, seed=0, env_num=1, group_n=2)
    envs.reset()
    _, rewards, dones, infos = envs.step(["fine", "boom"])
    assert rewards == [0.5, 0.0] and dones == [False, True]
    assert (infos[1]["exit_status"], infos[1]["reward_valid"]) == ("env_error", False) and infos[0][
        "reward_valid"
    ] is True
    env = trl_environment(RAISING_ID)()
    env.reset()
    env._turn("boom")  # what each of its tools does with the action text
    assert env.episode.done and env.get_reward() is None  # faulted: TRL leaves the rollout unscored
