"""The rules of ``exit_status``, ``reward_valid``, ``reward_components``, ``state_key`` and ``snapshot``/``fork``,
written once for :func:`~agentgym_turn.testing.checker.check_turn_env` and the stateful machine.

An env is held to a rule only when it declares the field (its info carries the key, its unwrapped env has the
method), so a user's env that predates them still passes; every ``TurnEnv`` declares all but ``state_key``.
"""

from __future__ import annotations

import math
from numbers import Real
from typing import Any, Sequence

import gymnasium as gym
from gymnasium.utils.env_checker import data_equivalence

from ..core.contract import EXIT_STATUSES, FAULT_STATUSES

#: How far the components' sum may lie from the reward (float rounding only).
COMPONENT_TOLERANCE = 1e-9


def info_problems(env: gym.Env, info: dict[str, Any]) -> list[str]:
    """The contract fields' rules that ``info`` (from ``reset`` or ``step``) breaks, as sentences."""
    out = []
    if "exit_status" in info:
        status = info["exit_status"]
        if status not in EXIT_STATUSES:
            out.append(f"info['exit_status'] is {status!r}, not one of {list(EXIT_STATUSES)}.")
        elif "reward_valid" in info and info["reward_valid"] is not (status not in FAULT_STATUSES):
            out.append(
                f"info['reward_valid'] is {info['reward_valid']!r} with exit_status {status!r}: it must be False "
                "exactly for a fault (env_error, infra_error)."
            )
    if "reward_valid" in info and not isinstance(info["reward_valid"], bool):
        out.append(f"info['reward_valid'] is {type(info['reward_valid']).__name__}, expected bool.")
    if "reward_components" in info:
        parts = info["reward_components"]
        declared = tuple(env.metadata.get("reward_components", ()) or ())
        if not isinstance(parts, dict) or not all(isinstance(k, str) for k in parts):
            out.append("info['reward_components'] must be a dict of name -> float.")
        elif not all(
            isinstance(v, Real) and not isinstance(v, bool) and math.isfinite(float(v)) for v in parts.values()
        ):
            out.append("info['reward_components'] holds a value that is not a finite number.")
        elif declared and tuple(parts) != declared:
            out.append(
                f"info['reward_components'] names {list(parts)}, but metadata['reward_components'] declares "
                f"{list(declared)}: give every declared name, in order (0.0 where it does not apply)."
            )
    if "state_key" in info and (not isinstance(info["state_key"], str) or not info["state_key"]):
        out.append(f"info['state_key'] is {info['state_key']!r}, expected a non-empty str.")
    return out


def step_problems(env: gym.Env, reward: Any, info: dict[str, Any], *, env_error: bool = True) -> list[str]:
    """:func:`info_problems` plus what needs the step's reward: components summing to it, a fault paying 0, and
    (``env_error``) no ``env_error`` turn (:func:`env_error_problem`)."""
    out = info_problems(env, info)
    parts = info.get("reward_components")
    if isinstance(parts, dict) and isinstance(reward, Real) and all(isinstance(v, Real) for v in parts.values()):
        total = math.fsum(float(v) for v in parts.values())
        if abs(total - float(reward)) > COMPONENT_TOLERANCE:
            out.append(
                f"info['reward_components'] sum to {total!r}, the reward is {float(reward)!r}: the parts must sum "
                f"to the reward (within {COMPONENT_TOLERANCE})."
            )
    if info.get("exit_status") in FAULT_STATUSES and isinstance(reward, Real) and reward != 0:
        out.append(
            f"a turn with exit_status {info['exit_status']!r} paid {reward!r}: a fault pays 0.0 (and reward_valid=False)."
        )
    if env_error and info.get("exit_status") == "env_error":
        out.append(env_error_problem(env))
    return out


def env_error_problem(env: gym.Env) -> str:
    """What to say of a turn that ended with ``exit_status="env_error"``: which exception the env's own code raised."""
    exc = getattr(env.unwrapped, "last_error", None)
    raised = (
        f"step raised {type(exc).__name__} inside the turn ({str(exc)[:160]!r})"
        if exc is not None
        else "the env's own code raised inside the turn"
    )
    return (
        f"{raised}; TurnEnv ended the episode with exit_status 'env_error'. Any string must be a legal action: return an "
        "invalid turn (message, format_penalty, info['action_is_valid']=False) instead."
    )


def _trace(env: Any, responses: Sequence[Any]) -> list[tuple]:
    out = []
    for response in responses:
        obs, reward, terminated, _truncated, info = env.step(response)
        out.append((obs, float(reward), bool(terminated), info.get("state_key"), info.get("reward_components")))
        if terminated:
            break
    return out


def same_future(a: Any, b: Any, responses: Sequence[Any]) -> str | None:
    """Play ``responses`` on unwrapped envs ``a`` and ``b`` (both consumed); ``None`` when every observation,
    reward, ``terminated``, state key and component agree, else where they first part."""
    ta, tb = _trace(a, responses), _trace(b, responses)
    fields = ("observation", "reward", "terminated", "state_key", "reward_components")
    for k, (x, y) in enumerate(zip(ta, tb), start=1):
        if not data_equivalence(x, y):
            diff = [f for f, u, v in zip(fields, x, y) if not data_equivalence(u, v)]
            return f"{k} step(s) later, {', '.join(diff)} differ"
    if len(ta) != len(tb):
        return f"one ended after {len(ta)} step(s), the other after {len(tb)}"
    return None


def snapshot_problems(env: gym.Env, responses: Sequence[Any], seed: int) -> list[str]:
    """Snapshot the unwrapped ``env`` now (mid-episode), play ``responses``; a restore of the snapshot, and each of
    ``fork(2)``, must play them the same way, and three resets without a seed after the restore must draw the
    same episodes as after the snapshot (the RNG is part of the state)."""
    base = env.unwrapped
    out = []
    snap = base.snapshot()
    forks = base.fork(2)
    if len(forks) != 2:
        return [f"fork(2) returned {len(forks)} envs."]
    reference = _trace(base, responses)
    first_after = [(base.reset(), _trace(base, responses)) for _ in range(3)]
    for label, other in (("fork(2)[0]", forks[0]), ("fork(2)[1]", forks[1])):
        got = _trace(other, responses)
        if not data_equivalence(got, reference):
            out.append(f"{label} does not continue as the original (same responses, another transcript).")
    base.restore(snap)
    got = _trace(base, responses)
    if not data_equivalence(got, reference):
        out.append("after restore(snapshot), the env does not continue as it did from the snapshot.")
    again = [(base.reset(), _trace(base, responses)) for _ in range(3)]
    if not data_equivalence(again, first_after):
        out.append(
            "after restore(snapshot), a reset without a seed draws another episode: the snapshot must hold the RNG state."
        )
    return out
