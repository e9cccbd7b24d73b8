"""``validate`` certifies every registered env and catches each planted fault on its own check."""

from __future__ import annotations

import json

import pytest

from support.paths import ROOT
from support.planted_envs import AnswerWithoutSearchEnv, PartialCreditWordleEnv, WeakExpertEnv, limited, salted_hash_env
from agentgym_turn.cli import main
from agentgym_turn.testing.learnability import LearnBudget
from agentgym_turn.testing.validate import CHECKS, validate

#: The registered ids the suite certifies (the browser env and the remote client have their own tests; the benchmark
#: ``benchmarks/validate_all.py`` runs every id with a longer search).
SUITE_IDS = [
    "TurnSokoban-v0",
    "TurnSokoban-8x8-v0",
    "TurnWebShop-v0",
    "TurnWebShopDialog-v0",
    "TurnSearchQA-v0",
    "TurnSearchQA-MCQ-v0",
]


def _statuses(report) -> dict[str, str]:
    return {v.check: v.status for v in report.verdicts}


@pytest.mark.parametrize("env_id", SUITE_IDS)
def test_every_registered_env_passes_every_check(env_id):
    report = validate(env_id, tasks=4, search_episodes=60)
    assert _statuses(report) == dict.fromkeys(CHECKS, "pass"), report.to_markdown()


def test_partial_credit_for_invalid_moves_is_caught_as_reward_without_success():
    report = validate(limited(PartialCreditWordleEnv, 6), tasks=4, search_episodes=200)
    assert _statuses(report) == {**dict.fromkeys(CHECKS, "pass"), "gameability": "fail"}, report.to_markdown()
    exploit = report.verdict("gameability").evidence
    assert exploit["best_failure_return"] > 1.0 and exploit["exploit"]  # the transcript of the exploit


def test_an_answer_paid_without_a_search_is_caught_as_reward_without_success():
    report = validate(limited(AnswerWithoutSearchEnv, 5), tasks=4, search_episodes=100)
    assert _statuses(report) == {**dict.fromkeys(CHECKS, "pass"), "gameability": "fail"}, report.to_markdown()
    first = report.verdict("gameability").evidence["exploit"][0]["response"]
    assert "<answer>" in first and "<search>" not in first  # it answered without searching


def test_an_expert_that_cannot_reach_the_maximum_fails_the_oracle_check():
    report = validate(limited(WeakExpertEnv, 3), tasks=8, search_episodes=40)
    assert _statuses(report)["oracle"] == "fail" and _statuses(report)["contract"] == "pass", report.to_markdown()
    assert report.verdict("oracle").evidence["failed_seeds"]


def test_an_env_seeded_by_the_salted_hash_fails_determinism_in_a_fresh_process_only(monkeypatch):
    monkeypatch.setenv("PYTHONPATH", str(ROOT / "tests"))  # the fresh process imports support.planted_envs
    report = validate("support.planted_envs:salted_hash_env", tasks=4, search_episodes=20)
    verdict = report.verdict("determinism")
    assert verdict.status == "fail" and "fresh process" in verdict.summary, report.to_markdown()
    assert _statuses(report)["contract"] == "pass"  # one process cannot see it
    in_process = validate(salted_hash_env, tasks=4, search_episodes=20, checks=["determinism"])
    assert _statuses(in_process) == {"determinism": "pass"}


def test_the_cli_writes_the_report_and_exits_1_on_a_failed_check(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("PYTHONPATH", str(ROOT / "tests"))
    assert (
        main(["validate", "TurnSokoban-v0", "--tasks", "2", "--search-episodes", "20", "--out", str(tmp_path / "ok")])
        == 0
    )
    saved = json.loads((tmp_path / "ok" / "validation.json").read_text())
    assert saved["ok"] and [v["check"] for v in saved["verdicts"]] == list(CHECKS)
    assert "| gameability | pass |" in (tmp_path / "ok" / "validation.md").read_text()
    code = main(
        [
            "validate",
            "support.planted_envs:salted_hash_env",
            "--tasks",
            "2",
            "--checks",
            "determinism",
            "--out",
            str(tmp_path / "bad"),
        ]
    )
    assert code == 1 and "FAIL" in capsys.readouterr().out


def test_a_served_env_that_never_frees_a_session_fails_the_soak():
    import sys

    from agentgym_turn.testing.soak import ServedProcess

    leaky = ServedProcess([sys.executable, str(ROOT / "tests" / "support" / "leaky_server.py")])
    try:
        report = validate(
            f"http://127.0.0.1:{leaky.port}", checks=[], soak_minutes=0.2, soak_clients=2, soak_idle_timeout=1.0
        )
    finally:
        leaky.stop()
    verdict = report.verdict("soak")
    assert verdict.status == "fail" and "sessions still live after the drain" in verdict.summary, report.to_markdown()
    assert verdict.evidence["live_sessions_after_drain"] > 0


def test_our_served_env_passes_a_short_soak():
    report = validate("TurnSokoban-v0", checks=[], soak_minutes=0.2, soak_clients=2)
    verdict = report.verdict("soak")
    assert verdict.status == "pass" and not verdict.evidence["memory_judged"], report.to_markdown()
    assert verdict.evidence["sessions"] > 50 and verdict.evidence["live_sessions_after_drain"] == 0


#: A hill-climb the size of a unit test: the corridor's six rooms teach in a few iterations when the signs show. SFT two
#: steps at a time until 5% of sampled corridors are walked through: more overshoots to a greedy start that walks
#: through every held-out corridor, where no gain can show.
SMALL_CLIMB = LearnBudget(
    sft_episodes=64,
    sft_chunk=2,
    sft_max_steps=40,
    start_level=0.05,
    iterations=6,
    tasks_per_iteration=32,
    eval_tasks=64,
    max_new_tokens=2,
)


def test_an_env_that_hides_what_its_reward_follows_fails_learnability_and_its_twin_passes(monkeypatch):
    monkeypatch.setenv("PYTHONPATH", str(ROOT / "tests"))
    shown = validate("support.planted_envs:exact_door_corridor", tasks=4, search_episodes=40, learn_budget=SMALL_CLIMB)
    assert _statuses(shown) == dict.fromkeys([*CHECKS, "learnability"], "pass"), shown.to_markdown()
    hidden = validate(
        "support.planted_envs:hidden_sign_corridor", tasks=4, search_episodes=40, learn_budget=SMALL_CLIMB
    )
    assert _statuses(hidden) == {**dict.fromkeys(CHECKS, "pass"), "learnability": "fail"}, hidden.to_markdown()
    gain = hidden.verdict("learnability").evidence["gain"]
    assert gain["low"] <= 0 and len(hidden.verdict("learnability").evidence["per_task"]) == SMALL_CLIMB.eval_tasks
