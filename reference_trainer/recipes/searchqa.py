"""TurnSearchQA-v0 with the tiny model (2-layer Qwen2 style, copy-pretrained on other worlds).

SFT on the env's searching expert (every question type) until its validation exact match stops
improving, then RL on single-hop questions. Questions are split by their text
(``content_split=``): training (world 0, the pretraining's worlds 1000-1015) plays ``"train"``
questions, choices are made on ``"validation"`` questions of world 102, results are reported on
``"test"`` questions of world 101. The suite's one run stops SFT at ``suite_sft_steps`` (the plateau
takes up to 4,000 steps, more than the suite's time). Why each setting: ``docs/experiments.md``;
what the recipe measures: ``docs/benchmarks.md``.
"""

from __future__ import annotations

from typing import Any

from ..config import Config, preset
from .base import NOISE_CONTROL, Recipe

SEARCHQA_ENV = "TurnSearchQA-v0"
#: The first message: the two actions and the question (Search-R1's scorer skips the prompt's example answer pair).
SEARCHQA_PROMPT = "Search: <search> name </search>. Answer: <answer> x </answer>.\nQuestion: {question}\n"
SEARCHQA_ENV_KWARGS: dict[str, Any] = {
    "prompt_template": SEARCHQA_PROMPT,
    "topk": 1,
    "max_searches": 2,
    "passage_sentences": 3,
    "expert_think": False,
    "format_penalty": -0.1,
    "question_types": ["single_hop"],
    "split": "all",
    "content_split": "train",
}
SEARCHQA_PRETRAIN: dict[str, Any] = {
    "worlds": list(range(1000, 1016)),
    "world_scale": 0.25,
    "episodes_per_world": 128,
    "steps": 300,
    "batch_size": 16,
    "lr": 3e-3,
    "response_weight": 4.0,
    "induction_heads": 2,
}
SEARCHQA_RL_ITERATIONS = 20


def searchqa_tiny(
    algo: str = "turn-ppo",
    *,
    seed: int = 0,
    iterations: int = SEARCHQA_RL_ITERATIONS,
    out: str = "runs/searchqa",
    model: str = "tiny",
    sft_episodes: int = 4000,
    **train: Any,
) -> Config:
    """One run: SFT to the validation plateau (unless ``sft_episodes=0``), then ``algo``; ``train``
    overrides fields of any config section; ``model`` is ``"tiny"`` or a checkpoint directory."""
    rollout: dict[str, Any] = dict(
        tasks_per_iteration=128,
        num_envs=128,
        max_new_tokens=24,
        temperature=0.8,
        max_context_tokens=512,
        env_kwargs=dict(SEARCHQA_ENV_KWARGS),
    )
    if algo == "grpo":
        rollout.update(tasks_per_iteration=16, group_size=8)  # the same 128 episodes, 8 per question
    return preset(
        algo,
        **{
            "model": model,
            "tiny_arch": "qwen2",
            "tiny_rope_theta": 1e6,
            "tiny_vocab": 2048,
            "tiny_pretrain": dict(SEARCHQA_PRETRAIN),
            **rollout,
            "lr": 3e-4,
            "lr_warmup_steps": 10,
            "minibatch_size": 16,
            "micro_batch_tokens": 4096,
            **NOISE_CONTROL,
            "env": SEARCHQA_ENV,
            "iterations": iterations,
            "seed": seed,
            "eval_every": 0,
            "eval_episodes": 640,
            "eval_env_kwargs": {"world_seed": 101, "content_split": "test"},
            "val_env_kwargs": {"world_seed": 102, "content_split": "validation"},
            "val_episodes": 200,
            "sft_episodes": sft_episodes,
            "sft_steps": 4000,
            "sft_validate_every": 200,
            "sft_patience": 5,
            "sft_batch_size": 16,
            "sft_lr": 1e-3,
            "sft_env_kwargs": {"question_types": None},
            "out": out,
            **train,
        },
    )


RECIPE = Recipe(
    name="searchqa",
    env_id=SEARCHQA_ENV,
    build=searchqa_tiny,
    rl_iterations=SEARCHQA_RL_ITERATIONS,
    metric="success",
    what="greedy exact match on 640 draws of test single-hop questions of world 101 (content_split='test')",
    sft_minutes=2.5,
    rl_minutes=3,
    control_minutes=2.5,
    suite_sft_steps=600,
)
