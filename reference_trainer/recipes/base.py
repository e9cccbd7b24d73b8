"""What a recipe is: the measured settings of the tiny model on one env."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from ..config import Config

#: What every tiny-model recipe uses against one iteration's noisy gradient (``docs/experiments.md``,
#: "Sokoban"): a separate critic, a KL penalty towards the weight average that
#: evaluations play, and the ratio's denominator recorded while sampling.
NOISE_CONTROL: dict[str, Any] = {
    "critic": "separate",
    "kl_coef": 0.1,
    "kl_reference": "average",
    "ema_decay": 0.9,
    "recompute_old_logp": False,
}


#: Held-out tasks the untrained model plays before SFT: enough to show it solves next to none, without
#: paying a full evaluation in which every episode runs to the turn limit.
BEFORE_SFT_TASKS = 16


@dataclass(frozen=True)
class Recipe:
    """The tiny model's measured settings on one env.

    ``build(algo, *, seed, iterations, out, model, sft_episodes, **train)`` returns the
    :class:`~reference_trainer.config.Config` of one run: an SFT warm start on ``expert_action()``
    episodes (unless ``sft_episodes=0``), then ``algo`` for ``iterations``; ``model`` is
    ``"tiny"`` or a checkpoint directory (e.g. a saved SFT policy); ``train`` overrides fields of
    any config section. Evaluations play the held-out tasks the config's ``eval_env_kwargs`` name.
    """

    name: str
    env_id: str
    build: Callable[..., Config]
    rl_iterations: int
    #: The held-out metric the recipe's gain is reported on: ``"success"`` or ``"score"`` (0-1).
    metric: str
    #: One line for reports: what the held-out evaluation is.
    what: str
    #: About how long :func:`~reference_trainer.recipes.runs.sft_policy` and the RL part of :func:`~reference_trainer.recipes.runs.learn` take on one quiet thread, in
    #: minutes (measured): the suite schedules its learning jobs by them (``tests/support/learning_jobs.py``).
    sft_minutes: float = 5.0
    rl_minutes: float = 5.0
    #: The shuffled-reward control's RL (``None``: ``rl_minutes``); a policy that unlearns plays longer episodes.
    control_minutes: float | None = None
    #: A lower SFT ceiling for the test suite's one run, where the recipe's plateau costs more than the
    #: suite's time (``None``: the recipe's own); SFT keeps the best validated weights up to it.
    suite_sft_steps: int | None = None
    #: Whether the test suite runs the recipe's learning (the tiny model's recipes); a real model's recipe is a benchmark.
    suite_learning: bool = True
    #: The model before any training, on the first ``tasks`` test tasks with ``env_kwargs`` over the evaluation's (e.g.
    #: the env's full instructions where the recipe trains on a compact prompt) and ``train`` over its config
    #: (``{"tasks": 64, "env_kwargs": {...}, "train": {...}}``); ``None``: no zero-shot row.
    zero_shot: dict[str, Any] | None = None
