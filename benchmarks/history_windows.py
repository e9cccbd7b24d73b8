"""Training on the history the model is shown: the whole episode, the last 3 turns, the compact state alone.

    .venv/bin/python benchmarks/history_windows.py              # sokoban: SFT seed 0, Turn-PPO seeds 0 and 1
    .venv/bin/python benchmarks/history_windows.py --markdown   # the table of the saved result

For each history policy (``--history-window``: none, 3, compact) the recipe's SFT start is made under that policy
(seed 0, the suite's SFT ceiling; the same policy in the demonstrations, the validation and the test evaluation;
the whole-history start is the shipped one), then Turn-PPO runs from it with the recipe's budget for each RL seed.
Reported per policy, on the recipe's test tasks: success after SFT and after RL with the gain's interval over RL
seeds and tasks (:func:`reference_trainer.stats.nested_bootstrap`), and per RL iteration the tokens and rows the
update ran through (``rollout/train_tokens``, ``rollout/train_rows``) and the seconds of rollout and update (the
policies run side by side, two processes at a time: compare their ratios, not the absolute seconds). Writes
``benchmarks/results/history_windows.json``.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import statistics
from pathlib import Path
from typing import Any

try:  # python -m benchmarks.history_windows, or imported by the tests
    from benchmarks import common
except ModuleNotFoundError:  # python benchmarks/history_windows.py
    import common

POLICIES = {"whole episode": None, "last 3 turns": "3", "compact state": "compact"}


def _start(job: tuple) -> tuple[str, str, dict[str, Any]]:
    from reference_trainer.recipes import RECIPES
    from reference_trainer.recipes.runs import SHIPPED_STARTS, sft_policy

    label, recipe, window, work = job
    settings = {} if window is None else {"history_window": window}
    starts = (SHIPPED_STARTS,) if window is None else ()
    policy_dir, meta = sft_policy(
        recipe,
        str(Path(work) / label.replace(" ", "_")),
        max_steps=RECIPES[recipe].suite_sft_steps,
        settings=settings,
        starts=starts,
    )
    return label, policy_dir, meta


def _rl(job: tuple) -> tuple[str, dict[str, Any]]:
    from reference_trainer.recipes.runs import rl_from, sft_start

    label, recipe, window, policy_dir, meta, seed, work = job
    over = {} if window is None else {"history_window": window}
    start, _ = sft_start(meta)
    return label, rl_from((recipe, "turn-ppo", seed, policy_dir, _budget(recipe), 0, work, over), start=start)


def _budget(recipe: str) -> int:
    from reference_trainer.recipes import RECIPES

    return RECIPES[recipe].rl_iterations


def run(args: argparse.Namespace) -> dict[str, Any]:
    from reference_trainer.stats import nested_bootstrap

    work = Path(args.work)
    ctx = mp.get_context("spawn")
    with ctx.Pool(args.jobs, maxtasksperchild=1) as pool:
        starts = pool.map(_start, [(label, args.recipe, w, str(work)) for label, w in POLICIES.items()])
        jobs = [
            (label, args.recipe, POLICIES[label], policy_dir, meta, seed, str(work / "rl"))
            for label, policy_dir, meta in starts
            for seed in args.seeds
        ]
        runs = pool.map(_rl, jobs)
    for _, r in runs:  # every reset RL played: the recipe's held-out test checks them; here only how many
        r["train_resets"] = sum(len(g["resets"]) for g in r.pop("train_tasks"))
    rows = {}
    for label, _, meta in starts:
        mine = [r for lab, r in runs if lab == label]
        diffs = [[[a - b for b, a in r["per_task"]] for r in mine]]
        rows[label] = {
            "history_window": POLICIES[label],
            "sft_success": meta["after"],
            "sft_steps": meta["steps"],
            "sft_best_step": meta["best_step"],
            "rl_success": [r["end"] for r in mine],
            "gain": nested_bootstrap(diffs),
            "train_tokens_per_iteration": statistics.mean(x for r in mine for x in r["train_tokens"]),
            "train_rows_per_iteration": statistics.mean(x for r in mine for x in r["train_rows"]),
            "rollout_s_per_iteration": statistics.mean(x for r in mine for x in r["rollout_s"]),
            "update_s_per_iteration": statistics.mean(x for r in mine for x in r["update_s"]),
            "runs": mine,
        }
    return {
        "recipe": args.recipe,
        "algo": "turn-ppo",
        "seeds": args.seeds,
        "machine": common.machine(jobs=args.jobs),
        "policies": rows,
    }


def markdown(result: dict[str, Any]) -> str:
    whole = result["policies"]["whole episode"]
    lines = [
        "| history shown | SFT start | after Turn-PPO (per seed) | RL gain (95% interval) | tokens / iteration "
        "| rows / iteration | rollout + update s / iteration (vs whole) |",
        "|---|---|---|---|---|---|---|",
    ]
    for label, row in result["policies"].items():
        g = row["gain"]
        seconds = row["rollout_s_per_iteration"] + row["update_s_per_iteration"]
        ratio = seconds / (whole["rollout_s_per_iteration"] + whole["update_s_per_iteration"])
        lines.append(
            f"| {label} | {row['sft_success']:.1%} | {', '.join(f'{x:.1%}' for x in row['rl_success'])} "
            f"| {100 * g['mean']:+.1f} ({100 * g['low']:+.1f} to {100 * g['high']:+.1f}) points "
            f"| {row['train_tokens_per_iteration']:,.0f} | {row['train_rows_per_iteration']:.0f} "
            f"| {seconds:.1f} ({ratio:.2f}x) |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--recipe", default="sokoban")
    ap.add_argument("--seeds", nargs="+", type=int, default=[0, 1], help="Turn-PPO seeds from each start")
    ap.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1), help="processes at a time")
    ap.add_argument("--work", default="runs/history_windows", help="where starts and runs go")
    ap.add_argument("--out", default=str(common.RESULTS / "history_windows.json"))
    ap.add_argument("--markdown", action="store_true", help="only print the table of the saved result")
    return common.run_and_report(ap.parse_args(argv), run, markdown)


if __name__ == "__main__":
    raise SystemExit(main())
