"""``learnability``: does a small learner improve on the env with its reward as the only teacher?

A short hill-climb of the reference trainer's tiny model (``reference_trainer``, the ``train`` extra; imported only
here, so the suite imports without torch): the tiny model is built from the env's own text, imitates a few hundred
``expert_action()`` episodes of training tasks for a few steps (a start that is better than random yet short of the
ceiling), then Turn-PPO runs a few iterations on training tasks. The verdict is the paired gain of success on held-out
tasks (the recipe's metric where the env has one; the same tasks before and after RL, 95% interval,
``reference_trainer.stats.paired_ci``): it passes when the interval lies above 0. An env whose reward does not follow what its observations show cannot pass: nothing the policy sees
tells it how to earn more.

Held-out tasks are reset seeds the training never draws (the trainer's ``eval_seed`` and above); an env with a
registered recipe (``reference_trainer.recipes``) uses that recipe's settings and its content-disjoint test split.
The short SFT start is on purpose: the check asks whether the reward teaches, not how far imitation goes (that is
what ``benchmarks/learning.py`` measures).
"""

from __future__ import annotations

import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import gymnasium as gym

from ..remote import REMOTE_ENV_ID
from .targets import spec_kind

#: The id a ``module:factory`` target is registered under for the trainer, which makes its envs by id.
TARGET_ID = "agentgym_turn_validate/Target-v0"


@dataclass(frozen=True)
class LearnBudget:
    """The hill-climb's size. SFT runs ``sft_chunk`` steps at a time on ``sft_episodes`` expert episodes of training
    tasks until the policy, sampling as RL will, reaches ``start_level`` of the metric on 64 training tasks (at most
    ``sft_max_steps``): a start RL can move in either direction. Then ``iterations`` of ``algo``, each on
    ``tasks_per_iteration`` tasks, and ``eval_tasks`` held-out tasks played greedily before and after. ``None`` takes
    the env's recipe where it has one (its demonstrations, its suite's SFT ceiling, its RL settings and budget: what
    was measured on its validation split), else the defaults: 256 demonstrations, at most 200 SFT steps, 50 iterations of 64 tasks, 16 a minibatch (200 optimizer
    steps: RFC 008's "a policy improves in a few hundred steps"), 128 held-out tasks."""

    sft_episodes: int | None = None
    sft_chunk: int = 10
    sft_max_steps: int | None = None
    start_level: float = 0.5
    iterations: int | None = None
    tasks_per_iteration: int | None = None
    eval_tasks: int | None = None
    algo: str = "turn-ppo"
    #: Longest response per turn, in tokens; ``None``: a recipe's own, else 32 raised to hold the expert's longest reply
    #: (:func:`fitting_response`).
    max_new_tokens: int | None = None
    #: Trainer config fields over the hill-climb's (e.g. ``{"lr": 1e-4}``).
    settings: dict = field(default_factory=dict)


#: The hill-climb's size for an env without a recipe (see :class:`LearnBudget`).
GENERIC = {
    "sft_episodes": 256,
    "sft_max_steps": 200,
    "iterations": 50,
    "tasks_per_iteration": 64,
    "eval_tasks": 128,
    "max_new_tokens": 32,
}
PROBE_TASKS = 64
#: The most context the generic climb raises itself to: the tiny model's rotary positions set no limit, its attention
#: cost (and a rollout's memory) grows with the context.
MAX_GENERIC_CONTEXT = 4096
#: The longest reply the generic climb raises its response budget to.
MAX_GENERIC_RESPONSE = 256


