"""The one protocol every env pool keeps: ``num_envs`` text envs addressed by index, stepped in batches.

A trainer or rollout engine resets some envs with seeds, steps the active ones with one turn's responses each and,
where it needs to ask an env something (its instructions, its state), runs a function on it where it lives. Serial
stepping (:class:`~agentgym_turn.pools.serial.SerialPool`) defines the results: every other pool returns exactly
what it returns for the same seeds and actions, whatever runs the envs (threads, processes, Ray actors).
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

#: What ``env.step`` returns: observation, reward, terminated, truncated, info.
StepResult = tuple[str, float, bool, bool, dict[str, Any]]
T = TypeVar("T")


def plain(result: tuple) -> StepResult:
    """A step's result with Python scalars (vector envs and worker processes return numpy ones)."""
    obs, r, term, trunc, info = result
    return obs, float(r), bool(term), bool(trunc), info


class EnvPool(abc.ABC):
    """``num_envs`` envs: :meth:`reset` some with seeds, :meth:`step` the active ones, :meth:`call` a function on one.

    Use it as a context manager, or call :meth:`close`.
    """

    num_envs: int

    @abc.abstractmethod
    def reset(self, seeds: Sequence[int]) -> list[tuple[str, dict[str, Any]]]:
        """Reset envs ``0 .. len(seeds) - 1``, env ``i`` with ``seeds[i]``: ``(observation, info)`` of each."""

    @abc.abstractmethod
    def step(self, actions: Mapping[int, str]) -> dict[int, StepResult]:
        """Step env ``i`` with ``actions[i]`` for every ``i`` given (the others wait): each step's result by index."""

    @abc.abstractmethod
    def call(self, index: int, fn: Callable[..., T], *args: Any) -> T:
        """``fn(env, *args)`` on env ``index`` where it lives (``fn`` picklable where that is another process)."""

    def close(self) -> None:
        """Close every env (and whatever runs them)."""

    def __enter__(self) -> EnvPool:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
