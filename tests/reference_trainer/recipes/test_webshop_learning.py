"""The tiny model learns TurnWebShop-v0 with its recipe (``reference_trainer/recipes/webshop.py``).

One run, shared with the other recipes' learning tests: the session fixture ``learning_runs``
(``tests/conftest.py``) builds the tiny model, SFTs it (keeping the best validated weights, up to the
recipe's ``suite_sft_steps``; the benchmark runs to the plateau), saves the policy
and runs Turn-PPO from it for exactly the recipe's RL budget (seed 0, one thread), evaluating the
weight average greedily on the recipe's test goals before and after; and a negative control from
the same start, Turn-PPO paid shuffled rewards for the same budget. What the tests pin: the test
goals are split from training by instruction and each is played once, greedily; the demonstrations
a tiny model can imitate (a query copied from the instruction's start, the first listed product
that earns R = 1); the model's tokenizer and copy circuit, built from catalogs the runs never play;
SFT reaches at least its floor (never a ceiling); Turn-PPO raises the test score over the best SFT
and the control does not. Three SFT seeds x three RL seeds are ``benchmarks/learning.py``'s job;
no test reads a clock.
"""

import math

import pytest
import gymnasium as gym

import agentgym_turn  # noqa: F401
from support.learning_checks import assert_control_gains_nothing, assert_ran_exactly_the_budget
from reference_trainer.recipes import RECIPES
from agentgym_turn.webshop.expert import best_reward
from reference_trainer.tiny import PretrainSpec
from reference_trainer.recipes.webshop import WEBSHOP_EVAL_EPISODES, WEBSHOP_RL_ITERATIONS, WEBSHOP_VAL_EPISODES


#: The least test score the recipe's best SFT reaches (SFT seeds 0/1/2: ``docs/benchmarks.md``); a better start never fails.
SFT_SCORE_FLOOR = 0.25
#: The least gain of test score the suite's run (SFT seed 0, RL seed 0) shows over its best-SFT start, and by which it beats
#: the shuffled-reward control: WebShop's target gain over the best SFT, +3 points (the benchmark reports every seed's).
GAIN_BAR = 0.03


@pytest.fixture(scope="module")
def run(learning_runs):
    return learning_runs["webshop"]


@pytest.fixture(scope="module")
def control(learning_runs):
    return learning_runs["webshop/shuffled"]


def test_the_recipe_is_registered_with_its_budget_and_metric():
    recipe = RECIPES["webshop"]
    assert recipe.env_id == "TurnWebShop-v0" and recipe.metric == "score"
    assert recipe.rl_iterations == WEBSHOP_RL_ITERATIONS
    cfg = recipe.build("turn-ppo", seed=0, out="unused")
    assert cfg.algo.truncation_value == "zero"  # an episode cut short scores 0 in WebShop's evaluation, and in training


def test_the_test_goals_are_split_by_instruction_and_each_played_once_greedily():
    cfg = RECIPES["webshop"].build("turn-ppo", seed=0, out="unused")
    t = cfg.train
    assert cfg.rollout.env_kwargs["goal_split"] == "all" and cfg.rollout.env_kwargs["content_split"] == "train"
    assert t.eval_env_kwargs["content_split"] == "test" and t.val_env_kwargs["content_split"] == "validation"
    assert t.eval_temperature == 0.0 and t.eval_seed >= 10**9 and t.sft_validate_every > 0 and t.val_metric == "score"
    for kwargs, n in ((t.eval_env_kwargs, t.eval_episodes), (t.val_env_kwargs, t.val_episodes)):
        env = gym.make(cfg.train.env, **{**cfg.rollout.env_kwargs, **kwargs})
        keys = set()
        for s in range(t.eval_seed, t.eval_seed + n):
            env.reset(seed=s)
            keys.add(env.unwrapped.task_key())
        assert len(keys) == n == len(env.unwrapped._goals), (kwargs, n)  # every goal of the split, each once
    assert (t.eval_episodes, t.val_episodes) == (WEBSHOP_EVAL_EPISODES, WEBSHOP_VAL_EPISODES)


