"""``python -m reference_trainer demo`` (``reference_trainer/demo.py``): its plan, its start and its RL config."""

import pytest


@pytest.mark.parametrize(
    "argv,env,iterations",
    [
        (["demo"], "TurnSokoban-v0", None),
        (["demo", "--recipe", "webshop"], "TurnWebShop-v0", None),
        (["demo", "--recipe", "webshop", "--iterations", "3", "--seed", "2"], "TurnWebShop-v0", 3),
    ],
)
def test_demo_runs_the_chosen_recipe_for_its_budget_from_its_sft_start(argv, env, iterations):
    from reference_trainer.cli import build_parser
    from reference_trainer.demo import demo_config
    from reference_trainer.recipes import RECIPES

    args = build_parser().parse_args(argv)
    cfg = demo_config(args, "a/policy")
    recipe = RECIPES[args.recipe]
    assert cfg.train.env == env == recipe.env_id
    assert cfg.train.iterations == (iterations or recipe.rl_iterations)
    expected = recipe.build(
        args.algo, seed=args.seed, iterations=cfg.train.iterations, model="a/policy", sft_episodes=0, out=args.out
    )
    assert cfg.to_dict() == expected.to_dict()


def test_demo_says_what_it_will_run_and_how_long_before_it_starts():
    from reference_trainer.cli import build_parser
    from reference_trainer.demo import plan

    shipped = plan(build_parser().parse_args(["demo"]))
    assert "shipped with the package" in shipped and "about 5 min in all" in shipped, shipped
    trained = plan(build_parser().parse_args(["demo", "--sft", "--iterations", "24"]))
    assert "SFT on the env's expert, up to 900 steps (about 6 min" in trained and "about 8 min in all" in trained
    webshop = plan(build_parser().parse_args(["demo", "--recipe", "webshop"]))
    assert "shipped with the package (webshop_sft_seed0_max200" in webshop, webshop
    assert "shipped" not in plan(build_parser().parse_args(["demo", "--recipe", "webshop", "--sft-seed", "1"]))


def test_demo_starts_rl_from_the_shipped_sft_start_without_training(monkeypatch, tmp_path):
    """The shipped start was saved by the recipe's current SFT settings: a recipe changed since does not match it
    (then ``benchmarks/demo_start.py`` makes it again)."""
    from reference_trainer import demo
    from reference_trainer.cli import build_parser
    from reference_trainer.recipes import runs

    def no_training(*a, **k):
        raise AssertionError("the demo trained an SFT start; the shipped one no longer matches the recipe")

    monkeypatch.setattr("reference_trainer.trainer.Trainer", no_training)
    policy_dir, meta = demo.start(build_parser().parse_args(["demo", "--out", str(tmp_path)]))
    assert policy_dir.startswith(str(runs.SHIPPED_STARTS)) and meta["steps"] == 900 >= meta["best_step"]
