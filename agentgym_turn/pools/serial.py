"""One process, one env after another: the pool every other pool is tested equal to."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

import gymnasium as gym

from ..core.contract import FaultGuard
from .base import EnvPool, StepResult, plain

T = TypeVar("T")


class SerialPool(EnvPool):
    """``envs`` (made with ``gymnasium.make``) stepped one by one, only the active ones, each inside a
    :class:`~agentgym_turn.core.contract.FaultGuard` (an env that raises gives a faulted turn, not an exception)."""

    def __init__(self, envs: Sequence[gym.Env]):
        self.envs = [e if isinstance(e, FaultGuard) else FaultGuard(e) for e in envs]
        self.num_envs = len(self.envs)

    def reset(self, seeds: Sequence[int]) -> list[tuple[str, dict[str, Any]]]:
        return [self.envs[i].reset(seed=int(s)) for i, s in enumerate(seeds)]

    def step(self, actions: Mapping[int, str]) -> dict[int, StepResult]:
        return {i: plain(self.envs[i].step(a)) for i, a in actions.items()}

    def call(self, index: int, fn: Callable[..., T], *args: Any) -> T:
        return fn(self.envs[index], *args)

    def close(self) -> None:
        for e in self.envs:
            e.close()
