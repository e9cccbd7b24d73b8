"""The envs of an :class:`~agentgym_turn.async_pool.AsyncTurnEnvPool` (threads or worker processes), stepped as a batch:
all active envs at once, each step under the pool's timeout."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

from ..async_pool import AsyncTurnEnvPool
from .base import EnvPool, StepResult, plain

T = TypeVar("T")


class ConcurrentPool(EnvPool):
    """``pool``'s envs through the batch protocol (``reset_all``/``step_all``). A step past the pool's
    ``step_timeout_s`` returns :func:`~agentgym_turn.async_pool.timeout_result` and the pool replaces that env.

    With threads (``in_threads``), :meth:`reset_then` and :meth:`step_then` also run a function on each result in the
    thread that made the call, right after it: a rollout tokenises each observation there while other envs still wait.
    """

    def __init__(self, pool: AsyncTurnEnvPool):
        self.pool, self.num_envs = pool, pool.num_envs

    @property
    def in_threads(self) -> bool:
        """Whether the envs live in this process, stepped by threads."""
        return self.pool.envs is not None

    @property
    def timeouts(self) -> int:
        """Steps cut off by the timeout so far."""
        return self.pool.timeouts

    def reset(self, seeds: Sequence[int]) -> list[tuple[str, dict[str, Any]]]:
        return [tuple(r) for r in self.pool.reset_all([int(s) for s in seeds])]  # type: ignore[misc]

    def step(self, actions: Mapping[int, str]) -> dict[int, StepResult]:
        return {i: plain(r) for i, r in self.pool.step_all(dict(actions)).items()}

    def reset_then(self, seeds: Sequence[int], then: Callable[[str], Any]) -> list[tuple[str, Any]]:
        """:meth:`reset`, with ``then(observation)`` of each env: ``(observation, then's result)`` per env."""
        pairs = self.pool.reset_all([int(s) for s in seeds], then=lambda r: then(r[0]))
        return [(obs, extra) for (obs, _), extra in pairs]

    def step_then(
        self, actions: Mapping[int, str], then: Callable[[StepResult], Any]
    ) -> dict[int, tuple[StepResult, Any]]:
        """:meth:`step`, with ``then(result)`` of each step (``None`` for a step cut off by the timeout)."""
        pairs = self.pool.step_all(dict(actions), then=lambda r: then(plain(r)))
        return {i: (plain(r), extra) for i, (r, extra) in pairs.items()}

    def call(self, index: int, fn: Callable[..., T], *args: Any) -> T:
        if not self.in_threads:
            raise ValueError(
                "ConcurrentPool.call needs the envs in this process (executor='thread'); worker processes hold theirs."
            )
        return fn(self.pool.envs[index], *args)  # type: ignore[index]

    def close(self) -> None:
        self.pool.close()
