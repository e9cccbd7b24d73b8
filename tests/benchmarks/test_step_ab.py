"""benchmarks/step_ab.py: each side runs the package it is meant to, and the results hold every round."""

import json

from benchmarks import step_ab


def test_step_ab__compares_a_revision_with_this_checkout(tmp_path):
    out = tmp_path / "step_ab.json"
    assert step_ab.main(["HEAD", "--rounds", "2", "--steps", "40", "--out", str(out)]) == 0
    result = json.loads(out.read_text())
    assert result["env_id"] == "TurnSokoban-v0" and len(result["rounds"]) == 2
    for r in result["rounds"]:
        assert r["this checkout"] > 0 and r["HEAD"] > 0 and abs(r["ratio"] - r["this checkout"] / r["HEAD"]) < 1e-9
    assert result["ratio_min"] <= result["ratio_median"] <= result["ratio_max"]


def test_step_ab__a_side_that_imports_another_package_is_refused(tmp_path):
    import pytest

    with pytest.raises(RuntimeError, match="imported"):
        step_ab.rate(tmp_path, "TurnSokoban-v0", 5)  # nothing under tmp_path: the installed package answers
