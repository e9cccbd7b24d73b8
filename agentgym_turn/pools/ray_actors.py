"""Envs held by Ray actors across a cluster, stepped as one batch (the optional ``ray`` extra).

:class:`RayEnvPool` makes ``num_envs`` envs with ``gymnasium.make(env_id, **env_kwargs)`` inside
``ceil(num_envs / envs_per_actor)`` actors, placed with Ray's ``SPREAD`` strategy (over every node of the
cluster ``ray.init`` connected to), and steps the envs whose actions it is given, one remote call per
actor, all actors at once. It is what verl, SkyRL and RAGEN scale env workers with; the trainer uses it as
``--env-mode ray``.

GRPO groups need nothing from the pool: members of a group are reset with the same seed, and an env is a
function of its seed and actions, so they get the same task on whichever node their actor runs.

Faults: an env that raises inside a turn is a faulted turn already (:class:`~agentgym_turn.core.contract.FaultGuard`
wraps each env). An actor that dies (its node lost, the process killed) or does not answer within
``step_timeout_s`` ends every episode it held with ``exit_status="infra_error"`` and ``reward_valid=False``
(:func:`infra_turn`), never an exception and never a reward of 0 counted as the policy's; the actor is replaced
by a new one on the next ``reset`` of its envs. ``replaced`` counts the replacements.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, Sequence, TypeVar

from ..core.contract import FaultGuard, InfraError, fault_step
from ..extras import require
from .base import EnvPool, StepResult

T = TypeVar("T")


def infra_turn(cause: str) -> StepResult:
    """The turn an episode ends with when the actor holding its env is gone."""
    return fault_step(
        "infra_error", f"The env worker holding this episode is gone ({cause[:300]}). This episode is over."
    )


class _EnvWorker:
    """What one actor runs: a few envs, each inside a FaultGuard."""

    def __init__(self, env_id: str, count: int, env_kwargs: dict[str, Any], imports: Sequence[str]):
        import importlib

        import gymnasium as gym

        import agentgym_turn  # noqa: F401  (registers the ids in the worker)

        for name in imports:  # modules that register a user's ids
            importlib.import_module(name)
        self.envs = [FaultGuard(gym.make(env_id, **env_kwargs)) for _ in range(count)]

    def node(self) -> str:
        import ray

        return ray.get_runtime_context().get_node_id()

    def reset(self, seeds: list[tuple[int, int]]) -> list[tuple[int, str, dict[str, Any]]]:
        return [(k, *self.envs[k].reset(seed=int(s))) for k, s in seeds]

    def step(self, actions: list[tuple[int, str]]) -> list[tuple[int, StepResult]]:
        out = []
        for k, a in actions:
            obs, r, term, trunc, info = self.envs[k].step(a)
            out.append((k, (obs, float(r), bool(term), bool(trunc), info)))
        return out

    def call(self, k: int, fn: Any, args: tuple[Any, ...]) -> Any:
        return fn(self.envs[k], *args)

    def close(self) -> None:
        for e in self.envs:
            e.close()


class RayEnvPool(EnvPool):
    """``num_envs`` envs of ``env_id`` in Ray actors of ``envs_per_actor`` envs each (see the module docstring).

    Args:
        env_id, env_kwargs: What each env is (``gymnasium.make(env_id, **env_kwargs)``).
        num_envs: How many envs.
        envs_per_actor: Envs per actor (one process each); fewer actors, fewer processes.
        step_timeout_s: A reset or step batch an actor has not answered by then ends its episodes as
            ``infra_error`` and replaces it (``None``: wait as long as it takes).
        imports: Modules each actor imports first (ones that register a user's env ids).
        actor_options: More ``ray.remote`` options for the actors (``num_cpus`` defaults to 0.5: envs wait on
            the policy most of the time).
    """

    def __init__(
        self,
        env_id: str,
        num_envs: int,
        *,
        env_kwargs: dict[str, Any] | None = None,
        envs_per_actor: int = 8,
        step_timeout_s: float | None = None,
        imports: Sequence[str] = (),
        actor_options: dict[str, Any] | None = None,
    ):
        require("ray", "RayEnvPool")
        import ray

        if not isinstance(num_envs, int) or num_envs < 1 or not isinstance(envs_per_actor, int) or envs_per_actor < 1:
            raise ValueError(
                f"RayEnvPool: num_envs and envs_per_actor must be integers >= 1, got {num_envs!r}, {envs_per_actor!r}."
            )
        if not ray.is_initialized():
            raise RuntimeError("RayEnvPool needs a Ray cluster: call ray.init() (or ray.init(address=...)) first.")
        self.env_id, self.num_envs, self.env_kwargs = env_id, num_envs, dict(env_kwargs or {})
        self.step_timeout_s, self.imports = step_timeout_s, tuple(imports)
        self._options = {"num_cpus": 0.5, "scheduling_strategy": "SPREAD", **(actor_options or {})}
        self._remote = ray.remote(_EnvWorker).options(**self._options)
        n_actors = math.ceil(num_envs / envs_per_actor)
        #: ``slots[i] = (actor index, index inside the actor)`` of env ``i``.
        self.slots = [(i // envs_per_actor, i % envs_per_actor) for i in range(num_envs)]
        self._where = {slot: i for i, slot in enumerate(self.slots)}
        self._sizes = [sum(1 for a, _ in self.slots if a == k) for k in range(n_actors)]
        self.actors = [self._spawn(k) for k in range(n_actors)]
        self._dead: set[int] = set()
        #: How many actors were replaced after they died or timed out.
        self.replaced = 0

    def _spawn(self, k: int) -> Any:
        return self._remote.remote(self.env_id, self._sizes[k], self.env_kwargs, self.imports)

    def nodes(self) -> list[str]:
        """The node id each actor runs on (where the envs are)."""
        import ray

        return ray.get([a.node.remote() for a in self.actors])

    def _gather(self, calls: dict[int, Any]) -> dict[int, Any]:
        """``{actor: result}`` of the calls that answered; an actor that died or timed out is marked dead."""
        import ray

        out: dict[int, Any] = {}
        refs = {ref: k for k, ref in calls.items()}
        ready, pending = ray.wait(list(refs), num_returns=len(refs), timeout=self.step_timeout_s)
        for ref in ready:
            k = refs[ref]
            try:
                out[k] = ray.get(ref)
            except (
                ray.exceptions.RayActorError,
                ray.exceptions.WorkerCrashedError,
                ray.exceptions.ObjectLostError,
            ) as exc:
                self._dead.add(k)
                out[k] = exc
        for ref in pending:  # no answer in time: the actor is given up (killed, replaced at the next reset)
            k = refs[ref]
            self._dead.add(k)
            ray.kill(self.actors[k], no_restart=True)
            out[k] = TimeoutError(f"no answer within step_timeout_s={self.step_timeout_s} s")
        return out

    def _revive(self) -> None:
        for k in sorted(self._dead):
            self.actors[k] = self._spawn(k)
            self.replaced += 1
        self._dead.clear()

    def reset(self, seeds: Sequence[int]) -> list[tuple[str, dict[str, Any]]]:
        """Reset env ``i`` with ``seeds[i]``; ``(observation, info)`` per env (a dead actor is replaced first)."""
        if len(seeds) != self.num_envs:
            raise ValueError(f"RayEnvPool.reset: {len(seeds)} seeds for {self.num_envs} envs.")
        self._revive()
        by_actor: dict[int, list[tuple[int, int]]] = {}
        for i, s in enumerate(seeds):
            a, j = self.slots[i]
            by_actor.setdefault(a, []).append((j, int(s)))
        answers = self._gather({a: self.actors[a].reset.remote(v) for a, v in by_actor.items()})
        out: list[tuple[str, dict[str, Any]] | None] = [None] * self.num_envs
        for a, answer in answers.items():
            for j, _ in by_actor[a]:
                i = self._index(a, j)
                if isinstance(answer, Exception):  # the episode cannot start: its first step says why
                    obs, _, _, _, info = infra_turn(f"{type(answer).__name__}: {answer}")
                    out[i] = (obs, info)
            if not isinstance(answer, Exception):
                for j, obs, info in answer:
                    out[self._index(a, j)] = (obs, info)
        return out  # type: ignore[return-value]

    def step(self, actions: dict[int, str]) -> dict[int, StepResult]:
        """Step env ``i`` with ``actions[i]`` for each given ``i``; envs of a dead actor return :func:`infra_turn`."""
        by_actor: dict[int, list[tuple[int, str]]] = {}
        for i, text in actions.items():
            a, j = self.slots[i]
            by_actor.setdefault(a, []).append((j, text))
        out: dict[int, StepResult] = {}
        live = {a: v for a, v in by_actor.items() if a not in self._dead}
        for a in set(by_actor) - set(live):
            for j, _ in by_actor[a]:
                out[self._index(a, j)] = infra_turn("its actor died earlier in this episode")
        for a, answer in self._gather({a: self.actors[a].step.remote(v) for a, v in live.items()}).items():
            if isinstance(answer, Exception):
                for j, _ in by_actor[a]:
                    out[self._index(a, j)] = infra_turn(f"{type(answer).__name__}: {answer}")
            else:
                for j, result in answer:
                    out[self._index(a, j)] = result
        return out

    def call(self, index: int, fn: Callable[..., T], *args: Any) -> T:
        """``fn(env, *args)`` on env ``index`` in its actor (``fn`` and ``args`` go there pickled); an actor that is
        gone, or does not answer within ``step_timeout_s``, raises :class:`~agentgym_turn.core.contract.InfraError`."""
        import ray

        a, j = self.slots[index]
        if a in self._dead:
            raise InfraError(f"env {index}'s Ray actor died earlier in this episode")
        try:
            return ray.get(self.actors[a].call.remote(j, fn, args), timeout=self.step_timeout_s)
        except (ray.exceptions.RayActorError, ray.exceptions.GetTimeoutError) as exc:
            self._dead.add(a)
            raise InfraError(f"env {index}'s Ray actor: {type(exc).__name__}") from None

    def _index(self, a: int, j: int) -> int:
        return self._where[(a, j)]

    def close(self) -> None:
        import ray

        for k, actor in enumerate(self.actors):
            if k not in self._dead:
                try:
                    ray.get(actor.close.remote(), timeout=10)
                except Exception:  # closing is best effort: the actor is killed next
                    pass
            ray.kill(actor, no_restart=True)
        self.actors = []
