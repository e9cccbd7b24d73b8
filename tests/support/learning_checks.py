"""Checks every learning test makes on its recipe's run (the ``learning_runs`` fixture's entry)."""

import math


def assert_ran_exactly_the_budget(run: dict, iterations: int, metric: str = "success") -> None:
    """The budget is work, not time: exactly ``iterations`` RL iterations, never stopped early, evaluated
    before and after only; the run's start/end ``metric`` ("success" or "score") are those evaluations,
    every per-iteration diagnostic is finite, and the saved per-task outcomes give back the reported interval."""
    from reference_trainer.stats import paired_ci

    start, end = ("start", "end") if metric == "success" else (f"start_{metric}", f"end_{metric}")
    assert run["iterations"] == iterations
    per_iteration = ("clipfrac", "clipfrac_turn", "approx_kl", "grad_norm", f"rollout_{metric}", "invalid_turns")
    assert [len(run[k]) for k in per_iteration] == [iterations] * len(per_iteration), {
        k: len(run[k]) for k in per_iteration
    }
    assert run["eval_iterations"] == [0, iterations]
    assert run[start] == run[f"eval_{metric}"][0] and run[end] == run[f"eval_{metric}"][-1]
    assert all(math.isfinite(x) for x in run["clipfrac"] + run["clipfrac_turn"] + run["approx_kl"] + run["grad_norm"])
    per_task = run["per_task"]
    assert len(per_task) == len(run["test_seeds"]) == run[f"ci_{metric}"]["n"]
    assert paired_ci([b for b, _ in per_task], [a for _, a in per_task]).to_dict() == run[f"ci_{metric}"]


def assert_control_gains_nothing(
    run: dict, control: dict, iterations: int, bar: float, metric: str = "success"
) -> None:
    """The negative control (the same trainer, start and budget, each episode paid another episode's
    score) ran the whole budget, shows no gain (its paired interval reaches 0 or lies below it, its
    mean under ``bar``), and ends at least ``bar`` below the real reward's run: a trainer that does
    not learn fails the learning test."""
    start, end = ("start", "end") if metric == "success" else (f"start_{metric}", f"end_{metric}")
    assert_ran_exactly_the_budget(control, iterations, metric=metric)
    assert control[start] == run[start]
    assert control[f"ci_{metric}"]["low"] <= 0.0, control[f"ci_{metric}"]
    assert control[end] - control[start] < bar, (control[start], control[end])
    assert run[end] - control[end] >= bar - 1e-9, (run[end], control[end])
