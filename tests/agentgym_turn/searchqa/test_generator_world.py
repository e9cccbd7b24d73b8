"""The generated world: deterministic across processes, consistent, and asking fair questions."""

import hashlib
import json
import subprocess
import sys
from collections import Counter

import pytest

from agentgym_turn.searchqa.corpus import Corpus, render_corpus
from agentgym_turn.searchqa.generator.names import RESERVED, Coiner, skeleton
from agentgym_turn.searchqa.reward import normalize_answer
from agentgym_turn.searchqa.generator.questions import SPLITS, generate_questions, split_questions
from agentgym_turn.searchqa.source import generated_source
from agentgym_turn.searchqa.generator.world import WorldConfig, generate_world

DIGEST_CODE = """
import hashlib, json
from agentgym_turn.searchqa.source import generated_source
s = generated_source(0, 1.0)
h = hashlib.sha256()
for c in s.corpus.contents: h.update(c.encode())
for q in s.questions: h.update(json.dumps([q.id, q.question, q.golden_answers, q.choices, q.answer_index, [[h.queries, h.passage] for h in q.hops]]).encode())
print(h.hexdigest())
"""


@pytest.fixture(scope="module")
def source():
    return generated_source(0, 1.0)


def test_world__is_identical_in_a_fresh_process(source):
    h = hashlib.sha256()
    for c in source.corpus.contents:
        h.update(c.encode())
    for q in source.questions:
        h.update(
            json.dumps(
                [
                    q.id,
                    q.question,
                    q.golden_answers,
                    q.choices,
                    q.answer_index,
                    [[x.queries, x.passage] for x in q.hops],
                ]
            ).encode()
        )
    other = subprocess.run(
        [sys.executable, "-c", DIGEST_CODE], capture_output=True, text=True, check=True, env={"PYTHONHASHSEED": "12345"}
    ).stdout.strip()
    assert other == h.hexdigest()


def test_world__other_seeds_give_other_worlds(source):
    other = generated_source(1, 1.0)
    assert set(other.corpus.contents).isdisjoint(source.corpus.contents[:100])


def test_coined_words__unique_pronounceable_and_never_english():
    import bm25s.stopwords

    import numpy as np

    words = Coiner(np.random.default_rng(0)).words(5000)
    assert len(set(words)) == len(words) == 5000
    assert len({skeleton(w) for w in words}) == 5000  # no two share a crude stem
    stop = {w.lower() for w in bm25s.stopwords.STOPWORDS_EN}
    assert not {w.lower() for w in words} & (stop | RESERVED)
    assert all(4 <= len(w) <= 9 and w.isalpha() and w[0].isupper() for w in words)


def test_world__names_and_titles_are_unique(source):
    world = generate_world(WorldConfig())
    for names in (
        [p.name for p in world.people],
        [p.short_name for p in world.people],
        [o.name for o in world.organisations],
        [w.title for w in world.works],
        [c.name for c in world.cities],
        [c.name for c in world.countries],
    ):
        assert len(set(names)) == len(names)
    # no entity name doubles as another kind of entity
    kinds = [
        {c.name for c in world.cities},
        {c.name for c in world.countries},
        {p.short_name for p in world.people},
        {o.name for o in world.organisations},
    ]
    for i in range(len(kinds)):
        for j in range(i + 1, len(kinds)):
            assert not kinds[i] & kinds[j]


def test_world__facts_are_consistent():
    world = generate_world(WorldConfig.scaled(0.5, seed=3))
    for o in world.organisations:
        assert 25 <= o.founded - world.people[o.founder].birth_year <= 55 or o.founded == 2015
    for p in world.people:
        assert p.death_year is None or p.death_year > p.birth_year
        assert world.organisations[p.employer].kind is not None
    for w in world.works:
        creator = world.people[w.creator]
        assert w.year >= creator.birth_year + 20
        assert w.year >= world.organisations[w.publisher].founded


