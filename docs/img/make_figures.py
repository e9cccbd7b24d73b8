"""Make the pictures the docs show; run from anywhere: ``python docs/img/make_figures.py``.

* ``learning*.png``: copies of the figures of ``benchmarks/results/`` named in :data:`LEARNING_FIGURES`
  (written by ``benchmarks/learning.py``), so the docs show the latest measured curves. A test
  fails when a copy differs.
* ``sokoban_episode.png``: ``TurnSokoban-v0`` with seed 0 played by the expert: for the reset
  and each turn, the board (``render_mode="rgb_array"``) above the grid text the agent reads.

Needs matplotlib (the ``train`` extra). Deterministic: the same bytes for the same code.
"""

from __future__ import annotations

import shutil
import textwrap
from pathlib import Path

import gymnasium as gym
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (after choosing the file-only backend)

import agentgym_turn  # noqa: E402,F401  (registers the ids)

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent


#: The learning benchmark's figures the docs show (``benchmarks/results/<name>`` -> ``docs/img/<name>``).
LEARNING_FIGURES = (
    "learning.png",
    "learning_sokoban.png",
    "learning_sokoban_presets_seedsplit.png",
    "learning_sokoban_2layers.png",
    "learning_sokoban_ablation.png",
    "learning_sokoban_control.png",
    "learning_sokoban_stress.png",
    "learning_webshop.png",
    "learning_webshop_presets_earlier.png",
    "learning_searchqa.png",
    "learning_searchqa_control.png",
    "learning_searchqa_presets_earlier.png",
    "learning_sokoban_smollm2.png",
    "learning_searchqa_smollm2.png",
)


def copy_learning_curves() -> list[Path]:
    """Copy the learning benchmark's figures into the docs."""
    out = []
    for name in LEARNING_FIGURES:
        shutil.copyfile(ROOT / "benchmarks" / "results" / name, HERE / name)
        out.append(HERE / name)
    return out


def _grid_text(observation: str) -> str:
    """The status line and grid at the end of a Sokoban observation (what changes each turn)."""
    lines = observation.rstrip().splitlines()
    start = max(i for i, line in enumerate(lines) if line.startswith("Turn "))
    # one sentence of the status line per row, so the text fits under its board
    status = [sentence.strip().rstrip(".") + "." for sentence in lines[start].split(". ") if sentence.strip(". ")]
    return "\n".join(status + lines[start + 1 :])


def sokoban_episode(out: Path = HERE / "sokoban_episode.png", seed: int = 0) -> Path:
    """Draw the expert's episode on ``TurnSokoban-v0`` (one column per turn, reset first)."""
    env = gym.make("TurnSokoban-v0", render_mode="rgb_array")
    observation, _ = env.reset(seed=seed)
    columns = [("reset", env.render(), _grid_text(observation))]
    done = False
    while not done:
        response = env.unwrapped.expert_action()
        observation, reward, terminated, truncated, info = env.step(response)
        done = terminated or truncated
        title = textwrap.wrap(f"turn {info['turn']}: {response}", 34, break_long_words=False)
        title.append(f"reward {reward:+.1f}" + (", solved" if info["success"] else ""))
        columns.append(("\n".join(title), env.render(), _grid_text(observation)))
    env.close()

    fig, axes = plt.subplots(
        2, len(columns), figsize=(3.2 * len(columns), 5.6), gridspec_kw={"height_ratios": [1, 0.62]}
    )
    for (title, frame, text), (top, bottom) in zip(columns, axes.T):
        top.imshow(frame, interpolation="nearest")
        top.set_title(title, fontsize=9)
        bottom.text(0.06, 0.94, text, family="monospace", fontsize=10, va="top", ha="left", transform=bottom.transAxes)
        for ax in (top, bottom):
            ax.set_xticks([])
            ax.set_yticks([])
    axes[1, 0].set_ylabel("what the agent reads", fontsize=9)
    axes[0, 0].set_ylabel("render_mode='rgb_array'", fontsize=9)
    fig.suptitle(f"TurnSokoban-v0, seed {seed}, played by env.unwrapped.expert_action()", fontsize=11)
    fig.tight_layout()
    fig.savefig(out, dpi=110, metadata={"Software": None})
    plt.close(fig)
    return out


def main() -> None:
    for path in (*copy_learning_curves(), sokoban_episode()):
        print(f"wrote {path.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
