"""Does RL add anything over the best imitation? Each env's recipe, tiny model, CPU, on test tasks held out by content.

Per env (a recipe of :mod:`reference_trainer.recipes`), three experiments:

* **validation** (default): for each SFT seed, SFT on the env's expert to its validation plateau
  (the best SFT), then RL (``--algo``, default Turn-PPO) from it for each RL seed, and the same
  SFT continued for the mean RL time of its runs ("more imitation for RL's compute"). Reported
  on the recipe's test tasks: best SFT, SFT continued, RL, and the gains over the best SFT with
  an interval over SFT seeds, RL seeds and test tasks (:func:`reference_trainer.stats.nested_bootstrap`).
* ``--ablation``: from SFT seed 0, Turn-PPO's estimator, gamma, lambda and budget with only the
  importance ratio's level changed (token, turn, sequence).
* ``--stress``: the same ratio levels with and without ST-PPO's clipping-bias correction, in a
  setting where clipping binds (more epochs, smaller minibatches, a larger learning rate).
* ``--control``: the negative control, each episode paid another episode's score (``--reward shuffled``).

    python benchmarks/learning.py --env sokoban                 # validation: 3 SFT seeds x 3 RL seeds
    python benchmarks/learning.py --env sokoban --ablation      # ratio level only
    python benchmarks/learning.py --env sokoban --stress        # clipping binds
    python benchmarks/learning.py --env sokoban --control       # shuffled rewards: must gain nothing
    python benchmarks/learning.py --env sokoban --markdown      # print the docs tables from the saved JSONs

Writes ``benchmarks/results/learning_<env>[_ablation|_stress|_control].json`` and a PNG each. The JSON holds
``tasks`` (``{"test": [GROUP], "train": [GROUP...]}``, every reset that played a test task or a
training input: :mod:`reference_trainer.tasks`) and, per run, ``per_task`` (``[before, after]`` of the
recipe's metric, aligned with the test resets), so the overlap and every interval can be recomputed
(``python benchmarks/learning.py --check FILE``). Finished jobs are kept in ``--work`` and reused.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import multiprocessing as mp
import os
import sys
from pathlib import Path
from typing import Any

from reference_trainer.recipes import RECIPES  # no torch import

try:  # python -m benchmarks.learning, or imported by the tests
    from benchmarks import common
except ModuleNotFoundError:  # python benchmarks/learning.py: this folder comes first on the import path
    import common

PRESETS = ["ppo", "turn-ppo", "s-ppo", "st-ppo", "grpo"]
#: Only the ratio's level changes (Turn-PPO's turn GAE, gamma 0.99, lambda 0.9, budget and everything else kept).
ABLATION = {
    "token ratio": {"ratio_level": "token"},
    "turn ratio (Turn-PPO)": {"ratio_level": "turn"},
    "sequence ratio": {"ratio_level": "sequence"},
}
#: Where clipping binds: 4 epochs over each batch in minibatches of 16 (16 optimizer steps per batch, the last ones far
#: off-policy) at 3x the recipe's learning rate; token and turn ratios without and with the clipping-bias correction.
STRESS_SETTINGS = {"epochs": 4, "minibatch_size": 16, "lr": 1e-3, "kl_coef": 0.0}
#: The negative control: the same trainer, start and budget, each episode paid another episode's score.
CONTROL = {"shuffled reward": {"reward": "shuffled"}}
STRESS = {
    "token ratio": {"ratio_level": "token", "clip_bias_correction": "none"},
    "token ratio + correction (S-PPO's)": {"ratio_level": "token", "clip_bias_correction": "max1"},
    "turn ratio (Turn-PPO)": {"ratio_level": "turn", "clip_bias_correction": "none"},
    "turn ratio + correction (ST-PPO)": {"ratio_level": "turn", "clip_bias_correction": "max1"},
}


def _key(*parts: Any) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:16]


def _job(job: tuple[str, tuple, str]) -> dict[str, Any]:
    """One job in a fresh process (``sft``, ``more``, ``rl`` or ``zero``), saved to ``cache`` as soon as it ends."""
    kind, args, cache = job
    from reference_trainer.recipes import rl_from, sft_policy

    if kind == "sft":
        name, work, seed, *settings = args
        policy_dir, meta = sft_policy(name, work, seed=seed, settings=settings[0] if settings else None)
        result = {"policy_dir": policy_dir, **meta}
    elif kind == "more":
        name, work, seed, model, seconds, *settings = args
        policy_dir, meta = sft_policy(
            name, work, seed=seed, model=model, seconds=seconds, settings=settings[0] if settings else None
        )
        result = {"policy_dir": policy_dir, **meta}
    elif kind == "zero":
        from reference_trainer.recipes import zero_shot

        result = zero_shot(*args)
    else:
        rl_job, start, sft_seed = args
        result = {"sft_seed": sft_seed, **rl_from(rl_job, start=start)}
    Path(cache).write_text(json.dumps(result))
    return result


#: With ``--cached-only``: report the finished jobs found in ``--work``, run none.
CACHED_ONLY = False
#: ``--set``: config fields over every job's recipe (a GPU run: device, dtype, batch sizes); part of every cache key.
SETTINGS: dict[str, Any] = {}


def _settings() -> tuple[dict[str, Any], ...]:
    """``(SETTINGS,)`` when there are any, else ``()``: jobs and cache keys of runs without ``--set`` stay as they were."""
    return (dict(SETTINGS),) if SETTINGS else ()


def parse_settings(pairs: list[str]) -> dict[str, Any]:
    """``["device=cuda", "num_envs=128", "recompute_old_logp=true"]`` -> config fields; values read as JSON where they
    parse (numbers, true/false/null), as text otherwise; an unknown field name is an error naming the fields."""
    from reference_trainer.config import field_sections

    known = field_sections()
    out: dict[str, Any] = {}
    for pair in pairs:
        key, sep, text = pair.partition("=")
        if not sep or key not in known:
            raise SystemExit(
                f"--set takes FIELD=VALUE with FIELD a config field (python -m reference_trainer train --help), got {pair!r}."
            )
        try:
            out[key] = json.loads(text)
        except json.JSONDecodeError:
            out[key] = text
    return out


def _run_all(jobs: list[tuple[str, tuple, str]], n: int, label: str) -> list[dict[str, Any]]:
    """Run ``jobs`` (reusing cached results) ``n`` processes at a time, one thread each; results in job order
    (with :data:`CACHED_ONLY`, only the finished ones)."""
    out: list[Any] = [None] * len(jobs)
    todo = []
    for i, job in enumerate(jobs):
        if Path(job[2]).exists():
            out[i] = json.loads(Path(job[2]).read_text())
        else:
            todo.append(i)
    print(f"[{label}] {len(jobs) - len(todo)} reused, {len(todo)} to run", flush=True)
    if CACHED_ONLY:
        return [r for r in out if r is not None]
    if todo:
        with mp.get_context("spawn").Pool(min(n, len(todo)), maxtasksperchild=1) as pool:
            for i, r in zip(todo, pool.imap(_job, [jobs[i] for i in todo])):
                out[i] = r
                print(
                    f"[{label}] done: {jobs[i][0]} {r.get('algo', '')} sft seed {r.get('sft_seed', r.get('seed'))}",
                    flush=True,
                )
    return out


def _start(meta: dict[str, Any]) -> tuple[dict, dict]:
    return meta["after_metrics"], meta["after_outcomes"]


def _metric_of(meta: dict[str, Any], metric: str) -> list[float]:
    return [float(x) for x in meta["after_outcomes"][metric]]


def _rl_jobs(
    name: str,
    args: argparse.Namespace,
    sfts: list[dict[str, Any]],
    variants: dict[str, dict[str, Any]],
    seeds: list[int],
    iterations: int,
    cache: Path,
    algo: str | None = None,
) -> list[tuple[str, tuple, str]]:
    algo = algo or args.algo[0]
    jobs = []
    for sft in sfts:
        for label, over in variants.items():
            for seed in seeds:
                rl_job = (
                    name,
                    algo,
                    seed,
                    sft["policy_dir"],
                    iterations,
                    0,
                    str(Path(args.work)),
                    {**SETTINGS, **over},
                )
                # the config, not the overrides' spelling: a variant equal to the recipe reuses the recipe's runs
                key = _key(
                    rl_job[:3],
                    rl_job[4:6],
                    sft["recipe"],
                    sft["after"],
                    RECIPES[name].build(algo, **{**SETTINGS, **over}).to_dict(),
                )
                jobs.append(("rl", (rl_job, _start(sft), sft["seed"]), str(cache / f"rl_{key}.json")))
    return jobs


def _test_group_and_keys(name: str) -> tuple[dict[str, Any], list[str]]:
    from reference_trainer.tasks import eval_group, task_keys

    group = eval_group(RECIPES[name].build(out="unused"))
    return group, [str(k) for k in task_keys(group)]


def scripted_references(name: str, test: dict[str, Any]) -> dict[str, float]:
    """The recipe's metric of scripted policies on its test tasks (the group ``test``), greedy and model-free: the
    env's expert (the demonstrator) and, for WebShop, its first turn then ``click[1]`` and ``click[buy now]``."""
    import gymnasium as gym

    import agentgym_turn  # noqa: F401  (registers the ids)

    metric = RECIPES[name].metric
    env = gym.make(test["env_id"], **test["env_kwargs"])
    policies = {"expert": lambda turn, shop: shop.expert_action()}
    if name == "webshop":
        policies["expert's search, then buy the first result"] = lambda turn, shop: (
            shop.expert_action() if turn == 0 else "click[1]" if turn == 1 else "click[buy now]"
        )
    out = {}
    for label, act in policies.items():
        total = 0.0
        for reset in test["resets"]:
            env.reset(seed=reset["seed"], options=reset.get("options"))
            info: dict[str, Any] = {}
            for turn in range(64):
                _, _, terminated, truncated, info = env.step(act(turn, env.unwrapped))
                if terminated or truncated:
                    break
            total += float(info.get(metric, 0.0))
        out[label] = total / len(test["resets"])
    env.close()
    return out


