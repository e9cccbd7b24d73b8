"""benchmarks/learnability.py writes one row per id with the hill-climb's verdict and evidence, and its docs table."""

from __future__ import annotations


from benchmarks import learnability
from support.paths import ROOT


def test_one_row_has_the_verdict_and_the_evidence_the_table_shows(monkeypatch):
    monkeypatch.setenv("PYTHONPATH", str(ROOT / "tests"))
    small = {"sft_episodes": 64, "sft_chunk": 2, "sft_max_steps": 40, "start_level": 0.05, "iterations": 6, "tasks_per_iteration": 32,
             "eval_tasks": 64, "max_new_tokens": 2}  # fmt: skip
    row = learnability._one(("support.planted_envs:exact_door_corridor", 0, small))
    assert row["status"] == "pass" and row["evidence"]["gain"]["low"] > 0, row["summary"]
    table = learnability.markdown({"envs": [row]})
    assert table.splitlines()[2].startswith("| support.planted_envs:exact_door_corridor | pass | success | ")
