"""benchmarks/learning.py's tables, figures and recomputation check, on made-up runs (the runs
themselves are the learning tests' job: tests/reference_trainer/recipes/test_*_learning.py)."""

import json

import pytest

from benchmarks import learning
from support.paths import ROOT
from reference_trainer.recipes import RECIPES
from reference_trainer.stats import nested_bootstrap, paired_ci
from reference_trainer.tasks import eval_group, group


def _made_up(tmp_path, leak=False):
    """A validation result of 2 SFT seeds x 2 RL seeds on 6 test tasks (Sokoban's first test draws)."""
    cfg = RECIPES["sokoban"].build(out="unused")
    test = eval_group(cfg, n=6)
    keys = [f"k{i}" for i in (0, 1, 2, 3, 4, 4)]  # the last two draws are one level
    sft = [
        {"seed": s, "after": 0.5, "after_score": 0.5, "per_task": [0.5] * 6, "best_step": 300, "steps": 600}
        for s in (0, 1)
    ]
    runs = [
        {
            "sft_seed": s,
            "seed": r,
            "end": 0.5 + 0.1 * r,
            "end_score": 0.5,
            "overrides": {},
            "per_task": [[b, min(1, b + (i + r) % 2)] for i, b in enumerate([0, 1, 0, 1, 0, 0])],
        }
        for s in (0, 1)
        for r in (0, 1)
    ]
    for r in runs:
        r["ci_success"] = paired_ci([b for b, _ in r["per_task"]], [a for _, a in r["per_task"]]).to_dict()
    diffs = [[[a - b for b, a in r["per_task"]] for r in runs if r["sft_seed"] == s] for s in (0, 1)]
    train = group(cfg.train.env, cfg.rollout.env_kwargs, range(40))
    if leak:
        train = group(test["env_id"], test["env_kwargs"], [test["resets"][2]["seed"]])
    result = {
        "env": "TurnSokoban-v0",
        "metric": "success",
        "algo": "turn-ppo",
        "settings": {"sft_seeds": [0, 1], "rl_seeds": [0, 1]},
        "test_task_keys": keys,
        "sft": sft,
        "sft_continued": [
            {"seed": s, "after": 0.55, "after_score": 0.5, "per_task": [0.55] * 6, "steps": 250} for s in (0, 1)
        ],
        "runs": runs,
        "scripted": {"expert": 1.0},
        "summary": {
            "best_sft": nested_bootstrap([[[0.5] * 6]] * 2, keys) | {"per_seed": [0.5, 0.5]},
            "sft_continued_gain": nested_bootstrap([[[0.55 - 0.5] * 6]] * 2, keys),
            "rl_gain": nested_bootstrap(diffs, keys),
            "rl_end_per_run": [r["end"] for r in runs],
            "sft_continued_per_seed": [0.55, 0.55],
        },
        "tasks": {"test": [test], "train": [train]},
    }
    path = tmp_path / "learning_sokoban.json"
    path.write_text(json.dumps(result))
    return path, result


def test_the_table_the_figure_and_the_check_of_a_made_up_result(tmp_path):
    path, result = _made_up(tmp_path)
    table = learning.markdown(result)
    assert (
        "| best SFT (validation plateau, 2 SFT seeds) | 50.0 |" in table and "| scripted: expert | 100.0 | |" in table
    )
    assert (
        "| 1 | 50.0 (300 of 600) | 55.0 (250) | 50.0, " in table
    )  # the per-seed table: best step, continued steps, each run
    assert "| SFT continued for RL's compute | 55.0 | gain over best SFT +5.0 (+5.0 to +5.0) |" in table
    assert learning.plot(result, tmp_path / "x.png").stat().st_size > 10_000
    found = learning.check(path)
    assert found["shared"] == [] and found["test_tasks"] >= 2


def test_the_check_fails_on_a_leaked_test_task_and_on_an_interval_that_does_not_recompute(tmp_path):
    path, _ = _made_up(tmp_path, leak=True)
    with pytest.raises(AssertionError, match="1 test tasks are among the training inputs"):
        learning.check(path)
    path, result = _made_up(tmp_path)
    result["summary"]["rl_gain"]["high"] += 0.01
    path.write_text(json.dumps(result))
    with pytest.raises(AssertionError):
        learning.check(path)


def test_markdown_mode_says_what_to_run_when_a_result_is_missing(tmp_path, capsys):
    assert learning.main(["--env", "sokoban", "--markdown", "--out-dir", str(tmp_path)]) == 2
    assert "benchmarks/learning.py --env sokoban" in capsys.readouterr().err
    _made_up(tmp_path)
    assert learning.main(["--env", "sokoban", "--markdown", "--out-dir", str(tmp_path)]) == 0
    assert "| RL (turn-ppo) from the best SFT, 2 x 2 runs |" in capsys.readouterr().out


