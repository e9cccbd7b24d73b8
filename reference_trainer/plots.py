"""Learning-curve PNGs from ``metrics.jsonl`` (matplotlib, headless)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

from .metrics import read_metrics


def pyplot() -> Any:
    """``matplotlib.pyplot`` on the file-only Agg backend, so figures render without a display."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _save(plt: Any, fig: Any, path: str | Path, title: str) -> Path:
    fig.suptitle(title)
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def plot_run(metrics: str | Path | Sequence[dict[str, Any]], path: str | Path, title: str = "") -> Path:
    """Two panels: success (training rollouts and held-out evaluation) and clip fractions, per iteration."""
    records = read_metrics(metrics) if isinstance(metrics, (str, Path)) else list(metrics)
    plt = pyplot()
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 3.6))
    train = [r for r in records if r.get("phase") == "train"]
    evals = [r for r in records if r.get("phase") == "eval"]
    if train:
        ax1.plot(
            [r["iteration"] for r in train], [r["rollout/success"] for r in train], label="training rollouts", alpha=0.6
        )
    if evals:
        ax1.plot([r["iteration"] for r in evals], [r["eval/success"] for r in evals], "o-", label="held-out eval")
    ax1.set_xlabel("iteration")
    ax1.set_ylabel("success rate")
    ax1.set_ylim(-0.02, 1.02)
    ax1.legend(loc="lower right")
    for key, label in (("train/clipfrac", "clip fraction (tokens)"), ("train/clipfrac_turn", "clip fraction (turns)")):
        pts = [(r["iteration"], r[key]) for r in train if r.get(key) is not None]
        if pts:
            ax2.plot(*zip(*pts), label=label)
    ax2.set_xlabel("iteration")
    ax2.set_ylabel("fraction")
    ax2.legend(loc="upper right")
    return _save(plt, fig, path, title)


def plot_comparison(curves: dict[str, dict[str, list[float]]], path: str | Path, title: str = "") -> Path:
    """Side-by-side curves: ``curves[name] = {"x": [...], "success": [...], "clipfrac": [...]}``."""
    plt = pyplot()
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 3.8))
    for name, c in curves.items():
        ax1.plot(c["x"], c["success"], "o-", label=name, markersize=3)
        if c.get("clipfrac"):
            ax2.plot(c.get("clip_x", c["x"]), c["clipfrac"], label=name)
    ax1.set_xlabel("RL iteration")
    ax1.set_ylabel("held-out success")
    ax1.set_ylim(-0.02, 1.02)
    ax1.legend(loc="lower right", fontsize=8)
    ax2.set_xlabel("RL iteration")
    ax2.set_ylabel("clip fraction (tokens)")
    ax2.legend(loc="upper right", fontsize=8)
    return _save(plt, fig, path, title)


def plot_learning(
    curves: dict[str, dict[str, list[float]]], path: str | Path, title: str = "", metric: str = "held-out success"
) -> Path:
    """Four panels per env, one line per preset (mean over seeds): the held-out metric at each
    evaluation, and per RL iteration the clip fraction (tokens solid, turns dashed), the approx KL
    and the gradient norm (the diagnostics of the Turn-PPO and ST-PPO papers).

    ``curves[preset] = {"x", "metric", "it", "clipfrac", "clipfrac_turn", "approx_kl", "grad_norm"}``.
    """
    plt = pyplot()
    fig, axes = plt.subplots(1, 4, figsize=(17, 3.8))
    ax1, ax2, ax3, ax4 = axes
    for name, c in curves.items():
        (line,) = ax1.plot(c["x"], c["metric"], "o-", label=name, markersize=3)
        colour = line.get_color()
        ax2.plot(c["it"], c["clipfrac"], color=colour, label=f"{name} tokens")
        ax2.plot(c["it"], c["clipfrac_turn"], color=colour, linestyle="--", label=f"{name} turns")
        ax3.plot(c["it"], c["approx_kl"], color=colour, label=name)
        ax4.plot(c["it"], c["grad_norm"], color=colour, label=name)
    ax1.set_ylabel(metric)
    ax1.set_ylim(-0.02, 1.02)
    ax1.legend(loc="lower right", fontsize=8)
    ax2.set_ylabel("clip fraction (solid: tokens, dashed: turns)")
    ax3.set_ylabel("approx KL (old -> new)")
    ax3.set_yscale("symlog", linthresh=1e-4)
    ax4.set_ylabel("gradient norm (before clipping)")
    for ax in axes:
        ax.set_xlabel("RL iteration")
    return _save(plt, fig, path, title)
