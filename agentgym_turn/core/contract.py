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
import logging
from typing import Any

import gymnasium as gym
from gymnasium.wrappers import PassiveEnvChecker

logger = logging.getLogger(__name__)

#: The ``info["exit_status"]`` vocabulary, in the order the docs list it.
EXIT_STATUSES: tuple[str, ...] = ("ok", "invalid_action", "truncated", "env_error", "infra_error")
#: The statuses whose turn ends the episode without the policy's doing (``reward_valid`` False).
FAULT_STATUSES: frozenset[str] = frozenset({"env_error", "infra_error"})


class InfraError(RuntimeError):
    """A fault outside the policy's control, raised inside an env's turn (a retriever that is down or
    timed out, a browser that crashed, a served env that is gone). :meth:`TurnEnv.step` ends the
    episode with ``exit_status="infra_error"`` and ``reward_valid=False`` instead of raising."""


#: :func:`state_digest`'s JSON, made once: ``json.dumps`` with any option builds a new encoder per call, a fifth of a
#: Sokoban key's cost.
_KEY_JSON = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=repr)


def state_digest(fields: Any) -> str:
    """A 24-hex-digit digest of ``fields`` (JSON-able: numbers, strings, lists, dicts; tuples count as
    lists): the same across processes and machines (no salted ``hash()``)."""
    return digest_text(_KEY_JSON.encode(fields))


def key_json(fields: Any) -> str:
    """The JSON :func:`state_digest` hashes (for an env that writes part of it once and the rest per turn)."""
    return _KEY_JSON.encode(fields)


def digest_text(text: str) -> str:
    """:func:`state_digest` of fields whose :func:`key_json` is ``text``."""
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=12).hexdigest()


def components_sum(components: dict[str, float]) -> float:
    """The sum of a turn's reward components (what the checker compares with the reward)."""
    return float(sum(components.values()))


class TurnStatus(gym.Wrapper):
    """Marks a turn that the turn limit cut as ``info["exit_status"] = "truncated"``.

    ``gymnasium.make`` applies it outside ``TimeLimit`` for every id of this package (the env itself
    does not know the registered limit). A fault or an invalid action keeps its own status; so does a
    turn that also terminated the episode.

    A ``reset`` that raises (an unknown option, a served env at capacity) leaves the env ready for the
    next ``reset``: Gymnasium's ``PassiveEnvChecker`` marks its reset check done before the call, and
    without the re-arming below every later ``step`` fails unpacking the missing first observation.
    """

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
        try:
            return self.env.reset(seed=seed, options=options)
        except BaseException:
            _rearm_reset_check(self.env)
            raise

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        obs, reward, terminated, truncated, info = self.env.step(action)
        if truncated and not terminated and info.get("exit_status") == "ok":
            info["exit_status"] = "truncated"
        return obs, reward, terminated, truncated, info


def _rearm_reset_check(env: Any) -> None:
    """Undo a ``PassiveEnvChecker``'s "reset checked" mark when that first checked reset raised (no data recorded)."""
    while isinstance(env, gym.Wrapper):
        if isinstance(env, PassiveEnvChecker) and env.checked_reset and getattr(env, "_previous_data", ()) is None:
            env.checked_reset = False
        env = env.env


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
        raise TypeError(
            f"{type(inner).__name__} has no fork(n): only TurnEnv subclasses (and envs that define it) can be forked."
        )
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


_LOGGED_FAULTS: set[tuple[str, str, str]] = set()  # (env, call, exception type) logged with a traceback already


class FaultGuard(gym.Wrapper):
    """Turns an exception out of the env's ``reset`` or ``step`` (an env that breaks the turn contract, or a
    service it needs failing) into a faulted turn, so one broken episode does not stop a whole rollout.

    A raising ``step`` returns a message, reward 0, ``truncated`` and ``info`` with ``reward_valid=False`` and
    ``exit_status`` ``"infra_error"`` (an :class:`~agentgym_turn.core.InfraError`) or ``"env_error"`` (any other
    exception), as :class:`~agentgym_turn.core.TurnEnv` does for a turn that raises inside it. A raising ``reset``
    returns a message saying so, and the episode's first ``step`` returns that fault without calling the env. Each
    (env, call, exception type) is logged once with its traceback, later ones at debug level.
    """

    def __init__(self, env: gym.Env):
        super().__init__(env)
        self._reset_fault: BaseException | None = None

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
        self._reset_fault = None
        try:
            return self.env.reset(seed=seed, options=options)
        except Exception as exc:  # the episode is lost, not the rollout
            self._reset_fault = exc
            status = self._log(exc, "reset")
            return _fault_message("could not start the episode", exc), {"exit_status": status, "reward_valid": False}

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        if self._reset_fault is not None:
            exc, self._reset_fault = self._reset_fault, None
            return self._fault(exc, "reset", log=False)
        try:
            return self.env.step(action)
        except Exception as exc:
            return self._fault(exc, "step")

    def _fault(self, exc: BaseException, call: str, log: bool = True) -> tuple[str, float, bool, bool, dict[str, Any]]:
        status = self._log(exc, call) if log else _fault_status(exc)
        return fault_step(
            status, _fault_message("failed during this turn" if call == "step" else "could not start the episode", exc)
        )

    def _log(self, exc: BaseException, call: str) -> str:
        status = _fault_status(exc)
        key = (type(self.env.unwrapped).__name__, call, type(exc).__name__)
        first = key not in _LOGGED_FAULTS
        _LOGGED_FAULTS.add(key)
        logger.log(
            logging.WARNING if first else logging.DEBUG,
            "%s.%s raised %s: %s; the episode ends as faulted (exit_status=%r) and is left out of training",
            key[0],
            call,
            key[2],
            exc,
            status,
            exc_info=exc if first else None,
        )
        return status


def fault_step(status: str, message: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
    """The ``step`` result of a turn a fault ended outside an env (a wrapper, a worker pool): ``message``, reward 0,
    ``truncated``, and an info with ``exit_status=status`` and ``reward_valid=False``."""
    info = {"success": False, "score": 0.0, "exit_status": status, "reward_valid": False, "reward_components": {}}
    return message, 0.0, False, True, info


def _fault_status(exc: BaseException) -> str:
    return "infra_error" if isinstance(exc, InfraError) else "env_error"


def _fault_message(what: str, exc: BaseException) -> str:
    return f"The environment {what} ({type(exc).__name__}: {str(exc)[:300]}). This episode is over."
