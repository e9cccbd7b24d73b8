"""``learnability``: does a small learner improve on the env with its reward as the only teacher?

A short hill-climb of the reference trainer's tiny model (``reference_trainer``, the ``train`` extra; imported only
here, so the suite imports without torch): the tiny model is built from the env's own text, imitates a few hundred
``expert_action()`` episodes of training tasks for a few steps (a start that is better than random yet short of the
ceiling), then Turn-PPO runs a few iterations on training tasks. The verdict is the paired gain on held-out tasks (the
same tasks before and after RL, 95% interval, ``reference_trainer.stats.paired_ci``): it passes when the interval
lies above 0. An env whose reward does not follow what its observations show cannot pass: nothing the policy sees
tells it how to earn more.

Held-out tasks are reset seeds the training never draws (the trainer's ``eval_seed`` and above); an env with a
registered recipe (``reference_trainer.recipes``) uses that recipe's settings and its content-disjoint test split.
The short SFT start is on purpose: the check asks whether the reward teaches, not how far imitation goes (that is
what ``benchmarks/learning.py`` measures).
"""

from __future__ import annotations

import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import gymnasium as gym

#: The id a ``module:factory`` target is registered under for the trainer, which makes its envs by id.
TARGET_ID = "agentgym_turn_validate/Target-v0"


@dataclass(frozen=True)
class LearnBudget:
    """The hill-climb's size. SFT runs ``sft_chunk`` steps at a time on ``sft_episodes`` expert episodes of training
    tasks until the policy, sampling as RL will, reaches ``start_level`` of the metric on ``tasks_per_iteration``
    training tasks (at most ``sft_max_steps``): a start RL can move in either direction. Then ``iterations`` of
    ``algo``, each on ``tasks_per_iteration`` tasks; ``eval_tasks`` held-out tasks, played greedily before and after."""

    sft_episodes: int = 256
    sft_chunk: int = 10
    sft_max_steps: int = 200
    start_level: float = 0.5
    #: 200 optimizer steps of RL (four an iteration): RFC 008's "a policy improves in a few hundred steps".
    iterations: int = 50
    tasks_per_iteration: int = 64
    eval_tasks: int = 128
    algo: str = "turn-ppo"
    #: Longest response per turn, in tokens (a recipe's own setting wins).
    max_new_tokens: int = 32


def trainer_env(spec: str | None) -> tuple[str | None, dict[str, Any], str]:
    """``(env id, env kwargs, why not)`` the trainer can make the target by: a registered id as it is, a
    ``module:factory`` registered under :data:`TARGET_ID`, a served env's URL through the remote client's id."""
    if spec is None:
        return None, {}, "the trainer makes its envs by id: give an env id, 'module:factory' or a URL, not an object"
    if spec.startswith(("http://", "https://")):
        return "agentgym_turn/Remote-v0", {"base_url": spec}, ""
    if ":" in spec and "/" not in spec.split(":")[0]:
        gym.registry.pop(TARGET_ID, None)  # the last target's registration: replaced without a warning
        gym.register(id=TARGET_ID, entry_point=spec)
        return TARGET_ID, {}, ""
    return spec, {}, ""


