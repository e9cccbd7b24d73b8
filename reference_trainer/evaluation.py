"""Held-out evaluation: the fixed seeds ``eval_seed ..`` played greedily, without touching the training RNGs.

Greedy play is deterministic, so seeds that start the same episode (equal ``info["state_key"]`` after
``reset``: 600 Sokoban test draws hold about 470 levels) are played once and their outcome is counted
for each of them; the metrics and per-seed outcomes are those of playing every seed.
"""

from __future__ import annotations

import contextlib
import json
from typing import Any, Iterator

import torch

from . import distributed
from .rollout import episode_metrics

__all__ = ["evaluate", "playing"]


@contextlib.contextmanager
def playing(policy: Any, lm: torch.nn.Module | None) -> Iterator[None]:
    """Within the block the policy's actor is ``lm`` (``None``: unchanged)."""
    saved = policy.lm
    try:
        if lm is not None:
            policy.lm = lm
        yield
    finally:
        policy.lm = saved


@torch.no_grad()
def evaluate(trainer: Any, n: int | None = None, *, split: str = "test", current: bool = False, envs: Any = None) -> dict[str, float]:
    """Episode metrics of ``trainer``'s policy on ``n`` held-out seeds (default ``eval_episodes``; ``val_episodes`` for
    ``split="validation"``) in ``envs``, the split's envs (:meth:`Trainer.evaluate` passes them). With ``ema_decay > 0`` the weight average plays,
    unless ``current``. Each rank plays its share; the per-episode outcomes go to ``trainer.last_eval_outcomes``
    (same seeds, same order every time, so two evaluations pair up)."""
    t = trainer.cfg.train
    if split not in ("test", "validation"):
        raise ValueError(f"split must be 'test' or 'validation', got {split!r}")
    if split == "validation" and (not t.val_env_kwargs or t.val_episodes <= 0):
        raise ValueError("no validation split: set --val-env-kwargs (e.g. split=validation) and --val-episodes N")
    if envs is None:
        raise ValueError(f"evaluate: no envs given for the {split!r} split (Trainer.evaluate passes them)")
    n = (t.eval_episodes if split == "test" else t.val_episodes) if n is None else n
    seeds = list(range(t.eval_seed, t.eval_seed + n))
    over = t.eval_env_kwargs if split == "test" else t.val_env_kwargs
    env_kwargs = {**trainer.cfg.rollout.env_kwargs, **(over or {})}
    played, first = _distinct_starts(t.env, env_kwargs, seeds) if t.eval_temperature == 0 else (seeds, list(range(n)))
    gen = torch.Generator().manual_seed(distributed.rank_seed(t.eval_seed, trainer.dist.rank))
    with playing(trainer.policy, None if current else trainer.averaged_lm):
        episodes = trainer.rollout(distributed.shard(played, trainer.dist), temperature=t.eval_temperature, generator=gen, envs=envs)
    episodes = distributed.gather_episodes(episodes, trainer.dist)
    episodes = [episodes[k] for k in first]
    trainer.last_eval_outcomes = {"seeds": [float(s) for s in seeds], "success": [float(e.success) for e in episodes],
                                  "score": [e.score for e in episodes], "return": [e.ret for e in episodes]}
    return episode_metrics(episodes)


#: :func:`_distinct_starts` per (env id, env options, seeds): replaying the resets costs as much as a short evaluation.
_STARTS: dict[tuple[str, str, tuple[int, ...]], tuple[list[int], list[int]]] = {}


def _distinct_starts(env_id: str, env_kwargs: dict[str, Any], seeds: list[int]) -> tuple[list[int], list[int]]:
    """The seeds to play (the first of each distinct start state) and, for every seed, the index of the played
    seed whose episode it shares; seeds of an env without state keys all play. Cached per env options and seeds."""
    from .tasks import start_keys

    cache_key = (env_id, json.dumps(env_kwargs, sort_keys=True, default=repr), tuple(seeds))
    if cache_key not in _STARTS:
        index: dict[Any, int] = {}
        played: list[int] = []
        first = []
        for seed, key in zip(seeds, start_keys(env_id, env_kwargs, seeds)):
            slot = index.get(key) if key is not None else None
            if slot is None:
                slot = len(played)
                played.append(seed)
                if key is not None:
                    index[key] = slot
            first.append(slot)
        _STARTS[cache_key] = (played, first)
    played, first = _STARTS[cache_key]
    return list(played), list(first)
