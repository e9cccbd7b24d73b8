"""The nested bootstrap over SFT seeds, RL seeds and test tasks (``docs/algorithms.md``), on hand cases."""

import pytest

from reference_trainer.stats import nested_bootstrap


def test_equal_differences_everywhere_give_a_point_interval():
    ci = nested_bootstrap([[[0.25] * 4] * 3] * 2)
    assert ci["mean"] == pytest.approx(0.25) and ci["low"] == pytest.approx(0.25) and ci["high"] == pytest.approx(0.25)
    assert (ci["starts"], ci["runs"], ci["tasks"], ci["clusters"]) == (2, [3, 3], 4, 4)


def test_the_interval_covers_the_spread_of_the_starts():
    # start 0's runs gain 0 on every task, start 1's gain 1: resampling starts gives means 0, 0.5 and 1
    ci = nested_bootstrap([[[0, 0], [0, 0]], [[1, 1], [1, 1]]], resamples=4000)
    assert ci["mean"] == 0.5 and ci["low"] == 0.0 and ci["high"] == 1.0


def test_tasks_with_one_key_are_resampled_together():
    # four draws of two levels: each level is all-gain or all-loss, so a resample's mean is 1, 0 or -1... in clusters
    diffs = [[[1, 1, -1, -1]]]
    ci = nested_bootstrap(diffs, ["a", "a", "b", "b"], resamples=2000)
    assert ci["clusters"] == 2 and ci["low"] == -1.0 and ci["high"] == 1.0
    assert nested_bootstrap(diffs, ["a", "a", "b", "b"]) == nested_bootstrap(
        diffs, ["a", "a", "b", "b"]
    )  # seeded: recomputable


def test_bad_shapes_say_what_is_expected():
    with pytest.raises(ValueError, match="starts"):
        nested_bootstrap([[1, 2]])
    with pytest.raises(ValueError, match="same number of tasks"):
        nested_bootstrap([[[1, 2]], [[1]]])


def test_starts_with_fewer_runs_weigh_the_same():
    ci = nested_bootstrap([[[0.0, 0.0]], [[1.0, 1.0], [1.0, 1.0], [1.0, 1.0]]])
    assert ci["mean"] == 0.5 and ci["runs"] == [1, 3]
    with pytest.raises(ValueError, match="one key per task"):
        nested_bootstrap([[[1, 2]]], ["a"])
