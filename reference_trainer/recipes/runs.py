"""Running a recipe: its SFT start (:func:`sft_policy`), one RL run from a saved policy (:func:`rl_from`), both (:func:`learn`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

from .base import BEFORE_SFT_TASKS
from .registry import RECIPES

#: SFT starts shipped with the package, in :func:`sft_policy`'s layout (``<recipe>_sft_seed<s>_max<steps>/``: ``policy/``
#: and ``sft.json``): ``make demo`` and the suite's learning runs start RL from one instead of spending minutes on SFT
#: first. Made by ``benchmarks/demo_start.py``; the suite checks that the code still makes each (the same settings, and
#: its first SFT losses retrained: ``tests/reference_trainer/recipes/test_runs_shipped_starts.py``).
SHIPPED_STARTS = Path(__file__).parent / "starts"


def one_thread() -> None:
    """How a recipe's job runs: on one torch thread (reproducible, two jobs on two cores), keeping the memory its
    tensors free for the next step (:func:`~reference_trainer.memory.keep_freed_memory`)."""
    import torch

    from ..memory import keep_freed_memory

    torch.set_num_threads(1)
    keep_freed_memory()


def rl_from(job: tuple, start: tuple[dict, dict] | None = None) -> dict[str, Any]:
    """One RL run of a recipe from a saved policy, on one thread; a summary of its metrics.

    ``job = (recipe, algo, seed, policy_dir, iterations, eval_every, out_dir[, overrides])``: a tuple so that a
    process pool can map it (``benchmarks/learning.py`` does); ``overrides`` are config fields over the recipe's. Returns start/end held-out success
    and score with their per-task outcomes and paired 95% intervals
    (:func:`~reference_trainer.stats.paired_ci`), the evaluations on the way, RL seconds (rollouts
    and updates, without evaluations) and the per-iteration diagnostics (token and turn clip
    fractions, approx KL, gradient norm) and rollout metrics. ``start``: the policy's held-out
    evaluation measured before, passed to :meth:`~reference_trainer.trainer.Trainer.fit`.
    """
    import time

    from ..metrics import read_metrics
    from ..stats import paired_ci
    from ..tasks import training_groups
    from ..trainer import Trainer

    name, algo, seed, policy_dir, iterations, eval_every, out, *rest = job
    over: dict[str, Any] = dict(rest[0]) if rest else {}
    recipe = RECIPES[name]
    one_thread()
    tag = "_".join(f"{k}-{v}" for k, v in sorted(over.items()))
    cfg = recipe.build(
        algo,
        seed=seed,
        iterations=iterations,
        model=policy_dir,
        sft_episodes=0,
        out=str(Path(out) / f"{name}_{algo}{'_' + tag if tag else ''}_{Path(policy_dir).parent.name}_seed{seed}"),
        eval_every=eval_every,
        progress=False,
        **over,
    )
    t0 = time.perf_counter()
    trainer = Trainer(cfg)
    try:
        summary = trainer.fit(start=start)
    finally:
        trainer.close()
    records = read_metrics(trainer.logger.path)
    evals = [r for r in records if r.get("phase") == "eval"]
    train = [r for r in records if r.get("phase") == "train"]
    before, after = summary["start_outcomes"], summary["end_outcomes"]
    return {
        "recipe": name,
        "env": recipe.env_id,
        "algo": algo,
        "seed": seed,
        "overrides": over,
        "iterations": len(train),
        "seconds": time.perf_counter() - t0,
        "rl_seconds": sum(r["time/rollout_s"] + r["time/update_s"] for r in train),  # without evaluations
        "start": summary["start"]["success"],
        "end": summary["end"]["success"],
        "start_score": summary["start"]["score"],
        "end_score": summary["end"]["score"],
        "start_invalid_turns": summary["start"]["invalid_turns"],
        "end_invalid_turns": summary["end"]["invalid_turns"],
        "ci_success": paired_ci(before["success"], after["success"]).to_dict(),
        "ci_score": paired_ci(before["score"], after["score"]).to_dict(),
        # per held-out task, in the order of its reset seeds: the recipe's metric before and after RL,
        # so anyone can recompute the interval (and pool runs over seeds)
        "test_seeds": [int(x) for x in before["seeds"]],
        # every reset its rollouts played (tasks.group records): what the held-out check compares with the test tasks
        "train_tasks": training_groups(cfg, trainer.played_tasks),
        "per_task": [[b, a] for b, a in zip(before[recipe.metric], after[recipe.metric])],
        "eval_iterations": [r["iteration"] for r in evals],
        "eval_success": [r["eval/success"] for r in evals],
        "eval_score": [r["eval/score"] for r in evals],
        "clipfrac": [r.get("train/clipfrac", 0.0) for r in train],
        "clipfrac_turn": [r.get("train/clipfrac_turn", 0.0) for r in train],
        "approx_kl": [r.get("train/approx_kl", 0.0) for r in train],
        "grad_norm": [r.get("train/grad_norm", 0.0) for r in train],
        "rollout_success": [r["rollout/success"] for r in train],
        "rollout_score": [r["rollout/score"] for r in train],
        "invalid_turns": [r["rollout/invalid_turns"] for r in train],
        "train_tokens": [r.get("rollout/train_tokens", 0.0) for r in train],  # what each update ran through
        "train_rows": [r.get("rollout/train_rows", 0.0) for r in train],
        "rollout_s": [r["time/rollout_s"] for r in train],
        "update_s": [r["time/update_s"] for r in train],
    }


def sft_policy(
    name: str,
    work: str,
    *,
    seed: int = 0,
    model: str | None = None,
    seconds: float | None = None,
    max_steps: int | None = None,
    settings: dict[str, Any] | None = None,
    starts: Sequence[str | Path] = (),
    progress: bool = False,
) -> tuple[str, dict[str, Any]]:
    """Build the tiny model, SFT it with recipe ``name`` and SFT seed ``seed``, save the policy under
    ``work``; returns ``(policy_dir, meta)``. A policy saved before by the same settings is reused.

    The recipe's SFT runs to its validation plateau (``sft_validate_every``; the best weights on the
    validation split). With ``model`` (a saved policy) and ``seconds``, SFT instead continues from
    that policy on the same demonstrations, without validation, until its optimizer steps have
    taken ``seconds`` (on one thread): "more imitation for the same compute" beside RL. ``max_steps``
    lowers the recipe's SFT ceiling (:attr:`Recipe.suite_sft_steps`: the suite's budget). ``settings``: config fields
    over the recipe's (e.g. ``device``, ``dtype``: ``benchmarks/learning.py --set``), part of the saved recipe.
    ``starts``: folders searched, before ``work``, for a policy saved by the same settings (e.g. :data:`SHIPPED_STARTS`);
    ``progress`` draws SFT's bar.

    ``meta``: held-out ``before`` (the untrained model, on the first :data:`BEFORE_SFT_TASKS` test
    tasks; not for a continued SFT) and ``after`` success and score on the test tasks, SFT seconds,
    steps, the validation curve, the recipe's settings, ``train_tasks`` (every reset that trained it:
    :func:`~reference_trainer.tasks.training_groups`) and the after-SFT evaluation whole
    (``after_metrics``, ``after_outcomes``: what :meth:`~reference_trainer.trainer.Trainer.fit` takes as ``start``).
    """
    import json
    import time

    from ..policy import save_policy
    from ..tasks import training_groups
    from ..trainer import Trainer

    one_thread()
    continued = model is not None
    root = Path(work) / (
        sft_folder(name, seed, max_steps) if not continued else f"{name}_sft_more{seconds:.0f}s_seed{seed}"
    )
    over: dict[str, Any] = {"model": model, "sft_steps": 10**6, "sft_validate_every": 0} if continued else {}
    if max_steps is not None and not continued:
        over["sft_steps"] = int(max_steps)
    policy_dir, meta_file = root / "policy", root / "sft.json"
    cfg = RECIPES[name].build(seed=seed, out=str(root / "run"), progress=progress, **{**(settings or {}), **over})
    cfg.model.tiny.dir = str(root / "tiny")
    recipe = start_settings(cfg)
    if continued:
        recipe["start"] = json.loads((Path(model).parent / "sft.json").read_text()).get("recipe")
        recipe["seconds"] = round(float(seconds), 0)
    for folder in (*map(Path, starts), Path(work)):
        saved = _saved_start(folder / root.name, recipe)
        if saved is not None:
            return saved
    trainer = Trainer(cfg)
    try:
        t0 = time.perf_counter()
        # the untrained model plays every turn to the limit: a sanity check, not a baseline
        before = None if continued else trainer.evaluate(BEFORE_SFT_TASKS)
        t1 = time.perf_counter()
        stats = trainer.sft(max_seconds=seconds)
        sft_seconds = time.perf_counter() - t1
        after = trainer.evaluate(current=True)
        after_outcomes = trainer.last_eval_outcomes
        save_policy(trainer.policy, trainer.tokenizer, policy_dir)
    finally:
        trainer.close()
    meta = {
        "seed": seed,
        "after": after["success"],
        "after_tasks": cfg.train.eval_episodes,
        "after_score": after["score"],
        "after_invalid_turns": after["invalid_turns"],
        "seconds": time.perf_counter() - t0,
        "sft_seconds": sft_seconds,
        "steps": int(stats["sft/steps"]),
        "step_seconds": stats["sft/step_seconds"],
        "best_step": int(stats.get("sft/best_step", stats["sft/steps"])),
        "validation": stats.get("sft/validation", []),
        "batch_size": cfg.train.sft_batch_size,
        "episodes": cfg.train.sft_episodes,
        "loss": stats["sft/loss"],
        "first_losses": stats["sft/first_losses"],
        "recipe": recipe,
        "train_tasks": training_groups(cfg),
        "after_metrics": after,
        "after_outcomes": after_outcomes,
    }
    if before is not None:
        meta.update(
            before=before["success"],
            before_score=before["score"],
            before_tasks=min(BEFORE_SFT_TASKS, cfg.train.eval_episodes),
        )
    meta_file.write_text(json.dumps(meta, indent=1))
    return str(policy_dir), meta


def first_sft_losses(name: str, seed: int = 0, max_steps: int | None = None, steps: int | None = None) -> list[float]:
    """The first ``steps`` (default: all :data:`~reference_trainer.sft.FIRST_LOSSES`) SFT losses of recipe ``name``'s
    start, trained as :func:`sft_policy` trains it (the same model, demonstrations and batch draws, one thread; no
    validation, which never changes the steps before it): what its saved ``first_losses`` must match."""
    import tempfile

    from ..sft import FIRST_LOSSES
    from ..trainer import Trainer

    one_thread()
    over: dict[str, Any] = {"sft_validate_every": 0}
    if max_steps is not None:
        over["sft_steps"] = int(max_steps)
    with tempfile.TemporaryDirectory() as work:
        cfg = RECIPES[name].build(seed=seed, out=str(Path(work) / "run"), progress=False, **over)
        cfg.model.tiny.dir = str(Path(work) / "tiny")
        trainer = Trainer(cfg)
        try:
            return trainer.sft(steps=FIRST_LOSSES if steps is None else steps)["sft/first_losses"]
        finally:
            trainer.close()


def sft_folder(name: str, seed: int, max_steps: int | None = None) -> str:
    """The folder :func:`sft_policy` saves recipe ``name``'s SFT start of ``seed`` in (under its ceiling ``max_steps``)."""
    return f"{name}_sft_seed{seed}" + (f"_max{int(max_steps)}" if max_steps is not None else "")


