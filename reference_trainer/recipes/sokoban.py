"""The settings for the tiny model on TurnSokoban-v0, shared by ``make demo``,
``benchmarks/learning.py`` and the Sokoban learning test.

What each choice does (the measurements behind them: ``docs/trainer.md``, "Sokoban with the
tiny model"):

* **Model**: the tiny GPT-2-style model with 3 layers (d=64, 4 heads, learned positions, 512-token
  vocabulary); one token per grid cell and per move word. With 2 layers every RL variant below
  plateaued near 55-59% held-out success (+11.7 points, mean of seeds 0-2): RL turned stalls and
  deadlocks into solves but never the levels lost by running out of moves, so the limit was the
  model's, not the optimiser's. A third layer, with the same SFT (300 steps), starts at the same place
  (45.7% against 46.3%) and RL lifts it much further, with every other setting unchanged: seeds 0/1/2
  end at 64.2/61.0/63.2%, +18.5 +-3.8 / +15.3 +-3.8 / +17.5 +-3.6 points (mean +17.1; 2 layers:
  +12.7 / +11.0 / +11.3). Wider is not better at this SFT budget: d=128 with 2 layers starts at 37.3%
  (SFT loss 0.287 against 0.211) and gains +6.7 +-3.2; nor is deeper: 4 layers start at 42.2% and end at
  57.2%, +15.0 +-3.9 (seed 0; 3 layers: 64.2%), with 572 s of RL against 440-530 s under the same load.
* **Observation**: ``prompt_style="compact"`` (a header line and the grid) without the
  all-wall outer ring (``show_border=False``), so an episode is about 100 tokens.
* **SFT**: 300 steps of 128 expert episodes (drawn from 2,000) at lr 3e-3, a start for RL
  that solves part of the levels and answers in the right format (loss 0.178, 7.6% invalid turns;
  RL brings them under 1%).
* **Critic**: a separate trunk, restarted from the SFT weights, so the value loss cannot move
  the actor's weights.
* **Speed**: ``micro_batch_tokens=2048`` packs length-sorted episodes (same gradient, less
  padding); the 256 episodes of an iteration are sampled as one batch (``num_envs=256``);
  the ratio's denominator is the log-prob recorded while sampling
  (``recompute_old_logp=False``: same weights, dtype and code, one forward pass less).
* **Rewards**: the env's own, with ``format_penalty=-1`` instead of -0.1, so that an invalid
  turn costs more than a move; ``reward_scale=0.1`` keeps the critic's targets near 1.
* **Update**: 256 episodes per iteration, minibatches of 64, actor lr 3e-4 after a 10-step
  warm-up (a fresh Adam's first steps move every weight by about the learning rate),
  responses up to 32 tokens (room for the moves a policy lists after a level is solved).
* **Noise control**: one iteration's gradient on this model is mostly noise, and noise alone
  lowers greedy success. So the evaluated and saved policy is the weight average
  (``ema_decay=0.9``), the KL penalty (``kl_coef=0.1``) pulls towards that average
  (``kl_reference="average"``, WARP's moving anchor), and rollouts sample at temperature 0.8
  (evaluation is greedy).
* **Tried, not better** (with 2 layers; seed 0, Turn-PPO, 64 iterations from the same 46.3% SFT start,
  held-out success at iterations 16/32/48/64; the recipe: 50.2/54.0/57.3/59.0%, +12.7 +-3.5): actor lr
  6e-4 (critic's lr kept at 3e-3) 53.0/53.5/54.0/53.7%, +7.3 +-4.0; lr 1e-3 keeps sampled success at the
  start's level for 38 iterations (stopped); ``kl_coef=0.03`` 52.8/55.8/56.3% (stopped at 48);
  ``ema_decay=0.8`` 50.8/54.0/55.0/56.8%, +10.5 +-3.8; ``epochs=2`` 49.7/53.7/55.7/55.7%, +9.3 +-3.7
  at 1.6x the RL time. RL on harder levels only (3-10 moves,
  evaluation unchanged) 53.8/57.7/56.8/55.7%, +9.3 +-3.6; rollout temperature 0.6
  51.7/54.7/57.7/58.8%, +12.5 +-3.5 (the same as 0.8). Each plateaus near 55-59%; every larger step
  (lr, epochs, a weaker pull to the average) ends lower: it adds more noise than signal. Four rollouts
  of each of 64 levels instead of one of 256 (``group_size=4``: the same 256 episodes) +9.2 +-3.6: turn
  GAE ignores the groups (each rollout's advantage is its own return against the critic; only GRPO
  reads ``group_ids``), so this only plays 4x fewer distinct levels per update.
* **Budget**: 48 RL iterations (64 until the WebShop recipe joined the suite: 48 keep the suite under
  its time bound, for 0.7 points of mean gain). The third layer makes an iteration 1.29x as long (side by side in one
  process, 5 iterations each: 8.0 s against 6.3 s on a loaded 2-core machine); with 2 layers an iteration
  took 2.6-3 s on the benchmark machine and 4.7 s on a slower quiet one, so 3.5-6.5 minutes of RL on one
  CPU thread (measured under a load of 2-3 on that slower machine: 420-530 s; the SFT start with its
  two evaluations, 164-251 s). Held-out success on the way (mean of seeds 0-2) at
  iterations 16/32/48/64: 55.8/60.8/62.1/62.8% (the 64-iteration runs); 48 iterations save a quarter of the RL
  time: +18.0 +-3.8 / +14.5 +-3.7 / +16.7 +-3.6 (mean +16.4, the benchmark's table), 32 would leave +15.2. With 2 layers the curve flattened after
  about 60 iterations. A shorter SFT (2 layers, 200 steps, a 36.5% start) leaves more headroom but RL does not
  use it: +9.5 points in 50 iterations against +11.7 in 54 from the 300-step start.
* **Evaluation**: greedy, on 600 held-out levels (seeds from 10^9 up, never drawn in training),
  enough for a paired 95% interval of +-4 points on the gain; every 16 iterations, since each
  evaluation costs about as much as two RL iterations' rollouts.
"""

