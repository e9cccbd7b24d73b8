"""make_vec gives vector envs whose text observations are fresh every step, in both modes."""

import gymnasium as gym
import pytest

import agentgym_turn
from support.toy_envs import GuessNumberEnv


@pytest.fixture(scope="module")
def toy_id():
    gym.register("ToyGuessVec-v0", entry_point=GuessNumberEnv, max_episode_steps=6)
    yield "ToyGuessVec-v0"
    del gym.registry["ToyGuessVec-v0"]


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_make_vec__observations_change_step_to_step(toy_id, mode):
    envs = agentgym_turn.make_vec(toy_id, 3, mode=mode)
    try:
        obs, _ = envs.reset(seed=[1, 2, 3])
        assert len(obs) == 3 and all(o.startswith("Guess") for o in obs)
        seen = [obs]
        for guess in ("0", "9", "5"):
            obs, rewards, terminated, truncated, infos = envs.step([f"<answer>{guess}</answer>"] * 3)
            assert obs != seen[-1]
            seen.append(obs)
        # each sub-env answered this step's guess (or was reset after finishing)
        for o in seen[1]:
            assert o.startswith(("0 is too low", "Correct"))
        assert len(set(seen[1]) | set(seen[2])) > 1
    finally:
        envs.close()


def test_make_vec__refuses_shared_memory(toy_id):
    with pytest.raises(ValueError, match=r"shared_memory': True}: AsyncVectorEnv's shared memory cannot carry text"):
        agentgym_turn.make_vec(toy_id, 2, mode="async", vector_kwargs={"shared_memory": True})


def test_gymnasium_make_vec_async__fails_at_construction_saying_what_to_pass():
    # Gymnasium's default (shared memory) would return the blank strings it decoded at construction.
    with pytest.raises(ValueError) as raised:
        gym.make_vec("TurnSokoban-v0", 2, vectorization_mode="async")
    message = str(raised.value)
    assert "vector_kwargs={'shared_memory': False}" in message and "agentgym_turn.make_vec" in message


def test_gymnasium_make_vec_async__without_shared_memory_carries_the_text():
    envs = gym.make_vec("TurnSokoban-v0", 2, vectorization_mode="async", vector_kwargs={"shared_memory": False})
    try:
        obs, _ = envs.reset(seed=[0, 1])
        assert all("Sokoban" in o for o in obs)
        after, *_ = envs.step(["garbage", "garbage"])
        assert all(a.startswith("Invalid") for a in after)
    finally:
        envs.close()


# ---------------------------------------------------------------- every id, mixed ids, env_id kwarg
ALL_IDS = agentgym_turn.env_ids()


@pytest.mark.parametrize("env_id", ALL_IDS)
def test_gymnasium_make_vec_async__every_id_fails_at_construction_saying_what_to_pass(env_id):
    with pytest.raises(ValueError, match=r"vector_kwargs=\{'shared_memory': False\}"):
        gym.make_vec(env_id, 4, vectorization_mode="async")


class _NamedEnv(GuessNumberEnv):
    """A toy env with a keyword named like make_vec's first parameter (as the served-env client has)."""

    def __init__(self, env_id: str = "unset", **kwargs):
        super().__init__(**kwargs)
        self.env_id = env_id

    def _reset(self, options):
        obs, info = super()._reset(options)
        return f"[{self.env_id}] {obs}", info


def test_make_vec__first_parameters_are_positional_so_env_id_reaches_the_sub_envs():
    gym.register("ToyNamedVec-v0", entry_point=_NamedEnv, max_episode_steps=3)
    try:
        envs = agentgym_turn.make_vec("ToyNamedVec-v0", 2, env_id="inner")
        obs, _ = envs.reset(seed=0)
        assert all(o.startswith("[inner] Guess") for o in obs)
        envs.close()
    finally:
        del gym.registry["ToyNamedVec-v0"]


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_make_vec__mixed_ids_and_factories_in_one_vector_env(mode):
    sources = ["TurnSokoban-v0", "TurnSearchQA-v0", lambda: gym.make("TurnSokoban-v0", prompt_style="compact")]
    envs = agentgym_turn.make_vec(sources, mode=mode)
    try:
        assert envs.num_envs == 3
        obs, _ = envs.reset(seed=[0, 0, 0])
        assert "Sokoban" in obs[0] and "Question:" in obs[1] and obs[2].startswith("turn 1 moves 10")
        after, rewards, *_ = envs.step(["garbage"] * 3)
        assert after[0].startswith("Invalid answer") and after[2].startswith("invalid:")
        assert rewards[0] == rewards[2] == -0.1  # Sokoban's format penalty (the QA env's default is 0)
    finally:
        envs.close()


def test_make_vec__bad_arguments_are_named():
    with pytest.raises(ValueError, match="num_envs=3 but the list of env ids/factories has 2 entries"):
        agentgym_turn.make_vec(["TurnSokoban-v0", "TurnSokoban-v0"], 3)
    with pytest.raises(ValueError, match=r"num_envs \(the second argument\) must be an integer >= 1"):
        agentgym_turn.make_vec("TurnSokoban-v0")
    with pytest.raises(TypeError, match="entry 1 of env_id is 5"):
        agentgym_turn.make_vec(["TurnSokoban-v0", 5])
    with pytest.raises(ValueError, match="mode must be 'sync' or 'async'"):
        agentgym_turn.make_vec("TurnSokoban-v0", 2, "threads")
