"""The tiny model learns TurnSokoban-v0 with its recipe (``reference_trainer/recipes/sokoban.py``).

One run, shared with the other recipes' learning tests: the session fixture ``learning_runs``
(``tests/conftest.py``) builds the tiny model, SFTs it (keeping the best validated weights, up to the
recipe's ``suite_sft_steps``; the benchmark runs to the plateau), saves the policy
and runs Turn-PPO from it for exactly the recipe's RL budget (seed 0, one thread), evaluating the
weight average greedily on the recipe's test levels before and after; and a negative control from
the same start, Turn-PPO paid shuffled rewards for the same budget. What the tests pin: SFT reaches
at least its floor (never a ceiling), Turn-PPO keeps the format and raises test success over its
SFT start, the control does not, and the run trained on exactly the resets the held-out check
(``tests/reference_trainer/recipes/test_registry_heldout.py``) compared with the test levels. Three SFT seeds x three RL seeds are
``benchmarks/learning.py``'s job; no test reads a clock.
"""

import math

import pytest

from support.learning_checks import assert_control_gains_nothing, assert_ran_exactly_the_budget
from reference_trainer.recipes import RECIPES, SOKOBAN_RL_ITERATIONS

pytestmark = [pytest.mark.slow, pytest.mark.timeout(3600)]  # a hang guard for the shared fixture, not a speed bound

#: The least test success the recipe's SFT start reaches (SFT seeds 0/1/2: ``docs/benchmarks.md``); a better start never fails.
SFT_FLOOR = 0.6
#: Most invalid turns the SFT start may play.
SFT_MAX_INVALID_TURNS = 0.1
#: The least gain of test success the suite's run (SFT seed 0, RL seed 0) must show over its SFT start, and by which it
#: must beat the shuffled-reward control. From the best SFT, RL adds a few points (``docs/benchmarks.md``: the benchmark's
#: SFT x RL seeds), so one run's bar is low; the benchmark, not this test, reports the gain.
GAIN_BAR = 0.01


@pytest.fixture(scope="module")
def run(learning_runs):
    return learning_runs["sokoban"]


@pytest.fixture(scope="module")
def control(learning_runs):
    return learning_runs["sokoban/shuffled"]


def test_the_recipe_is_registered_with_its_budget_and_content_splits():
    recipe = RECIPES["sokoban"]
    assert recipe.env_id == "TurnSokoban-v0" and recipe.metric == "success"
    assert recipe.rl_iterations == SOKOBAN_RL_ITERATIONS
    cfg = recipe.build("turn-ppo", seed=0, out="unused")
    t = cfg.train
    assert (
        cfg.rollout.env_kwargs["split"] == "train"
        and t.eval_env_kwargs == {"split": "test"}
        and t.val_env_kwargs == {"split": "validation"}
    )
    assert t.eval_episodes >= 600 and t.eval_temperature == 0.0 and t.sft_validate_every > 0


def test_sft_warm_start_reaches_at_least_its_floor(run):
    sft = run["sft"]
    assert sft["before"] < 0.05, sft  # a random tiny model does not solve Sokoban
    recipe = RECIPES["sokoban"]
    # SFT kept its best validated weights up to the suite's ceiling (below the recipe's, whose plateau the benchmark runs)
    assert sft["best_step"] <= sft["steps"] <= recipe.suite_sft_steps < recipe.build(out="unused").train.sft_steps, sft
    assert sft["after"] >= SFT_FLOOR, sft
    assert sft["after_invalid_turns"] < SFT_MAX_INVALID_TURNS, sft
    assert run["start"] == sft["after"], (run["start"], sft["after"])  # RL starts from the saved policy SFT evaluated


def test_turn_ppo_runs_exactly_the_recipe_budget(run):
    """The budget is work, not time: exactly the recipe's iterations, never stopped early."""
    assert_ran_exactly_the_budget(run, SOKOBAN_RL_ITERATIONS)


def test_turn_ppo_keeps_the_format(run):
    diagnostics = run["clipfrac"] + run["clipfrac_turn"] + run["approx_kl"] + run["grad_norm"]
    assert all(math.isfinite(x) for x in diagnostics)
    assert max(run["invalid_turns"]) < 0.25, run["invalid_turns"]
    assert run["end_invalid_turns"] < 0.1, run["end_invalid_turns"]


def test_turn_ppo_raises_test_success_over_its_sft_start(run):
    ci = run["ci_success"]
    report = (run["start"], run["end"], ci)
    assert ci["n"] == RECIPES["sokoban"].build(out="unused").train.eval_episodes, report
    assert math.isclose(ci["mean"], run["end"] - run["start"], abs_tol=1e-9), report
    assert run["end"] - run["start"] >= GAIN_BAR - 1e-9, report
    assert ci["low"] > -0.02, report  # it may be uncertain, never clearly worse


def test_the_shuffled_reward_control_gains_nothing_in_the_same_budget(run, control):
    """The same trainer, start and budget, each episode paid another episode's score: no gain, and
    clearly less than the real reward's."""
    assert_control_gains_nothing(run, control, SOKOBAN_RL_ITERATIONS, GAIN_BAR)
    assert control["ci_success"]["high"] < GAIN_BAR, control[
        "ci_success"
    ]  # 600 draws resolve it: the whole interval below the bar


def test_the_run_trained_on_exactly_the_resets_the_held_out_check_compared(run):
    from support.suite_tasks import suite_training_groups

    assert run["train_tasks"] == suite_training_groups("sokoban")
