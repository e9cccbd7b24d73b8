"""Make the SFT starts that ``make demo`` and the suite's learning runs start from (``reference_trainer/recipes/starts/``).

    .venv/bin/python benchmarks/demo_start.py                  # sokoban, SFT seed 0: about 6 minutes on one thread
    .venv/bin/python benchmarks/demo_start.py --recipe webshop # and searchqa: each recipe the suite learns on

Trains the recipe's SFT start exactly as the suite's learning run does (``sft_policy``: seed 0, one thread, the best
validated step under the suite's ceiling) in a temporary folder, then copies its ``policy/`` and ``sft.json`` into
``SHIPPED_STARTS``, replacing what was there. ``make demo`` and the suite then start RL from it; the suite checks that
the code still makes it (the same settings, and its first SFT losses, retrained, within a float tolerance). Rerun it
when that check fails (a change to the recipe, the model, the demonstrations or SFT).
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