def _config(env_id: str, env_kwargs: dict[str, Any], budget: LearnBudget, seed: int, out: Path) -> tuple[Any, str]:
    """The run's config and the held-out metric: the env's recipe at ``budget``'s size where one exists, else the
    Turn-PPO preset with the recipes' shared settings against one iteration's noise."""
    from reference_trainer.config import Config
    from reference_trainer.recipes import RECIPES
    from reference_trainer.recipes.base import NOISE_CONTROL

    # four optimizer steps an iteration from the first (a recipe's warm-up and minibatch are sized for its longer runs)
    size = dict(
        iterations=budget.iterations,
        sft_validate_every=0,
        eval_every=0,
        eval_episodes=budget.eval_tasks,
        progress=False,
        threads=1,
        tasks_per_iteration=budget.tasks_per_iteration,
        num_envs=budget.tasks_per_iteration,
        minibatch_size=max(1, budget.tasks_per_iteration // 4),
        lr_warmup_steps=0,
        out=str(out),
    )
    recipe = next((r for r in RECIPES.values() if r.env_id == env_id and r.suite_learning and not env_kwargs), None)
    if recipe is not None:
        return recipe.build(budget.algo, seed=seed, sft_episodes=budget.sft_episodes, **size), recipe.metric
    cfg = Config.from_preset(
        budget.algo,
        env=env_id,
        env_kwargs=dict(env_kwargs),
        seed=seed,
        temperature=0.8,
        max_new_tokens=budget.max_new_tokens,
        sft_episodes=budget.sft_episodes,
        sft_batch_size=32,
        **NOISE_CONTROL,
        **size,
    )
    return cfg, "score"


def _climb(trainer: Any, budget: LearnBudget, metric: str) -> dict[str, Any]:
    """SFT to the start level, held-out evaluation, RL, held-out evaluation; what each step measured."""
    from reference_trainer.rollout import episode_metrics

    probe_seeds = list(range(trainer.cfg.train.eval_seed - budget.tasks_per_iteration, trainer.cfg.train.eval_seed))
    levels: list[float] = []
    while len(levels) * budget.sft_chunk < budget.sft_max_steps and (not levels or levels[-1] < budget.start_level):
        trainer.sft(steps=budget.sft_chunk)
        levels.append(episode_metrics(trainer.rollout(probe_seeds))[metric])
    start = trainer.evaluate()
    start_outcomes = trainer.last_eval_outcomes
    rollout_levels = [trainer.train_iteration()[f"rollout/{metric}"] for _ in range(budget.iterations)]
    end = trainer.evaluate()
    return {
        "sft_steps": len(levels) * budget.sft_chunk,
        "sampled_levels": levels,
        "rollout_levels": rollout_levels,
        "start": start[metric],
        "end": end[metric],
        "start_outcomes": start_outcomes,
        "end_outcomes": trainer.last_eval_outcomes,
    }


def check_learnability(
    spec: str | None, *, seed: int = 0, budget: LearnBudget = LearnBudget(), work_dir: str | None = None
) -> tuple[str, str, dict[str, Any]]:
    """Run the hill-climb on the env ``spec`` names; ``(status, summary, evidence)`` as :func:`validate` reports them."""
    try:
        from reference_trainer.stats import paired_ci
        from reference_trainer.trainer import Trainer
    except ImportError as e:
        return "skip", f"needs the reference trainer (pip install 'agentgym-turn[train]'): {e}", {}
    env_id, env_kwargs, why_not = trainer_env(spec)
    if env_id is None:
        return "skip", why_not, {}
    probe = gym.make(env_id, **env_kwargs)
    try:
        if not callable(getattr(probe.unwrapped, "expert_action", None)):
            return "skip", "the env has no expert_action(): the hill-climb starts from imitating it", {}
    finally:
        probe.close()
    with tempfile.TemporaryDirectory(prefix="learnability-") as tmp:
        out = Path(work_dir or tmp)
        cfg, metric = _config(env_id, env_kwargs, budget, seed, out / "run")
        cfg.model.tiny.dir = str(out / "tiny")  # a target registered under TARGET_ID must never share a cached build
        t0 = time.perf_counter()
        trainer = Trainer(cfg)
        try:
            run = _climb(trainer, budget, metric)
        finally:
            trainer.close()
        seconds = time.perf_counter() - t0
    before, after = run.pop("start_outcomes")[metric], run["end_outcomes"][metric]
    seeds = run.pop("end_outcomes")["seeds"]
    ci = paired_ci(before, after)
    evidence = {
        "metric": metric,
        "budget": asdict(budget),
        "env_id": env_id,
        "seconds": round(seconds, 1),
        **run,
        "gain": ci.to_dict(),
        "test_seeds": [int(s) for s in seeds],
        "per_task": [[b, a] for b, a in zip(before, after)],
    }
    what = (
        f"held-out {metric} {run['start']:.3f} after {run['sft_steps']} SFT steps -> {run['end']:.3f} after "
        f"{budget.iterations} RL iterations: {100 * ci.mean:+.1f} points (95% {100 * ci.low:+.1f} to "
        f"{100 * ci.high:+.1f}, {ci.n} tasks)"
    )
    if min(before) >= 1.0 - 1e-9:
        return (
            "skip",
            f"the SFT start already scores 1 on every held-out task (a lower start_level leaves room): {what}",
            evidence,
        )
    return ("pass", what, evidence) if ci.low > 0 else ("fail", f"no gain above 0: {what}", evidence)