def _saved_start(root: Path, recipe: dict[str, Any]) -> tuple[str, dict[str, Any]] | None:
    """``(policy_dir, meta)`` of the start :func:`sft_policy` saved under ``root`` with exactly ``recipe``, or ``None``."""
    import json

    policy_dir, meta_file = root / "policy", root / "sft.json"
    if (policy_dir / "config.json").exists() and meta_file.exists():
        meta = json.loads(meta_file.read_text())
        if same_settings(meta.get("recipe"), recipe):
            return str(policy_dir), meta
    return None


def start_settings(cfg: Any) -> dict[str, Any]:
    """The settings an SFT start made with config ``cfg`` is saved with (and looked up by): every field but RL's
    (``algo``, the budget, evaluations), the output folders and the progress bar."""
    import json

    recipe = json.loads(json.dumps({k: v for k, v in cfg.to_dict().items() if k != "algo"}, default=str))
    recipe["model"].pop("tiny_dir", None)
    for key in ("out", "iterations", "eval_every", "progress"):  # RL's budget, evaluations, a bar: no part of the SFT
        recipe["train"].pop(key, None)
    return recipe


def suite_start_settings(name: str) -> dict[str, Any]:
    """:func:`start_settings` of the suite's start of recipe ``name`` (:func:`suite_sft_policy`)."""
    steps = RECIPES[name].suite_sft_steps
    return start_settings(RECIPES[name].build(seed=0, out="unused", **({"sft_steps": steps} if steps else {})))


