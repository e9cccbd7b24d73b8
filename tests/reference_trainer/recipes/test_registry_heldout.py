"""Every recipe's test tasks share no content with anything its training touches.

For the suite's run of each recipe (seed 0, the recipe's budget), the training inputs are the
tiny model's tokenizer corpus and pretraining episodes, the SFT demonstrations and the RL
rollouts' tasks (:func:`reference_trainer.tasks.training_groups`); the test tasks are its
held-out evaluation. Both sides are replayed and compared by :meth:`task_key` (the level, the
goal's instruction, the question's text), not by seed. The learning tests check that the runs
recorded exactly these training resets.
"""

from __future__ import annotations

import pytest

from reference_trainer.recipes import RECIPES
from reference_trainer.tasks import eval_group, group, merge_groups, overlap
from support.suite_tasks import suite_training_groups


@pytest.mark.parametrize("name", sorted(RECIPES))
def test_no_test_task_of_the_recipe_is_a_training_input(name):
    cfg = RECIPES[name].build(out="unused")
    found = overlap([eval_group(cfg)], suite_training_groups(name))
    assert found["test_tasks"] > 100 and found["train_tasks"] > 500, found
    assert found["shared"] == [], f"{len(found['shared'])} test tasks are training inputs, e.g. {found['shared'][:2]}"


def test_the_check_finds_a_planted_leak():
    cfg = RECIPES["sokoban"].build(out="unused")
    test = eval_group(cfg, n=20)
    leaked = group(test["env_id"], test["env_kwargs"], [r["seed"] for r in test["resets"][:3]])
    found = overlap([test], merge_groups([leaked]))
    assert 1 <= len(found["shared"]) <= 3


def test_merged_groups_keep_each_reset_once_in_order():
    a = group("E", {"x": 1}, [3, 1, 3])
    b = group("E", {"x": 1}, [2, 1])
    c = group("E", {"x": 2}, [1])
    assert merge_groups([a, b, c]) == [group("E", {"x": 1}, [3, 1, 2]), c]