def test_sft_start_splits_the_saved_evaluation_from_the_reported_summary():
    from reference_trainer.recipes import sft_start

    summary = {"before": 0.0, "after": 0.5, "after_score": 0.5, "recipe": {"env": "x"}}
    metrics, outcomes = (
        {"success": 0.5, "score": 0.5},
        {"seeds": [1.0, 2.0], "success": [1.0, 0.0], "score": [1.0, 0.0]},
    )
    start, reported = sft_start({**summary, "after_metrics": metrics, "after_outcomes": outcomes, "train_tasks": []})
    assert start == (metrics, outcomes) and reported == summary
    assert sft_start(summary) == (
        None,
        summary,
    )  # a meta saved before the evaluation was kept: RL plays its start again


def test_every_interval_of_the_committed_results_recomputes_from_their_per_task_records():
    """Only the bootstrap (the replay of every reset, ``--check``, is the benchmark's job: minutes)."""
    for path in sorted((ROOT / "benchmarks" / "results").glob("learning_*.json")):
        result = json.loads(path.read_text())
        if "test_task_keys" not in result:  # a result of the earlier protocol (no per-task records)
            continue
        for name, again in learning.recompute_intervals(result).items():
            assert again == learning.saved_interval(result, name), (path.name, name)


def _two_algorithms(tmp_path):
    """The made-up result with a second algorithm's runs from the same starts and a zero-shot row."""
    path, result = _made_up(tmp_path)
    keys = result["test_task_keys"]
    second = [
        {
            **r,
            "algo": "st-ppo",
            "end": r["end"] - 0.1,
            "per_task": [[b, max(0, a - (i % 2))] for i, (b, a) in enumerate(r["per_task"])],
        }
        for r in result["runs"]
    ]
    for r in result["runs"]:
        r["algo"] = "turn-ppo"
    runs = result["runs"] + second

    def gain(algo):
        return nested_bootstrap(
            [
                [[a - b for b, a in r["per_task"]] for r in runs if r["algo"] == algo and r["sft_seed"] == s]
                for s in (0, 1)
            ],
            keys,
        )

    zero = [0.0, 0.0, 1.0, 0.0]  # the first four test tasks
    result.update(
        runs=runs,
        algos=["turn-ppo", "st-ppo"],
        zero_shot={"tasks": 4, "spec": {"tasks": 4, "env_kwargs": {"prompt_style": "full"}}, "per_task": zero},
    )
    result["summary"].update(
        rl={
            a: {"gain": gain(a), "end_per_run": [r["end"] for r in runs if r["algo"] == a]}
            for a in ("turn-ppo", "st-ppo")
        },
        zero_shot=nested_bootstrap([[zero]], keys[:4]),
        rl_gain=gain("turn-ppo"),
    )
    path.write_text(json.dumps(result))
    return path, result


def test_several_algorithms_from_the_same_starts_and_a_zero_shot_row(tmp_path):
    path, result = _two_algorithms(tmp_path)
    table = learning.markdown(result)
    assert "| zero-shot (4 of the test tasks, prompt_style='full') | 25.0 |" in table, table
    assert (
        "| RL (turn-ppo) from the best SFT, 2 x 2 runs |" in table
        and "| RL (st-ppo) from the best SFT, 2 x 2 runs |" in table
    )
    assert "st-ppo 40.0" in table  # the per-seed table names each run's algorithm
    assert (
        table.index("zero-shot") < table.index("best SFT") < table.index("RL (turn-ppo)") < table.index("RL (st-ppo)")
    )
    assert learning.plot(result, tmp_path / "x.png").stat().st_size > 10_000
    assert learning.check(path)["shared"] == []
    for field in ("rl", "zero_shot"):  # an interval that does not recompute from the records fails the check
        _, tampered = _two_algorithms(tmp_path)
        (tampered["summary"]["rl"]["st-ppo"]["gain"] if field == "rl" else tampered["summary"]["zero_shot"])[
            "high"
        ] += 0.01
        path.write_text(json.dumps(tampered))
        with pytest.raises(AssertionError):
            learning.check(path)


def test_set_gives_every_job_the_same_config_fields_and_keys_of_their_own(tmp_path):
    assert learning.parse_settings(["device=cuda", "num_envs=256", "recompute_old_logp=true", "dtype=bfloat16"]) == {
        "device": "cuda",
        "num_envs": 256,
        "recompute_old_logp": True,
        "dtype": "bfloat16",
    }
    with pytest.raises(SystemExit, match="config field"):
        learning.parse_settings(["no_such_field=1"])
    import argparse

    args = argparse.Namespace(work=str(tmp_path), algo=["turn-ppo"])
    sft = {"policy_dir": "p", "recipe": {}, "after": 0.5, "seed": 0, "after_metrics": {}, "after_outcomes": {}}
    plain = learning._rl_jobs("sokoban", args, [sft], {"": {}}, [0], 2, tmp_path)
    learning.SETTINGS.update(device="cuda")
    try:
        gpu = learning._rl_jobs("sokoban", args, [sft], {"": {}}, [0], 2, tmp_path)
        assert gpu[0][1][0][7] == {"device": "cuda"} and plain[0][1][0][7] == {}  # the RL job's overrides
        assert gpu[0][2] != plain[0][2]  # another cache file
        assert learning._settings() == ({"device": "cuda"},)
    finally:
        learning.SETTINGS.clear()
    assert learning._settings() == ()
