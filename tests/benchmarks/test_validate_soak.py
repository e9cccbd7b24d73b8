"""benchmarks/validate_soak.py serves an id, churns it and writes the soak verdict; the committed run is the docs table."""

from __future__ import annotations

import json

from benchmarks import common, validate_soak
from support.paths import ROOT


def test_a_short_soak_writes_the_verdict_and_the_table(tmp_path, capsys):
    out = tmp_path / "soak.json"
    assert (
        validate_soak.main(["--ids", "TurnSokoban-v0", "--minutes", "0.05", "--clients", "2", "--out", str(out)]) == 0
    )
    (row,) = json.loads(out.read_text())["envs"]
    assert row["status"] == "pass" and row["evidence"]["live_sessions_after_drain"] == 0, row["summary"]
    assert "| TurnSokoban-v0 | pass | " in capsys.readouterr().out


def test_the_docs_table_is_the_committed_ten_minute_soak_and_every_id_held_its_bounds():
    result = json.loads((common.RESULTS / "validation_soak.json").read_text())
    assert validate_soak.markdown(result) in (ROOT / "docs" / "validation.md").read_text(encoding="utf-8")
    assert result["minutes"] >= 10 and {row["env"] for row in result["envs"]} == set(validate_soak.SERVED_IDS)
    assert all(row["status"] == "pass" and row["evidence"]["memory_judged"] for row in result["envs"])
