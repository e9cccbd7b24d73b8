"""The SFT starts shipped with the package are what the code makes.

``make demo`` and the suite's learning runs start RL from the SFT starts in ``reference_trainer/recipes/starts/``
(``benchmarks/demo_start.py`` makes them: the recipe's SFT, seed 0, to its best validated step under the suite's
ceiling) instead of training them again in every session. So that a shipped start cannot go stale unseen, each is
checked against the code here: its saved settings are the suite's run's (a field added since must hold its default),
and its first SFT steps, retrained from scratch, give the losses it recorded (float tolerance: CPUs round
differently; a change to the model, the tokenizer, the demonstrations, the batch draws or the loss moves them far
more)."""

import json

import pytest

from reference_trainer.recipes import RECIPES
from reference_trainer.recipes.runs import (
    SHIPPED_STARTS,
    same_settings,
    sft_folder,
    suite_start_settings,
)
from reference_trainer.sft import FIRST_LOSSES

SUITE_RECIPES = sorted(n for n, r in RECIPES.items() if r.suite_learning)
#: Relative tolerance of a retrained SFT loss: with ATEN's AVX2 kernels instead of this machine's default the first 20
#: losses moved by at most 3e-7 (Sokoban 4e-8, WebShop 3e-7); a change of the arithmetic's inputs moves them by percents.
LOSS_RTOL = 1e-3


def _shipped(name: str) -> dict:
    folder = SHIPPED_STARTS / sft_folder(name, 0, RECIPES[name].suite_sft_steps)
    assert (folder / "sft.json").exists(), f"no shipped start for {name}: run benchmarks/demo_start.py --recipe {name}"
    return json.loads((folder / "sft.json").read_text())


@pytest.mark.parametrize("name", SUITE_RECIPES)
def test_the_shipped_start_has_the_suites_settings(name):
    assert same_settings(_shipped(name)["recipe"], suite_start_settings(name)), (
        f"the shipped {name} start was made with other settings: rerun benchmarks/demo_start.py --recipe {name}"
    )


@pytest.mark.parametrize("name", SUITE_RECIPES)
def test_retraining_the_first_sft_steps_gives_the_shipped_losses(learning_runs, name):
    """The suite's learning job of each recipe starts from the shipped start and retrains its first SFT steps
    (:func:`reference_trainer.recipes.runs.suite_start`, in the background with the RL runs)."""
    start = learning_runs[f"{name}/start"]
    assert start["shipped"], f"the suite trained its own {name} start: rerun benchmarks/demo_start.py --recipe {name}"
    assert len(start["first_losses"]) == FIRST_LOSSES
    assert start["retrained_first_losses"] == pytest.approx(start["first_losses"], rel=LOSS_RTOL), (
        f"the code no longer makes the shipped {name} start: rerun benchmarks/demo_start.py --recipe {name}"
    )
    losses = start["retrained_first_losses"]
    assert losses[-1] < losses[0]  # the steps learn something
