"""The suite's scheduler of learning jobs (``tests/support/learning_jobs.py``), on stand-in tasks that take no time."""

from types import SimpleNamespace

import pytest

from support.learning_jobs import LearningJobs

MINUTES = {
    "a": SimpleNamespace(sft_minutes=5, rl_minutes=6),
    "b": SimpleNamespace(sft_minutes=7, rl_minutes=3),
    "c": SimpleNamespace(sft_minutes=3, rl_minutes=6.5),
}


def fake_sft(name, work):
    return f"{work}/{name}_sft", {}


def fake_rl(job):
    name, algo, seed, iterations, eval_every, work = job
    if name == "broken":
        raise ValueError("no such recipe")
    return {"recipe": name, "algo": algo, "seed": seed}


def test_each_recipe_runs_its_sft_then_its_rl_and_a_free_worker_takes_the_longest_chain(tmp_path):
    jobs = LearningJobs(sorted(MINUTES), str(tmp_path), workers=1, recipes=MINUTES, tasks=(fake_sft, fake_rl)).start()
    try:
        results = jobs.results()
    finally:
        jobs.stop()
    assert {k: v for k, v in results.items() if "/" not in k} == {
        n: {"recipe": n, "algo": "turn-ppo", "seed": 0} for n in MINUTES
    }
    assert {k: v for k, v in results.items() if "/" in k} == {f"{n}/start": fake_sft(n, str(tmp_path)) for n in MINUTES}
    # chains: a 11, b 10, c 9.5; once a's SFT is done its RL (6) is ready beside b's and c's SFTs (10, 9.5)
    assert jobs.order == [("sft", "a"), ("sft", "b"), ("sft", "c"), ("rl", "c"), ("rl", "a"), ("rl", "b")]
    # one worker: the timeline holds every task in that order, each starting after the previous one ended
    assert [(kind, name) for kind, name, _, _ in jobs.timeline] == jobs.order
    assert all(0 <= start <= end for _, _, start, end in jobs.timeline)
    assert all(a[3] <= b[2] for a, b in zip(jobs.timeline, jobs.timeline[1:]))
    assert jobs.report().count("\n") == len(jobs.order) - 1 and "sft      a" in jobs.report()


def test_a_failed_task_fails_the_results_with_its_recipe_and_stops_handing_out_work(tmp_path):
    recipes = {**MINUTES, "broken": SimpleNamespace(sft_minutes=9, rl_minutes=20)}
    jobs = LearningJobs(sorted(recipes), str(tmp_path), workers=1, recipes=recipes, tasks=(fake_sft, fake_rl)).start()
    try:
        with pytest.raises(RuntimeError, match="broken recipe's RL job failed.*no such recipe"):
            jobs.results()
    finally:
        jobs.stop()
    assert jobs.order[:2] == [("sft", "broken"), ("rl", "broken")] and len(jobs.order) == 2


def fake_rl_with_overrides(job):
    name, algo, seed, iterations, eval_every, work, *over = job
    return {"recipe": name, "overrides": over[0] if over else {}}


def test_a_recipe_with_a_control_runs_it_from_the_same_sft_with_shuffled_rewards(tmp_path):
    jobs = LearningJobs(
        sorted(MINUTES),
        str(tmp_path),
        workers=1,
        recipes=MINUTES,
        tasks=(fake_sft, fake_rl_with_overrides),
        controls=("c",),
    ).start()
    try:
        results = jobs.results()
    finally:
        jobs.stop()
    assert results["c/shuffled"] == {"recipe": "c", "overrides": {"reward": "shuffled"}}
    assert {k: v["overrides"] for k, v in results.items() if "/" not in k} == {n: {} for n in MINUTES}
    # c's SFT now has two RL budgets behind it (3 + 2 x 6.5 = 16): it goes first
    assert jobs.order[0] == ("sft", "c") and jobs.order.index(("control", "c")) > 0


def test_a_control_longer_than_its_rl_is_scheduled_by_its_own_minutes(tmp_path):
    recipes = {
        "a": SimpleNamespace(sft_minutes=5, rl_minutes=2, control_minutes=9),
        "b": SimpleNamespace(sft_minutes=8, rl_minutes=6),
    }
    jobs = LearningJobs(
        sorted(recipes),
        str(tmp_path),
        workers=1,
        recipes=recipes,
        tasks=(fake_sft, fake_rl_with_overrides),
        controls=("a",),
    ).start()
    try:
        jobs.results()
    finally:
        jobs.stop()
    # chains: a 5 + 2 + 9 = 16, b 8 + 6 = 14; then the ready tasks longest first: a's control (9), b's RL (6), a's RL (2)
    assert jobs.order == [("sft", "a"), ("sft", "b"), ("control", "a"), ("rl", "b"), ("rl", "a")]


def fake_extra(x, y):
    if x < 0:
        raise ValueError("a negative x")
    return {"sum": x + y}


def test_background_work_is_handed_out_by_its_minutes_after_the_recipes_longer_tasks(tmp_path):
    extras = {"t[1]": (fake_extra, (1, 2), 0.5), "t[2]": (fake_extra, (3, 4), 4.0)}
    jobs = LearningJobs(
        sorted(MINUTES), str(tmp_path), workers=1, recipes=MINUTES, tasks=(fake_sft, fake_rl), extras=extras
    ).start()
    try:
        results = jobs.results()
    finally:
        jobs.stop()
    assert results["t[1]"] == {"sum": 3} and results["t[2]"] == {"sum": 7}
    # chains a 11, b 10, c 9.5; c's RL (6.5) and a's (6) before the 4-minute task, b's RL (3) before the half-minute one
    assert jobs.order == [
        ("sft", "a"),
        ("sft", "b"),
        ("sft", "c"),
        ("rl", "c"),
        ("rl", "a"),
        ("extra", "t[2]"),
        ("rl", "b"),
        ("extra", "t[1]"),
    ]
    # alone, and one raising: its exception is its result, the other tasks' results stand
    alone = LearningJobs([], str(tmp_path), workers=1, extras={**extras, "t[3]": (fake_extra, (-1, 0), 9.0)}).start()
    try:
        results = alone.results()
    finally:
        alone.stop()
    assert isinstance(results.pop("t[3]"), ValueError) and results == {"t[1]": {"sum": 3}, "t[2]": {"sum": 7}}
