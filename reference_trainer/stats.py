"""Statistics for reported gains: the paired confidence interval of a before/after difference.

A gain "from an SFT start, RL raised held-out success by X points" is measured on the same
evaluated tasks twice (same seeds, same greedy decoding), so the two measurements are paired:
the interval comes from the per-task differences ``d_i = after_i - before_i``, which is much
tighter than comparing two independent means when the same tasks stay solved.

Formula (``docs/algorithms.md``, "Paired confidence interval"):

    mean = (1/n) sum_i d_i
    s^2  = (1/(n-1)) sum_i (d_i - mean)^2          (sample variance; 0 when n == 1)
    half = z_{(1+c)/2} * s / sqrt(n)               (normal quantile; z = 1.959964 for c = 0.95)
    interval = [mean - half, mean + half]

The normal quantile instead of Student's t is exact as n grows and off by under 0.3% of the
width at n = 200 (t_{0.975, 199} = 1.972); the evaluation sets this project reports on have
200 to 1,000 tasks.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from statistics import NormalDist
from typing import Any, Sequence

__all__ = ["PairedCI", "nested_bootstrap", "paired_ci", "required_tasks"]


@dataclass(frozen=True)
class PairedCI:
    """A paired difference ``after - before`` and its confidence interval (same units as the inputs)."""

    mean: float
    half_width: float
    low: float
    high: float
    n: int
    confidence: float

    def to_dict(self) -> dict[str, float]:
        return asdict(self)

    def points(self) -> str:
        """``"+12.5 ± 3.1 points"`` for rates in [0, 1]."""
        return f"{100 * self.mean:+.1f} ± {100 * self.half_width:.1f} points"


def paired_ci(before: Sequence[float], after: Sequence[float], confidence: float = 0.95) -> PairedCI:
    """The ``confidence`` interval of ``mean(after - before)`` over paired tasks.

    Args:
        before, after: One outcome per task (success 0/1 or a score), in the same task order.
        confidence: Two-sided coverage in (0, 1).
    """
    if len(before) != len(after):
        raise ValueError(f"paired_ci needs one 'after' per 'before' (same tasks), got {len(before)} and {len(after)}.")
    if not before:
        raise ValueError("paired_ci needs at least one task.")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must lie in (0, 1), got {confidence}.")
    d = [float(a) - float(b) for b, a in zip(before, after)]
    n = len(d)
    mean = sum(d) / n
    var = sum((x - mean) ** 2 for x in d) / (n - 1) if n > 1 else 0.0
    z = NormalDist().inv_cdf((1 + confidence) / 2)
    half = z * math.sqrt(var / n)
    return PairedCI(mean=mean, half_width=half, low=mean - half, high=mean + half, n=n, confidence=confidence)


def required_tasks(discordant: float, half_width: float, confidence: float = 0.95) -> int:
    """Tasks needed for a paired interval on 0/1 outcomes of at most ``half_width``, when a share
    ``discordant`` of tasks changes outcome (worst case: the changes cancel, so ``var = discordant``)."""
    z = NormalDist().inv_cdf((1 + confidence) / 2)
    return math.ceil((z / half_width) ** 2 * discordant)


def nested_bootstrap(
    diffs: Sequence[Sequence[Sequence[float]]],
    clusters: Sequence[str] | None = None,
    *,
    resamples: int = 2000,
    confidence: float = 0.95,
    seed: int = 0,
) -> dict[str, Any]:
    """The mean paired difference over runs and tasks, with a bootstrap interval covering both.

    ``diffs[i][j][t]`` is ``after - before`` of task ``t`` in RL run ``j`` from SFT start ``i``
    (every run on the same tasks, in the same order; starts may have different numbers of runs).
    One resample draws SFT starts with replacement, then runs with replacement within each drawn
    start, then task clusters with replacement (shared by all runs of the resample, since they
    played the same tasks); a cluster is every task with the same key in ``clusters`` (e.g. a
    level drawn twice), each task its own cluster without it. The interval is the percentile
    interval of the resampled means (``docs/algorithms.md``, "Intervals over seeds and tasks");
    ``seed`` fixes the draws, so the same inputs give the same numbers anywhere.
    """
    import numpy as np

    starts = [np.asarray(runs, dtype=np.float64) for runs in diffs]
    if not starts or any(d.ndim != 2 or 0 in d.shape for d in starts) or len({d.shape[1] for d in starts}) != 1:
        raise ValueError("diffs must be [starts][runs][tasks], none empty, every run on the same number of tasks.")
    n_task = starts[0].shape[1]
    keys = list(range(n_task)) if clusters is None else list(clusters)
    if len(keys) != n_task:
        raise ValueError(f"clusters needs one key per task ({n_task}), got {len(keys)}.")
    ids: dict[object, int] = {}
    member = np.array([ids.setdefault(k, len(ids)) for k in keys])
    sums = []  # per start: [runs, clusters], the sum of each run's differences over each cluster's tasks
    for d in starts:
        m = np.zeros((d.shape[0], len(ids)))
        np.add.at(m, (slice(None), member), d)
        sums.append(m)
    counts = np.bincount(member, minlength=len(ids)).astype(np.float64)
    rng = np.random.default_rng(seed)
    means = np.empty(resamples)
    for b in range(resamples):
        drawn = rng.integers(0, len(starts), len(starts))
        picked = np.concatenate(
            [sums[i][rng.integers(0, len(sums[i]), len(sums[i]))].mean(0, keepdims=True) for i in drawn]
        )
        weight = np.bincount(rng.integers(0, len(ids), len(ids)), minlength=len(ids)).astype(np.float64)
        means[b] = float((picked @ weight).mean() / (counts @ weight))
    alpha = (1 - confidence) / 2
    low, high = np.quantile(means, [alpha, 1 - alpha])
    mean = float(np.mean([d.mean() for d in starts]))  # each start weighs the same, as in every resample
    return {
        "mean": mean,
        "low": float(low),
        "high": float(high),
        "starts": len(starts),
        "runs": [int(d.shape[0]) for d in starts],
        "tasks": n_task,
        "clusters": len(ids),
        "resamples": resamples,
        "confidence": confidence,
        "seed": seed,
    }
