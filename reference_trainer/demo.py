"""``python -m reference_trainer demo``: a recipe's SFT start, then RL from it, on held-out tasks before and after.

The start is the recipe's SFT (seed ``--sft-seed``) to the best validated step under the suite's ceiling
(:attr:`~reference_trainer.recipes.base.Recipe.suite_sft_steps`): the start the test suite trains and checks. The
Sokoban recipe's seed-0 start ships with the package (:data:`~reference_trainer.recipes.runs.SHIPPED_STARTS`, made by
``benchmarks/demo_start.py``), so the demo's training is RL alone; any other start is trained once and kept under
``--out`` (``--sft`` trains it even where one ships). The plan, with the time each part takes, prints before anything
runs.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from .config import Config
from .recipes import RECIPES
from .recipes.base import Recipe
from .recipes.runs import SHIPPED_STARTS, sft_folder, sft_policy


def sft_ceiling(recipe: Recipe) -> int:
    """The demo's SFT ceiling: the suite's, else the recipe's own."""
    return recipe.suite_sft_steps or recipe.build(out="unused").train.sft_steps


def shipped_start(recipe: Recipe, seed: int) -> Path | None:
    """The folder of the start shipped for ``recipe`` and SFT seed ``seed`` (``None``: none ships)."""
    folder = SHIPPED_STARTS / sft_folder(recipe.name, seed, sft_ceiling(recipe))
    return folder if (folder / "sft.json").exists() else None


def _start_to_use(args: argparse.Namespace) -> Path | None:
    """The shipped start the demo will use (``None`` with ``--sft`` or where none ships)."""
    return None if args.sft else shipped_start(RECIPES[args.recipe], args.sft_seed)


def demo_config(args: argparse.Namespace, policy_dir: str) -> Config:
    """The RL run ``demo`` trains: the recipe for its budget (or ``--iterations``) from the saved start ``policy_dir``."""
    recipe = RECIPES[args.recipe]
    return recipe.build(
        args.algo,
        seed=args.seed,
        iterations=args.iterations or recipe.rl_iterations,
        model=policy_dir,
        sft_episodes=0,
        out=args.out,
    )


def plan(args: argparse.Namespace) -> str:
    """What the demo will do and about how long each part takes (the recipe's measured minutes on one quiet thread)."""
    recipe = RECIPES[args.recipe]
    iterations = args.iterations or recipe.rl_iterations
    shipped = _start_to_use(args)
    rl_minutes = recipe.rl_minutes * iterations / recipe.rl_iterations
    if shipped is not None:
        sft = f"shipped with the package ({shipped.name}; --sft trains it again, about {recipe.sft_minutes:g} min)"
        total = rl_minutes
    else:
        sft = f"SFT on the env's expert, up to {sft_ceiling(recipe)} steps (about {recipe.sft_minutes:g} min; kept under --out)"
        total = recipe.sft_minutes + rl_minutes
    return (
        f"demo: {recipe.env_id}, recipe {recipe.name!r}: {recipe.what}\n"
        f"  SFT start (seed {args.sft_seed}): {sft}\n"
        f"  then {args.algo} for {iterations} iterations (seed {args.seed}, about {rl_minutes:.0f} min)\n"
        f"  about {total:.0f} min in all on one CPU thread"
    )


def sft_lines(meta: dict[str, Any]) -> list[str]:
    """The start's SFT as measured when it was trained: steps, the best validated step, success before and after."""
    lines = [
        f"{'SFT':>12s}: {meta['steps']} steps of {meta['batch_size']} of {meta['episodes']} expert episodes, "
        f"best validated at step {meta['best_step']} ({meta['step_seconds']:.0f} s of optimizer steps)"
    ]
    if "before" in meta:
        lines.append(f"{'before SFT':>12s}: success {meta['before']:.1%} ({meta['before_tasks']} held-out tasks)")
    return lines


def start(args: argparse.Namespace) -> tuple[str, dict[str, Any]]:
    """``(policy_dir, meta)`` of the demo's SFT start: shipped, kept under ``--out`` from an earlier run, or trained now."""
    recipe = RECIPES[args.recipe]
    return sft_policy(
        recipe.name,
        str(Path(args.out) / "sft"),
        seed=args.sft_seed,
        max_steps=sft_ceiling(recipe),
        starts=(SHIPPED_STARTS,) if _start_to_use(args) is not None else (),
        progress=True,
    )
