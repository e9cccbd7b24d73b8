"""TurnWebShop-v0 with the tiny model (2-layer Qwen2 style, its tokenizer and copy circuit built on other catalogs).

SFT on the env's expert (searching the instruction up to its options, buying the first product that
earns ``R = 1``) until its validation score stops improving, then RL. Goals are split by their
instruction (``content_split=``): training plays ``"train"`` goals (as do the tokenizer's catalogs),
choices are made on the 199 ``"validation"`` goals, results are reported on the 187 ``"test"`` goals,
each played once. The suite's one run stops SFT at ``suite_sft_steps``, the step of the plateau run's best validated
weights (SFT seed 0: step 200 of 350). Why each setting: ``docs/experiments.md``; what it
measures: ``docs/benchmarks.md``.
"""

from __future__ import annotations

from typing import Any

from ..config import Config, preset
from .base import NOISE_CONTROL, Recipe

WEBSHOP_ENV = "TurnWebShop-v0"
WEBSHOP_ENV_KWARGS: dict[str, Any] = {
    "observation_style": "compact",
    "results_per_page": 3,
    "goal_split": "all",
    "content_split": "train",
    "expert_query": "clause",
    "expert_browse": "first_match",
}
#: The default catalog's test goals by instruction (of its 2,000 goals: 1,614 train, 199 validation, 187 test).
WEBSHOP_EVAL_EPISODES = 187
WEBSHOP_VAL_EPISODES = 199
WEBSHOP_PRETRAIN: dict[str, Any] = {
    "worlds": list(range(1000, 1016)),
    "world_option": "catalog_seed",
    "scale_option": None,
    "corpus_episodes_per_world": 16,
    "steps": 0,
    "induction_heads": 2,
}
WEBSHOP_RL_ITERATIONS = 8


def webshop_tiny(
    algo: str = "turn-ppo",
    *,
    seed: int = 0,
    iterations: int = WEBSHOP_RL_ITERATIONS,
    out: str = "runs/webshop",
    model: str = "tiny",
    sft_episodes: int = 1000,
    **train: Any,
) -> Config:
    """One run: SFT to the validation plateau (unless ``sft_episodes=0``), then ``algo``; ``train``
    overrides fields of any config section; ``model`` is ``"tiny"`` or a checkpoint directory."""
    rollout: dict[str, Any] = dict(
        tasks_per_iteration=128,
        num_envs=128,
        max_new_tokens=64,
        max_context_tokens=768,
        temperature=0.8,
        env_kwargs=dict(WEBSHOP_ENV_KWARGS),
    )
    if algo == "grpo":
        rollout.update(tasks_per_iteration=16, group_size=8)  # the same 128 episodes, 8 per goal
    return preset(
        algo,
        **{
            "model": model,
            "tiny_arch": "qwen2",
            "tiny_rope_theta": 1e6,
            "tiny_vocab": 2048,
            "tiny_pretrain": dict(WEBSHOP_PRETRAIN),
            **rollout,
            "lr": 3e-4,
            "lr_warmup_steps": 5,
            "minibatch_size": 32,
            "micro_batch_tokens": 4096,
            "truncation_value": "zero",
            **NOISE_CONTROL,
            "env": WEBSHOP_ENV,
            "iterations": iterations,
            "seed": seed,
            "eval_every": 0,
            "eval_episodes": WEBSHOP_EVAL_EPISODES,
            "eval_env_kwargs": {"content_split": "test", "goal_from_seed": True},
            "val_env_kwargs": {"content_split": "validation", "goal_from_seed": True},
            "val_episodes": WEBSHOP_VAL_EPISODES,
            "val_metric": "score",
            "sft_episodes": sft_episodes,
            "sft_steps": 2000,
            "sft_validate_every": 50,
            "sft_patience": 3,
            "sft_batch_size": 32,
            "sft_lr": 1e-3,
            "out": out,
            **train,
        },
    )


RECIPE = Recipe(
    name="webshop",
    env_id=WEBSHOP_ENV,
    build=webshop_tiny,
    rl_iterations=WEBSHOP_RL_ITERATIONS,
    metric="score",
    what=f"greedy WebShop score on the {WEBSHOP_EVAL_EPISODES} test goals (content_split='test', each once)",
    sft_minutes=4.5,
    rl_minutes=4.5,
    control_minutes=5.5,
    suite_sft_steps=200,
)
