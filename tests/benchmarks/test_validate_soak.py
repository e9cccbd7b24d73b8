"""benchmarks/validate_soak.py serves an id, churns it and writes the soak verdict; the committed run is the docs table."""

from __future__ import annotations

import json

from benchmarks import validate_soak


def test_a_short_soak_writes_the_verdict_and_the_table(tmp_path, capsys):
    out = tmp_path / "soak.json"
    assert (
        validate_soak.main(["--ids", "TurnSokoban-v0", "--minutes", "0.05", "--clients", "2", "--out", str(out)]) == 0
    )
    (row,) = json.loads(out.read_text())["envs"]
    assert row["status"] == "pass" and row["evidence"]["live_sessions_after_drain"] == 0, row["summary"]
    assert "| TurnSokoban-v0 | pass | " in capsys.readouterr().out
