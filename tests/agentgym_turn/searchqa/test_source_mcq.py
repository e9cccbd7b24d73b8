"""TurnSearchQA-MCQ gives nothing away in its options, and MCQ files are checked at load."""

import hashlib
import json
from collections import Counter

import numpy as np
import pytest

from agentgym_turn.searchqa.generator.questions import Question
from agentgym_turn.searchqa.loader import load_flashrag
from agentgym_turn.searchqa.source import generated_source
from benchmarks import searchqa_mcq_leak


bench = searchqa_mcq_leak

#: The open questions of world 0 (text, golds, template), as drawn before the options had their own streams.
OPEN_QUESTIONS_DIGEST = "317f488f30bd20d3"


def test_options_only_strategies__none_beats_28_percent_on_1000_questions_of_3_held_out_world_seeds():
    """Every rule, and a conditional logit and boosted trees trained on the other two seeds, scores <= 28% (chance 25%)."""
    result = bench.measure(seeds=(0, 1, 2), n=1000, train_questions=1000)
    for seed, row in result["by_seed"].items():
        assert str(seed) not in map(str, row["trained_on_seeds"])
        for name in (*bench.STRATEGIES, *bench.TRAINED):
            assert row[name] <= 0.28, (seed, name, row[name])
        assert min(row["answer_letter_counts"]) >= 200  # the gold's letter is uniform too
    assert result["best"] <= 0.28


def _question(k: int, gold: str, others: list[str], rng) -> Question:
    order = rng.permutation(4).tolist()
    options = [gold, *others]
    return Question(
        str(k), "q?", (gold,), "single_hop", "t", choices=tuple(options[i] for i in order), answer_index=order.index(0)
    )


def test_options_only_strategies__catch_leaky_constructions():
    rng = np.random.default_rng(0)
    # numbers: distractors gold + 1..40 on one side only (a leak found in review)
    numeric = []
    for k in range(400):
        gold = 1800 + k
        others = [gold + int(rng.integers(1, 41)), gold + int(rng.integers(41, 81)), gold - int(rng.integers(1, 41))]
        numeric.append(_question(k, str(gold), [str(v) for v in others], rng))
    assert bench.accuracy(bench.within_40, numeric) > 0.4 or bench.accuracy(bench.median, numeric) > 0.4
    assert bench.accuracy(bench.OptionClassifier().fit([numeric[:200]]), numeric[200:]) > 0.4
    # names: golds from a small pool (people who made something), distractors from everyone (the earlier leak)
    people = [f"Name{k} Surname{k}" for k in range(600)]
    names = []
    for k in range(1200):
        gold = people[int(rng.integers(0, 100))]
        others = [p for p in (people[int(i)] for i in rng.permutation(600)) if p != gold][:3]
        names.append(_question(k, gold, others, rng))
    world = bench.WorldOptions(names)
    assert bench.accuracy(bench.most_frequent, names, world) > 0.4
    for make in bench.TRAINED.values():
        assert bench.accuracy(make().fit([names[:600]]), names[600:], world) > 0.4


def test_options__every_option_is_the_gold_of_a_question_sharing_the_same_options():
    """Options come in blocks: questions sharing one option set, each string the gold of equally many of them, so any
    rule that reads the options alone (and the world's statistics) is right on exactly a quarter of a block."""
    questions = generated_source(0).questions
    by_set: dict[frozenset, list[Question]] = {}
    for q in questions:
        by_set.setdefault(frozenset(q.choices), []).append(q)
    balanced = 0
    for options, qs in by_set.items():
        golds = Counter(q.choices[q.answer_index] for q in qs)
        if set(golds) == options and len(set(golds.values())) == 1:
            balanced += len(qs)
    assert balanced >= 0.97 * len(questions)
    for q in questions:  # the options are of the gold's type
        numeric = [c.isdigit() for c in q.choices]
        assert all(numeric) or not any(numeric), q.choices


def test_options__never_shift_the_open_questions():
    """The options have their own random streams: the open-answer questions (and so every split) are those drawn before."""
    questions = generated_source(0).questions
    assert [q.id for q in questions[:3]] == ["gen-0-0", "gen-0-1", "gen-0-2"]
    digest = hashlib.sha256(
        json.dumps([[q.question, q.golden_answers, q.template] for q in questions]).encode()
    ).hexdigest()
    assert digest[:16] == OPEN_QUESTIONS_DIGEST


def test_mcq_file__more_than_26_choices_fails_at_load_naming_file_line_and_limit(tmp_path):
    path = tmp_path / "mcq.jsonl"
    rows = [
        {"id": "a", "question": "ok?", "golden_answers": ["B"], "choices": ["x", "y"]},
        {"id": "b", "question": "too many?", "golden_answers": ["A"], "choices": [f"c{k}" for k in range(27)]},
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(ValueError, match=r"mcq\.jsonl:2: .*27 choices.*26"):
        load_flashrag(path)
