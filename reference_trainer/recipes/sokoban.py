"""TurnSokoban-v0 with the tiny model (3-layer GPT-2 style, one token per cell and move word).

SFT on the env's optimal expert until its validation success stops improving, then RL. Levels
are split by content (``split=``: the level itself, not its seed): every training input plays
``"train"`` levels, choices are made on ``"validation"``, results are reported on ``"test"``.
The suite's one run stops SFT at ``suite_sft_steps`` (SFT seeds 1 and 2 peaked at step 900 on
validation, seed 0 at 1,400: 2.5 minutes more of a core; up to 900 its best is step 900). Why each setting: ``docs/experiments.md``;
what the recipe measures: ``docs/benchmarks.md``.
"""

from __future__ import annotations

from typing import Any

from ..config import Config, preset
from .base import NOISE_CONTROL, Recipe

SOKOBAN_ENV = "TurnSokoban-v0"
SOKOBAN_ENV_KWARGS: dict[str, Any] = {
    "prompt_style": "compact",
    "show_border": False,
    "format_penalty": -1.0,
    "split": "train",
}
SOKOBAN_RL_ITERATIONS = 48
#: Test draws (seeds from 10^9 up, each drawing a test level: about 470 distinct levels).
SOKOBAN_EVAL_LEVELS = 600


def sokoban_tiny(
    algo: str = "turn-ppo",
    *,
    seed: int = 0,
    iterations: int = SOKOBAN_RL_ITERATIONS,
    out: str = "runs/sokoban",
    model: str = "tiny",
    sft_episodes: int = 2000,
    **train: Any,
) -> Config:
    """One run: SFT to the validation plateau (unless ``sft_episodes=0``), then ``algo``; ``train``
    overrides fields of any config section; ``model`` is ``"tiny"`` or a checkpoint directory."""
    rollout: dict[str, Any] = dict(
        tasks_per_iteration=256, num_envs=256, max_new_tokens=32, temperature=0.8, env_kwargs=dict(SOKOBAN_ENV_KWARGS)
    )
    if algo == "grpo":
        rollout.update(tasks_per_iteration=32, group_size=8)  # the same 256 episodes, 8 per level
    return preset(
        algo,
        **{
            "model": model,
            "tiny_arch": "gpt2",
            "tiny_layers": 3,
            **rollout,
            "lr": 3e-4,
            "lr_warmup_steps": 10,
            "minibatch_size": 64,
            "micro_batch_tokens": 2048,
            "reward_scale": 0.1,
            **NOISE_CONTROL,
            "env": SOKOBAN_ENV,
            "iterations": iterations,
            "seed": seed,
            "eval_every": 0,
            "eval_episodes": SOKOBAN_EVAL_LEVELS,
            "eval_env_kwargs": {"split": "test"},
            "val_env_kwargs": {"split": "validation"},
            "val_episodes": 200,
            "sft_episodes": sft_episodes,
            "sft_steps": 4000,
            "sft_validate_every": 100,
            "sft_patience": 3,
            "sft_batch_size": 128,
            "sft_lr": 3e-3,
            "out": out,
            **train,
        },
    )


RECIPE = SOKOBAN = Recipe(
    name="sokoban",
    env_id=SOKOBAN_ENV,
    build=sokoban_tiny,
    rl_iterations=SOKOBAN_RL_ITERATIONS,
    metric="success",
    what=f"greedy success on {SOKOBAN_EVAL_LEVELS} draws of TurnSokoban-v0 test levels (6x6, 1 box)",
    sft_minutes=6,
    rl_minutes=5,
    control_minutes=8,
    suite_sft_steps=900,
)