def test_the_demonstrations_copy_the_instruction_start_and_open_the_first_match():
    """The expert searches the instruction up to its options (a copy of its start, which the tiny
    model's induction heads can make) and opens the first listed product that earns R = 1."""
    cfg = RECIPES["webshop"].build("turn-ppo", seed=0, out="unused")
    kw = cfg.rollout.env_kwargs
    assert kw["expert_query"] == "clause" and kw["expert_browse"] == "first_match"
    env = gym.make(cfg.train.env, **kw)
    for seed in range(5):
        env.reset(seed=seed)
        shop = env.unwrapped
        instruction = shop.goal.instruction_text
        query = shop.expert_action()
        assert (
            query.startswith("search[") and instruction.startswith(query[7:-1]) and len(query[7:-1]) < len(instruction)
        )
        _, _, _, _, info = env.step(query)
        click = shop.expert_action()
        if click.startswith("click[") and click[6:-1].isdigit():  # the first product on this page that can earn R = 1
            shown = [shop.shop.product(i) for i in shop.state.results[: shop.results_per_page]]
            first = next(k for k, p in enumerate(shown, 1) if best_reward(p, shop.goal)[0] >= 1.0)
            assert int(click[6:-1]) == first, (seed, click, first)


def test_the_model_is_the_many_catalog_tokenizer_and_copy_circuit_without_pretraining_steps():
    cfg = RECIPES["webshop"].build("turn-ppo", seed=0, out="unused")
    spec = PretrainSpec.from_config(cfg.model.tiny.pretrain)
    assert spec.steps == 0 and spec.induction_heads > 0 and spec.world_option == "catalog_seed"
    training_catalog = cfg.rollout.env_kwargs.get("catalog_seed", 0)
    assert training_catalog not in spec.worlds  # the tokenizer never reads the catalog RL and evaluation play
    assert cfg.model.tiny.arch == "qwen2" and cfg.model.tiny.vocab == 2048


@pytest.mark.slow
@pytest.mark.timeout(3600)  # a hang guard for the shared fixture, not a speed bound
def test_sft_warm_start_reaches_at_least_its_floor(run):
    sft = run["sft"]
    assert sft["before_score"] < 0.05, sft  # the untrained model buys nothing worth a score
    recipe = RECIPES["webshop"]
    # SFT kept its best validated weights up to the suite's ceiling (below the recipe's, whose plateau the benchmark runs)
    assert sft["best_step"] <= sft["steps"] <= recipe.suite_sft_steps < recipe.build(out="unused").train.sft_steps, sft
    assert sft["after_score"] >= SFT_SCORE_FLOOR, sft
    assert run["start_score"] == sft["after_score"], (
        run["start_score"],
        sft["after_score"],
    )  # RL starts from the saved policy SFT evaluated


@pytest.mark.slow
@pytest.mark.timeout(3600)
def test_turn_ppo_runs_exactly_the_recipe_budget(run):
    """The budget is work, not time: exactly the recipe's iterations, never stopped early."""
    assert_ran_exactly_the_budget(run, WEBSHOP_RL_ITERATIONS, metric="score")


@pytest.mark.slow
@pytest.mark.timeout(3600)
def test_turn_ppo_raises_the_test_score_over_the_best_sft(run):
    ci = run["ci_score"]
    report = (run["start_score"], run["end_score"], ci, "success", run["start"], run["end"])
    assert ci["n"] == WEBSHOP_EVAL_EPISODES, report  # every test goal, each once
    assert math.isclose(ci["mean"], run["end_score"] - run["start_score"], abs_tol=1e-9), report
    assert run["end_score"] - run["start_score"] >= GAIN_BAR - 1e-9, report
    assert ci["low"] > 0.0, report
    assert run["end_invalid_turns"] < run["start_invalid_turns"], report


@pytest.mark.slow
@pytest.mark.timeout(3600)
def test_the_shuffled_reward_control_gains_nothing_in_the_same_budget(run, control):
    assert_control_gains_nothing(run, control, WEBSHOP_RL_ITERATIONS, GAIN_BAR, metric="score")


def test_the_run_trained_on_exactly_the_resets_the_held_out_check_compared(run):
    from support.suite_tasks import suite_training_groups

    assert run["train_tasks"] == suite_training_groups("webshop")
