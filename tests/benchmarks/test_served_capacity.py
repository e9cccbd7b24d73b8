"""benchmarks/served_capacity.py: a short run measures a served env under load, and the docs quote the committed table."""

from benchmarks import served_capacity
from support.paths import ROOT


def test_served_capacity__a_short_run_measures_latency_and_which_side_is_busy(tmp_path):
    results = served_capacity.main(
        ["--only", "TurnSokoban-v0", "--sessions", "2", "4", "--seconds", "0.5", "--out", str(tmp_path / "c.json")]
    )
    row = results["ids"]["TurnSokoban-v0"]
    assert [level["sessions"] for level in row["levels"]] == [2, 4]
    for level in row["levels"]:
        assert (
            level["steps"] > 0
            and 0 < level["p50_ms"] <= level["p99_ms"]
            and level["server_cpu"] >= 0
            and level["client_cpu"] >= 0
        )
    assert row["sessions_per_core"] in (0, 2, 4)


def test_the_docs_table_is_the_committed_results_table():
    table = served_capacity.markdown(served_capacity.common.read_json(served_capacity.RESULTS))
    assert table in (ROOT / "docs" / "integrations.md").read_text(encoding="utf-8")