def fitting_context(longest_demo: int, max_new_tokens: int, default: int, cap: int = MAX_GENERIC_CONTEXT) -> int:
    """The generic climb's ``max_context_tokens``: ``default``, raised (to a multiple of 256, at most ``cap``) to hold
    the longest expert episode and one more reply. Left at the default, an env whose expert talks longer than it would
    train on its shorter tasks only and count every long one a failure (or, none fitting, not start)."""
    need = int(longest_demo) + int(max_new_tokens)
    return int(default) if need <= default else min(int(cap), -(-need // 256) * 256)


def fitting_response(longest_reply: int, default: int, cap: int = MAX_GENERIC_RESPONSE) -> int:
    """The generic climb's ``max_new_tokens``: ``default``, raised (to a multiple of 8, at most ``cap``) to hold the
    expert's longest reply. Left at the default, a reply the model imitates whole is cut when it samples it: an env
    whose expert thinks aloud before it acts would see mostly unfinished, invalid actions."""
    return int(default) if longest_reply <= default else min(int(cap), -(-int(longest_reply) // 8) * 8)


def _demo_lengths(trainer: Any) -> tuple[int, int]:
    """``(longest input, longest reply)`` in tokens of the SFT demonstrations ``trainer`` will imitate (played here
    once to measure them)."""
    from reference_trainer.rollout import longest_input
    from reference_trainer.sft import sft_demonstrations

    cfg = trainer.cfg
    demos = sft_demonstrations(cfg, trainer.fmt, cfg.train.sft_episodes)
    longest = max((longest_input(d) for d in demos), default=0)
    reply = max((b - a for d in demos for a, b in d.conversation.action_spans), default=0)
    return longest, reply


def trainer_env(spec: str | None) -> tuple[str | None, dict[str, Any], str]:
    """``(env id, env kwargs, why not)`` the trainer can make the target by: a registered id as it is, a
    ``module:factory`` registered under :data:`TARGET_ID`, a served env's URL through the remote client's id."""
    if spec is None:
        return None, {}, "the trainer makes its envs by id: give an env id, 'module:factory' or a URL, not an object"
    if spec_kind(spec) == "url":
        return REMOTE_ENV_ID, {"base_url": spec}, ""
    if spec_kind(spec) == "factory":
        gym.registry.pop(TARGET_ID, None)  # the last target's registration: replaced without a warning
        gym.register(id=TARGET_ID, entry_point=spec)
        return TARGET_ID, {}, ""
    return spec, {}, ""


def family_recipe(env_id: str) -> Any:
    """The tiny-model recipe the hill-climb of ``env_id`` takes: the id's own, else that of a registered id made by
    the same env class (``TurnSokoban-8x8-v0`` takes ``TurnSokoban-v0``'s settings, chosen on that id's validation
    split, with its own levels); ``None`` where no recipe's env is of its class."""
    from reference_trainer.recipes import RECIPES

    suite = [r for r in RECIPES.values() if r.suite_learning]
    own = next((r for r in suite if r.env_id == env_id), None)
    if own is not None or env_id not in gym.registry:
        return own
    entry = gym.spec(env_id).entry_point
    return next((r for r in suite if r.env_id in gym.registry and gym.spec(r.env_id).entry_point == entry), None)


def climb_recipe(env_id: str, env_kwargs: dict[str, Any]) -> Any:
    """The recipe the climb of ``env_id`` made with ``env_kwargs`` takes (:func:`family_recipe`); ``None`` (the generic
    climb) where kwargs are given: a recipe's settings were chosen for its env as registered. A served env takes
    the recipe of the id it serves when it serves it as the recipe plays it (:func:`served_phases`)."""
    if env_id == REMOTE_ENV_ID and set(env_kwargs) == {"base_url"}:
        served = served_phases(env_kwargs["base_url"])
        return None if served is None else served[0]
    return family_recipe(env_id) if not env_kwargs else None


#: The recipe's env options of each phase: training rollouts, SFT's expert play, held-out test and validation tasks.
_PHASES = {"train": None, "sft": "sft_env_kwargs", "test": "eval_env_kwargs", "validation": "val_env_kwargs"}


def served_phases(base_url: str) -> tuple[Any, dict[str, dict[str, Any]]] | None:
    """``(recipe, {phase: reset options})`` when the server at ``base_url`` serves a recipe's env as the recipe plays
    it, else None. A recipe plays its phases (training, SFT, test, validation tasks) on envs made with different
    kwargs; one served env can play them all when every kwarg that differs is a reset option of the env (Sokoban's
    ``split``) and the server serves the rest: the same id, kwargs and turn limit, compared by the configuration
    digest its ``/schema`` publishes. Each phase's client then sends its options with every reset."""
    from ..remote.client import RemoteTurnEnv
    from ..remote.sessions import describe_env

    client = RemoteTurnEnv(base_url)
    try:
        served_id, digest = client.served_env_id, client.config_digest
    finally:
        client.close()
    recipe = family_recipe(served_id)
    if recipe is None:
        return None
    cfg = recipe.build("turn-ppo", out="unused")
    kwargs = dict(cfg.rollout.env_kwargs)
    probe = gym.make(served_id, **kwargs)
    per_episode = frozenset(getattr(probe.unwrapped, "reset_options", ()))
    probe.close()
    overs = {phase: {} if field is None else dict(getattr(cfg.train, field) or {}) for phase, field in _PHASES.items()}
    if any(set(over) - per_episode for over in overs.values()):
        return None  # a phase needs another env (another world), not other episodes of this one
    if describe_env(served_id, {k: v for k, v in kwargs.items() if k not in per_episode}).config_digest != digest:
        return None
    phases = {}
    for phase, over in overs.items():
        merged = {**kwargs, **over}
        phases[phase] = {k: merged[k] for k in sorted(per_episode) if k in merged}
    return recipe, phases


def _config(env_id: str, env_kwargs: dict[str, Any], budget: LearnBudget, seed: int, out: Path) -> tuple[Any, str, int]:
    """The run's config, the held-out metric and the most SFT steps: the env's recipe (its RL settings and budget) where one exists, else
    the Turn-PPO preset with the recipes' shared settings against one iteration's noise, at :data:`GENERIC`'s size."""
    from reference_trainer.config import Config
    from reference_trainer.recipes.base import NOISE_CONTROL

    given = {
        "sft_episodes": budget.sft_episodes,
        "iterations": budget.iterations,
        "tasks_per_iteration": budget.tasks_per_iteration,
        "num_envs": budget.tasks_per_iteration,
        "eval_episodes": budget.eval_tasks,
    }
    run = dict(sft_validate_every=0, eval_every=0, progress=False, threads=1, out=str(out))
    recipe = climb_recipe(env_id, env_kwargs)
    if recipe is not None:
        over = {k: v for k, v in given.items() if v is not None}
        if env_id == REMOTE_ENV_ID:  # the served env, each phase's tasks chosen by its reset options
            _, phases = served_phases(env_kwargs["base_url"])
            client = lambda phase: {"reset_options": phases[phase]}  # noqa: E731
            over.update(
                env_kwargs={**env_kwargs, **client("train")},
                **{field: client(phase) for phase, field in _PHASES.items() if field is not None},
            )
        cfg = recipe.build(budget.algo, seed=seed, **run, **over, **budget.settings, env=env_id)
        return cfg, recipe.metric, budget.sft_max_steps or recipe.suite_sft_steps or cfg.train.sft_steps
    size = {**GENERIC, **{k: v for k, v in vars(budget).items() if k in GENERIC and v is not None}}
    cfg = Config.from_preset(
        budget.algo,
        env=env_id,
        env_kwargs=dict(env_kwargs),
        seed=seed,
        temperature=0.8,
        max_new_tokens=size["max_new_tokens"],
        sft_episodes=size["sft_episodes"],
        **{
            "sft_batch_size": 32,
            **NOISE_CONTROL,
            "iterations": size["iterations"],
            "tasks_per_iteration": size["tasks_per_iteration"],
            "num_envs": size["tasks_per_iteration"],
            "minibatch_size": max(1, size["tasks_per_iteration"] // 4),
            "eval_episodes": size["eval_tasks"],
            **run,
            **budget.settings,
        },
    )
    return cfg, "success", size["sft_max_steps"]


def probe_seeds(trainer: Any) -> list[int]:
    """The training tasks SFT's sampled play is probed on: the :data:`PROBE_TASKS` seeds below the held-out ones."""
    return list(range(trainer.cfg.train.eval_seed - PROBE_TASKS, trainer.cfg.train.eval_seed))


def sft_to_start(trainer: Any, budget: LearnBudget, metric: str, sft_max_steps: int) -> list[float]:
    """SFT, ``budget.sft_chunk`` steps at a time, until the sampled play on :func:`probe_seeds` reaches
    ``budget.start_level`` of ``metric`` or ``sft_max_steps`` are done; the level after each chunk."""
    from reference_trainer.rollout import episode_metrics

    levels: list[float] = []
    while len(levels) * budget.sft_chunk < sft_max_steps and (not levels or levels[-1] < budget.start_level):
        trainer.sft(steps=budget.sft_chunk)
        levels.append(episode_metrics(trainer.rollout(probe_seeds(trainer)))[metric])
    return levels


def climb_trainer(
    env_id: str, env_kwargs: dict[str, Any], budget: LearnBudget, seed: int, out: Path
) -> tuple[Any, str, int]:
    """``(trainer, metric, most SFT steps)`` of the climb (:func:`_config`), its tiny model built under ``out``; the
    generic climb's reply budget and context sized to its demonstrations (:func:`fitting_response`,
    :func:`fitting_context`)."""
    from reference_trainer.trainer import Trainer

    cfg, metric, sft_max_steps = _config(env_id, env_kwargs, budget, seed, out / "run")
    cfg.model.tiny.dir = str(out / "tiny")  # a target registered under TARGET_ID must never share a cached build
    trainer = Trainer(cfg)
    # a recipe's reply and context budgets were chosen with its settings; the generic climb sizes its own
    if climb_recipe(env_id, env_kwargs) is None:
        r = cfg.rollout
        longest, reply = _demo_lengths(trainer)
        new_tokens = fitting_response(reply, r.max_new_tokens) if budget.max_new_tokens is None else r.max_new_tokens
        context = r.max_context_tokens
        if "max_context_tokens" not in budget.settings:
            context = fitting_context(longest, new_tokens, r.max_context_tokens)
        if (new_tokens, context) != (r.max_new_tokens, r.max_context_tokens):  # the same tiny model (built once)
            trainer.close()
            r.max_new_tokens, r.max_context_tokens = new_tokens, context
            trainer = Trainer(cfg)
    return trainer, metric, sft_max_steps


def _climb(trainer: Any, budget: LearnBudget, metric: str, sft_max_steps: int) -> dict[str, Any]:
    """SFT to the start level, held-out evaluation, RL, held-out evaluation; what each step measured."""
    levels = sft_to_start(trainer, budget, metric, sft_max_steps)
    start = trainer.evaluate()
    start_outcomes = trainer.last_eval_outcomes
    rollout_levels = [trainer.train_iteration()[f"rollout/{metric}"] for _ in range(trainer.cfg.train.iterations)]
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
        from reference_trainer.trainer import Trainer  # noqa: F401 (the train extra: torch and transformers)
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
        t0 = time.perf_counter()
        trainer, metric, sft_max_steps = climb_trainer(env_id, env_kwargs, budget, seed, Path(work_dir or tmp))
        cfg, recipe = trainer.cfg, climb_recipe(env_id, env_kwargs)
        try:
            run = _climb(trainer, budget, metric, sft_max_steps)
        finally:
            trainer.close()
        seconds = time.perf_counter() - t0
    before, after = run.pop("start_outcomes")[metric], run["end_outcomes"][metric]
    seeds = run.pop("end_outcomes")["seeds"]
    ci = paired_ci(before, after)
    evidence = {
        "metric": metric,
        "budget": asdict(budget),
        "iterations": cfg.train.iterations,
        "tasks_per_iteration": cfg.rollout.tasks_per_iteration,
        "env_id": env_id,
        "recipe": getattr(recipe, "name", None),
        "max_context_tokens": cfg.rollout.max_context_tokens,
        "max_new_tokens": cfg.rollout.max_new_tokens,
        "seconds": round(seconds, 1),
        **run,
        "gain": ci.to_dict(),
        "test_seeds": [int(s) for s in seeds],
        "per_task": [[b, a] for b, a in zip(before, after)],
    }
    what = (
        f"held-out {metric} {run['start']:.3f} after {run['sft_steps']} SFT steps -> {run['end']:.3f} after "
        f"{cfg.train.iterations} RL iterations of {cfg.rollout.tasks_per_iteration} tasks: {100 * ci.mean:+.1f} points (95% {100 * ci.low:+.1f} to "
        f"{100 * ci.high:+.1f}, {ci.n} tasks)"
    )
    if min(before) >= 1.0 - 1e-9:
        return (
            "skip",
            f"the SFT start already reaches 1 on every held-out task (a lower start_level leaves room): {what}",
            evidence,
        )
    return ("pass", what, evidence) if ci.low > 0 else ("fail", f"no gain above 0: {what}", evidence)