def test_corpus__uses_the_wiki18_line_format(source, tmp_path):
    corpus = source.corpus
    assert len(set(corpus.ids)) == len(corpus) > 5000
    assert all(c.startswith('"') and '"\n' in c for c in corpus.contents)
    for suffix in ("corpus.jsonl", "corpus.jsonl.gz"):
        path = tmp_path / suffix
        corpus.to_jsonl(path)
        back = Corpus.from_jsonl(path)
        assert back.ids == corpus.ids and back.contents == corpus.contents
    first = json.loads((tmp_path / "corpus.jsonl").read_text().splitlines()[0])
    assert set(first) == {"id", "contents"} and first["id"] == "0"


def test_corpus__loads_title_text_lines_and_reports_bad_lines(tmp_path):
    path = tmp_path / "c.jsonl"
    path.write_text('{"title": "Aldo", "text": "Aldo was born."}\n\n{"id": "x9", "contents": "\\"B\\"\\nb"}\n')
    corpus = Corpus.from_jsonl(path)
    assert corpus.ids == ["0", "x9"] and corpus.contents[0] == '"Aldo"\nAldo was born.'
    path.write_text('{"id": 1, "contents": "ok"}\nnot json\n')
    with pytest.raises(ValueError, match=":2: not valid JSON"):
        Corpus.from_jsonl(path)


def test_questions__never_contain_their_answer(source):
    for q in source.questions:
        norm_q = f" {normalize_answer(q.question)} "
        assert not any(f" {normalize_answer(g)} " in norm_q for g in q.golden_answers), q


def test_questions__supporting_passages_state_the_facts(source):
    contents = source.corpus.contents
    for q in source.questions:
        evidence = " ".join(contents[h.passage] for h in q.hops)
        gold = q.golden_answers[0]
        if q.template == "founded_gap":  # the answer is a difference: both years are stated
            assert all(contents[h.passage].count("founded") for h in q.hops)
            continue
        assert gold in evidence, (q.question, gold)
        if q.type == "bridge":  # the first passage names the entity the second hop searches for
            bridge_entity = q.hops[1].queries[0]
            bridge_name = bridge_entity.split(" city")[0]
            assert bridge_name in contents[q.hops[0].passage], (q.question, bridge_name)


def test_questions__splits_are_fixed_and_mix_every_type(source):
    qs = source.questions
    assert [len(split_questions(qs, s)) for s in ("test", "dev")] == [500, 500]
    assert len(split_questions(qs, "train")) == len(qs) - 1000 >= 5000
    assert split_questions(qs, "test") == qs[SPLITS["test"]]
    assert len({q.id for q in qs}) == len(qs) and len({q.question for q in qs}) == len(qs)
    types = Counter(q.type for q in split_questions(qs, "test"))
    assert set(types) == {"single_hop", "bridge", "comparison"}
    assert min(types.values()) >= 75
    with pytest.raises(ValueError, match="split must be one of"):
        split_questions(qs, "validation")


def test_questions__four_distinct_options_with_one_correct(source):
    letters = Counter()
    for q in source.questions:
        norms = [normalize_answer(c) for c in q.choices]
        assert len(q.choices) == 4 and len(set(norms)) == 4
        correct = [k for k, n in enumerate(norms) if n in {normalize_answer(g) for g in q.golden_answers}]
        assert correct == [q.answer_index]
        letters[q.answer_letter] += 1
    assert all(n > 0.2 * len(source.questions) for n in letters.values()) and len(letters) == 4


def test_questions__small_and_scaled_worlds_work():
    for cfg in (WorldConfig.scaled(0.02, seed=5), WorldConfig.scaled(0.3, seed=6)):
        world = generate_world(cfg)
        rendered = render_corpus(world)
        qs = generate_questions(world, rendered, count=200)
        assert len(qs) >= 150 and all(q.hops for q in qs)
    with pytest.raises(ValueError):
        WorldConfig.scaled(0)
