"""Choosing RL settings on the validation split: short RL runs of one recipe from one saved policy, one per variant.

Each variant is a set of config fields over the recipe's (learning rate, critic warm-up, KL...). Every run starts from
the same policy, plays the recipe's training tasks, and is scored greedily on the recipe's *validation* tasks before
and after, with a paired interval. The test split is never played here, so a setting picked from this file is picked
on validation only, as ``docs/experiments.md`` requires.

    python benchmarks/rl_validation.py --recipe sokoban_smollm2 --policy runs/keep_sft200_seed0/policy \\
        --variant recipe --variant "paper rates:lr=1e-6,critic_warmup=2" --iterations 8

Writes ``benchmarks/results/rl_validation_<recipe>.json`` (one entry per variant, kept across calls: a variant run
again replaces its entry).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

try:  # python -m benchmarks.rl_validation, or imported by the tests
    from benchmarks import common
    from benchmarks.learning import parse_settings
except ModuleNotFoundError:  # python benchmarks/rl_validation.py
    import common
    from learning import parse_settings

_SUMMARY = (
    "start",
    "end",
    "start_score",
    "end_score",
    "ci_success",
    "ci_score",
    "rl_seconds",
    "iterations",
    "rollout_success",
    "rollout_score",
    "approx_kl",
    "clipfrac_turn",
    "grad_norm",
    "invalid_turns",
)


#: The settings each entry records as they resolved (the recipe's own values where a variant does not set them).
RESOLVED = (
    "lr",
    "critic_lr_ratio",
    "critic_warmup",
    "lr_warmup_steps",
    "kl_coef",
    "epochs",
    "minibatch_size",
    "clip_eps",
)


def parse_variant(text: str) -> tuple[str, dict[str, Any]]:
    """``"NAME:FIELD=VALUE,FIELD=VALUE"`` (or a bare ``NAME``: the recipe as it is) -> ``(NAME, fields)``."""
    name, _, spec = text.partition(":")
    pairs = [p.strip() for p in spec.split(",") if p.strip()]
    return name.strip(), parse_settings(pairs)


def validation_overrides(recipe: str) -> dict[str, Any]:
    """Config fields that point a recipe's held-out evaluation at its validation tasks (its split and count)."""
    from reference_trainer.recipes import RECIPES

    cfg = RECIPES[recipe].build(out="unused")
    return {"eval_env_kwargs": dict(cfg.train.val_env_kwargs), "eval_episodes": cfg.train.val_episodes}


def run_variant(
    recipe: str, policy: str, name: str, fields: dict[str, Any], *, algo: str, seed: int, iterations: int, work: str
) -> dict[str, Any]:
    """One short RL run from ``policy`` with ``fields`` over the recipe, scored on validation before and after."""
    from reference_trainer.recipes import rl_from

    from reference_trainer.recipes import RECIPES

    over = {**fields, **validation_overrides(recipe)}
    algo_section = RECIPES[recipe].build(algo, out="unused", **fields).to_dict()["algo"]
    run = rl_from((recipe, algo, seed, policy, iterations, 0, str(Path(work) / name.replace(" ", "_")), over))
    return {
        "variant": name,
        "fields": fields,
        "settings": {k: algo_section.get(k) for k in RESOLVED},
        "algo": algo,
        "seed": seed,
        "policy": policy,
        "split": over["eval_env_kwargs"],
        "tasks": over["eval_episodes"],
        **{k: run[k] for k in _SUMMARY},
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--recipe", required=True, help="a recipe name (reference_trainer.recipes)")
    parser.add_argument("--policy", required=True, help="the saved policy every variant starts from")
    parser.add_argument(
        "--variant",
        action="append",
        required=True,
        help="NAME or NAME:FIELD=VALUE,... (config fields over the recipe); repeat for several",
    )
    parser.add_argument("--algo", default="turn-ppo")
    parser.add_argument("--seed", type=int, default=0, help="RL seed (the same for every variant)")
    parser.add_argument("--iterations", type=int, default=8)
    parser.add_argument("--work", default="runs/rl_validation")
    parser.add_argument(
        "--out", default=None, help="results file (default benchmarks/results/rl_validation_RECIPE.json)"
    )
    args = parser.parse_args(argv)
    out = Path(args.out or common.RESULTS / f"rl_validation_{args.recipe}.json")
    saved = common.read_json(out, {"recipe": args.recipe, "runs": []})
    for text in args.variant:
        name, fields = parse_variant(text)
        t0 = time.perf_counter()
        entry = run_variant(
            args.recipe,
            args.policy,
            name,
            fields,
            algo=args.algo,
            seed=args.seed,
            iterations=args.iterations,
            work=args.work,
        )
        entry["seconds"] = round(time.perf_counter() - t0, 1)
        saved["runs"] = [
            r for r in saved["runs"] if (r["variant"], r["algo"], r["seed"]) != (name, args.algo, args.seed)
        ]
        saved["runs"].append(entry)
        saved["machine"] = common.machine(threads_per_run=1)
        out.write_text(json.dumps(saved, indent=1))
        print(
            f"{name}: validation success {entry['start']:.3f} -> {entry['end']:.3f} "
            f"(gain {entry['ci_success']['mean']:+.3f}, {entry['ci_success']['low']:+.3f} to {entry['ci_success']['high']:+.3f})",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
