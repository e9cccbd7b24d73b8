"""Our envs as a verl-agent environment package (``envs`` of an ``EnvironmentManagerBase``).

verl-agent's env packages (``build_sokoban_envs(seed, env_num, group_n, mode, is_train,
env_kwargs)``) return one object holding ``env_num * group_n`` envs with ``reset() -> (obs_list,
info_list)`` and ``step(actions) -> (obs_list, reward_list, done_list, info_list)``; every
``reset()`` draws ``env_num`` fresh seeds and repeats each ``group_n`` times, so the members of a
group play the same task, and a rollout runs until every env is done (done envs keep being
stepped and are masked out by the trainer's ``active_masks``). :class:`VerlAgentEnvs` is that
object for any registered id, with text actions (a turn's whole response) and verl-agent's
``info["won"]`` (our ``success``); :func:`text_projection` is the matching ``projection_f``.

Every info (reset, step) also carries the turn contract's ``exit_status``, ``reward_valid`` and
``reward_components`` (for an env that reports none: ``exit_status`` from the flags, ``reward_valid``
True, the whole reward as ``{"task": reward}``). A turn with ``reward_valid=False`` (``env_error``
or ``infra_error``: a fault, not the policy, ended the episode) marks the env in
:attr:`VerlAgentEnvs.faulted` until the next reset; an env manager should leave such a trajectory out
of training (of its group's statistics too) instead of scoring its reward. A done env repeats its
last info with every reward component 0 (its reward is 0).

**Exact tokens.** ``build_envs(..., tokenizer=tok)`` also keeps, per env, a
:class:`~agentgym_turn.chat.ChatView` with that tokenizer: ``envs.step_ids(ids_per_env)`` plays the ids the
policy sampled (decoded for the env, kept as they are), :meth:`VerlAgentEnvs.tokens` gives env ``i``'s model
input now (sample from its ``ids``), and :meth:`VerlAgentEnvs.trajectory` gives the episode as verl's agent loop
returns it: ``prompt_ids``, ``response_ids`` (every response as sampled and every observation as appended) and
``response_mask`` (1 on generated tokens, 0 on observation and template tokens). ``reset`` and ``step`` still
return the env's own text observations; ``step`` with text keeps working (the text is encoded canonically).

Differences from verl-agent's own packages, on purpose: seeds come from a private
``numpy.random.Generator`` (never the global one), training seeds lie in ``[0, 2**16 - 1)`` and
validation seeds in ``[2**16, 2**32 - 1)`` as in verl-agent; a step on a done env changes nothing
and returns its last observation, reward 0 and ``done=True``; envs run in this process (use
``agentgym_turn/Remote-v0`` to put them elsewhere).
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

from ..core.args import is_int
from ..core.contract import FAULT_STATUSES, FaultGuard
from ..tokens import EpisodeTokens, as_token_ids

__all__ = ["VerlAgentEnvs", "build_envs", "text_projection"]


def text_projection(text_actions: list[str]) -> tuple[list[str], list[int]]:
    """verl-agent's ``projection_f`` for text envs: the actions are the responses, all valid here.

    Whether a response was a valid action is the env's to say: ``info["action_is_valid"]``.
    """
    return list(text_actions), [1] * len(text_actions)


def _with_contract(
    info: dict[str, Any], reward: float, terminated: bool = False, truncated: bool = False
) -> dict[str, Any]:
    """``info`` plus verl-agent's ``won`` and the turn contract's fields (filled in for an env that reports none)."""
    status = str(info.get("exit_status") or ("truncated" if truncated and not terminated else "ok"))
    components = info.get("reward_components")
    return {
        **info,
        "won": bool(info.get("success", False)),
        "exit_status": status,
        "reward_valid": bool(info.get("reward_valid", status not in FAULT_STATUSES)),
        "reward_components": {str(k): float(v) for k, v in components.items()}
        if components is not None
        else {"task": float(reward)},
    }


class VerlAgentEnvs:
    """``env_num`` groups of ``group_n`` copies of ``env_id`` with verl-agent's list API.

    Args:
        env_id: A registered id.
        seed: Seeds the private generator that draws each reset's task seeds.
        env_num: Number of distinct tasks per reset (verl-agent's ``env_num``).
        group_n: Copies of each task (verl-agent's ``group_n``; 1 for validation).
        is_train: Draw training seeds (``[0, 2**16 - 1)``) or validation seeds (``[2**16, 2**32 - 1)``).
        env_kwargs: Passed to ``gymnasium.make``.
        tokenizer: A Hugging Face tokenizer with a chat template: keep each env's exact tokens (see the module
            docstring; :attr:`views`).
        view_kwargs: Passed to each :class:`~agentgym_turn.chat.ChatView` (``history_window``, ``system_prompt``,
            ``split_system_prompt``).

    Attributes:
        faulted: Per env, whether a fault (``info["reward_valid"]`` False) ended its current episode.
        views: With a tokenizer, each env's :class:`~agentgym_turn.chat.ChatView`; otherwise ``None``.
    """

    def __init__(
        self,
        env_id: str,
        seed: int = 0,
        env_num: int = 1,
        group_n: int = 1,
        is_train: bool = True,
        env_kwargs: dict[str, Any] | None = None,
        tokenizer: Any = None,
        view_kwargs: dict[str, Any] | None = None,
    ):
        for name, value in (("env_num", env_num), ("group_n", group_n)):
            if not is_int(value, 1):
                raise ValueError(f"VerlAgentEnvs: {name} must be an integer >= 1, got {value!r}.")
        import agentgym_turn  # noqa: F401  (registers the ids in a Ray worker too)

        self.env_id, self.env_num, self.group_n, self.is_train = env_id, env_num, group_n, is_train
        self.num_processes = env_num * group_n
        # an env that raises ends its episode as faulted (reward_valid False) instead of stopping the batch
        self.envs = [FaultGuard(gym.make(env_id, **(env_kwargs or {}))) for _ in range(self.num_processes)]
        self._rng = np.random.default_rng(seed)
        self._done = [True] * self.num_processes
        self._last: list[tuple[str, dict[str, Any]]] = [("", {})] * self.num_processes
        self.seeds: list[int] = []
        self.faulted = [False] * self.num_processes
        self.views: list[Any] | None = None
        if tokenizer is not None:
            from ..chat import ChatView

            self.envs = [_LastObservation(env) for env in self.envs]
            self.views = [ChatView(env, tokenizer=tokenizer, **(view_kwargs or {})) for env in self.envs]
        elif view_kwargs:
            raise ValueError("VerlAgentEnvs: view_kwargs needs a tokenizer.")

    def reset(self) -> tuple[list[str], list[dict[str, Any]]]:
        """Reset every env: ``env_num`` fresh task seeds, each repeated ``group_n`` times."""
        low, high = (0, 2**16 - 1) if self.is_train else (2**16, 2**32 - 1)
        drawn = self._rng.integers(low, high, size=self.env_num)
        self.seeds = [int(s) for s in np.repeat(drawn, self.group_n)]
        observations, infos = [], []
        for i, (env, seed) in enumerate(zip(self.envs, self.seeds)):
            if self.views is not None:  # the view resets the env and opens the episode's tokens
                self.views[i].reset(seed=seed)
                obs, info = env.last
            else:
                obs, info = env.reset(seed=seed)
            info = _with_contract(info, 0.0)
            self._last[i], self._done[i], self.faulted[i] = (obs, info), False, False
            observations.append(obs)
            infos.append(info)
        return observations, infos

    def step(self, actions: list[str]) -> tuple[list[str], list[float], list[bool], list[dict[str, Any]]]:
        """Step every env that is not done with its text action (done envs return their last state)."""
        if len(actions) != self.num_processes:
            raise ValueError(
                f"VerlAgentEnvs.step: got {len(actions)} actions for {self.num_processes} envs (env_num * group_n)."
            )
        observations, rewards, dones, infos = [], [], [], []
        for i, (env, action) in enumerate(zip(self.envs, actions)):
            if self._done[i]:
                obs, info = self._last[i]
                reward = 0.0
                info = {**info, "reward_components": dict.fromkeys(info["reward_components"], 0.0)}
            else:
                if self.views is not None:  # the view steps the env and appends the response's ids
                    _, reward, terminated, truncated, _ = self.views[i].step(action)
                    obs, info = env.last
                else:
                    obs, reward, terminated, truncated, info = env.step(action)
                info = _with_contract(info, float(reward), terminated, truncated)
                self.faulted[i] = self.faulted[i] or not info["reward_valid"]
                self._done[i] = (
                    bool(terminated or truncated) or self.faulted[i]
                )  # nothing after a fault is the policy's
                self._last[i] = (obs, info)
            observations.append(obs)
            rewards.append(float(reward))
            dones.append(self._done[i])
            infos.append(info)
        return observations, rewards, dones, infos

    def step_ids(self, ids: list[list[int]]) -> tuple[list[str], list[float], list[bool], list[dict[str, Any]]]:
        """:meth:`step` with the token ids each env's policy sampled (a list of ints per env, ending with the
        end-of-turn token when it was emitted; anything for a done env): each is decoded for the env and kept
        as is in the env's tokens. Needs a tokenizer."""
        self._view(0)
        if len(ids) != self.num_processes:
            raise ValueError(
                f"VerlAgentEnvs.step_ids: got {len(ids)} id lists for {self.num_processes} envs (env_num * group_n)."
            )
        actions = []
        for i, row in enumerate(ids):
            if self._done[i]:
                actions.append([])  # a done env is not stepped
                continue
            values = as_token_ids(row)
            if values is None:
                raise ValueError(f"VerlAgentEnvs.step_ids: env {i}'s response must be a list of token ids.")
            actions.append(values)
        return self.step(actions)  # type: ignore[arg-type]  (a view's step takes ids too)

    def tokens(self, i: int) -> EpisodeTokens:
        """Env ``i``'s model input now (:meth:`agentgym_turn.chat.ChatView.tokens`): exact ids ending with the
        generation prompt, the mask (1 on sampled ids), roles and turn ids. Sample its next response from ``ids``."""
        return self._view(i).tokens()

    def samples(self, i: int) -> list[EpisodeTokens]:
        """Env ``i``'s sequences to train on (:meth:`agentgym_turn.chat.ChatView.samples`)."""
        return self._view(i).samples()

    def trajectory(self, i: int) -> dict[str, list[int]]:
        """Env ``i``'s episode as verl's agent loop returns one: ``prompt_ids`` (the first turn's input),
        ``response_ids`` (everything after it up to the end of the last response: the responses as sampled, the
        observations as appended) and ``response_mask`` (1 on generated tokens, 0 on observation and template
        tokens), so ``prompt_ids + response_ids`` is the episode's exact sequence. Needs ``history_window=None``
        and at least one response (see :func:`agentgym_turn.integrations.trl.completion_of`)."""
        from .trl import completion_of

        prompt_ids, response_ids, mask = completion_of(self._view(i))
        return {"prompt_ids": prompt_ids, "response_ids": response_ids, "response_mask": mask}

    def _view(self, i: int) -> Any:
        if self.views is None:
            raise ValueError("VerlAgentEnvs: exact tokens need build_envs(..., tokenizer=tokenizer).")
        return self.views[i]

    def close(self) -> None:
        for env in self.views if self.views is not None else self.envs:
            env.close()


