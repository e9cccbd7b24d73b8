"""The committed real-model results and the docs: each table in docs/benchmarks.md is its result file rendered, and
every interval of the SmolLM2 learning result recomputes from its per-task records with no test task trained on."""

import json

import pytest

from benchmarks import common, learning, smollm2_speed, trl_throughput
from support.paths import ROOT

#: The committed SmolLM2 learning results, one per env.
LEARNING = [common.RESULTS / "learning_sokoban_smollm2.json", common.RESULTS / "learning_searchqa_smollm2.json"]


def _page():
    return (ROOT / "docs" / "benchmarks.md").read_text(encoding="utf-8")


@pytest.mark.parametrize("path", LEARNING, ids=lambda p: p.stem)
def test_the_smollm2_learning_table_is_the_committed_result_and_its_intervals_recompute(path):
    result = json.loads(path.read_text())
    assert learning.markdown(result) in _page()
    assert result["algos"] == ["turn-ppo", "st-ppo"] and "zero_shot" in result["summary"]
    found = learning.check(path)
    assert found["shared"] == [] and found["test_tasks"] > 100


@pytest.mark.parametrize(
    "module, name", [(smollm2_speed, "smollm2_speed.json"), (trl_throughput, "trl_throughput.json")]
)
def test_the_speed_tables_are_the_committed_results(module, name):
    assert module.markdown(json.loads((common.RESULTS / name).read_text())) in _page()