def _tasks(test: dict[str, Any], trained: list[dict[str, Any]]) -> dict[str, Any]:
    from reference_trainer.tasks import merge_groups

    groups = []
    for r in trained:
        groups += r["train_tasks"]
    return {"test": [test], "train": merge_groups(groups)}


def _strip(r: dict[str, Any]) -> dict[str, Any]:
    """A job's result without what the file keeps once (its training resets) or cannot use (the saved evaluation whole)."""
    return {k: v for k, v in r.items() if k not in ("train_tasks", "after_metrics", "after_outcomes")}


def _machine(args: argparse.Namespace) -> dict[str, Any]:
    return common.machine(threads_per_run=1, jobs=args.jobs)


def validation(name: str, args: argparse.Namespace) -> dict[str, Any]:
    """Best SFT x RL seeds, SFT continued, and the gains over the best SFT."""
    from reference_trainer.stats import nested_bootstrap

    recipe, metric = RECIPES[name], RECIPES[name].metric
    work, cache = Path(args.work), Path(args.work) / f"{name}_jobs"
    cache.mkdir(parents=True, exist_ok=True)
    iterations = args.iterations or recipe.rl_iterations
    sft_jobs = [
        (
            "sft",
            (name, str(work), s, *_settings()),
            str(cache / f"sft_{_key(name, s, *_settings(), recipe.build(out='x').to_dict())}.json"),
        )
        for s in args.sft_seeds
    ]
    spec = (
        None
        if recipe.zero_shot is None
        else (
            {**recipe.zero_shot, "train": {**SETTINGS, **recipe.zero_shot.get("train", {})}}
            if SETTINGS
            else recipe.zero_shot
        )
    )
    zero_jobs = (
        []
        if spec is None
        else [("zero", (name, spec), str(cache / f"zero_{_key(name, spec, recipe.build(out='x').to_dict())}.json"))]
    )
    done = _run_all(zero_jobs + sft_jobs, args.jobs, f"{name} zero-shot and best SFT")  # side by side
    zero = next((r for r in done if "per_task" in r and "policy_dir" not in r), None)
    sfts = [r for r in done if "policy_dir" in r]
    runs = _run_all(
        [
            job
            for algo in args.algo
            for job in _rl_jobs(name, args, sfts, {"": {}}, args.seeds, iterations, cache, algo)
        ],
        args.jobs,
        f"{name} RL",
    )
    sfts_run = [s for s in sfts if any(r["sft_seed"] == s["seed"] for r in runs)]  # all of them unless --cached-only
    more_jobs = []
    for sft in sfts_run:
        mine = [r for r in runs if r["sft_seed"] == sft["seed"]]
        seconds = round(sum(r["rl_seconds"] for r in mine) / len(mine))
        more_jobs.append(
            (
                "more",
                (name, str(work), sft["seed"], sft["policy_dir"], seconds, *_settings()),
                str(cache / f"more_{_key(name, sft['seed'], sft['recipe'], seconds)}.json"),
            )
        )
    more = _run_all(more_jobs, args.jobs, f"{name} SFT continued")
    test, keys = _test_group_and_keys(name)
    best = [_metric_of(s, metric) for s in sfts]
    by_seed = {s["seed"]: s for s in sfts}
    diffs_more = [
        [[a - b for b, a in zip(_metric_of(by_seed[m["seed"]], metric), _metric_of(m, metric))]] for m in more
    ]
    per_algo = {algo: _rl_summary([r for r in runs if r["algo"] == algo], sfts_run, keys, metric) for algo in args.algo}
    summary = {
        "best_sft": nested_bootstrap([[v] for v in best], keys) | {"per_seed": [sum(v) / len(v) for v in best]},
        "sft_continued_gain": nested_bootstrap(diffs_more, keys) if more else None,
        # the first algorithm's, as before several could be run
        "rl_gain": per_algo[args.algo[0]]["gain"],
        "rl_end_per_run": per_algo[args.algo[0]]["end_per_run"],
        "rl": per_algo,
        "sft_continued_per_seed": [m["after" if metric == "success" else "after_score"] for m in more],
        "complete": len(runs) == len(args.algo) * len(args.sft_seeds) * len(args.seeds)
        and len(more) == len(args.sft_seeds),
    }
    if zero is not None:
        summary["zero_shot"] = nested_bootstrap([[zero["per_task"]]], keys[: len(zero["per_task"])])
    result = {
        "env": recipe.env_id,
        "recipe": f"reference_trainer.recipes.{name}",
        "what": recipe.what,
        "metric": metric,
        "machine": _machine(args),
        "algo": args.algo[0],
        "algos": list(args.algo),
        "settings": {
            "iterations": iterations,
            "sft_seeds": args.sft_seeds,
            "rl_seeds": args.seeds,
            "bootstrap": "nested: SFT seeds, RL seeds within each, test-task clusters (same task key) shared; 2000 "
            "resamples, percentile 95% interval, numpy seed 0",
        },
        "summary": summary,
        "scripted": scripted_references(name, test),
        "test_task_keys": keys,
        # per test task, the recipe's metric of each best SFT and of each continued SFT, so every interval recomputes
        "sft": [{**_strip(s), "per_task": _metric_of(s, metric)} for s in sfts],
        "sft_continued": [{**_strip(m), "per_task": _metric_of(m, metric)} for m in more],
        "runs": [_strip(r) for r in runs],
        "tasks": _tasks(test, sfts + more + runs),
    }
    if zero is not None:
        result["zero_shot"] = zero
    return result


