"""benchmarks/turn_cache.py: a quick run of each case gives the same rollout both ways, and the docs quote the committed results' table."""

import textwrap

import pytest

from benchmarks import turn_cache
from support.paths import ROOT


@pytest.mark.parametrize("name", sorted(turn_cache.CASES))
def test_turn_cache_benchmark__a_quick_run_samples_the_same_tokens_both_ways(name, tmp_path):
    case = turn_cache.quick(turn_cache.CASES[name])
    row = turn_cache.measure(case, tmp_path, repeats=1)
    assert row["same_tokens"] and 0 <= row["max_logp_abs_diff"] <= 1e-4
    assert row["episodes"] == 4 and row["sampled_tokens"] > 0 and row["mean_turns"] > 1
    assert len(row["reuse_s"]) == len(row["no_reuse_s"]) == 1 and row["ratio"] > 0
    assert "context" not in row["endings"]
    table = turn_cache.markdown({"cases": {name: row}})
    assert len(table.splitlines()) == 3 and case.env_id in table


def test_the_docs_table_is_the_committed_results_table():
    results = turn_cache.common.read_json(turn_cache.RESULTS)
    assert set(results["cases"]) == set(turn_cache.CASES)
    for row in results["cases"].values():
        assert row["same_tokens"] and row["max_logp_abs_diff"] <= turn_cache.LOGP_TOLERANCE
    table = turn_cache.markdown(results)
    assert textwrap.indent(table, "  ") in (ROOT / "docs" / "trainer.md").read_text(encoding="utf-8")
