"""Checks every learning test makes on its recipe's run (the ``learning_runs`` fixture's entry)."""

import math


def assert_ran_exactly_the_budget(run: dict, iterations: int, metric: str = "success") -> None:
    """The budget is work, not time: exactly ``iterations`` RL iterations, never stopped early, evaluated
    before and after only; the run's start/end ``metric`` ("success" or "score") are those evaluations,
    and every per-iteration diagnostic is finite."""
    start, end = ("start", "end") if metric == "success" else (f"start_{metric}", f"end_{metric}")
    assert run["iterations"] == iterations
    per_iteration = ("clipfrac", "clipfrac_turn", "approx_kl", "grad_norm", f"rollout_{metric}", "invalid_turns")
    assert [len(run[k]) for k in per_iteration] == [iterations] * len(per_iteration), {k: len(run[k]) for k in per_iteration}
    assert run["eval_iterations"] == [0, iterations]
    assert run[start] == run[f"eval_{metric}"][0] and run[end] == run[f"eval_{metric}"][-1]
    assert all(math.isfinite(x) for x in run["clipfrac"] + run["clipfrac_turn"] + run["approx_kl"] + run["grad_norm"])
