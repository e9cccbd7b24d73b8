"""The tiny model on TurnSokoban-v0: the SFT warm start and a short Turn-PPO run of the
measured recipe (reference_trainer.recipes), one thread, fixed step counts and seeds.

What this checks: SFT lands in the band RL starts from, and Turn-PPO with the recipe keeps
the policy intact (no format collapse, no success collapse: the two failure modes the
recipe's choices remove). How much RL *gains* is measured in benchmarks/learning.py.
"""

import pytest
import torch

from reference_trainer.recipes import sokoban_tiny
from reference_trainer.trainer import Trainer


@pytest.fixture(scope="module")
def sft_trainer(tmp_path_factory):
    torch.set_num_threads(1)
    root = tmp_path_factory.mktemp("sokoban")
    cfg = sokoban_tiny("turn-ppo", seed=0, iterations=8, out=str(root / "run"), progress=False)
    cfg.model.tiny_dir = str(root / "tiny")
    trainer = Trainer(cfg)
    before = trainer.evaluate()
    trainer.sft()
    yield trainer, before, trainer.evaluate()
    trainer.close()


@pytest.mark.slow
def test_sft_warm_start_lands_in_the_band_rl_starts_from(sft_trainer):
    _, before, after = sft_trainer
    assert before["success"] < 0.05  # a random tiny model does not solve Sokoban
    assert 0.25 <= after["success"] <= 0.5, after
    assert after["invalid_turns"] < 0.1, after


@pytest.mark.slow
def test_turn_ppo_with_the_recipe_keeps_format_and_success(sft_trainer):
    trainer, _, start = sft_trainer
    metrics = [trainer.train_iteration() for _ in range(trainer.cfg.train.iterations)]
    end = trainer.evaluate()
    assert all(torch.isfinite(torch.tensor(list(m.values()))).all() for m in metrics)
    assert end["success"] >= start["success"] - 0.08, (start, end)
    assert max(m["rollout/invalid_turns"] for m in metrics) < 0.25
    assert end["invalid_turns"] < 0.1, end


@pytest.mark.slow
def test_rl_from_a_saved_policy_reports_what_the_benchmark_reads(sft_trainer, tmp_path):
    from reference_trainer.policy import save_policy
    from reference_trainer.recipes import rl_from

    trainer, _, _ = sft_trainer
    policy = save_policy(trainer.policy, trainer.tokenizer, tmp_path / "policy")
    r = rl_from(("turn-ppo", 3, str(policy), 2, 1, str(tmp_path)))
    assert r["eval_iterations"] == [0, 1, 2] and len(r["clipfrac"]) == len(r["invalid_turns"]) == 2
    assert 0 < r["rl_seconds"] <= r["seconds"] and r["start"] == r["eval_success"][0] and r["end"] == r["eval_success"][-1]
