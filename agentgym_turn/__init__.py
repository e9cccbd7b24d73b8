"""agentgym-turn: Gymnasium text-turn environments for training LLM agents.

``import agentgym_turn`` registers every env id and loads nothing heavy::

    import gymnasium as gym
    import agentgym_turn  # noqa: F401  (registers the ids)

    env = gym.make("TurnSokoban-v0")
    observation, info = env.reset(seed=0)
    observation, reward, terminated, truncated, info = env.step("<answer>Up</answer>")
"""

from .core.contract import fork_env
from .registration import env_ids, register_envs
from .vector import make_vec

__version__ = "0.1.0"
__all__ = ["env_ids", "fork_env", "make_vec", "register_envs", "__version__"]

register_envs()
