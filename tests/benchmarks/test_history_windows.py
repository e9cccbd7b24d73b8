"""The committed history-window comparison: its table is the docs', its numbers recompute from its records."""

import json
import statistics

import pytest

from support.paths import ROOT
from benchmarks import history_windows
from reference_trainer.stats import nested_bootstrap

RESULT = ROOT / "benchmarks" / "results" / "history_windows.json"


@pytest.fixture(scope="module")
def result():
    return json.loads(RESULT.read_text())


def test_the_docs_table_is_the_committed_result_rendered(result):
    page = (ROOT / "docs" / "benchmarks.md").read_text(encoding="utf-8")
    assert history_windows.markdown(result) in page


def test_every_policy_ran_every_seed_and_its_numbers_recompute_from_its_runs(result):
    assert list(result["policies"]) == list(history_windows.POLICIES)
    for label, row in result["policies"].items():
        runs = row["runs"]
        assert [r["seed"] for r in runs] == result["seeds"] and len(runs) >= 2
        assert all(
            r["overrides"] == ({} if row["history_window"] is None else {"history_window": row["history_window"]})
            for r in runs
        ), label
        assert row["gain"] == nested_bootstrap([[[a - b for b, a in r["per_task"]] for r in runs]])
        assert row["rl_success"] == [r["end"] for r in runs]
        assert row["train_tokens_per_iteration"] == pytest.approx(
            statistics.mean(x for r in runs for x in r["train_tokens"])
        )
        assert all(r["start"] == pytest.approx(row["sft_success"]) for r in runs)  # RL starts from that start
    whole, windowed = result["policies"]["whole episode"], result["policies"]["last 3 turns"]
    assert whole["train_rows_per_iteration"] <= windowed["train_rows_per_iteration"]  # windows cut episodes in rows
