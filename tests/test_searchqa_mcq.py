"""TurnSearchQA-MCQ gives nothing away in its options, and MCQ files are checked at load."""

import importlib.util
import json
import sys
from pathlib import Path

import pytest

from agentgym_turn.searchqa.loader import load_flashrag
from agentgym_turn.searchqa.generator.questions import _numeric_distractors

ROOT = Path(__file__).resolve().parents[1]


def _load_bench():
    spec = importlib.util.spec_from_file_location("searchqa_mcq_leak", ROOT / "benchmarks" / "searchqa_mcq_leak.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


bench = _load_bench()


def test_options_only_strategies__none_beats_30_percent_on_1000_questions_of_3_world_seeds():
    result = bench.measure(seeds=(0, 1, 2), n=1000)
    for seed, row in result["by_seed"].items():
        for name in (*bench.STRATEGIES, "classifier"):
            assert row[name] <= 0.30, (seed, name, row[name])
        assert min(row["answer_letter_counts"]) >= 200  # the gold's letter is uniform too
    assert result["best"] <= 0.30


def test_options_only_strategies__catch_a_leaky_construction():
    # distractors gold + 1..40 on one side only (a leak found in review) are caught by the measurement
    from agentgym_turn.searchqa.generator.questions import Question

    rng = __import__("numpy").random.default_rng(0)
    leaky = []
    for k in range(400):
        gold = 1800 + k
        options = [gold, gold + int(rng.integers(1, 41)), gold + int(rng.integers(41, 81)), gold - int(rng.integers(1, 41))]
        order = rng.permutation(4).tolist()
        leaky.append(Question(str(k), "q?", (str(gold),), "single_hop", "t", choices=tuple(str(options[i]) for i in order),
                              answer_index=order.index(0)))
    assert bench.accuracy(bench.within_40, leaky) > 0.4 or bench.accuracy(bench.median, leaky) > 0.4
    assert bench.accuracy(bench.OptionClassifier().fit(leaky[:200]), leaky[200:]) > 0.4


def test_numeric_distractors__gold_rank_is_uniform_and_values_positive_for_gaps():
    rng = __import__("numpy").random.default_rng(1)
    ranks = [0, 0, 0, 0]
    for _ in range(4000):
        gold = int(rng.integers(1700, 2000))
        values = sorted([gold] + [int(v) for v in _numeric_distractors(gold, rng, positive=False)])
        assert len(set(values)) == 4
        ranks[values.index(gold)] += 1
    assert all(900 <= r <= 1100 for r in ranks), ranks
    for gold in (1, 2, 3, 5, 40):
        others = [int(v) for v in _numeric_distractors(gold, rng, positive=True)]
        assert min(others) > 0 and gold not in others and len(set(others)) == 3


def test_mcq_file__more_than_26_choices_fails_at_load_naming_file_line_and_limit(tmp_path):
    path = tmp_path / "mcq.jsonl"
    rows = [{"id": "a", "question": "ok?", "golden_answers": ["B"], "choices": ["x", "y"]},
            {"id": "b", "question": "too many?", "golden_answers": ["A"], "choices": [f"c{k}" for k in range(27)]}]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(ValueError, match=r"mcq\.jsonl:2: .*27 choices.*26"):
        load_flashrag(path)
