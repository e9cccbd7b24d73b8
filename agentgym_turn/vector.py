"""Text-safe vector envs: several ids in one vector env, and GRPO groups that share their tasks.

Gymnasium's ``AsyncVectorEnv`` with its default shared memory decodes ``Text`` observations
from its buffer once, at construction, and returns those blank strings on every step; with
``shared_memory=False`` observations travel through pipes and are always the ones just
produced. :func:`make_vec` always uses the safe setting, and importing this module makes the
unsafe one fail at construction for :class:`~agentgym_turn.core.TurnText` observations (plain
``gymnasium.make_vec(id, n, vectorization_mode="async")``) with a message saying what to pass.

:func:`make_vec` also takes a list of ids or env factories (one sub-env each, mixed ids allowed),
and :func:`make_group_vec` builds a :class:`GroupedVectorEnv`: ``num_groups`` groups of
``group_size`` sub-envs, every member of a group playing the same task (same reset seed), a
group reset only when all its members are done, as GRPO needs (RAGEN's env-state manager,
verl-agent's ``group_n``).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from copy import deepcopy
from types import ModuleType
from typing import Any, Literal

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode
from gymnasium.vector.utils import batch_space, concatenate, create_shared_memory, iterate

from .core.spaces import TurnText

__all__ = ["make_vec", "make_group_vec", "GroupedVectorEnv", "SHARED_MEMORY_MESSAGE", "unbatch_info"]

#: One sub-env: a registered id, or a factory returning an env.
EnvSource = str | Callable[[], gym.Env]

SHARED_MEMORY_MESSAGE = (
    "AsyncVectorEnv's shared memory cannot carry text observations (TurnText): every step would "
    "return the blank strings read at construction. Pass vector_kwargs={'shared_memory': False} "
    "to gymnasium.make_vec (AsyncVectorEnv(..., shared_memory=False)), or build the vector env with "
    "agentgym_turn.make_vec(env_id, num_envs, mode='async')."
)


@create_shared_memory.register(TurnText)
def _refuse_text_shared_memory(space: TurnText, n: int = 1, ctx: ModuleType | None = None) -> Any:
    # A ValueError, not Gymnasium's CustomSpaceError, so AsyncVectorEnv does not replace the message.
    raise ValueError(SHARED_MEMORY_MESSAGE)


def unbatch_info(infos: dict[str, Any], i: int) -> dict[str, Any]:
    """Sub-env ``i``'s info from a Gymnasium vector env's batched info dict (nested dicts too).

    A key counts when its ``"_key"`` mask says sub-env ``i`` returned it; numpy scalars become
    Python numbers, as the env returned them.
    """
    out = {}
    for k, v in infos.items():
        if k.startswith("_") or not infos.get("_" + k, np.ones(i + 1, bool))[i]:
            continue
        value = unbatch_info(v, i) if isinstance(v, dict) else v[i]
        out[k] = value.item() if isinstance(value, np.generic) else value
    return out


def make_vec(
    env_id: str | Sequence[EnvSource],
    num_envs: int | None = None,
    /,
    mode: Literal["sync", "async"] = "sync",
    *,
    vector_kwargs: dict[str, Any] | None = None,
    **env_kwargs: Any,
) -> gym.vector.VectorEnv:
    """Build a Gymnasium vector env of text-turn envs that works with text.

    Args:
        env_id: A registered id, e.g. ``"TurnSokoban-v0"`` (``num_envs`` copies), or a list of
            ids and/or factories (zero-argument callables returning an env), one sub-env each:
            ``["TurnSokoban-v0", "TurnWebShop-v0"]`` mixes envs in one vector env (their
            observation and action spaces must be equal; every id's default ``TurnText`` is).
            Positional only, so an env keyword named ``env_id`` (the served-env client's) goes
            to the sub-envs.
        num_envs: Number of sub-environments (positional only). Required with one id; with a
            list it defaults to, and must equal, the list's length.
        mode: ``"sync"`` (one process) or ``"async"`` (one process per sub-env).
        vector_kwargs: Extra arguments for ``SyncVectorEnv``/``AsyncVectorEnv`` (e.g.
            ``{"autoreset_mode": gymnasium.vector.AutoresetMode.SAME_STEP}``); ``shared_memory``
            is forced to ``False`` in async mode.
        **env_kwargs: Passed to every sub-env made from an id (as in ``gymnasium.make``), e.g.
            ``max_episode_steps=8``; factories take none.

    Observations come back as a tuple of ``num_envs`` strings; actions go in as a sequence of
    strings. Sub-envs reset automatically (Gymnasium's next-step autoreset unless
    ``vector_kwargs`` says otherwise).
    """
    if mode not in ("sync", "async"):
        raise ValueError(f"make_vec: mode must be 'sync' or 'async', got {mode!r}.")
    vkw = dict(vector_kwargs or {})
    if mode == "async":
        if vkw.get("shared_memory"):
            raise ValueError(f"make_vec got vector_kwargs={{'shared_memory': True}}: {SHARED_MEMORY_MESSAGE}")
        vkw["shared_memory"] = False
    if isinstance(env_id, str):
        if num_envs is None or isinstance(num_envs, bool) or not isinstance(num_envs, int) or num_envs < 1:
            raise ValueError(
                f"make_vec: num_envs (the second argument) must be an integer >= 1 with one id, got {num_envs!r}."
            )
        return gym.make_vec(env_id, num_envs=num_envs, vectorization_mode=mode, vector_kwargs=vkw, **env_kwargs)
    env_fns = _env_fns(env_id, num_envs, env_kwargs, "make_vec")
    vector_class = gym.vector.SyncVectorEnv if mode == "sync" else gym.vector.AsyncVectorEnv
    return vector_class(env_fns, **vkw)


def _env_fns(sources: Any, count: int | None, env_kwargs: dict[str, Any], caller: str) -> list[Callable[[], gym.Env]]:
    """Zero-argument env factories for a list of ids/factories (ids made with ``env_kwargs``)."""
    if isinstance(sources, (str, bytes)) or not isinstance(sources, Sequence) or not sources:
        raise ValueError(
            f"{caller}: env_id must be a registered id or a non-empty list of ids/factories, got {sources!r}."
        )
    if count is not None and count != len(sources):
        raise ValueError(
            f"{caller}: num_envs={count} but the list of env ids/factories has {len(sources)} entries; pass one or make them agree."
        )
    fns: list[Callable[[], gym.Env]] = []
    for k, source in enumerate(sources):
        if isinstance(source, str):
            fns.append(functools.partial(gym.make, source, **env_kwargs))
        elif callable(source):
            fns.append(source)
        else:
            raise TypeError(
                f"{caller}: entry {k} of env_id is {source!r}; give a registered id (str) or a zero-argument env factory."
            )
    return fns


def make_group_vec(
    env_id: str | Sequence[EnvSource],
    num_groups: int | None = None,
    group_size: int = 2,
    /,
    *,
    autoreset_mode: AutoresetMode | str = AutoresetMode.NEXT_STEP,
    **env_kwargs: Any,
) -> GroupedVectorEnv:
    """``num_groups`` groups of ``group_size`` copies of a task, as one vector env (see :class:`GroupedVectorEnv`).

    Args:
        env_id: A registered id (every group plays it), or a list with one id or factory per
            group (mixed envs; ``num_groups`` defaults to its length). Positional only.
        num_groups: Number of groups (distinct tasks at a time). Positional only.
        group_size: Members per group (GRPO's ``G``, verl-agent's ``group_n``). Positional only.
        autoreset_mode: ``AutoresetMode.NEXT_STEP`` (default) or ``AutoresetMode.SAME_STEP``
            (or their values ``"NextStep"``/``"SameStep"``).
        **env_kwargs: Passed to every sub-env made from an id (as in ``gymnasium.make``).

    Sub-env ``i`` belongs to group ``i // group_size``.
    """
    if isinstance(group_size, bool) or not isinstance(group_size, int) or group_size < 1:
        raise ValueError(
            f"make_group_vec: group_size (the third argument) must be an integer >= 1, got {group_size!r}."
        )
    if isinstance(env_id, str):
        if num_groups is None or isinstance(num_groups, bool) or not isinstance(num_groups, int) or num_groups < 1:
            raise ValueError(
                f"make_group_vec: num_groups (the second argument) must be an integer >= 1 with one id, got {num_groups!r}."
            )
        sources: list[Any] = [env_id] * num_groups
    else:
        sources = list(_env_fns(env_id, num_groups, env_kwargs, "make_group_vec"))
    fns = _env_fns(sources, None, env_kwargs, "make_group_vec")
    return GroupedVectorEnv([fn for fn in fns for _ in range(group_size)], group_size, autoreset_mode=autoreset_mode)


def _check_grouping(num_envs: int, group_size: Any, autoreset_mode: Any) -> AutoresetMode:
    """The autoreset mode of a :class:`GroupedVectorEnv` of ``num_envs`` envs in groups of ``group_size``, or a
    ``ValueError`` that says what to pass."""
    if isinstance(group_size, bool) or not isinstance(group_size, int) or group_size < 1:
        raise ValueError(f"GroupedVectorEnv: group_size must be an integer >= 1, got {group_size!r}.")
    if not num_envs or num_envs % group_size:
        raise ValueError(
            f"GroupedVectorEnv: got {num_envs} env factories for group_size={group_size}; "
            "pass num_groups * group_size of them."
        )
    mode = AutoresetMode(autoreset_mode)
    if mode not in (AutoresetMode.NEXT_STEP, AutoresetMode.SAME_STEP):
        raise ValueError(f"GroupedVectorEnv: autoreset_mode must be NEXT_STEP or SAME_STEP, got {mode}.")
    return mode


def _check_same_spaces(envs: Sequence[gym.Env]) -> gym.Env:
    """The first of ``envs``, after checking that every env has its spaces (a batch needs one space per slot)."""
    first = envs[0]
    for i, env in enumerate(envs[1:], start=1):
        if env.observation_space != first.observation_space or env.action_space != first.action_space:
            raise ValueError(
                f"GroupedVectorEnv: sub-env {i} has spaces {env.observation_space}/{env.action_space}, "
                f"sub-env 0 has {first.observation_space}/{first.action_space}; give every env the same spaces."
            )
    return first


class GroupedVectorEnv(gym.vector.VectorEnv):
    """A vector env of groups of sub-envs that play the same task, for GRPO (one process).

    Sub-env ``i`` is member ``i % group_size`` of group ``g = i // group_size``. All members
    of a group reset together, with the same seed, so they start the same task; a group resets
    only when all its members are done (terminated or truncated), then starts its next task.

    Seeds: ``reset(seed=s)`` gives group ``g`` the seed ``s + g``; its ``e``-th later task gets
    ``s + g + e * num_groups``. So every task of the run has its own seed, a group's sequence of
    tasks depends on ``s`` only (never on how fast other groups finish), and RAGEN's layout of
    the first batch (``seed + g`` for group ``g``, the same seed for all members) is matched.
    ``reset(seed=None)`` draws ``s`` from fresh entropy. ``info["task_seed"]`` says the seed of the
    task each sub-env plays, ``info["group"]`` its group.

    While a member waits for the rest of its group, its action is ignored and it returns its
    last observation with reward 0, ``terminated = truncated = False`` and ``info["waiting"] =
    True`` (``info`` is otherwise its last one); a rollout engine skips waiting members, as
    RAGEN's manager stops generating for done envs. Autoreset, per group:

    * ``AutoresetMode.NEXT_STEP`` (Gymnasium's default): the step after the last member is done,
      every member of the group returns the first message of the new task (reward 0, flags
      False) and its action is ignored.
    * ``AutoresetMode.SAME_STEP``: the step at which the last member is done already returns
      the new task's first messages; the members that finished at that step carry their final
      observation and info in ``info["final_obs"]`` / ``info["final_info"]`` (Gymnasium's keys).

    Args:
        env_fns: One zero-argument env factory per sub-env (``num_groups * group_size``).
        group_size: Members per group.
        autoreset_mode: See above.
    """

    def __init__(
        self,
        env_fns: Sequence[Callable[[], gym.Env]],
        group_size: int,
        *,
        autoreset_mode: AutoresetMode | str = AutoresetMode.NEXT_STEP,
    ):
        mode = _check_grouping(len(env_fns), group_size, autoreset_mode)
        self.envs = [fn() for fn in env_fns]
        self.num_envs = len(self.envs)
        self.group_size = group_size
        self.num_groups = self.num_envs // group_size
        self.autoreset_mode = mode
        first = _check_same_spaces(self.envs)
        self.single_observation_space = first.observation_space
        self.single_action_space = first.action_space
        self.observation_space = batch_space(self.single_observation_space, self.num_envs)
        self.action_space = batch_space(self.single_action_space, self.num_envs)
        self.metadata = {**getattr(first, "metadata", {}), "autoreset_mode": mode}
        self.render_mode = getattr(first, "render_mode", None)
        self.spec = None
        self._clear_groups()

    def _clear_groups(self) -> None:
        """The groups' state before the first reset."""
        self._base_seed = 0
        self._episodes = np.zeros(self.num_groups, dtype=np.int64)  # tasks started per group
        self._task_seed = np.zeros(self.num_envs, dtype=np.int64)
        self._done = np.zeros(self.num_envs, dtype=np.bool_)
        self._reset_next = np.zeros(self.num_groups, dtype=np.bool_)
        self._obs: list[Any] = [None] * self.num_envs
        self._infos: list[dict[str, Any]] = [{} for _ in range(self.num_envs)]
        self._started = False

    # ------------------------------------------------------------------ groups
    def group_of(self, i: int) -> int:
        """The group of sub-env ``i``."""
        return i // self.group_size

    def members(self, group: int) -> range:
        """The sub-env indices of ``group``."""
        return range(group * self.group_size, (group + 1) * self.group_size)

    def _start_task(self, group: int, options: dict[str, Any] | None = None) -> None:
        seed = int(self._base_seed + group + self._episodes[group] * self.num_groups)
        self._episodes[group] += 1
        for i in self.members(group):
            self._obs[i], self._infos[i] = self.envs[i].reset(seed=seed, options=options)
            self._task_seed[i] = seed
            self._done[i] = False
        self._reset_next[group] = False

    def _stamp(self, info: dict[str, Any], i: int, waiting: bool) -> dict[str, Any]:
        return {**info, "group": self.group_of(i), "task_seed": int(self._task_seed[i]), "waiting": waiting}

    # ------------------------------------------------------------------ VectorEnv API
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
        """Start a task in every group (see the class docstring for the seeds).

        ``options`` go to every sub-env's ``reset`` now (e.g. ``{"level": ...}`` for a fixed
        level in every group), not to later group resets.
        """
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, (int, np.integer))):
            raise ValueError(
                f"GroupedVectorEnv.reset: seed must be an int or None (one base seed for all groups), got {seed!r}."
            )
        self._base_seed = int(seed) if seed is not None else int(np.random.SeedSequence().entropy % (2**31))
        self._episodes[:] = 0
        infos: dict[str, Any] = {}
        for g in range(self.num_groups):
            self._start_task(g, options)
        for i in range(self.num_envs):
            infos = self._add_info(infos, self._stamp(self._infos[i], i, False), i)
        self._started = True
        return self._batch(), infos

    def step(self, actions: Any) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        if not self._started:
            raise RuntimeError("GroupedVectorEnv: call reset() before step().")
        actions = list(iterate(self.action_space, actions)) if not isinstance(actions, (list, tuple)) else list(actions)
        if len(actions) != self.num_envs:
            raise ValueError(f"GroupedVectorEnv.step: got {len(actions)} actions for {self.num_envs} sub-envs.")
        rewards = np.zeros(self.num_envs, dtype=np.float64)
        terminations = np.zeros(self.num_envs, dtype=np.bool_)
        truncations = np.zeros(self.num_envs, dtype=np.bool_)
        waiting = np.zeros(self.num_envs, dtype=np.bool_)
        finals: dict[int, tuple[Any, dict[str, Any]]] = {}
        fresh = [bool(self._reset_next[g]) for g in range(self.num_groups)]
        for g in range(self.num_groups):
            if fresh[g]:  # NEXT_STEP: the group ended last step; its actions are ignored
                self._start_task(g)
        for i, action in enumerate(actions):
            if fresh[self.group_of(i)]:
                continue
            if self._done[i]:
                waiting[i] = True
                continue
            obs, reward, terminated, truncated, info = self.envs[i].step(action)
            self._obs[i], self._infos[i] = obs, info
            rewards[i], terminations[i], truncations[i] = reward, terminated, truncated
            if terminated or truncated:
                self._done[i] = True
                finals[i] = (obs, info)
        restarted: set[int] = set()
        for g in range(self.num_groups):
            if fresh[g] or not self._done[self.members(g)].all():
                continue
            if self.autoreset_mode is AutoresetMode.SAME_STEP:
                self._start_task(g)
                restarted.add(g)
                waiting[self.members(g)] = False
            else:
                self._reset_next[g] = True
        infos: dict[str, Any] = {}
        for i in range(self.num_envs):
            if i in finals and self.group_of(i) in restarted:
                final_obs, final_info = finals[i]
                infos = self._add_info(
                    infos, {"final_obs": final_obs, "final_info": self._stamp(final_info, i, False)}, i
                )
            infos = self._add_info(infos, self._stamp(self._infos[i], i, bool(waiting[i])), i)
        return self._batch(), rewards, terminations, truncations, infos

    def _batch(self) -> Any:
        out = concatenate(self.single_observation_space, self._obs, None)
        return deepcopy(out)

    def render(self) -> tuple[Any, ...] | None:
        return tuple(env.render() for env in self.envs)

    def call(self, name: str, *args: Any, **kwargs: Any) -> tuple[Any, ...]:
        """Call ``name(*args, **kwargs)`` on every sub-env (or read the attribute), e.g. ``call("expert_action")``."""
        results = []
        for env in self.envs:
            attr = env.get_wrapper_attr(name)
            results.append(attr(*args, **kwargs) if callable(attr) else attr)
        return tuple(results)

    def get_attr(self, name: str) -> tuple[Any, ...]:
        """The attribute ``name`` of every sub-env."""
        return tuple(env.get_wrapper_attr(name) for env in self.envs)

    def close_extras(self, **kwargs: Any) -> None:
        for env in self.envs:
            env.close()
