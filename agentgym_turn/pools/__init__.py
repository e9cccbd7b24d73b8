"""Env pools: one protocol (:class:`EnvPool`: ``reset(seeds)``, ``step({i: action})``, ``call(i, fn)``, ``close()``)
and the ways to run it.

* :class:`SerialPool`: in this process, one env after another (the reference every pool is tested equal to);
* :class:`VectorPool`: a Gymnasium vector env;
* :class:`ConcurrentPool`: an :class:`~agentgym_turn.async_pool.AsyncTurnEnvPool`, threads or worker processes, with a
  per-step timeout;
* :class:`~agentgym_turn.pools.ray_actors.RayEnvPool`: Ray actors across a cluster (the ``ray`` extra; also
  ``agentgym_turn.ray_pool.RayEnvPool``).

:func:`make` builds one by mode for an env id, every env inside a
:class:`~agentgym_turn.core.contract.FaultGuard`; the reference trainer's ``--env-mode`` is its ``mode``.
"""

from __future__ import annotations

import functools
from typing import Any

import gymnasium as gym

from ..core.contract import FaultGuard
from .base import EnvPool, StepResult, plain
from .concurrent import ConcurrentPool
from .serial import SerialPool
from .vector import VectorPool

__all__ = [
    "EnvPool",
    "StepResult",
    "SerialPool",
    "VectorPool",
    "ConcurrentPool",
    "MODES",
    "make",
    "make_guarded",
    "plain",
]

#: The modes of :func:`make`, each a distinct way to run envs: ``list`` (one after another, in this process),
#: ``threads`` (all active envs at once, one thread each: envs that wait on I/O), ``processes`` (one worker process per
#: env: CPU-bound envs), ``ray`` (Ray actors across a cluster).
MODES = ("list", "threads", "processes", "ray")
#: Modes that earlier versions took and what they are now: a Gymnasium sync vector env stepped like ``list``, and an
#: async one like ``processes``, with the same results.
RENAMED = {"sync": "list", "async": "processes"}


def make_guarded(env_id: str, **env_kwargs: Any) -> FaultGuard:
    """``gymnasium.make(env_id, **env_kwargs)`` inside a :class:`FaultGuard` (a picklable factory for worker processes)."""
    return FaultGuard(gym.make(env_id, **env_kwargs))


def make(
    env_id: str, num_envs: int, mode: str = "list", *, workers: int = 0, step_timeout_s: float = 0.0, **env_kwargs: Any
) -> EnvPool:
    """``num_envs`` envs of ``env_id`` (``gymnasium.make(env_id, **env_kwargs)``) in a pool of ``mode`` (:data:`MODES`).

    ``workers`` caps the threads of ``threads`` (0: one per env). ``step_timeout_s > 0`` (``threads``,
    ``processes`` and ``ray``) cuts off a step after that many seconds and replaces its env (for ``ray``: gives up an
    actor that does not answer). ``ray`` needs ``ray.init()`` first; each actor imports the module that registered
    ``env_id``.
    """
    mode = RENAMED.get(mode, mode)
    if mode not in MODES:
        raise ValueError(f"env pool mode must be one of {MODES}, got {mode!r}.")
    if step_timeout_s and mode == "list":
        raise ValueError(
            f"step_timeout_s={step_timeout_s} needs mode 'threads', 'processes' or 'ray' (got 'list'); use "
            "--env-mode threads (I/O-bound envs) or processes (CPU-bound envs)."
        )
    if workers and mode != "threads":
        raise ValueError(
            f"workers={workers} sets the threads of mode 'threads' (got {mode!r}); leave it at 0 or use "
            "--env-mode threads."
        )
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 0:
        raise ValueError(f"workers must be an integer >= 0 (0: one thread per env), got {workers!r}.")
    if mode == "ray":
        from .ray_actors import RayEnvPool

        entry = gym.spec(env_id).entry_point
        module = entry.split(":")[0] if isinstance(entry, str) else getattr(entry, "__module__", "")
        return RayEnvPool(
            env_id,
            num_envs,
            env_kwargs=env_kwargs,
            step_timeout_s=step_timeout_s or None,
            imports=(module,) if module and not module.startswith("agentgym_turn") else (),
        )
    factory = functools.partial(make_guarded, env_id, **env_kwargs)
    if mode == "list":
        return SerialPool([factory() for _ in range(num_envs)])
    from ..async_pool import AsyncTurnEnvPool

    # start_method=None: the platform's, so forked workers know the envs the caller's imports registered
    return ConcurrentPool(
        AsyncTurnEnvPool(
            [factory] * num_envs,
            max_workers=workers or num_envs,
            executor="thread" if mode == "threads" else "process",
            step_timeout_s=step_timeout_s,
            start_method=None,
        )
    )
