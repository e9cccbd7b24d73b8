"""benchmarks/sokoban.py: the docs' speed tables are the committed interleaved results, rendered."""

from benchmarks import sokoban
from support.paths import ROOT


def test_the_docs_tables_are_the_committed_results_tables():
    results = sokoban.common.read_json(sokoban.RESULTS)
    assert "--quick" not in results["script"]
    assert all(r["rounds"] >= 10 for r in results["ratios"].values())  # a full run, not a quick one
    page = (ROOT / "docs" / "benchmarks.md").read_text(encoding="utf-8")
    for table in sokoban.markdown(results).split("\n\n"):
        assert table in page


def test_a_ratio_cell_gives_the_median_its_interval_and_the_spread():
    row = {"median": 401.04, "median_interval": [99.9, 804.0], "min": 2.8, "max": 3391.8, "rounds": 40, "pooled": 375.0}
    assert sokoban._ratio_cell(row) == "401x (100-804x; 2.8-3,392x, 40 rounds)"
    assert (
        sokoban._ratio_cell({**row, "median": 3.31, "median_interval": [3.0, 4.2], "min": 2.8, "max": 5.0}, " moves")
        == "3.3x moves (3.0-4.2x; 2.8-5.0x, 40 rounds)"
    )
