"""benchmarks/openenv_server.py: how the rounds of the two servers are summed up, and the docs quote the committed table.

The measurement itself needs OpenEnv in a virtual environment of its own (not a dependency of this project); a short
run is in the script's docstring."""

from __future__ import annotations

from benchmarks import common, openenv_server
from support.paths import ROOT


def _round(sessions: int, p99: float, steps_per_s: float, errors: int = 0) -> dict:
    return {
        "sessions": sessions,
        "p50_ms": p99 / 2,
        "p99_ms": p99,
        "steps_per_s": steps_per_s,
        "server_cpu": 1.0,
        "client_cpu": 0.3,
        "errors": errors,
    }


def test_a_level_is_the_median_of_its_rounds_and_sessions_per_core_the_largest_level_under_the_slo():
    played = {
        # ours: 64 within (median p99 of 40, 120, 60 is 60), 128 not (median 130)
        "agentgym-turn": [
            [_round(64, 40, 3000), _round(64, 120, 2800), _round(64, 60, 2900)],
            [_round(128, 130, 3000), _round(128, 90, 3100), _round(128, 150, 2900)],
        ],
        # OpenEnv's: 64 within but for an error frame; 128 out
        "openenv": [
            [_round(64, 50, 1500), _round(64, 55, 1450, errors=1), _round(64, 52, 1400)],
            [_round(128, 200, 1500), _round(128, 210, 1500), _round(128, 220, 1500)],
        ],
    }
    summary = openenv_server.summarise(played, slo_ms=100)
    ours, theirs = summary["agentgym-turn"], summary["openenv"]
    assert [row["p99_ms"] for row in ours["levels"]] == [60, 130]
    assert ours["levels"][0]["round_p99_ms"] == [40, 120, 60]
    assert ours["sessions_per_core"] == 64 and theirs["sessions_per_core"] == 0
    assert theirs["levels"][0]["errors"] == 1
    assert summary["steps_per_s_ratio"] == [2900 / 1450, 3000 / 1500]


def test_the_docs_table_is_the_committed_results_table():
    table = openenv_server.markdown(common.read_json(common.RESULTS / "openenv_server.json"))
    assert table in (ROOT / "docs" / "integrations.md").read_text(encoding="utf-8")
