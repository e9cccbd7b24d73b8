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


def test_the_docs_table_is_the_committed_run():
    import json

    from benchmarks import common
    from support.paths import ROOT

    result = json.loads((common.RESULTS / "learnability.json").read_text())
    assert learnability.markdown(result) in (ROOT / "docs" / "validation.md").read_text(encoding="utf-8")
    passed = {row["env"] for row in result["envs"] if row["status"] == "pass"}
    assert {"TurnSokoban-v0", "TurnSearchQA-v0"} <= passed  # the ids with a recipe climbed as the docs say
    for row in result["envs"]:
        if row["evidence"]:  # its interval recomputes from the per-task outcomes it saved
            from reference_trainer.stats import paired_ci

            ci = paired_ci([b for b, _ in row["evidence"]["per_task"]], [a for _, a in row["evidence"]["per_task"]])
            assert abs(ci.low - row["evidence"]["gain"]["low"]) < 1e-9 and (ci.low > 0) == (row["status"] == "pass")


def test_a_merged_rerun_replaces_the_rows_of_the_ids_it_ran_and_keeps_the_rest_in_registry_order():
    row = lambda env, status: {"env": env, "status": status, "summary": "", "evidence": {}}  # noqa: E731
    saved = [row("A-v0", "pass"), row("Remote-v0 (serving A-v0)", "fail"), row("C-v0", "error")]
    new = [row("C-v0", "pass"), row("B-v0", "fail")]
    rows = learnability.merged(saved, new, order=["A-v0", "B-v0", "C-v0", "Remote-v0"])
    assert [(r["env"], r["status"]) for r in rows] == [
        ("A-v0", "pass"),
        ("B-v0", "fail"),
        ("C-v0", "pass"),
        ("Remote-v0 (serving A-v0)", "fail"),
    ]
