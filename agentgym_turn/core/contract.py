"""What RL infrastructure reads from every turn: the failure vocabulary, state keys, reward components, forks.

* ``info["exit_status"]``: one of :data:`EXIT_STATUSES`. ``ok`` (a valid turn, the episode going on or
  ended by the task), ``invalid_action`` (the response did not parse or was not allowed), ``truncated``
  (the registered turn limit ended the episode: set by :class:`TurnStatus`, which ``gymnasium.make``
  puts outside ``TimeLimit``), ``env_error`` (the env's own code failed: a bug), ``infra_error``
  (a fault outside the policy's control: a retriever down or timing out, a browser that crashed, a
  served env gone).
* ``info["reward_valid"]``: ``False`` exactly for ``env_error`` and ``infra_error``: the episode ended
  without the policy's doing, so its reward (0.0) is not a score of the policy. Trainers drop it.
* ``info["state_key"]``: :func:`state_digest` of what decides the episode's future (equal exactly when
  two states give the same observations, rewards and flags for every action sequence).
* ``info["reward_components"]``: the env's declared named parts (``metadata["reward_components"]``),
  summing to the turn's reward.
"""

from __future__ import annotations

import copy
import hashlib
import json
from typing import Any

import gymnasium as gym

__all__ = ["EXIT_STATUSES", "FAULT_STATUSES", "InfraError", "TurnStatus", "fork_env", "fork_by_replay", "state_digest", "components_sum"]

#: The ``info["exit_status"]`` vocabulary, in the order the docs list it.
EXIT_STATUSES: tuple[str, ...] = ("ok", "invalid_action", "truncated", "env_error", "infra_error")
#: The statuses whose turn ends the episode without the policy's doing (``reward_valid`` False).
FAULT_STATUSES: frozenset[str] = frozenset({"env_error", "infra_error"})


class InfraError(RuntimeError):
    """A fault outside the policy's control, raised inside an env's turn (a retriever that is down or
    timed out, a browser that crashed, a served env that is gone). :meth:`TurnEnv.step` ends the
    episode with ``exit_status="infra_error"`` and ``reward_valid=False`` instead of raising."""


def state_digest(fields: Any) -> str:
    """A 24-hex-digit digest of ``fields`` (JSON-able: numbers, strings, lists, dicts; tuples count as
    lists): the same across processes and machines (no salted ``hash()``)."""
    text = json.dumps(fields, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=repr)
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=12).hexdigest()


def components_sum(components: dict[str, float]) -> float:
    """The sum of a turn's reward components (what the checker compares with the reward)."""
    return float(sum(components.values()))


class TurnStatus(gym.Wrapper):
    """Marks a turn that the turn limit cut as ``info["exit_status"] = "truncated"``.

    ``gymnasium.make`` applies it outside ``TimeLimit`` for every id of this package (the env itself
    does not know the registered limit). A fault or an invalid action keeps its own status; so does a
    turn that also terminated the episode.
    """

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        obs, reward, terminated, truncated, info = self.env.step(action)
        if truncated and not terminated and info.get("exit_status") == "ok":
            info["exit_status"] = "truncated"
        return obs, reward, terminated, truncated, info


def fork_env(env: gym.Env, n: int) -> list[gym.Env]:
    """``n`` independent copies of ``env`` in its current state, wrappers included (a ``TimeLimit``
    keeps its elapsed turns): the unwrapped env's :meth:`~agentgym_turn.core.turn_env.TurnEnv.fork`
    inside a shallow copy of each wrapper layer."""
    layers = []
    inner = env
    while isinstance(inner, gym.Wrapper):
        layers.append(inner)
        inner = inner.env
    if not hasattr(inner, "fork"):
        raise TypeError(f"{type(inner).__name__} has no fork(n): only TurnEnv subclasses (and envs that define it) can be forked.")
    out = []
    for base in inner.fork(n):
        current = base
        for layer in reversed(layers):
            twin = copy.copy(layer)
            twin.env = current
            current = twin
        out.append(current)
    return out


def fork_by_replay(env: Any, n: int) -> list[Any]:
    """``fork(n)`` for an env that snapshots by replay (a live browser, a served session): ``n`` new envs made with
    the arguments it recorded (``env._init_args``), each restored to ``env.snapshot()``; all closed if one fails."""
    if not isinstance(n, int) or isinstance(n, bool) or n < 0:
        raise ValueError(f"fork(n) takes a count >= 0, got {n!r}.")
    saved = env.snapshot()
    out: list[Any] = []
    try:
        for _ in range(n):
            twin = type(env)(**env._init_args)
            out.append(twin)
            twin.restore(saved)
    except BaseException:
        for twin in out:
            twin.close()
        raise
    return out
