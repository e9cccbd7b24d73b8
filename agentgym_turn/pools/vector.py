"""A Gymnasium vector env as a pool: every sub-env steps each turn; the finished ones get an empty response and their
results (Gymnasium's autoreset included) are ignored until the next reset."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

import gymnasium as gym

from ..vector import unbatch_info
from .base import EnvPool, StepResult, plain

T = TypeVar("T")


class VectorPool(EnvPool):
    """A ``gymnasium.vector.VectorEnv`` of text envs (e.g. ``agentgym_turn.make_vec(id, n, mode="async")``; build it
    with autoreset disabled, or reset it before each batch of episodes as :meth:`reset` does)."""

    def __init__(self, vec: gym.vector.VectorEnv):
        self.vec = vec
        self.num_envs = vec.num_envs

    def reset(self, seeds: Sequence[int]) -> list[tuple[str, dict[str, Any]]]:
        padded = [int(s) for s in seeds] + [0] * (self.num_envs - len(seeds))
        obs, infos = self.vec.reset(seed=padded)
        return [(obs[i], unbatch_info(infos, i)) for i in range(len(seeds))]

    def step(self, actions: Mapping[int, str]) -> dict[int, StepResult]:
        obs, rew, term, trunc, infos = self.vec.step([actions.get(i, "") for i in range(self.num_envs)])
        return {i: plain((obs[i], rew[i], term[i], trunc[i], unbatch_info(infos, i))) for i in actions}

    def call(self, index: int, fn: Callable[..., T], *args: Any) -> T:
        envs = getattr(self.vec, "envs", None)
        if envs is None:
            raise ValueError(
                "VectorPool.call needs the sub-envs in this process (a SyncVectorEnv); an AsyncVectorEnv's "
                "live in other processes."
            )
        return fn(envs[index], *args)

    def close(self) -> None:
        self.vec.close()