def same_settings(saved: dict[str, Any] | None, recipe: dict[str, Any]) -> bool:
    """Whether a start saved with settings ``saved`` was made with ``recipe``: equal, except that a config field
    added since (absent from ``saved``) must hold its default, which keeps what the start was made with."""
    import json

    from ..config import Config

    if not isinstance(saved, dict) or saved.keys() != recipe.keys():
        return False
    defaults = json.loads(json.dumps(Config().to_dict(), default=str))
    for section, fields in recipe.items():
        old = saved[section]
        if not isinstance(fields, dict) or not isinstance(old, dict):
            if old != fields:
                return False
            continue
        added = set(fields) - set(old)
        if set(old) - set(fields) or any(old[k] != fields[k] for k in old):
            return False
        if any(k not in defaults.get(section, {}) or defaults[section][k] != fields[k] for k in added):
            return False
    return True


#: The keys of :func:`sft_policy`'s meta that hold its after-SFT evaluation whole (per-task outcomes).
_SFT_EVALUATION = ("after_metrics", "after_outcomes", "train_tasks")


def sft_start(meta: dict[str, Any]) -> tuple[tuple[dict, dict] | None, dict[str, Any]]:
    """Split :func:`sft_policy`'s meta into RL's start evaluation (``fit``'s ``start``: the saved
    policy on the recipe's held-out tasks, measured right after SFT; ``None`` for a meta saved
    without it) and the summary worth reporting (the rest)."""
    start = (meta["after_metrics"], meta["after_outcomes"]) if "after_outcomes" in meta else None
    return start, {k: v for k, v in meta.items() if k not in _SFT_EVALUATION}


