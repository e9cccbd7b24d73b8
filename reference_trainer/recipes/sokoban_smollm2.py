"""TurnSokoban-v0 with a real pretrained chat model: SmolLM2-135M-Instruct, fully fine-tuned on CPU.

The tiny recipe's env and protocol (:mod:`.sokoban`: the compact prompt, levels split by content,
test and validation levels drawn from the same seeds), with SmolLM2's own tokenizer and chat
template: SFT on the env's optimal expert to its validation plateau, then RL from the best SFT.
What differs from the tiny model's recipe is what one core affords a 135M model (about 20x the
tiny one's compute per token): a smaller SFT batch and validation set, 32 episodes per RL
iteration, a value head on the actor's trunk (the Turn-PPO paper's set-up; a separate critic
doubled the update), bfloat16 autocast (1.7x the float32 update on one core, the loss within 0.2%;
the ratio's denominator is then scored again by the training pass, so each ratio starts at 1),
an SFT ceiling far enough out that validation, not the ceiling, ends SFT, and RL learning rates
chosen on the validation split (``benchmarks/rl_validation.py``): an actor rate of 3e-6, between
the Turn-PPO paper's 1e-6 and the 1e-5 that lost 20 points, a value head at 100x it so that it fits
within the run, and two iterations of critic warm-up before the policy moves. None of them was chosen
on test results. Zero-shot, the model is given the env's full instructions (``prompt_style="full"``), since the compact prompt states no rules.
Why each setting and what each run measured: ``docs/experiments.md``.
"""

from __future__ import annotations

from typing import Any

from ..config import Config, preset
from .base import Recipe
from .sokoban import SOKOBAN_ENV, SOKOBAN_ENV_KWARGS

SMOLLM2 = "smollm2-135m-instruct"
#: The model's RL and precision settings (chosen on this env's validation split; the search QA recipe reuses them as is).
SMOLLM2_RL: dict[str, Any] = {
    "critic": "shared",
    "dtype": "bfloat16",
    "recompute_old_logp": True,
    "lr": 3e-6,
    "critic_lr_ratio": 100.0,
    "critic_warmup": 2,
    "lr_warmup_steps": 2,
    "minibatch_size": 8,
    "micro_batch_tokens": 2048,
    "reward_scale": 0.1,
}
SOKOBAN_SMOLLM2_RL_ITERATIONS = 16
#: SFT optimizer steps at most (8 episodes each); validation every 25 steps ends it first.
SOKOBAN_SMOLLM2_SFT_CEILING = 1000
#: Test draws (seeds from 10^9 up, each drawing a test level) and validation draws.
SOKOBAN_SMOLLM2_EVAL_LEVELS = 256
SOKOBAN_SMOLLM2_VAL_LEVELS = 64
#: Zero-shot: the untrained model with the env's full instructions, on the first test draws (every turn runs to the
#: token budget, so a full evaluation would cost more than the RL runs).
SOKOBAN_SMOLLM2_ZERO_SHOT = {"tasks": 64, "env_kwargs": {"prompt_style": "full"}}


def sokoban_smollm2(
    algo: str = "turn-ppo",
    *,
    seed: int = 0,
    iterations: int = SOKOBAN_SMOLLM2_RL_ITERATIONS,
    out: str = "runs/sokoban_smollm2",
    model: str = SMOLLM2,
    sft_episodes: int = 1600,
    **train: Any,
) -> Config:
    """One run: SFT to the validation plateau (unless ``sft_episodes=0``), then ``algo``; ``train``
    overrides fields of any config section; ``model`` is SmolLM2 by name or a checkpoint directory."""
    rollout: dict[str, Any] = dict(
        tasks_per_iteration=32,
        num_envs=32,
        max_new_tokens=32,
        max_context_tokens=512,
        temperature=1.0,
        env_kwargs=dict(SOKOBAN_ENV_KWARGS),
    )
    if algo == "grpo":
        rollout.update(tasks_per_iteration=4, group_size=8)  # the same 32 episodes, 8 per level
    return preset(
        algo,
        **{
            "model": model,
            **rollout,
            **SMOLLM2_RL,
            "env": SOKOBAN_ENV,
            "iterations": iterations,
            "seed": seed,
            "eval_every": 0,
            "eval_episodes": SOKOBAN_SMOLLM2_EVAL_LEVELS,
            "eval_env_kwargs": {"split": "test"},
            "val_env_kwargs": {"split": "validation"},
            "val_episodes": SOKOBAN_SMOLLM2_VAL_LEVELS,
            "sft_episodes": sft_episodes,
            "sft_steps": SOKOBAN_SMOLLM2_SFT_CEILING,
            "sft_validate_every": 25,
            "sft_patience": 3,
            "sft_batch_size": 8,
            "sft_lr": 2e-5,
            "out": out,
            **train,
        },
    )


RECIPE = Recipe(
    name="sokoban_smollm2",
    env_id=SOKOBAN_ENV,
    build=sokoban_smollm2,
    rl_iterations=SOKOBAN_SMOLLM2_RL_ITERATIONS,
    metric="success",
    suite_learning=False,
    zero_shot=SOKOBAN_SMOLLM2_ZERO_SHOT,
    what=f"greedy success on {SOKOBAN_SMOLLM2_EVAL_LEVELS} draws of TurnSokoban-v0 test levels (6x6, 1 box), "
    "SmolLM2-135M-Instruct",
    sft_minutes=30,
    rl_minutes=20,
)
