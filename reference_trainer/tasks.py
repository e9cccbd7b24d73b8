"""Which env resets a run plays, as records anyone can replay, and whether test tasks leak into training.

A **group** is ``{"env_id": ..., "env_kwargs": {...}, "resets": [{"seed": ..., "options": {...}}, ...]}``:
``gymnasium.make(env_id, **env_kwargs)`` then ``reset(seed=..., options=...)`` for each entry plays
exactly the task the run played. A run's training inputs are the groups of its tokenizer corpus
and pretraining (when it builds the tiny model), its SFT demonstrations and its RL rollouts; its
test tasks are the group of its held-out evaluation. :func:`overlap` replays groups and compares
the envs' :meth:`~agentgym_turn.core.TurnEnv.task_key` (the task's content, not its seed).

The seed lists here are the ones the trainer and :mod:`reference_trainer.tiny` draw (they call
these functions), so a record is what ran.
"""

from __future__ import annotations

import json
from typing import Any, Iterable

import numpy as np

from .tiny import PretrainSpec, TinySpec, corpus_seeds, pretrain_world_seeds, world_kwargs


def group(
    env_id: str, env_kwargs: dict[str, Any] | None, seeds: Iterable[int], options: dict[str, Any] | None = None
) -> dict[str, Any]:
    """A group record: ``env_id`` made with ``env_kwargs``, reset once per seed (with ``options``)."""
    return {
        "env_id": env_id,
        "env_kwargs": json.loads(json.dumps(dict(env_kwargs or {}))),
        "resets": [{"seed": int(s), "options": dict(options or {})} for s in seeds],
    }


def merge_groups(groups: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Groups of the same env and options made one, each distinct reset kept once (in first-seen order)."""
    merged: dict[str, dict[str, Any]] = {}
    seen: dict[str, set[str]] = {}
    for g in groups:
        key = json.dumps([g["env_id"], g["env_kwargs"]], sort_keys=True)
        into = merged.setdefault(key, {"env_id": g["env_id"], "env_kwargs": g["env_kwargs"], "resets": []})
        have = seen.setdefault(key, set())
        for r in g["resets"]:
            rk = json.dumps(r, sort_keys=True)
            if rk not in have:
                have.add(rk)
                into["resets"].append(r)
    return list(merged.values())


def sft_seeds(seed: int, eval_seed: int, episodes: int) -> list[int]:
    """The reset seeds of the SFT demonstrations (:meth:`reference_trainer.trainer.Trainer.sft`): below ``eval_seed``."""
    return np.random.default_rng([int(seed), 1]).integers(0, int(eval_seed), size=int(episodes)).tolist()


def rl_task_seeds(seed: int, eval_seed: int, tasks_per_iteration: int, iterations: int) -> list[int]:
    """The task seeds of ``iterations`` RL iterations from the start (the trainer's ``np_rng`` draws), in order."""
    rng = np.random.default_rng(int(seed))
    return [
        s for _ in range(iterations) for s in rng.integers(0, int(eval_seed), size=int(tasks_per_iteration)).tolist()
    ]


def demo_env_kwargs(cfg: Any) -> dict[str, Any]:
    """The env options of expert play (SFT, tokenizer corpus, pretraining): ``env_kwargs`` with ``sft_env_kwargs`` over them."""
    return {**cfg.rollout.env_kwargs, **cfg.train.sft_env_kwargs}


def _tiny_groups(cfg: Any) -> list[dict[str, Any]]:
    """The tokenizer corpus and pretraining of the tiny model ``cfg`` builds (none for a checkpoint)."""
    m, env = cfg.model, cfg.train.env
    if m.model != "tiny":
        return []
    kwargs = demo_env_kwargs(cfg)
    if not m.tiny.pretrain:
        return [group(env, kwargs, corpus_seeds(m.tiny.seed, TinySpec().corpus_episodes))]
    spec = PretrainSpec.from_config(m.tiny.pretrain)
    out = [
        group(env, world_kwargs(kwargs, w, spec), corpus_seeds(spec.seed, spec.corpus_episodes_per_world))
        for w in spec.worlds
    ]
    if spec.steps > 0:
        seeds = pretrain_world_seeds(spec.seed, spec.worlds, spec.episodes_per_world)
        out += [group(env, world_kwargs(kwargs, w, spec), s) for w, s in zip(spec.worlds, seeds)]
    return out


def training_groups(cfg: Any, rl_seeds: Iterable[int] = (), *, sft_episodes: int | None = None) -> list[dict[str, Any]]:
    """Every reset that trained the run ``cfg`` describes: tiny model build, SFT demonstrations, and ``rl_seeds`` (the
    tasks its RL rollouts played, as the trainer recorded them); merged (:func:`merge_groups`)."""
    t = cfg.train
    n = t.sft_episodes if sft_episodes is None else sft_episodes
    groups = _tiny_groups(cfg)
    if n > 0:
        groups.append(group(t.env, demo_env_kwargs(cfg), sft_seeds(t.seed, t.eval_seed, n)))
    rl_seeds = list(rl_seeds)
    if rl_seeds:
        groups.append(group(t.env, cfg.rollout.env_kwargs, rl_seeds))
    return merge_groups(groups)


def eval_group(cfg: Any, n: int | None = None, env_kwargs: dict[str, Any] | None = None) -> dict[str, Any]:
    """The held-out tasks an evaluation of ``cfg`` plays: seeds ``eval_seed ..`` in its eval envs (or ``env_kwargs`` over
    the training options, e.g. a validation split)."""
    t = cfg.train
    over = t.eval_env_kwargs if env_kwargs is None else env_kwargs
    n = t.eval_episodes if n is None else n
    return group(t.env, {**cfg.rollout.env_kwargs, **over}, range(t.eval_seed, t.eval_seed + n))


def start_keys(env_id: str, env_kwargs: dict[str, Any], seeds: Iterable[int]) -> list[str | None]:
    """``info["state_key"]`` right after ``reset(seed)`` for each seed (``None`` where the env gives none):
    two seeds with equal keys start the same episode, so a deterministic policy plays them alike."""
    import gymnasium as gym

    import agentgym_turn  # noqa: F401  (registers the ids)

    env = gym.make(env_id, **env_kwargs)
    try:
        return [env.reset(seed=int(s))[1].get("state_key") for s in seeds]
    finally:
        env.close()


def task_keys(g: dict[str, Any]) -> list[str | None]:
    """The task key (:meth:`~agentgym_turn.core.TurnEnv.task_key`) of every reset of group ``g``, in order."""
    import gymnasium as gym

    import agentgym_turn  # noqa: F401  (registers the ids)

    env = gym.make(g["env_id"], **g["env_kwargs"])
    try:
        keys = []
        for r in g["resets"]:
            env.reset(seed=r["seed"], options=r.get("options") or None)
            keys.append(env.unwrapped.task_key())
        return keys
    finally:
        env.close()


def overlap(test: Iterable[dict[str, Any]], train: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """Replay both sides and compare task keys: ``{"test_tasks", "train_tasks", "shared": [keys in both]}`` (distinct
    keys). A ``None`` key (an env without :meth:`task_key`) is a ValueError: such tasks cannot be compared."""
    sides = []
    for groups in (test, train):
        keys: set[str] = set()
        for g in groups:
            got = task_keys(g)
            if any(k is None for k in got):
                raise ValueError(f"{g['env_id']} gives no task_key(): its tasks cannot be compared by content.")
            keys.update(got)  # type: ignore[arg-type]
        sides.append(keys)
    return {"test_tasks": len(sides[0]), "train_tasks": len(sides[1]), "shared": sorted(sides[0] & sides[1])}
