"""benchmarks/rl_validation.py: variants parse to config fields, runs are scored on the validation split only,
and the committed results say which settings each run had."""

from __future__ import annotations

import json

import pytest

from benchmarks import common
from benchmarks.rl_validation import parse_variant, validation_overrides


def test_a_variant_is_a_name_and_config_fields():
    assert parse_variant("recipe") == ("recipe", {})
    assert parse_variant("paper rates:lr=1e-6,critic_warmup=2") == ("paper rates", {"lr": 1e-6, "critic_warmup": 2})
    with pytest.raises(SystemExit, match="config field"):
        parse_variant("x:not_a_field=1")


def test_runs_are_scored_on_the_validation_split_never_the_test_split():
    over = validation_overrides("sokoban_smollm2")
    assert over["eval_env_kwargs"]["split"] == "validation" and over["eval_episodes"] == 64


def test_the_committed_runs_name_their_settings_and_start_from_one_policy():
    saved = json.loads((common.RESULTS / "rl_validation_sokoban_smollm2.json").read_text())
    runs = saved["runs"]
    assert len({r["policy"] for r in runs}) == 1 and all(r["split"]["split"] == "validation" for r in runs)
    assert all("lr" in r["fields"] for r in runs) and len({r["fields"]["lr"] for r in runs}) == len(runs)
    assert all(r["start"] == runs[0]["start"] for r in runs)  # the same start, scored the same way
