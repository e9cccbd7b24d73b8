"""The five presets side by side on each env's recipe, tiny model, CPU, with paired intervals.

Per env (a recipe of :mod:`reference_trainer.recipes`): one SFT warm start (seeded, fixed step
count) is trained once and saved; every preset then runs the recipe's RL budget from it on the
same seeds, one thread per process, ``--jobs`` processes at a time. Each run is evaluated greedily
on the recipe's held-out tasks (a test goal split, a fresh world, unseen levels) before and after
RL, so every gain comes with its paired 95% interval over the same tasks
(:func:`reference_trainer.stats.paired_ci`); the token and turn clip fractions, approx KL and
gradient norm of every update are kept (the Turn-PPO and ST-PPO papers' diagnostics).

    python benchmarks/learning.py                                   # every env, all presets, seeds 0 1 2
    python benchmarks/learning.py --env searchqa --presets turn-ppo # one env, one preset
    python benchmarks/learning.py --env sokoban --markdown          # print the docs table from the saved JSON

Writes ``benchmarks/results/learning_<env>.json`` and ``learning_<env>.png`` per env. Finished runs
are kept in ``--work`` (one JSON per run, keyed by the recipe's settings), so an interrupted
benchmark resumes where it stopped; ``--fresh`` ignores them.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import multiprocessing as mp
import os
import platform
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
if str(ROOT) not in sys.path:  # run as a script from anywhere
    sys.path.insert(0, str(ROOT))

from reference_trainer.plots import plot_learning  # noqa: E402,F401  (matplotlib only when called)
from reference_trainer.recipes import RECIPES  # noqa: E402  (no torch import)

PRESETS = ["ppo", "turn-ppo", "s-ppo", "st-ppo", "grpo"]


def _run_key(name: str, algo: str, seed: int, iterations: int, eval_every: int, sft: dict[str, Any]) -> str:
    """What a run's result depends on: the recipe's config for this algo, the SFT start, the budget."""
    cfg = RECIPES[name].build(algo, seed=seed, iterations=iterations, eval_every=eval_every, progress=False)
    c = json.loads(json.dumps(cfg.to_dict(), default=str))
    c["train"].pop("out", None)
    c["model"].pop("tiny_dir", None)
    blob = json.dumps({"config": c, "sft": sft.get("recipe"), "sft_after": sft.get("after")}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def _job(job: tuple[str, str, int, str, int, int, str, str, Any]) -> dict[str, Any]:
    """One RL run (``rl_from``, from the SFT's evaluation of its start), saved to ``cache`` as soon as it ends."""
    from reference_trainer.recipes import rl_from

    name, algo, seed, policy_dir, iterations, eval_every, work, cache, start = job
    result = rl_from((name, algo, seed, policy_dir, iterations, eval_every, work), start=start)
    Path(cache).write_text(json.dumps(result))
    return result


def summarise(runs: list[dict[str, Any]], metric: str) -> dict[str, Any]:
    """Per preset: mean start/end of success and score, gains (mean, worst), per-seed intervals, diagnostics, times."""
    key = "" if metric == "success" else "_score"
    ci_key = "ci_success" if metric == "success" else "ci_score"
    out: dict[str, Any] = {}
    for algo in PRESETS:
        rs = [r for r in runs if r["algo"] == algo]
        if not rs:
            continue

        def mean(xs: list[float]) -> float:
            return sum(xs) / len(xs) if xs else float("nan")

        gains = [r[f"end{key}"] - r[f"start{key}"] for r in rs]
        out[algo] = {
            "seeds": [r["seed"] for r in rs],
            "metric": metric,
            "mean_start": mean([r[f"start{key}"] for r in rs]),
            "mean_end": mean([r[f"end{key}"] for r in rs]),
            "mean_gain_points": 100 * mean(gains),
            "min_gain_points": 100 * min(gains),
            "per_seed_ci_points": [{"seed": r["seed"], "gain": 100 * r[ci_key]["mean"], "half_width": 100 * r[ci_key]["half_width"],
                                    "low": 100 * r[ci_key]["low"], "high": 100 * r[ci_key]["high"], "n": r[ci_key]["n"]} for r in rs],
            "mean_start_success": mean([r["start"] for r in rs]),
            "mean_end_success": mean([r["end"] for r in rs]),
            "mean_start_score": mean([r["start_score"] for r in rs]),
            "mean_end_score": mean([r["end_score"] for r in rs]),
            "mean_end_invalid_turns": mean([r["end_invalid_turns"] for r in rs]),
            "mean_clipfrac_tokens": mean([mean(r["clipfrac"]) for r in rs]),
            "mean_clipfrac_turns": mean([mean(r["clipfrac_turn"]) for r in rs]),
            "mean_approx_kl": mean([mean(r["approx_kl"]) for r in rs]),
            "mean_grad_norm": mean([mean(r["grad_norm"]) for r in rs]),
            "mean_rl_seconds": mean([r["rl_seconds"] for r in rs]),
            "rl_seconds": [r["rl_seconds"] for r in rs],
        }
    return out


def markdown(result: dict[str, Any]) -> str:
    """The docs table of one env's result."""
    metric = result["metric"]
    unit = "success" if metric == "success" else "score"
    lines = [
        f"| preset | held-out {unit}: start -> end (mean of seeds) | gain per seed, points (paired 95% CI) | success start -> end "
        "| clip fraction tokens / turns | approx KL | grad norm | RL time per run |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for algo, s in result["summary"].items():
        seeds = ", ".join(f"{c['gain']:+.1f} ± {c['half_width']:.1f}" for c in s["per_seed_ci_points"])
        lines.append(
            f"| {algo} | {100 * s['mean_start']:.1f} -> {100 * s['mean_end']:.1f} ({s['mean_gain_points']:+.1f}) | {seeds} "
            f"| {100 * s['mean_start_success']:.1f}% -> {100 * s['mean_end_success']:.1f}% "
            f"| {s['mean_clipfrac_tokens']:.3f} / {s['mean_clipfrac_turns']:.3f} | {s['mean_approx_kl']:.4f} "
            f"| {s['mean_grad_norm']:.2f} | {s['mean_rl_seconds']:.0f} s |"
        )
    return "\n".join(lines)


def _curves(runs: list[dict[str, Any]], metric: str) -> dict[str, dict[str, list[float]]]:
    curves = {}
    for algo in PRESETS:
        rs = [r for r in runs if r["algo"] == algo]
        if not rs:
            continue
        ev = "eval_success" if metric == "success" else "eval_score"
        n = min(len(r[ev]) for r in rs)
        m = min(len(r["clipfrac"]) for r in rs)

        def avg(k: str, i: int) -> float:
            return sum(r[k][i] for r in rs) / len(rs)

        curves[algo] = {
            "x": rs[0]["eval_iterations"][:n], "metric": [avg(ev, i) for i in range(n)], "it": list(range(1, m + 1)),
            **{k: [avg(k, i) for i in range(m)] for k in ("clipfrac", "clipfrac_turn", "approx_kl", "grad_norm")},
        }
    return curves


def run_env(name: str, args: argparse.Namespace) -> dict[str, Any]:
    import torch

    from reference_trainer.plots import plot_learning
    from reference_trainer.recipes import sft_policy, sft_start

    recipe = RECIPES[name]
    work = Path(args.work)
    iterations = args.iterations or recipe.rl_iterations
    eval_every = args.eval_every if args.eval_every is not None else max(1, iterations // 4)
    print(f"[{name}] SFT warm start ...", flush=True)
    policy_dir, meta = sft_policy(name, str(work))
    start, sft = sft_start(meta)  # every run starts from the same saved policy: its evaluation is played once
    untrained = f" on {sft['before_tasks']} tasks" if "before_tasks" in sft else ""
    print(f"[{name}] SFT: held-out success {sft['before']:.1%} (untrained{untrained}) -> {sft['after']:.1%}, score "
          f"{sft['before_score']:.3f} -> {sft['after_score']:.3f} ({sft['seconds']:.0f} s)", flush=True)
    cache_dir = work / f"{name}_runs"
    cache_dir.mkdir(parents=True, exist_ok=True)
    runs, jobs = [], []
    for algo in args.presets:
        for seed in args.seeds:
            cache = cache_dir / f"{algo}_seed{seed}_{_run_key(name, algo, seed, iterations, eval_every, sft)}.json"
            if cache.exists() and not args.fresh:
                runs.append(json.loads(cache.read_text()))
            else:
                jobs.append((name, algo, seed, policy_dir, iterations, eval_every, str(work), str(cache), start))
    print(f"[{name}] {len(runs)} runs reused from {cache_dir}, {len(jobs)} to run", flush=True)
    ci = "ci_success" if recipe.metric == "success" else "ci_score"
    if jobs:
        with mp.get_context("spawn").Pool(args.jobs, maxtasksperchild=1) as pool:
            for r in pool.imap_unordered(_job, jobs):
                runs.append(r)
                c = r[ci]
                print(f"[{name}] {r['algo']:>9s} seed {r['seed']}: {recipe.metric} "
                      f"{r['start' if recipe.metric == 'success' else 'start_score']:.3f} -> "
                      f"{r['end' if recipe.metric == 'success' else 'end_score']:.3f} "
                      f"({100 * c['mean']:+.1f} ± {100 * c['half_width']:.1f} points), {r['rl_seconds']:.0f} s of RL", flush=True)
    if args.include_cached:  # finished runs of other presets/seeds with the same settings (e.g. more seeds of one preset)
        have = {(r["algo"], r["seed"]) for r in runs}
        for path in sorted(cache_dir.glob("*_seed*_*.json")):
            algo, rest = path.stem.split("_seed", 1)
            seed_text, key = rest.split("_", 1)
            if algo in PRESETS and (algo, int(seed_text)) not in have and \
                    key == _run_key(name, algo, int(seed_text), iterations, eval_every, sft):
                runs.append(json.loads(path.read_text()))
                have.add((algo, int(seed_text)))
    runs.sort(key=lambda r: (PRESETS.index(r["algo"]), r["seed"]))
    result = {
        "env": recipe.env_id, "recipe": f"reference_trainer.recipes.{name}", "what": recipe.what, "metric": recipe.metric,
        "machine": {"python": sys.version.split()[0], "platform": platform.platform(), "cpus": os.cpu_count(),
                    "torch": torch.__version__, "threads_per_run": 1, "jobs": args.jobs},
        "settings": {"iterations": iterations, "eval_every": eval_every, "seeds": sorted({r["seed"] for r in runs}),
                     "presets": [p for p in PRESETS if any(r["algo"] == p for r in runs)]},
        "sft": sft, "summary": summarise(runs, recipe.metric), "runs": runs,
    }
    out = Path(args.out_dir) / f"learning_{name}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1))
    label = "held-out success" if recipe.metric == "success" else "held-out score (0-1)"
    png = plot_learning(_curves(runs, recipe.metric), out.with_suffix(".png"), metric=label,
                        title=f"{recipe.env_id}, tiny model, SFT start " + (f"{sft['after']:.0%} success" if recipe.metric == "success" else
                                                                          f"score {sft['after_score']:.2f}") + ", mean over each preset's seeds")
    print(markdown(result))
    print(f"wrote {out} and {png}", flush=True)
    return result


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--env", nargs="+", default=sorted(RECIPES), choices=sorted(RECIPES), help="recipes to run (default: all)")
    ap.add_argument("--presets", nargs="+", default=PRESETS, choices=PRESETS)
    ap.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    ap.add_argument("--iterations", type=int, default=0, help="RL iterations per run (default: the recipe's budget)")
    ap.add_argument("--eval-every", type=int, default=None, help="evaluate every N iterations (default: a quarter of the budget)")
    ap.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1), help="processes at a time (one thread each)")
    ap.add_argument("--work", default="runs/learning", help="where SFT policies, run folders and finished runs go")
    ap.add_argument("--out-dir", default=str(HERE / "results"))
    ap.add_argument("--fresh", action="store_true", help="rerun runs that finished before")
    ap.add_argument("--include-cached", action="store_true",
                    help="also report finished runs of other presets/seeds with the same settings found in --work")
    ap.add_argument("--markdown", action="store_true", help="only print the docs tables of the saved results")
    args = ap.parse_args(argv)
    if args.markdown:
        for name in args.env:
            path = Path(args.out_dir) / f"learning_{name}.json"
            if not path.exists():
                print(f"{path} does not exist: run `python benchmarks/learning.py --env {name}` first.", file=sys.stderr)
                return 2
            print(f"### {name}\n\n{markdown(json.loads(path.read_text()))}\n")
        return 0
    for name in args.env:
        run_env(name, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
