"""benchmarks/validate_all.py writes one row per id with every check's verdict, and its docs table."""

from __future__ import annotations

import json

from benchmarks import validate_all


def test_a_short_run_writes_every_verdict_and_the_table(tmp_path, capsys):
    out = tmp_path / "validation.json"
    assert validate_all.main(["--ids", "TurnSokoban-v0", "--tasks", "2", "--search-episodes", "10", "--out", str(out)]) == 0
    result = json.loads(out.read_text())
    (row,) = result["envs"]
    assert row["env"] == "TurnSokoban-v0" and row["ok"] and row["search_episodes"] == 10 and row["tasks"] == 2
    assert [v["check"] for v in row["verdicts"]] == ["contract", "determinism", "oracle", "floors", "gameability"]
    assert "| TurnSokoban-v0 | pass | pass | pass | pass | pass: " in capsys.readouterr().out
