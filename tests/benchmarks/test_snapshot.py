"""benchmarks/snapshot.py: a short run measures every id, and the docs quote the committed results' table."""

from benchmarks import snapshot
from support.paths import ROOT


def test_snapshot_benchmark__a_short_run_measures_every_id(tmp_path):
    results = snapshot.main(
        [
            "--states",
            "2",
            "--repeat",
            "2",
            "--only",
            "TurnSokoban-v0",
            "TurnSearchQA-v0",
            "--out",
            str(tmp_path / "s.json"),
        ]
    )
    assert set(results["ids"]) == {"TurnSokoban-v0", "TurnSearchQA-v0"}
    for row in results["ids"].values():
        assert row["bytes"] > 0 and row["snapshot_s"] >= 0 and row["fork1_s"] >= 0 and row["states"] == 2


def test_the_docs_table_is_the_committed_results_table():
    table = snapshot.markdown(snapshot.common.read_json(snapshot.RESULTS))
    assert table in (ROOT / "docs" / "turn-contract.md").read_text(encoding="utf-8")
