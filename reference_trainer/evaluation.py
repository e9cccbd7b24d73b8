"""Held-out evaluation: the fixed seeds ``eval_seed ..`` played greedily, without touching the training RNGs.

Greedy play is deterministic, so seeds that start the same episode (equal ``info["state_key"]`` after
``reset``: 600 Sokoban test draws hold about 470 levels) are played once and their outcome is counted
for each of them; the metrics and per-seed outcomes are those of playing every seed.
"""

from __future__ import annotations

import contextlib
import json
from typing import Any, Callable, Iterator

import torch

from . import distributed
from .config import Config
from .rollout import Episode, episode_metrics


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


#: Plays ``seeds`` and returns one episode each: ``play(seeds, temperature=, generator=, envs=)`` (the trainer's rollout).
Play = Callable[..., list[Episode]]


class Evaluator:
    """Held-out evaluation of a policy on the fixed seeds ``eval_seed ..`` of a split (``"test"``, ``"validation"``).

    Owns each split's envs (the test envs given, or made with ``make_envs(env_kwargs)``; the validation envs at the
    first validation) and returns the metrics with the per-episode outcomes (``seeds``, ``success``, ``score``,
    ``return``: same seeds, same order every time, so two evaluations pair up). Each rank plays its share.
    """

    def __init__(
        self,
        cfg: Config,
        play: Play,
        dist: distributed.DistContext,
        make_envs: Callable[[dict[str, Any]], Any],
        test_envs: Any = None,
    ):
        self.cfg, self.play, self.dist, self.make_envs = cfg, play, dist, make_envs
        t = cfg.train
        self.envs: dict[str, Any] = {"test": test_envs if test_envs is not None else make_envs(t.eval_env_kwargs or {})}

    def split_envs(self, split: str) -> Any:
        """The envs of ``split``; the validation envs are made here the first time."""
        t = self.cfg.train
        if split not in ("test", "validation"):
            raise ValueError(f"split must be 'test' or 'validation', got {split!r}")
        if split == "validation" and (not t.val_env_kwargs or t.val_episodes <= 0):
            raise ValueError("no validation split: set --val-env-kwargs (e.g. split=validation) and --val-episodes N")
        if split not in self.envs:
            self.envs[split] = self.make_envs(t.val_env_kwargs)
        return self.envs[split]

    @torch.no_grad()
    def evaluate(
        self, policy: Any, lm: torch.nn.Module | None = None, n: int | None = None, *, split: str = "test"
    ) -> tuple[dict[str, float], dict[str, list[float]]]:
        """``(metrics, outcomes)`` of ``policy`` (its actor replaced by ``lm`` while playing, when given) on ``n``
        seeds of ``split`` (default ``eval_episodes``, or ``val_episodes`` for validation), greedy unless the
        config's ``eval_temperature`` says otherwise."""
        t = self.cfg.train
        envs = self.split_envs(split)
        n = (t.eval_episodes if split == "test" else t.val_episodes) if n is None else n
        seeds = list(range(t.eval_seed, t.eval_seed + n))
        over = t.eval_env_kwargs if split == "test" else t.val_env_kwargs
        env_kwargs = {**self.cfg.rollout.env_kwargs, **(over or {})}
        played, first = (
            _distinct_starts(t.env, env_kwargs, seeds) if t.eval_temperature == 0 else (seeds, list(range(n)))
        )
        gen = torch.Generator().manual_seed(distributed.rank_seed(t.eval_seed, self.dist.rank))
        with playing(policy, lm):
            episodes = self.play(
                distributed.shard(played, self.dist), temperature=t.eval_temperature, generator=gen, envs=envs
            )
        episodes = distributed.gather_episodes(episodes, self.dist)
        episodes = [episodes[k] for k in first]
        outcomes = {
            "seeds": [float(s) for s in seeds],
            "success": [float(e.success) for e in episodes],
            "score": [e.score for e in episodes],
            "return": [e.ret for e in episodes],
        }
        return episode_metrics(episodes), outcomes

    def close(self, keep: Any = None) -> None:
        """Close every split's envs but ``keep`` (the training envs, when the test split shares them)."""
        for envs in {id(e): e for e in self.envs.values() if e is not keep}.values():
            envs.close()


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
