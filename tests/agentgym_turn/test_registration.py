"""Every registered id, tested the day it is registered (Minigrid's idea)."""

import pickle
import inspect
import re

import gymnasium as gym
import pytest

import agentgym_turn
from agentgym_turn.core import COMMON_INFO_KEYS
from agentgym_turn.testing import check_turn_env

IDS = agentgym_turn.env_ids()


def _documented_info_keys(env: gym.Env) -> set[str]:
    doc = inspect.getdoc(type(env.unwrapped)) or ""
    m = re.search(r"^##+ Information\s*$(.*?)(?=^##+ |\Z)", doc, re.S | re.M)
    assert m, f"{type(env.unwrapped).__name__} docstring has no '## Information' section"
    return set(re.findall(r"`([a-z_][a-z0-9_]*)`", m.group(1)))


@pytest.mark.parametrize("env_id", IDS)
def test_registered_env__keeps_the_turn_contract(env_id):
    report = check_turn_env(env_id, seed=0, episodes=2, fuzz_actions=16)
    assert report.expert_successes == report.expert_episodes == 2


@pytest.mark.parametrize("env_id", IDS)
def test_registered_env__has_a_turn_limit_and_kwargs_overrides(env_id):
    assert gym.spec(env_id).max_episode_steps, "register max_episode_steps as the turn limit"
    env = gym.make(env_id, format_penalty=-0.5, max_episode_steps=2)
    env.reset(seed=1)
    _, r1, term1, trunc1, info = env.step("not an action")
    _, r2, term2, trunc2, _ = env.step("still not an action")
    assert (r1, r2) == (-0.5, -0.5) and not info["action_is_valid"]
    assert not term1 and not trunc1 and trunc2 and not term2


@pytest.mark.parametrize("env_id", IDS)
def test_registered_env__info_keys_are_documented(env_id):
    env = gym.make(env_id)
    documented = _documented_info_keys(env)
    assert set(COMMON_INFO_KEYS) <= documented
    seen = set()
    for seed in range(2):
        _, info = env.reset(seed=seed)
        seen |= set(info)
        _, _, _, _, info = env.step("garbage")
        seen |= set(info)
        for _ in range(env.spec.max_episode_steps):
            _, _, terminated, truncated, info = env.step(env.unwrapped.expert_action())
            seen |= set(info)
            if terminated or truncated:
                break
    assert seen <= documented, f"undocumented info keys: {sorted(seen - documented)}"


@pytest.mark.parametrize("env_id", IDS)
@pytest.mark.parametrize("mode", ["sync", "async"])
def test_registered_env__vectorises(env_id, mode):
    envs = agentgym_turn.make_vec(env_id, 2, mode=mode)
    try:
        obs, _ = envs.reset(seed=[0, 1])
        assert all(isinstance(o, str) and o for o in obs)
        actions = ["garbage", "<answer>garbage</answer>"]
        obs2, rewards, *_ = envs.step(actions)
        assert len(rewards) == 2
        for i, action in enumerate(actions):  # each sub-env did what the same env alone does
            single = gym.make(env_id)
            first, _ = single.reset(seed=i)
            alone, reward, *_ = single.step(action)
            assert (obs[i], obs2[i], float(rewards[i])) == (first, alone, reward)
    finally:
        envs.close()


@pytest.mark.parametrize("env_id", IDS)
def test_registered_env__pickles_through_gymnasium_make(env_id):
    env = gym.make(env_id)
    env.reset(seed=3)
    env.step(env.unwrapped.expert_action())
    clone = pickle.loads(pickle.dumps(env))
    response = env.unwrapped.expert_action()
    assert clone.unwrapped.expert_action() == response
    a, b = env.step(response), clone.step(response)
    assert a[:4] == b[:4] and a[4].keys() == b[4].keys()


@pytest.mark.parametrize("env_id", IDS)
def test_registered_env__misspelt_kwarg_names_the_id_class_keyword_and_accepted_ones(env_id):
    with pytest.raises(TypeError) as raised:
        gym.make(env_id, format_penalti=-1.0)
    message = str(raised.value)
    cls = gym.spec(env_id).entry_point.rsplit(":", 1)[1]
    assert f"{cls} got an unexpected keyword argument 'format_penalti' (did you mean 'format_penalty'?)" in message
    assert env_id in message and "TurnEnv.__init__" not in message
    accepted = re.search(r"Accepted keywords: \[([^\]]*)\]", message)
    assert accepted and {"format_penalty", "render_mode"} <= set(accepted.group(1).split(", "))


def test_ids_that_need_an_extra_or_a_server_are_registered_but_left_out_of_env_ids():
    # registry-wide tests make every id of env_ids(): none of them may start a browser or need a server
    extra_ids = {"TurnWebShopBrowser-v0", "agentgym_turn/Remote-v0"}
    every = agentgym_turn.registration.all_env_ids()
    assert every[: len(IDS)] == IDS and set(every) == set(IDS) | extra_ids
    assert not extra_ids & set(IDS) and all(env_id in gym.registry for env_id in every)
    needs = {env_id: agentgym_turn.registration.env_needs(env_id) for env_id in every}
    assert (
        needs["TurnWebShopBrowser-v0"] == "extra browser + Chromium"
        and needs["agentgym_turn/Remote-v0"] == "a served env (base_url)"
    )
    assert {needs[env_id] for env_id in IDS} == {"-"}


def test_sokoban_misspelt_dim_suggests_dim():
    with pytest.raises(
        TypeError, match=r"TurnSokobanEnv got an unexpected keyword argument 'dimm' \(did you mean 'dim'\?\)"
    ):
        gym.make("TurnSokoban-v0", dimm=(6, 6))


def test_misspelt_id__gymnasium_suggests_the_right_one():
    with pytest.raises(gym.error.NameNotFound, match=r"TurnSokobn.*Did you mean: `TurnSokoban`\?"):
        gym.make("TurnSokobn-v0")
    with pytest.raises(gym.error.VersionNotFound, match=r"TurnWebShop.*v0"):
        gym.make("TurnWebShop-v1")


def test_keyword_check_leaves_envs_that_keep_their_own_kwargs_alone():
    from support.toy_envs import GuessNumberEnv

    class KeepsOptions(GuessNumberEnv):
        def __init__(self, **options):
            super().__init__(high=5)
            self.options = options

    assert KeepsOptions(anything=1).options == {"anything": 1}
    with pytest.raises(
        TypeError, match=r"GuessNumberEnv got an unexpected keyword argument 'hihg' \(did you mean 'high'\?\)"
    ):
        GuessNumberEnv(hihg=3)
    clone = pickle.loads(pickle.dumps(GuessNumberEnv(high=4)))  # unpickling calls __new__ without kwargs
    assert clone.high == 4
