"""benchmarks/validate_all.py writes one row per id with every check's verdict, and its docs table."""

from __future__ import annotations

import json

from benchmarks import validate_all


def test_a_short_run_writes_every_verdict_and_the_table(tmp_path, capsys):
    out = tmp_path / "validation.json"
    assert (
        validate_all.main(["--ids", "TurnSokoban-v0", "--tasks", "2", "--search-episodes", "10", "--out", str(out)])
        == 0
    )
    result = json.loads(out.read_text())
    (row,) = result["envs"]
    assert row["env"] == "TurnSokoban-v0" and row["ok"] and row["search_episodes"] == 10 and row["tasks"] == 2
    assert [v["check"] for v in row["verdicts"]] == ["contract", "determinism", "oracle", "floors", "gameability"]
    assert "| TurnSokoban-v0 | pass | pass | pass | pass | pass: " in capsys.readouterr().out


def test_the_docs_table_is_the_committed_run_and_every_id_passed_it():
    from benchmarks import common
    from support.paths import ROOT

    result = json.loads((common.RESULTS / "validation.json").read_text())
    assert validate_all.markdown(result) in (ROOT / "docs" / "validation.md").read_text(encoding="utf-8")
    assert all(row["ok"] for row in result["envs"]) and len(result["envs"]) >= 9
    assert all(row["search_episodes"] >= 10_000 for row in result["envs"] if "Browser" not in row["env"])