from __future__ import annotations

from typing import Any

from ..config import Config, preset
from .base import NOISE_CONTROL, Recipe

__all__ = ["RECIPE", "SOKOBAN", "SOKOBAN_ENV", "SOKOBAN_ENV_KWARGS", "SOKOBAN_EVAL_LEVELS", "SOKOBAN_RL_ITERATIONS", "sokoban_tiny"]

SOKOBAN_ENV = "TurnSokoban-v0"
SOKOBAN_ENV_KWARGS: dict[str, Any] = {"prompt_style": "compact", "show_border": False, "format_penalty": -1.0}


#: The recipe's RL budget, in iterations (their time on one CPU thread: ``docs/benchmarks.md``). With 3 layers
#: the mean gain of seeds 0-2 is +15.2 points at 32 iterations, +16.4 at 48 and +17.1 at 64. With 2 layers
#: held-out success still rose between 54 and 63 iterations (+11.7 -> +12.8 points, seed 0) and barely after (+13.2 at 72).
SOKOBAN_RL_ITERATIONS = 48
#: Held-out levels (seeds from ``eval_seed`` = 10^9 up, never drawn in training). About a fifth of them
#: change outcome between the SFT start and the end of RL, so 600 bound the paired 95% interval of the
#: gain to +-4 points (``stats.required_tasks(0.2, 0.04)`` = 481; measured: +-3.6 to +-3.8 on three seeds).
SOKOBAN_EVAL_LEVELS = 600


def sokoban_tiny(algo: str = "turn-ppo", *, seed: int = 0, iterations: int = SOKOBAN_RL_ITERATIONS, out: str = "runs/sokoban",
                 model: str = "tiny", sft_episodes: int = 2000, **train: Any) -> Config:
    """The configuration of one run: SFT warm start (unless ``sft_episodes=0``), then ``algo``.

    ``model`` is ``"tiny"`` (built offline) or a checkpoint directory, e.g. a saved SFT policy
    to start RL from; ``train`` overrides :class:`~reference_trainer.config.TrainConfig` fields.
    """
    rollout: dict[str, Any] = dict(tasks_per_iteration=256, num_envs=256, max_new_tokens=32, temperature=0.8,
                                   env_kwargs=dict(SOKOBAN_ENV_KWARGS))
    if algo == "grpo":
        rollout.update(tasks_per_iteration=32, group_size=8)  # the same 256 episodes, 8 per level
    return preset(algo, **{
        "model": model, "tiny_arch": "gpt2", "tiny_layers": 3,
        **rollout,
        "lr": 3e-4, "lr_warmup_steps": 10, "minibatch_size": 64, "micro_batch_tokens": 2048, "reward_scale": 0.1,
        **NOISE_CONTROL,
        "env": SOKOBAN_ENV, "iterations": iterations, "seed": seed, "eval_every": 16, "eval_episodes": SOKOBAN_EVAL_LEVELS,
        "sft_episodes": sft_episodes, "sft_steps": 300, "sft_batch_size": 128, "sft_lr": 3e-3, "out": out,
        **train,
    })


#: The recipe as :mod:`reference_trainer.recipes` registers it.
RECIPE = SOKOBAN = Recipe(name="sokoban", env_id=SOKOBAN_ENV, build=sokoban_tiny, rl_iterations=SOKOBAN_RL_ITERATIONS, metric="success",
                 what=f"held-out greedy success on {SOKOBAN_EVAL_LEVELS} TurnSokoban-v0 levels (6x6, 1 box)", sft_minutes=3, rl_minutes=6.5)
