"""Generated splits share no fact: chaining what the training questions reveal answers (almost) no test question.

The solver below is independent of the generator's bookkeeping: it reads each question's
entities from its supporting passages and its template's chain of attributes from its own
table, learns from every training question the fact (or two-hop composite) its answer reveals,
derives what chains of those facts give, and counts the test questions it can then answer.
"""

from collections import Counter

import pytest

from agentgym_turn.searchqa.generator.questions import question_facts, split_questions
from agentgym_turn.searchqa.source import generated_source

# template -> chain of attributes from the first entity searched (single-hop and bridge)
CHAINS = {
    "birth_year": ["birth_year"],
    "birthplace": ["birthplace"],
    "death_year": ["death_year"],
    "employer": ["employer"],
    "creator": ["creator"],
    "work_year": ["year"],
    "publisher": ["publisher"],
    "founded": ["founded"],
    "founder": ["founder"],
    "headquarters": ["headquarters"],
    "city_country": ["country"],
    "creator_birthplace": ["creator", "birthplace"],
    "creator_birth_year": ["creator", "birth_year"],
    "founder_birthplace": ["founder", "birthplace"],
    "founder_birth_year": ["founder", "birth_year"],
    "employer_headquarters": ["employer", "headquarters"],
    "employer_founded": ["employer", "founded"],
    "publisher_founder": ["publisher", "founder"],
    "headquarters_country": ["headquarters", "country"],
    "birthplace_country": ["birthplace", "country"],
}


class World:
    """Entity lookups over a generated source: passage -> entity, (entity, attribute) -> value."""

    def __init__(self, source):
        r, self.w = source.rendered, None
        self.entity = {}
        for kind, passages in (
            ("person", r.person_passage),
            ("city", r.city_passage),
            ("org", r.organisation_passage),
            ("work", r.work_passage),
            ("country", r.country_passage),
        ):
            for i, p in enumerate(passages):
                self.entity[p] = (kind, i)

    def bind(self, world):
        self.w = world
        return self

    def value(self, entity, attr):
        kind, i = entity
        w = self.w
        if kind == "person":
            p = w.people[i]
            return {
                "birth_year": p.birth_year,
                "death_year": p.death_year,
                "birthplace": ("city", p.birthplace),
                "employer": ("org", p.employer),
            }[attr]
        if kind == "org":
            o = w.organisations[i]
            return {"founded": o.founded, "founder": ("person", o.founder), "headquarters": ("city", o.headquarters)}[
                attr
            ]
        if kind == "work":
            wk = w.works[i]
            return {"year": wk.year, "creator": ("person", wk.creator), "publisher": ("org", wk.publisher)}[attr]
        return {"country": ("country", w.cities[i].country)}[attr]


def _comparison_winner(world, q, entities):
    a, b = entities
    if q.template in ("elder_birthplace", "younger_birth_year"):
        ya, yb = world.value(a, "birth_year"), world.value(b, "birth_year")
        return (a if ya < yb else b) if q.template == "elder_birthplace" else (a if ya > yb else b)
    if q.template == "earlier_creator":
        return a if world.value(a, "year") < world.value(b, "year") else b
    return None


def chaining_answers(source, world_obj) -> tuple[int, int]:
    """(test questions answerable from training questions' facts, test questions)."""
    world = World(source).bind(world_obj)
    known, composite = {}, {}
    for q in split_questions(source.questions, "train"):
        entities = [world.entity[h.passage] for h in q.hops]
        if q.template in CHAINS:
            chain = CHAINS[q.template]
            value = world.value(entities[0], chain[0])
            if len(chain) == 1:
                known[(entities[0], chain[0])] = value
            else:
                composite[(entities[0], chain[0], chain[1])] = world.value(value, chain[1])
        else:  # generous: a comparison reveals the winner's facts it asks about
            winner = _comparison_winner(world, q, entities)
            if q.template == "elder_birthplace":
                known[(winner, "birthplace")] = world.value(winner, "birthplace")
            elif q.template == "younger_birth_year":
                known[(winner, "birth_year")] = world.value(winner, "birth_year")
            elif q.template == "earlier_creator":
                known[(winner, "creator")] = world.value(winner, "creator")
    changed = True
    while changed:  # derive: a composite whose first hop is known gives the second fact
        changed = False
        for (e, a1, a2), v in composite.items():
            if (e, a1) in known and (known[(e, a1)], a2) not in known:
                known[(known[(e, a1)], a2)] = v
                changed = True
    answered = 0
    tests = split_questions(source.questions, "test")
    for q in tests:
        entities = [world.entity[h.passage] for h in q.hops]
        if q.template in CHAINS:
            chain = CHAINS[q.template]
            e = entities[0]
            if len(chain) == 1:
                ok = (e, chain[0]) in known
            else:
                ok = (e, chain[0], chain[1]) in composite or (
                    (e, chain[0]) in known and (known[(e, chain[0])], chain[1]) in known
                )
        else:
            a, b = entities
            if q.template == "founded_gap":
                ok = (a, "founded") in known and (b, "founded") in known
            else:
                order = "birth_year" if q.template != "earlier_creator" else "year"
                need = {
                    "elder_birthplace": "birthplace",
                    "younger_birth_year": "birth_year",
                    "earlier_creator": "creator",
                }[q.template]
                winner = _comparison_winner(world, q, entities)
                ok = (a, order) in known and (b, order) in known and (winner, need) in known
        answered += ok
    return answered, len(tests)


@pytest.mark.parametrize("seed", [0, 1])
def test_splits__training_fact_chains_answer_at_most_2_percent_of_test_questions(seed):
    from agentgym_turn.searchqa.generator.world import WorldConfig, generate_world

    source = generated_source(seed, 1.0)
    answered, total = chaining_answers(source, generate_world(WorldConfig.scaled(1.0, seed=seed)))
    assert total == 500 and answered / total <= 0.02, answered


def test_splits__share_no_fact_and_keep_every_question_type():
    source = generated_source(0, 1.0)
    facts = {
        s: set().union(*(question_facts(q.template, q.hops) for q in split_questions(source.questions, s)))
        for s in ("test", "dev", "train")
    }
    assert facts["test"].isdisjoint(facts["train"]) and facts["dev"].isdisjoint(facts["train"])
    assert facts["test"].isdisjoint(facts["dev"])
    for split in ("test", "train"):
        templates = Counter(q.template for q in split_questions(source.questions, split))
        assert len(templates) == 24, (split, templates)


def test_fresh_world_seed__gives_another_world_with_the_same_split_sizes():
    import gymnasium as gym

    import agentgym_turn  # noqa: F401

    env = gym.make("TurnSearchQA-v0", split="test", world_seed=15)
    obs, _ = env.reset(seed=0)
    ours = {q.question for q in env.unwrapped.questions}
    assert len(ours) == 500 and not ours & {
        q.question for q in split_questions(generated_source(0, 1.0).questions, "test")
    }