def suite_sft_policy(name: str, work: str) -> tuple[str, dict[str, Any]]:
    """The suite's SFT start of recipe ``name``: :func:`sft_policy`, seed 0, under :attr:`Recipe.suite_sft_steps`."""

    return sft_policy(name, work, max_steps=RECIPES[name].suite_sft_steps, starts=(SHIPPED_STARTS,))


def suite_start(name: str, work: str) -> dict[str, Any]:
    """The suite's SFT start of recipe ``name`` (:func:`suite_sft_policy`: the shipped one when its settings are the
    suite's) with the evidence that the code still makes it: the first SFT losses it recorded and, for a shipped
    start, the same steps retrained now (:func:`first_sft_losses`; a start trained here is its own evidence)."""
    policy_dir, meta = suite_sft_policy(name, work)
    shipped = Path(policy_dir).resolve().is_relative_to(SHIPPED_STARTS.resolve())
    recorded = meta.get("first_losses")
    retrained = first_sft_losses(name, 0, RECIPES[name].suite_sft_steps) if shipped else recorded
    return {"policy_dir": policy_dir, "shipped": shipped, "first_losses": recorded, "retrained_first_losses": retrained}


def learn(job: tuple) -> dict[str, Any]:
    """A recipe end to end on one thread, as the suite runs it: its SFT start (:func:`suite_sft_policy`,
    reused when saved), then one RL run (:func:`rl_from`). ``job = (recipe, algo, seed, iterations, eval_every,
    work)``; ``iterations <= 0`` means the recipe's budget. RL's start evaluation is the SFT's
    (the same saved policy on the same tasks), not played a second time. The result is
    :func:`rl_from`'s with ``"sft"`` (the start's meta) added and ``train_tasks`` covering SFT's inputs too."""
    from ..tasks import merge_groups

    name, algo, seed, iterations, eval_every, work, *over = job
    policy_dir, meta = suite_sft_policy(name, work)
    n = iterations if iterations > 0 else RECIPES[name].rl_iterations
    start, result_sft = sft_start(meta)  # the saved policy's evaluation right after SFT: not played a second time
    result = rl_from((name, algo, seed, policy_dir, n, eval_every, work, *over), start=start)
    result["sft"] = result_sft
    result["train_tasks"] = merge_groups(meta["train_tasks"] + result["train_tasks"])  # the SFT start's inputs and RL's
    return result


def zero_shot(name: str, spec: dict[str, Any]) -> dict[str, Any]:
    """The recipe's model before any training, greedy, on its first ``spec["tasks"]`` test tasks, on one thread.

    ``spec``: :attr:`~reference_trainer.recipes.base.Recipe.zero_shot` (``env_kwargs`` over the evaluation's env
    options, ``train`` over the recipe's config fields). Returns the evaluation's metrics, its per-task ``success``,
    ``score`` and the recipe's metric (``per_task``, in the order of the test resets) and the settings."""
    import tempfile
    import time

    from ..trainer import Trainer

    one_thread()
    recipe = RECIPES[name]
    n = int(spec["tasks"])
    base = recipe.build(out="unused")
    over = {"eval_env_kwargs": {**base.train.eval_env_kwargs, **spec.get("env_kwargs", {})}, **spec.get("train", {})}
    with tempfile.TemporaryDirectory() as out:
        cfg = recipe.build(sft_episodes=0, eval_episodes=n, out=out, progress=False, **over)
        t0 = time.perf_counter()
        trainer = Trainer(cfg)
        try:
            metrics = trainer.evaluate(n)
            outcomes = trainer.last_eval_outcomes
        finally:
            trainer.close()
    return {
        "recipe": name,
        "tasks": n,
        "spec": spec,
        "metrics": metrics,
        "seconds": time.perf_counter() - t0,
        "test_seeds": [int(x) for x in outcomes["seeds"]],
        "success": list(outcomes["success"]),
        "score": list(outcomes["score"]),
        "per_task": [float(x) for x in outcomes[recipe.metric]],
    }
