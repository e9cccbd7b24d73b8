"""Make the SFT start that ``make demo`` ships (``reference_trainer/recipes/starts/``).

    .venv/bin/python benchmarks/demo_start.py                  # sokoban, SFT seed 0: about 6 minutes on one thread

Trains the recipe's SFT start exactly as the suite's learning run does (``sft_policy``: seed 0, one thread, the best
validated step under the suite's ceiling) in a temporary folder, then copies its ``policy/`` and ``sft.json`` into
``SHIPPED_STARTS``, replacing what was there. ``make demo`` then starts RL from it; the suite's learning test compares
the start it trains itself with the shipped one (settings exactly, test success within a tolerance).
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
from pathlib import Path

from reference_trainer.demo import sft_ceiling
from reference_trainer.recipes import RECIPES
from reference_trainer.recipes.runs import SHIPPED_STARTS, sft_policy


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--recipe", default="sokoban", choices=sorted(RECIPES))
    parser.add_argument("--seed", type=int, default=0, help="SFT seed (default: 0, the demo's)")
    args = parser.parse_args()
    recipe = RECIPES[args.recipe]
    with tempfile.TemporaryDirectory() as work:
        policy_dir, meta = sft_policy(recipe.name, work, seed=args.seed, max_steps=sft_ceiling(recipe), progress=True)
        source = Path(policy_dir).parent
        target = SHIPPED_STARTS / source.name
        shutil.rmtree(target, ignore_errors=True)
        target.mkdir(parents=True)
        shutil.copytree(source / "policy", target / "policy")
        shutil.copy2(source / "sft.json", target / "sft.json")
    print(
        f"{target}: SFT seed {args.seed}, {meta['steps']} steps (best validated {meta['best_step']}), "
        f"test success {meta['after']:.1%} on {meta['after_tasks']} tasks, {meta['step_seconds']:.0f} s of optimizer steps"
    )


if __name__ == "__main__":
    main()
