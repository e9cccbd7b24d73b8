"""Measured settings for the tiny model on TurnSokoban-v0, shared by ``make demo``,
``benchmarks/learning.py`` and the Sokoban learning test.

Why each choice (measurements in ``docs/trainer.md#sokoban-with-the-tiny-model``):

* **Model**: the tiny GPT-2-style model (d=64, 2 layers, 4 heads, learned positions, ~185k
  parameters with its 512-token vocabulary); one token per grid cell and per move word.
* **Observation**: ``prompt_style="compact"`` (a header line and the grid), so an episode
  fits in about 150 tokens.
* **SFT**: 200 steps of 128 expert episodes (drawn from 2,000) at lr 3e-3 land the greedy
  held-out success in the 30-50% band the Turn-PPO recipe starts from.
* **Critic**: a separate trunk. With the shared trunk the value loss alone moves the actor
  (measured: five critic-only warm-up iterations at lr 1e-3 raised invalid turns 8% -> 57%).
* **Rewards**: the env's own, with ``format_penalty=-1`` instead of -0.1. With -0.1 an invalid
  turn costs less than a single move, and the policy learned to answer invalidly (invalid
  turns rose to 93%). ``reward_scale=0.1`` keeps the critic's targets near 1.
* **Update**: 128 episodes per iteration, minibatches of 32, actor lr 3e-4 (1e-3 collapsed
  the response format within 30 iterations).
"""

from __future__ import annotations

from typing import Any

from .config import Config, ModelConfig, RolloutConfig, TrainConfig, preset

__all__ = ["SOKOBAN_ENV", "SOKOBAN_ENV_KWARGS", "sokoban_tiny"]

SOKOBAN_ENV = "TurnSokoban-v0"
SOKOBAN_ENV_KWARGS: dict[str, Any] = {"prompt_style": "compact", "format_penalty": -1.0}


def sokoban_tiny(algo: str = "turn-ppo", *, seed: int = 0, iterations: int = 30, out: str = "runs/sokoban",
                 model: str = "tiny", sft_episodes: int = 2000, **train: Any) -> Config:
    """The configuration of one run: SFT warm start (unless ``sft_episodes=0``), then ``algo``.

    ``model`` is ``"tiny"`` (built offline) or a checkpoint directory, e.g. a saved SFT policy
    to start RL from; ``train`` overrides :class:`TrainConfig` fields.
    """
    rollout = dict(tasks_per_iteration=128, num_envs=64, max_new_tokens=16, env_kwargs=dict(SOKOBAN_ENV_KWARGS))
    if algo == "grpo":
        rollout.update(tasks_per_iteration=16, group_size=8)  # the same 128 episodes, 8 per level
    return Config(
        model=ModelConfig(model=model, tiny_arch="gpt2", critic="separate"),
        rollout=RolloutConfig(**rollout),
        algo=preset(algo, lr=3e-4, minibatch_size=32, reward_scale=0.1),
        train=TrainConfig(**{
            "env": SOKOBAN_ENV, "iterations": iterations, "seed": seed, "eval_every": 5, "eval_episodes": 200,
            "sft_episodes": sft_episodes, "sft_steps": 200, "sft_batch_size": 128, "sft_lr": 3e-3, "out": out,
            **train,
        }),
    )
