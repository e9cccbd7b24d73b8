"""make_vec gives vector envs whose text observations are fresh every step, in both modes."""

import gymnasium as gym
import pytest

import agentgym_turn
from toy_envs import GuessNumberEnv


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
    with pytest.raises(ValueError, match="stale strings"):
        agentgym_turn.make_vec(toy_id, 2, mode="async", vector_kwargs={"shared_memory": True})