def _rl_summary(runs: list[dict[str, Any]], sfts: list[dict[str, Any]], keys: list[str], metric: str) -> dict[str, Any]:
    """One algorithm's runs: the gain over the best SFT (nested over SFT seeds, RL seeds and tasks) and each run's end."""
    from reference_trainer.stats import nested_bootstrap

    diffs = [[[a - b for b, a in r["per_task"]] for r in runs if r["sft_seed"] == s["seed"]] for s in sfts]
    diffs = [d for d in diffs if d]
    return {
        "gain": nested_bootstrap(diffs, keys) if diffs else None,
        "end_per_run": [r["end" if metric == "success" else "end_score"] for r in runs],
    }


def variants(name: str, args: argparse.Namespace, kind: str) -> dict[str, Any]:
    """The ablation, the stress test or the negative control, from SFT seed 0's best SFT."""
    recipe = RECIPES[name]
    work, cache = Path(args.work), Path(args.work) / f"{name}_jobs"
    cache.mkdir(parents=True, exist_ok=True)
    table = {"ablation": ABLATION, "control": CONTROL}.get(kind) or {
        k: {**STRESS_SETTINGS, **v} for k, v in STRESS.items()
    }
    iterations = args.iterations or (max(1, recipe.rl_iterations // 2) if kind == "stress" else recipe.rl_iterations)
    sft = _run_all(
        [
            (
                "sft",
                (name, str(work), 0, *_settings()),
                str(cache / f"sft_{_key(name, 0, *_settings(), recipe.build(out='x').to_dict())}.json"),
            )
        ],
        1,
        f"{name} best SFT",
    )[0]
    runs = _run_all(_rl_jobs(name, args, [sft], table, args.seeds, iterations, cache), args.jobs, f"{name} {kind}")
    from reference_trainer.stats import nested_bootstrap

    test, keys = _test_group_and_keys(name)
    summary = {}
    n = len(args.seeds)
    for i, (label, over) in enumerate(table.items()):
        # by job order, not by each result's overrides: a variant equal to the recipe reuses runs saved without them
        rs = runs[i * n : (i + 1) * n]
        for r in rs:
            r["variant"] = label
        summary[label] = {
            "overrides": over,
            "gain": nested_bootstrap([[[a - b for b, a in r["per_task"]] for r in rs]], keys),
            "end": [r["end" if recipe.metric == "success" else "end_score"] for r in rs],
            "mean_clipfrac_tokens": _mean([_mean(r["clipfrac"]) for r in rs]),
            "mean_clipfrac_turns": _mean([_mean(r["clipfrac_turn"]) for r in rs]),
            "max_clipfrac_tokens": max(max(r["clipfrac"]) for r in rs),
            "mean_approx_kl": _mean([_mean(r["approx_kl"]) for r in rs]),
            "rl_seconds": [r["rl_seconds"] for r in rs],
        }
    return {
        "env": recipe.env_id,
        "recipe": f"reference_trainer.recipes.{name}",
        "metric": recipe.metric,
        "kind": kind,
        "machine": _machine(args),
        "settings": {
            "iterations": iterations,
            "rl_seeds": args.seeds,
            "sft_seed": 0,
            "base": args.algo[0],
            "variants": table,
        },
        "start": sft["after" if recipe.metric == "success" else "after_score"],
        "summary": summary,
        "test_task_keys": keys,
        "runs": [_strip(r) for r in runs],
        "tasks": _tasks(test, [sft] + runs),
    }


def _mean(xs: list[float]) -> float:
    return sum(xs) / len(xs) if xs else float("nan")


def _pct(ci: dict[str, float]) -> str:
    return f"{100 * ci['mean']:+.1f} ({100 * ci['low']:+.1f} to {100 * ci['high']:+.1f})"


def markdown(result: dict[str, Any]) -> str:
    """The docs table of one saved result."""
    unit = "success, %" if result["metric"] == "success" else "score x 100"
    if "kind" not in result:
        s = result["summary"]
        n_sft, n_rl = len(result["settings"]["sft_seeds"]), len(result["settings"]["rl_seeds"])
        rl_end = _mean(s["rl_end_per_run"])
        n_rl_seeds = n_rl
        n_rl = _runs(len(s["rl_end_per_run"]), n_sft, n_rl) if not s.get("complete", True) else f"{n_sft} x {n_rl} runs"
        more_row = (
            f"| SFT continued for RL's compute | {100 * _mean(s['sft_continued_per_seed']):.1f} | gain over best SFT "
            f"{_pct(s['sft_continued_gain'])} |"
            if s["sft_continued_gain"]
            else "| SFT continued for RL's compute | not run yet | |"
        )
        rl_rows = [
            f"| RL ({result['algo']}) from the best SFT, {n_rl} | {100 * rl_end:.1f} | gain over best SFT "
            f"{_pct(s['rl_gain'])} |"
        ]
        if "rl" in s:  # one row per algorithm, each from the same best SFT
            rl_rows = [
                f"| RL ({algo}) from the best SFT, {_runs(len(v['end_per_run']), n_sft, n_rl_seeds)} | "
                f"{100 * _mean(v['end_per_run']):.1f} | gain over best SFT {_pct(v['gain']) if v['gain'] else 'not run'} |"
                for algo, v in s["rl"].items()
            ]
        zero = s.get("zero_shot")
        zero_rows = (
            []
            if zero is None
            else [
                f"| zero-shot ({result['zero_shot']['tasks']} of the test tasks, {_spec(result['zero_shot']['spec'])}) | "
                f"{100 * zero['mean']:.1f} | {_zero_interval(result)} |"
            ]
        )
        # stopped by its patience below the step ceiling: a plateau; otherwise the ceiling ended it
        plateau = all(
            x["steps"] < x.get("recipe", {}).get("train", {}).get("sft_steps", float("inf")) for x in result["sft"]
        )
        best_label = "validation plateau" if plateau else "best validated weights; SFT stopped at its step ceiling"
        return "\n".join(
            [
                f"| test {unit} | mean | interval (95%, over seeds and tasks) |",
                "|---|---|---|",
                *zero_rows,
                f"| best SFT ({best_label}, {n_sft} SFT seed{'s' if n_sft > 1 else ''}) | {100 * s['best_sft']['mean']:.1f} "
                f"| {100 * s['best_sft']['low']:.1f} to {100 * s['best_sft']['high']:.1f} |",
                more_row,
                *rl_rows,
                *[f"| scripted: {label} | {100 * v:.1f} | |" for label, v in result.get("scripted", {}).items()],
                "",
                _per_seed_table(result),
            ]
        )
    lines = [
        f"| variant | test {unit}: gain over the start (95% interval) | clip fraction tokens / turns (max tokens) "
        "| approx KL | RL time per run |",
        "|---|---|---|---|---|",
    ]
    for label, v in result["summary"].items():
        lines.append(
            f"| {label} | {_pct(v['gain'])} | {v['mean_clipfrac_tokens']:.3f} / {v['mean_clipfrac_turns']:.3f} "
            f"({v['max_clipfrac_tokens']:.3f}) | {v['mean_approx_kl']:.4f} | {_mean(v['rl_seconds']):.0f} s |"
        )
    return "\n".join(lines)


def _zero_interval(result: dict[str, Any]) -> str:
    """The zero-shot row's 95% interval: Wilson's for a success rate (a bootstrap of all-zero outcomes is 0 to 0),
    the tasks' bootstrap otherwise."""
    if result["metric"] == "success":
        from agentgym_turn.evaluation.card import wilson_interval

        outcomes = result["zero_shot"]["per_task"]
        low, high = wilson_interval(round(sum(outcomes)), len(outcomes))
        return f"{100 * low:.1f} to {100 * high:.1f} (Wilson, over tasks)"
    zero = result["summary"]["zero_shot"]
    return f"{100 * zero['low']:.1f} to {100 * zero['high']:.1f}"


def _runs(done: int, n_sft: int, n_rl: int) -> str:
    """``"2 x 2 runs"``, or how many of them were made."""
    return f"{n_sft} x {n_rl} runs" if done == n_sft * n_rl else f"{done} runs ({n_sft} x {n_rl} planned)"


def _spec(spec: dict[str, Any]) -> str:
    """A zero-shot setting in a few words: the env options over the recipe's."""
    return (
        ", ".join(f"{k}={v!r}" for k, v in {**spec.get("env_kwargs", {}), **spec.get("train", {})}.items())
        or "the recipe's setting"
    )


def _per_seed_table(result: dict[str, Any]) -> str:
    """Per SFT seed: the best SFT (and the step it was best at), the SFT continued, and each RL run's paired gain."""
    end, after = ("end", "after") if result["metric"] == "success" else ("end_score", "after_score")
    ci = f"ci_{result['metric']}"
    lines = [
        "| SFT seed | best SFT (best step of steps) | SFT continued (steps) | RL per seed: end, gain in points (paired 95% interval) |",
        "|---|---|---|---|",
    ]
    for sft in result["sft"]:
        more = [m for m in result["sft_continued"] if m["seed"] == sft["seed"]]
        runs = sorted(
            (r for r in result["runs"] if r["sft_seed"] == sft["seed"]), key=lambda r: (r.get("algo", ""), r["seed"])
        )
        more_cell = ", ".join(f"{100 * m[after]:.1f} ({m['steps']})" for m in more) or "not run"
        several = len(result.get("algos", [])) > 1
        rl_cell = (
            "; ".join(f"{r['algo'] + ' ' if several else ''}{100 * r[end]:.1f}, {_pct(r[ci])}" for r in runs)
            or "not run"
        )
        lines.append(
            f"| {sft['seed']} | {100 * sft[after]:.1f} ({sft['best_step']} of {sft['steps']}) | {more_cell} | {rl_cell} |"
        )
    return "\n".join(lines)


def plot(result: dict[str, Any], path: Path) -> Path:
    """Validation: the test metric of each start and run. Variants: per-iteration sampled metric and clip fraction."""
    from reference_trainer.plots import pyplot

    plt = pyplot()
    metric = result["metric"]
    if "kind" not in result:
        fig, ax = plt.subplots(figsize=(7, 3.8))
        s = result["summary"]
        for i, sft in enumerate(result["sft"]):
            seed = sft["seed"]
            best = sft["after" if metric == "success" else "after_score"]
            more = [
                m["after" if metric == "success" else "after_score"]
                for m in result["sft_continued"]
                if m["seed"] == seed
            ]
            ax.plot([i - 0.2], [best], "ks", label="best SFT" if i == 0 else None)
            ax.plot([i] * len(more), more, "b^", label="SFT continued (RL's compute)" if i == 0 else None)
            algos = result.get("algos", [result["algo"]])
            for k, (algo, style) in enumerate(zip(algos, ("ro", "mD", "gv", "c<", "y>"))):
                ends = [
                    r["end" if metric == "success" else "end_score"]
                    for r in result["runs"]
                    if r["sft_seed"] == seed and r.get("algo", algos[0]) == algo
                ]
                ax.plot(
                    [i + 0.2 + 0.1 * k] * len(ends), ends, style, label=f"RL ({algo}), per RL seed" if i == 0 else None
                )
        if "zero_shot" in s:
            ax.axhline(s["zero_shot"]["mean"], color="gray", linestyle=":", label="zero-shot")
        ax.set_xticks(range(len(result["sft"])), [f"SFT seed {sft['seed']}" for sft in result["sft"]])
        ax.set_ylabel(f"test {metric}")
        gains = (
            "; ".join(f"{algo} {_pct(v['gain'])}" for algo, v in s["rl"].items() if v["gain"])
            if "rl" in s
            else _pct(s["rl_gain"])
        )
        ax.set_title(
            f"{result['env']}: RL gain over best SFT, points: {gains}"
            + ("" if s.get("complete", True) else " (partial)"),
            fontsize=9,
        )
        ax.legend(fontsize=8)
    else:
        fig, (a1, a2) = plt.subplots(1, 2, figsize=(12, 3.8))
        key = "rollout_success" if metric == "success" else "rollout_score"
        for label in result["summary"]:
            rs = [r for r in result["runs"] if r["variant"] == label]
            n = min(len(r[key]) for r in rs)
            it = list(range(1, n + 1))
            (line,) = a1.plot(it, [_mean([r[key][i] for r in rs]) for i in range(n)], label=label)
            a2.plot(
                it,
                [_mean([r["clipfrac"][i] for r in rs]) for i in range(n)],
                color=line.get_color(),
                label=f"{label} tokens",
            )
            a2.plot(
                it,
                [_mean([r["clipfrac_turn"][i] for r in rs]) for i in range(n)],
                color=line.get_color(),
                linestyle="--",
            )
        a1.set_ylabel(f"sampled {metric} (training rollouts)")
        a2.set_ylabel("clip fraction (solid: tokens, dashed: turns)")
        for ax in (a1, a2):
            ax.set_xlabel("RL iteration")
        a1.legend(fontsize=8)
        fig.suptitle(f"{result['env']}: {result['kind']}")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def recompute_intervals(result: dict[str, Any]) -> dict[str, Any]:
    """Every interval of a saved result, recomputed from its ``per_task`` records alone."""
    from reference_trainer.stats import nested_bootstrap

    keys, s = result["test_task_keys"], result["summary"]
    if "kind" in result:
        return {
            label: nested_bootstrap(
                [[[a - b for b, a in r["per_task"]] for r in result["runs"] if r["variant"] == label]], keys
            )
            for label in s
        }
    start = {x["seed"]: x["per_task"] for x in result["sft"]}

    def gain(runs: list[dict[str, Any]]) -> dict[str, Any] | None:
        diffs = [[[a - b for b, a in r["per_task"]] for r in runs if r["sft_seed"] == x] for x in start]
        diffs = [d for d in diffs if d]
        return nested_bootstrap(diffs, keys) if diffs else None

    algos = result.get("algos", [result["algo"]])
    again = {
        "best_sft": nested_bootstrap([[start[x]] for x in start], keys)
        | {"per_seed": [sum(v) / len(v) for v in start.values()]},
        "rl_gain": gain([r for r in result["runs"] if r.get("algo", algos[0]) == algos[0]]),
    }
    if "rl" in s:
        for algo in algos:
            again[f"rl[{algo}]"] = gain([r for r in result["runs"] if r["algo"] == algo])
    if result["sft_continued"]:
        again["sft_continued_gain"] = nested_bootstrap(
            [[[a - b for b, a in zip(start[m["seed"]], m["per_task"])]] for m in result["sft_continued"]], keys
        )
    if "zero_shot" in result:
        again["zero_shot"] = nested_bootstrap(
            [[result["zero_shot"]["per_task"]]], keys[: len(result["zero_shot"]["per_task"])]
        )
    return again


def saved_interval(result: dict[str, Any], name: str) -> dict[str, Any] | None:
    """The interval a result saved under ``name``, a key of :func:`recompute_intervals` (``rl[ALGO]``: one algorithm's gain)."""
    saved = result["summary"]
    if "kind" in result:
        return saved[name]["gain"]
    return saved["rl"][name[3:-1]]["gain"] if name.startswith("rl[") else saved[name]


def check(path: Path) -> dict[str, Any]:
    """Recompute a saved result's intervals from its ``per_task`` records and its test/train overlap from its ``tasks``."""
    from reference_trainer.tasks import overlap

    result = json.loads(path.read_text())
    for name, again in recompute_intervals(result).items():
        got = saved_interval(result, name)
        assert again == got, (name, again, got)
    shared = overlap(result["tasks"]["test"], result["tasks"]["train"])
    assert not shared["shared"], f"{len(shared['shared'])} test tasks are among the training inputs"
    return shared


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "--env", nargs="+", default=sorted(RECIPES), choices=sorted(RECIPES), help="recipes to run (default: all)"
    )
    ap.add_argument(
        "--algo",
        nargs="+",
        default=["turn-ppo"],
        choices=PRESETS,
        help="the RL presets of the validation, each from the same best SFT (the first: the base of the variants)",
    )
    ap.add_argument("--sft-seeds", nargs="+", type=int, default=[0, 1, 2])
    ap.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2], help="RL seeds from each SFT start")
    ap.add_argument("--ablation", action="store_true", help="only the ratio level changes")
    ap.add_argument(
        "--stress", action="store_true", help="a setting where clipping binds, with and without the correction"
    )
    ap.add_argument(
        "--control", action="store_true", help="the negative control: shuffled rewards, the same start and budget"
    )
    ap.add_argument(
        "--iterations", type=int, default=0, help="RL iterations per run (default: the recipe's budget; stress: half)"
    )
    ap.add_argument(
        "--jobs", type=int, default=min(2, os.cpu_count() or 1), help="processes at a time (one thread each)"
    )
    ap.add_argument("--work", default="runs/learning", help="where policies, run folders and finished jobs go")
    ap.add_argument("--out-dir", default=str(common.RESULTS))
    ap.add_argument("--markdown", action="store_true", help="only print the docs tables of the saved results")
    ap.add_argument("--check", type=Path, help="recompute the intervals and the test/train overlap of a saved result")
    ap.add_argument(
        "--cached-only",
        action="store_true",
        help="report the finished jobs in --work, run none (summary says if complete)",
    )
    ap.add_argument(
        "--set",
        nargs="+",
        default=[],
        metavar="FIELD=VALUE",
        help="config fields over every job's recipe, e.g. a GPU run: device=cuda dtype=bfloat16 num_envs=128 "
        "(use its own --work and --out-dir)",
    )
    args = ap.parse_args(argv)
    global CACHED_ONLY
    CACHED_ONLY = args.cached_only
    SETTINGS.clear()
    SETTINGS.update(parse_settings(args.set))
    if args.check:
        print(json.dumps(check(args.check)))
        return 0
    kind = "ablation" if args.ablation else "stress" if args.stress else "control" if args.control else ""
    suffix = f"_{kind}" if kind else ""
    for name in args.env:
        out = Path(args.out_dir) / f"learning_{name}{suffix}.json"
        if args.markdown:
            if not out.exists():
                print(f"{out} does not exist: run `python benchmarks/learning.py --env {name}` first.", file=sys.stderr)
                return 2
            print(f"### {name}{suffix}\n\n{markdown(json.loads(out.read_text()))}\n")
            continue
        result = variants(name, args, kind) if kind else validation(name, args)
        common.write_json(out, result, indent=None, separators=(",", ":"))
        png = plot(result, out.with_suffix(".png"))
        print(markdown(result))
        print(f"wrote {out} and {png}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
