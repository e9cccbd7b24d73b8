"""Measured settings for the tiny model on TurnSokoban-v0, shared by ``make demo``,
``benchmarks/learning.py`` and the Sokoban learning test.

Why each choice (measurements in ``docs/trainer.md#sokoban-with-the-tiny-model``):

* **Model**: the tiny GPT-2-style model (d=64, 2 layers, 4 heads, learned positions, ~185k
  parameters with its 512-token vocabulary); one token per grid cell and per move word.
* **Observation**: ``prompt_style="compact"`` (a header line and the grid) without the
  all-wall outer ring (``show_border=False``), so an episode takes about 100 tokens.
* **SFT**: 300 steps of 128 expert episodes (drawn from 2,000) at lr 3e-3 land the greedy
  held-out success in the 30-50% band the Turn-PPO recipe starts from (measured: 46%, in
  about 60 s on one thread; 200 steps: 36%).
* **Critic**: a separate trunk, restarted from the SFT weights. With the shared trunk the
  value loss alone moves the actor (measured: five critic-only warm-up iterations at lr
  1e-3 raised invalid turns 8% -> 57%).
* **Speed**: ``micro_batch_tokens=2048`` packs length-sorted episodes (same gradient; the
  update ran 2.4x faster); all 256 episodes of an iteration are sampled as one batch
  (``num_envs=256``), and the ratio's denominator is the log-prob recorded while sampling
  (``recompute_old_logp=False``: same weights, dtype and code, one forward pass less). An
  iteration takes 2.4-3 s, so ``SOKOBAN_RL_ITERATIONS`` (54) is 2.3-2.7 minutes of RL.
* **Rewards**: the env's own, with ``format_penalty=-1`` instead of -0.1. With -0.1 an invalid
  turn costs less than a single move, and the policy learned to answer invalidly (invalid
  turns rose to 93%). ``reward_scale=0.1`` keeps the critic's targets near 1.
* **Update**: 256 episodes per iteration, minibatches of 64, actor lr 3e-4 after a 10-step
  warm-up (a fresh Adam's first steps move every weight by about the learning rate; at 1e-3
  without warm-up the first update alone had approx. KL 0.13 and invalid turns doubled),
  responses up to 32 tokens (at 16 a policy that lists extra moves, which the env ignores
  once a level is solved, drifts into truncated, invalid answers).
* **Noise control**: one iteration's gradient on this model is mostly noise, and noise alone
  lowers greedy success (random +-1 advantages: 36% -> 14.5% in 28 iterations). So the
  evaluated and saved policy is the weight average (``ema_decay=0.9``), the KL penalty
  (``kl_coef=0.1``) pulls towards that average (``kl_reference="average"``, WARP's moving
  anchor), and rollouts sample at temperature 0.8 (greedy evaluation). Turn-PPO from the 36%
  start, seeds 0-2, 3 minutes: the older recipe (128 episodes, none of these) ended at
  -0.5 to +1.5 points; KL to the start policy with 256 episodes +7.5 to +11; all of the
  above +10 to +13.5. From the 46% start (benchmark, 54 iterations): +12.5, +12.5, +12.
"""

from __future__ import annotations

from typing import Any

from .config import Config, ModelConfig, RolloutConfig, TrainConfig, preset

__all__ = ["SOKOBAN_ENV", "SOKOBAN_ENV_KWARGS", "SOKOBAN_RL_ITERATIONS", "sokoban_tiny", "rl_from"]

SOKOBAN_ENV = "TurnSokoban-v0"
SOKOBAN_ENV_KWARGS: dict[str, Any] = {"prompt_style": "compact", "show_border": False, "format_penalty": -1.0}


#: RL iterations that take 2.3-2.7 minutes of RL on one CPU thread (the issue's budget is 3 minutes).
SOKOBAN_RL_ITERATIONS = 54


def sokoban_tiny(algo: str = "turn-ppo", *, seed: int = 0, iterations: int = SOKOBAN_RL_ITERATIONS, out: str = "runs/sokoban",
                 model: str = "tiny", sft_episodes: int = 2000, **train: Any) -> Config:
    """The configuration of one run: SFT warm start (unless ``sft_episodes=0``), then ``algo``.

    ``model`` is ``"tiny"`` (built offline) or a checkpoint directory, e.g. a saved SFT policy
    to start RL from; ``train`` overrides :class:`TrainConfig` fields.
    """
    rollout = dict(tasks_per_iteration=256, num_envs=256, max_new_tokens=32, temperature=0.8,
                   env_kwargs=dict(SOKOBAN_ENV_KWARGS))
    if algo == "grpo":
        rollout.update(tasks_per_iteration=32, group_size=8)  # the same 256 episodes, 8 per level
    return Config(
        model=ModelConfig(model=model, tiny_arch="gpt2", critic="separate"),
        rollout=RolloutConfig(**rollout),
        algo=preset(algo, lr=3e-4, lr_warmup_steps=10, minibatch_size=64, micro_batch_tokens=2048, reward_scale=0.1,
                    kl_coef=0.1, kl_reference="average", ema_decay=0.9, recompute_old_logp=False),
        train=TrainConfig(**{
            "env": SOKOBAN_ENV, "iterations": iterations, "seed": seed, "eval_every": 6, "eval_episodes": 200,
            "sft_episodes": sft_episodes, "sft_steps": 300, "sft_batch_size": 128, "sft_lr": 3e-3, "out": out,
            **train,
        }),
    )


def rl_from(job: tuple[str, int, str, int, int, str]) -> dict[str, Any]:
    """One RL run of the recipe from a saved policy, on one thread; a summary of its metrics.

    ``job = (algo, seed, policy_dir, iterations, eval_every, out_dir)``; a tuple so that a
    process pool can map it (``benchmarks/learning.py`` does).
    Returns start/end held-out success, the evaluations on the way, RL seconds (rollouts and
    updates, without evaluations) and per-iteration clip fractions and rollout metrics.
    """
    import time
    from pathlib import Path

    import torch

    from .metrics import read_metrics
    from .trainer import Trainer

    algo, seed, policy_dir, iterations, eval_every, out = job
    torch.set_num_threads(1)
    cfg = sokoban_tiny(algo, seed=seed, iterations=iterations, model=policy_dir, sft_episodes=0,
                       out=str(Path(out) / f"{algo}_seed{seed}"), eval_every=eval_every, progress=False)
    t0 = time.perf_counter()
    trainer = Trainer(cfg)
    try:
        summary = trainer.fit()
    finally:
        trainer.close()
    records = read_metrics(trainer.logger.path)
    evals = [(r["iteration"], r["eval/success"]) for r in records if r.get("phase") == "eval"]
    train = [r for r in records if r.get("phase") == "train"]
    return {
        "algo": algo, "seed": seed, "seconds": time.perf_counter() - t0,
        "rl_seconds": sum(r["time/rollout_s"] + r["time/update_s"] for r in train),  # without evaluations
        "start": summary["start"]["success"], "end": summary["end"]["success"],
        "eval_iterations": [i for i, _ in evals], "eval_success": [s for _, s in evals],
        "clipfrac": [r.get("train/clipfrac", 0.0) for r in train],
        "clipfrac_turn": [r.get("train/clipfrac_turn", 0.0) for r in train],
        "rollout_success": [r["rollout/success"] for r in train],
        "invalid_turns": [r["rollout/invalid_turns"] for r in train],
    }
