"""TurnSearchQA-v0 with a real pretrained chat model: SmolLM2-135M-Instruct, fully fine-tuned on CPU.

The tiny recipe's env and protocol (:mod:`.searchqa`: the compact prompt, questions split by their
text, training on world 0, choices on validation questions of world 102, results on test questions
of world 101), with SmolLM2's own tokenizer and chat template: SFT on the env's searching expert
(every question type) to its validation plateau, then RL on single-hop questions from the best SFT.
Search QA rather than WebShop as the second env: an episode is about a fifth of WebShop's tokens,
and it asks what a pretrained model brings (reading a passage and copying the answer out of it).
The RL settings are the Sokoban SmolLM2 recipe's, chosen there on Sokoban's validation split
(:mod:`.sokoban_smollm2`), not tuned here, but for the reward scale (Sokoban's 0.1 brings its
+10 for a solve to 1; an exact match already pays 1); the SFT settings too. Zero-shot, the model is given the
env's full Search-R1 instructions (``prompt_template=None``), since the compact prompt states no rules.
Why each setting and what each run measured: ``docs/experiments.md``.
"""

from __future__ import annotations

from typing import Any

from ..config import Config, preset
from .base import Recipe
from .searchqa import SEARCHQA_ENV, SEARCHQA_ENV_KWARGS
from .sokoban_smollm2 import SMOLLM2, SMOLLM2_RL

SEARCHQA_SMOLLM2_RL_ITERATIONS = 16
#: SFT optimizer steps at most (8 episodes each); validation every 25 steps ends it first.
SEARCHQA_SMOLLM2_SFT_CEILING = 1000
#: Test draws (test questions of world 101) and validation draws (validation questions of world 102).
SEARCHQA_SMOLLM2_EVAL_QUESTIONS = 256
SEARCHQA_SMOLLM2_VAL_QUESTIONS = 64
#: Zero-shot: the untrained model with the env's full instructions, on the first test draws.
SEARCHQA_SMOLLM2_ZERO_SHOT = {"tasks": 64, "env_kwargs": {"prompt_template": None}}


def searchqa_smollm2(
    algo: str = "turn-ppo",
    *,
    seed: int = 0,
    iterations: int = SEARCHQA_SMOLLM2_RL_ITERATIONS,
    out: str = "runs/searchqa_smollm2",
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
        env_kwargs=dict(SEARCHQA_ENV_KWARGS),
    )
    if algo == "grpo":
        rollout.update(tasks_per_iteration=4, group_size=8)  # the same 32 episodes, 8 per question
    return preset(
        algo,
        **{
            "model": model,
            **rollout,
            **SMOLLM2_RL,
            "reward_scale": 1.0,  # exact match pays 1: returns already of order 1
            "env": SEARCHQA_ENV,
            "iterations": iterations,
            "seed": seed,
            "eval_every": 0,
            "eval_episodes": SEARCHQA_SMOLLM2_EVAL_QUESTIONS,
            "eval_env_kwargs": {"world_seed": 101, "content_split": "test"},
            "val_env_kwargs": {"world_seed": 102, "content_split": "validation"},
            "val_episodes": SEARCHQA_SMOLLM2_VAL_QUESTIONS,
            "sft_episodes": sft_episodes,
            "sft_steps": SEARCHQA_SMOLLM2_SFT_CEILING,
            "sft_validate_every": 25,
            "sft_patience": 3,
            "sft_batch_size": 8,
            "sft_lr": 2e-5,
            "sft_env_kwargs": {"question_types": None},
            "out": out,
            **train,
        },
    )


RECIPE = Recipe(
    name="searchqa_smollm2",
    env_id=SEARCHQA_ENV,
    build=searchqa_smollm2,
    rl_iterations=SEARCHQA_SMOLLM2_RL_ITERATIONS,
    metric="success",
    suite_learning=False,
    zero_shot=SEARCHQA_SMOLLM2_ZERO_SHOT,
    what=f"greedy exact match on {SEARCHQA_SMOLLM2_EVAL_QUESTIONS} draws of test single-hop questions of world 101 "
    "(content_split='test'), SmolLM2-135M-Instruct",
    sft_minutes=30,
    rl_minutes=15,
)
