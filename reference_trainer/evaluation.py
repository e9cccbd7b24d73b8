"""Held-out evaluation: the fixed seeds ``eval_seed ..`` played greedily, without touching the training RNGs."""

from __future__ import annotations

import contextlib
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
def evaluate(trainer: Any, n: int | None = None, *, split: str = "test", current: bool = False) -> dict[str, float]:
    """Episode metrics of ``trainer``'s policy on ``n`` held-out seeds (default ``eval_episodes``; ``val_episodes`` for
    ``split="validation"``, whose envs ``val_env_kwargs`` names). With ``ema_decay > 0`` the weight average plays,
    unless ``current``. Each rank plays its share; the per-episode outcomes go to ``trainer.last_eval_outcomes``
    (same seeds, same order every time, so two evaluations pair up)."""
    t = trainer.cfg.train
    if split not in ("test", "validation"):
        raise ValueError(f"split must be 'test' or 'validation', got {split!r}")
    if split == "validation" and (not t.val_env_kwargs or t.val_episodes <= 0):
        raise ValueError("no validation split: set --val-env-kwargs (e.g. split=validation) and --val-episodes N")
    if split == "validation" and trainer._val_envs is None:  # made at the first validation
        trainer._val_envs = trainer._make_envs(t.val_env_kwargs)
    envs = trainer.eval_envs if split == "test" else trainer._val_envs
    n = (t.eval_episodes if split == "test" else t.val_episodes) if n is None else n
    seeds = list(range(t.eval_seed, t.eval_seed + n))
    gen = torch.Generator().manual_seed(distributed.rank_seed(t.eval_seed, trainer.dist.rank))
    with playing(trainer.policy, None if current else trainer.averaged_lm):
        episodes = trainer.rollout(distributed.shard(seeds, trainer.dist), temperature=t.eval_temperature, generator=gen, envs=envs)
    episodes = distributed.gather_episodes(episodes, trainer.dist)
    trainer.last_eval_outcomes = {"seeds": [float(s) for s in seeds], "success": [float(e.success) for e in episodes],
                                  "score": [e.score for e in episodes], "return": [e.ret for e in episodes]}
    return episode_metrics(episodes)
