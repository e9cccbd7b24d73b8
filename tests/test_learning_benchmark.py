"""benchmarks/learning.py's summary, table and figure, on made-up runs (the runs themselves are the
learning tests' job: tests/test_learning_*.py)."""

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks import learning  # noqa: E402
from reference_trainer.stats import paired_ci  # noqa: E402


def _run(algo, seed, before, after, n_it=3):
    return {
        "algo": algo, "seed": seed, "start": sum(before) / len(before), "end": sum(after) / len(after),
        "start_score": 0.5, "end_score": 0.6, "end_invalid_turns": 0.01, "rl_seconds": 10.0 + seed,
        "ci_success": paired_ci(before, after).to_dict(), "ci_score": paired_ci([0.5] * 4, [0.6] * 4).to_dict(),
        "eval_iterations": [0, n_it], "eval_success": [sum(before) / len(before), sum(after) / len(after)],
        "eval_score": [0.5, 0.6], "clipfrac": [0.1] * n_it, "clipfrac_turn": [0.2] * n_it,
        "approx_kl": [0.001] * n_it, "grad_norm": [1.0] * n_it,
    }


def test_summary_table_and_figure_of_made_up_runs(tmp_path):
    runs = [_run("turn-ppo", 0, [1, 0, 0, 1], [1, 1, 1, 0]), _run("turn-ppo", 1, [0, 0, 0, 0], [1, 1, 0, 0]),
            _run("st-ppo", 0, [1, 1, 0, 0], [1, 1, 0, 0])]
    summary = learning.summarise(runs, "success")
    assert list(summary) == ["turn-ppo", "st-ppo"]  # preset order, only those run
    s = summary["turn-ppo"]
    assert s["mean_start"] == 0.25 and s["mean_end"] == 0.625
    assert abs(s["mean_gain_points"] - 37.5) < 1e-9 and abs(s["min_gain_points"] - 25.0) < 1e-9
    first = s["per_seed_ci_points"][0]
    assert abs(first["gain"] - 25.0) < 1e-9 and abs(first["half_width"] - 93.82) < 0.01  # docs/algorithms.md's hand case
    assert summary["st-ppo"]["per_seed_ci_points"][0]["half_width"] == 0.0
    result = {"metric": "success", "summary": summary}
    table = learning.markdown(result)
    assert table.count("\n") == 3 and "| turn-ppo | 25.0 -> 62.5 (+37.5) | +25.0 ± 93.8, +50.0 ± " in table
    png = learning.plot_learning(learning._curves(runs, "success"), tmp_path / "x.png")
    assert png.stat().st_size > 10_000
    score = learning.summarise(runs, "score")["turn-ppo"]
    assert abs(score["mean_gain_points"] - 10.0) < 1e-9


def test_markdown_mode_says_what_to_run_when_a_result_is_missing(tmp_path, capsys):
    assert learning.main(["--env", "sokoban", "--markdown", "--out-dir", str(tmp_path)]) == 2
    assert "benchmarks/learning.py --env sokoban" in capsys.readouterr().err
    (tmp_path / "learning_sokoban.json").write_text(json.dumps({"metric": "success", "summary": learning.summarise(
        [_run("ppo", 0, [0, 1], [1, 1])], "success")}))
    assert learning.main(["--env", "sokoban", "--markdown", "--out-dir", str(tmp_path)]) == 0
    assert "| ppo |" in capsys.readouterr().out


def test_sft_start_splits_the_saved_evaluation_from_the_reported_summary():
    from reference_trainer.recipes import sft_start

    summary = {"before": 0.0, "after": 0.5, "after_score": 0.5, "recipe": {"env": "x"}}
    metrics, outcomes = {"success": 0.5, "score": 0.5}, {"seeds": [1.0, 2.0], "success": [1.0, 0.0], "score": [1.0, 0.0]}
    start, reported = sft_start({**summary, "after_metrics": metrics, "after_outcomes": outcomes})
    assert start == (metrics, outcomes) and reported == summary
    assert sft_start(summary) == (None, summary)  # a meta saved before the evaluation was kept: RL plays its start again