class _LastObservation(gym.Wrapper):
    """Keeps the last observation and info of the env it wraps: the text API reports them when a
    :class:`~agentgym_turn.chat.ChatView` over it is what resets and steps."""

    last: tuple[Any, dict[str, Any]] = ("", {})

    def reset(self, **kwargs: Any) -> tuple[Any, dict[str, Any]]:
        self.last = self.env.reset(**kwargs)
        return self.last

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        obs, reward, terminated, truncated, info = self.env.step(action)
        self.last = (obs, info)
        return obs, reward, terminated, truncated, info


def build_envs(
    env_id: str,
    seed: int = 0,
    env_num: int = 1,
    group_n: int = 1,
    is_train: bool = True,
    env_kwargs: dict[str, Any] | None = None,
    tokenizer: Any = None,
    view_kwargs: dict[str, Any] | None = None,
) -> VerlAgentEnvs:
    """verl-agent's ``build_*_envs`` signature (less ``mode``) for any registered id; with ``tokenizer``, the envs
    also keep exact tokens (:meth:`VerlAgentEnvs.step_ids`, :meth:`~VerlAgentEnvs.trajectory`)."""
    return VerlAgentEnvs(env_id, seed, env_num, group_n, is_train, env_kwargs, tokenizer, view_kwargs)
