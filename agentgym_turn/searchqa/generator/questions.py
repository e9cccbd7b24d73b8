"""Questions about a generated world: single-hop, two-hop bridge and comparison, with splits.

Every question carries its gold answers (with aliases), the passages that support it, and the
search plan of an oracle (one query per hop, plus fallbacks). Questions are built so that

* the answer never appears in the question (checked for every question),
* the answer is a coined name, a year or a number that cannot be known without the corpus,
* comparison questions ask for a *fact about* the winner ("In which city was the elder of X and
  Y born?"), never for one of the two names in the question, so picking a name from the
  question scores nothing.

Splits of a generated world are fixed: questions are drawn in a deterministic order from the
world's seed; the first 500 form ``"test"``, the next 500 ``"dev"``, the rest ``"train"``
(:data:`SPLITS`). The splits share no fact: every question touches a set of facts (an
entity's attribute, such as a person's birthplace or a work's creator, for every hop:
:data:`TEMPLATE_FACTS`), and a drawn question joins the split being filled only if it touches
no fact of an earlier split's questions (test before dev before train; others are skipped).
So no chain of training facts answers a test question. Each question also has four options
(A-D; one correct, three drawn by the same process as the gold, from their own random stream)
for the multiple-choice variant.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Callable, NamedTuple

import numpy as np

from ..corpus import RenderedWorld
from ..reward import LETTERS, normalize_answer
from .world import WORK_ROLES, World, _rng

#: Split name -> slice of the generated question list.
SPLITS: dict[str, slice] = {"test": slice(0, 500), "dev": slice(500, 1000), "train": slice(1000, None)}
QUESTION_TYPES = ("single_hop", "bridge", "comparison")

_NUMBER_WORDS = (
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen "
    "fifteen sixteen seventeen eighteen nineteen twenty"
).split()


@dataclass(frozen=True)
class Hop:
    """One retrieval step of the oracle: queries to try in order, and the passage it needs."""

    queries: tuple[str, ...]
    passage: int  # index of the supporting passage in the corpus
    purpose: str  # what the hop finds, for the oracle's <think>


@dataclass(frozen=True)
class Question:
    """A question with gold answers, an oracle search plan and multiple-choice options.

    ``hops`` is empty for questions loaded from a dataset (no supporting passages are known).
    """

    id: str
    question: str
    golden_answers: tuple[str, ...]
    type: str  # "single_hop", "bridge", "comparison" or "dataset"
    template: str
    hops: tuple[Hop, ...] = ()
    choices: tuple[str, ...] = ()
    answer_index: int = -1  # index of the correct choice, -1 without choices
    metadata: dict = field(default_factory=dict, compare=False, hash=False)

    @property
    def answer_letter(self) -> str:
        """The correct option's letter ("" without choices)."""
        return LETTERS[self.answer_index] if 0 <= self.answer_index < len(self.choices) else ""

    @property
    def supporting_passages(self) -> tuple[int, ...]:
        return tuple(h.passage for h in self.hops)


def _number_aliases(n: int) -> tuple[str, ...]:
    out = [str(n), f"{n} years"]
    if n < len(_NUMBER_WORDS):
        out.append(_NUMBER_WORDS[n])
    return tuple(out)


def _person_answers(world: World, i: int) -> tuple[str, ...]:
    p = world.people[i]
    return (p.name,) if p.name == p.short_name else (p.name, p.short_name)


class Draft(NamedTuple):
    """One drawn question before the checks (duplicate, held-out fact, leaked answer) and options."""

    type: str  # "single_hop", "bridge" or "comparison"
    template: str  # the template's name, e.g. "creator_birthplace"
    text: str  # the question
    golds: tuple[str, ...]  # accepted answers, the canonical one first
    hops: tuple[Hop, ...]  # the oracle's search plan
    answer_kind: str  # what the answer is ("year", "city", "person"...): picks the distractors
    traps: tuple[str, ...] = ()  # wrong answers a careless reader would give (the earlier options led with them)
    stratum: str = ""  # what the question says of its answer's kind (a work's kind): its options share it


class _Builder:
    """Holds the world and the rendered corpus; each method returns one template's :class:`Draft`, or None."""

    def __init__(self, world: World, rendered: RenderedWorld, rng: np.random.Generator):
        self.w = world
        self.r = rendered
        self.rng = rng
        self.dead = [i for i, p in enumerate(world.people) if p.death_year is not None]
        self.creators = sorted(world.works_by_person)

    def pick(self, n: int) -> int:
        return int(self.rng.integers(0, n))

    # hops -----------------------------------------------------------------------------------
    def person_hop(self, i: int, about: str, extra: str) -> Hop:
        p = self.w.people[i]
        return Hop((p.name, f"{p.name} {extra}", p.short_name), self.r.person_passage[i], about.format(p.name))

    def org_hop(self, j: int, about: str, extra: str) -> Hop:
        o = self.w.organisations[j]
        return Hop((o.name, f"{o.name} {extra}"), self.r.organisation_passage[j], about.format(o.name))

    def work_hop(self, j: int, about: str) -> Hop:
        wk = self.w.works[j]
        return Hop(
            (f"{wk.title} {wk.kind}", wk.title, f'"{wk.title}"'), self.r.work_passage[j], about.format(f'"{wk.title}"')
        )

    def city_hop(self, c: int, about: str) -> Hop:
        city = self.w.cities[c]
        return Hop((f"{city.name} city", city.name), self.r.city_passage[c], about.format(city.name))

    # single hop -----------------------------------------------------------------------------
    def birth_year(self):
        i = self.pick(len(self.w.people))
        p = self.w.people[i]
        return Draft(
            "single_hop",
            "birth_year",
            f"In what year was {p.name} born?",
            (str(p.birth_year),),
            (self.person_hop(i, "find out when {} was born", "born"),),
            "year",
        )

    def birthplace(self):
        i = self.pick(len(self.w.people))
        p = self.w.people[i]
        return Draft(
            "single_hop",
            "birthplace",
            f"In which city was {p.name} born?",
            (self.w.cities[p.birthplace].name,),
            (self.person_hop(i, "find out where {} was born", "born"),),
            "city",
        )

    def death_year(self):
        if not self.dead:
            return None
        i = self.dead[self.pick(len(self.dead))]
        p = self.w.people[i]
        return Draft(
            "single_hop",
            "death_year",
            f"In what year did {p.name} die?",
            (str(p.death_year),),
            (self.person_hop(i, "find out when {} died", "died"),),
            "year",
        )

    def employer(self):
        i = self.pick(len(self.w.people))
        p = self.w.people[i]
        return Draft(
            "single_hop",
            "employer",
            f"Which organisation did {p.name} work for?",
            (self.w.organisations[p.employer].name,),
            (self.person_hop(i, "find out whom {} worked for", "worked for"),),
            "organisation",
        )

    def creator(self):
        if not self.w.works:
            return None
        j = self.pick(len(self.w.works))
        wk = self.w.works[j]
        verb = WORK_ROLES[wk.kind][1]
        return Draft(
            "single_hop",
            "creator",
            f'Who {verb} the {wk.kind} "{wk.title}"?',
            _person_answers(self.w, wk.creator),
            (self.work_hop(j, "find out who made {}"),),
            "person",
            stratum=wk.kind,
        )

    def work_year(self):
        if not self.w.works:
            return None
        j = self.pick(len(self.w.works))
        wk = self.w.works[j]
        return Draft(
            "single_hop",
            "work_year",
            f'In what year did the {wk.kind} "{wk.title}" come out?',
            (str(wk.year),),
            (self.work_hop(j, "find out when {} came out"),),
            "year",
        )

    def publisher(self):
        if not self.w.works:
            return None
        j = self.pick(len(self.w.works))
        wk = self.w.works[j]
        org_kind, _, org_verb, _ = WORK_ROLES[wk.kind]
        q = (
            f'Which {org_kind} holds the {wk.kind} "{wk.title}"?'
            if org_verb == "holds"
            else f'Which {org_kind} {org_verb} the {wk.kind} "{wk.title}"?'
        )
        return Draft(
            "single_hop",
            "publisher",
            q,
            (self.w.organisations[wk.publisher].name,),
            (self.work_hop(j, "find out which organisation published or holds {}"),),
            "organisation",
            stratum=wk.kind,
        )

    def founded(self):
        j = self.pick(len(self.w.organisations))
        o = self.w.organisations[j]
        return Draft(
            "single_hop",
            "founded",
            f"In what year was {o.name} founded?",
            (str(o.founded),),
            (self.org_hop(j, "find out when {} was founded", "founded"),),
            "year",
        )

    def founder(self):
        j = self.pick(len(self.w.organisations))
        o = self.w.organisations[j]
        return Draft(
            "single_hop",
            "founder",
            f"Who founded {o.name}?",
            _person_answers(self.w, o.founder),
            (self.org_hop(j, "find out who founded {}", "founded by"),),
            "person",
        )

    def headquarters(self):
        j = self.pick(len(self.w.organisations))
        o = self.w.organisations[j]
        return Draft(
            "single_hop",
            "headquarters",
            f"In which city is {o.name} headquartered?",
            (self.w.cities[o.headquarters].name,),
            (self.org_hop(j, "find out where {} is headquartered", "headquartered"),),
            "city",
        )

    def city_country(self):
        c = self.pick(len(self.w.cities))
        city = self.w.cities[c]
        return Draft(
            "single_hop",
            "city_country",
            f"In which country is the city of {city.name}?",
            (self.w.countries[city.country].name,),
            (self.city_hop(c, "find out which country {} is in"),),
            "country",
        )

    # bridge ---------------------------------------------------------------------------------
    def creator_birthplace(self):
        if not self.w.works:
            return None
        j = self.pick(len(self.w.works))
        wk = self.w.works[j]
        role = WORK_ROLES[wk.kind][3]
        p = wk.creator
        return Draft(
            "bridge",
            "creator_birthplace",
            f'In which city was the {role} of the {wk.kind} "{wk.title}" born?',
            (self.w.cities[self.w.people[p].birthplace].name,),
            (self.work_hop(j, "find out who made {}"), self.person_hop(p, "find out where {} was born", "born")),
            "city",
            (
                self.w.cities[self.w.people[p].residence].name,
                self.w.cities[self.w.organisations[wk.publisher].headquarters].name,
            ),
        )

    def creator_birth_year(self):
        if not self.w.works:
            return None
        j = self.pick(len(self.w.works))
        wk = self.w.works[j]
        role = WORK_ROLES[wk.kind][3]
        p = wk.creator
        return Draft(
            "bridge",
            "creator_birth_year",
            f'In what year was the {role} of the {wk.kind} "{wk.title}" born?',
            (str(self.w.people[p].birth_year),),
            (self.work_hop(j, "find out who made {}"), self.person_hop(p, "find out when {} was born", "born")),
            "year",
        )

    def founder_birthplace(self):
        j = self.pick(len(self.w.organisations))
        o = self.w.organisations[j]
        return Draft(
            "bridge",
            "founder_birthplace",
            f"In which city was the founder of {o.name} born?",
            (self.w.cities[self.w.people[o.founder].birthplace].name,),
            (
                self.org_hop(j, "find out who founded {}", "founded by"),
                self.person_hop(o.founder, "find out where {} was born", "born"),
            ),
            "city",
        )

    def founder_birth_year(self):
        j = self.pick(len(self.w.organisations))
        o = self.w.organisations[j]
        return Draft(
            "bridge",
            "founder_birth_year",
            f"In what year was the founder of {o.name} born?",
            (str(self.w.people[o.founder].birth_year),),
            (
                self.org_hop(j, "find out who founded {}", "founded by"),
                self.person_hop(o.founder, "find out when {} was born", "born"),
            ),
            "year",
        )

    def employer_headquarters(self):
        i = self.pick(len(self.w.people))
        p = self.w.people[i]
        o = self.w.organisations[p.employer]
        return Draft(
            "bridge",
            "employer_headquarters",
            f"In which city is the organisation that {p.name} worked for headquartered?",
            (self.w.cities[o.headquarters].name,),
            (
                self.person_hop(i, "find out whom {} worked for", "worked for"),
                self.org_hop(p.employer, "find out where {} is headquartered", "headquartered"),
            ),
            "city",
        )

    def employer_founded(self):
        i = self.pick(len(self.w.people))
        p = self.w.people[i]
        o = self.w.organisations[p.employer]
        return Draft(
            "bridge",
            "employer_founded",
            f"In what year was the organisation that {p.name} worked for founded?",
            (str(o.founded),),
            (
                self.person_hop(i, "find out whom {} worked for", "worked for"),
                self.org_hop(p.employer, "find out when {} was founded", "founded"),
            ),
            "year",
        )

    def publisher_founder(self):
        if not self.w.works:
            return None
        j = self.pick(len(self.w.works))
        wk = self.w.works[j]
        org_kind, _, org_verb, _ = WORK_ROLES[wk.kind]
        o = self.w.organisations[wk.publisher]
        clause = "holds" if org_verb == "holds" else org_verb
        return Draft(
            "bridge",
            "publisher_founder",
            f'Who founded the {org_kind} that {clause} the {wk.kind} "{wk.title}"?',
            _person_answers(self.w, o.founder),
            (
                self.work_hop(j, "find out which organisation published or holds {}"),
                self.org_hop(wk.publisher, "find out who founded {}", "founded by"),
            ),
            "person",
            stratum=wk.kind,
        )

    def headquarters_country(self):
        j = self.pick(len(self.w.organisations))
        o = self.w.organisations[j]
        city = self.w.cities[o.headquarters]
        return Draft(
            "bridge",
            "headquarters_country",
            f"In which country is the city where {o.name} is headquartered?",
            (self.w.countries[city.country].name,),
            (
                self.org_hop(j, "find out where {} is headquartered", "headquartered"),
                self.city_hop(o.headquarters, "find out which country {} is in"),
            ),
            "country",
        )

    def birthplace_country(self):
        i = self.pick(len(self.w.people))
        p = self.w.people[i]
        city = self.w.cities[p.birthplace]
        return Draft(
            "bridge",
            "birthplace_country",
            f"In which country is the city where {p.name} was born?",
            (self.w.countries[city.country].name,),
            (
                self.person_hop(i, "find out where {} was born", "born"),
                self.city_hop(p.birthplace, "find out which country {} is in"),
            ),
            "country",
        )

    # comparison -----------------------------------------------------------------------------
    def two_people(self) -> tuple[int, int] | None:
        n = len(self.w.people)
        for _ in range(20):
            a, b = self.pick(n), self.pick(n)
            if a != b and self.w.people[a].birth_year != self.w.people[b].birth_year:
                return a, b
        return None

    def elder_birthplace(self):
        pair = self.two_people()
        if pair is None:
            return None
        a, b = pair
        pa, pb = self.w.people[a], self.w.people[b]
        elder, younger = (pa, pb) if pa.birth_year < pb.birth_year else (pb, pa)
        if pa.birthplace == pb.birthplace:
            return None
        return Draft(
            "comparison",
            "elder_birthplace",
            f"In which city was the elder of {pa.name} and {pb.name} born?",
            (self.w.cities[elder.birthplace].name,),
            (
                self.person_hop(a, "find out when and where {} was born", "born"),
                self.person_hop(b, "find out when and where {} was born", "born"),
            ),
            "city",
            (self.w.cities[younger.birthplace].name,),
        )

    def younger_birth_year(self):
        pair = self.two_people()
        if pair is None:
            return None
        a, b = pair
        pa, pb = self.w.people[a], self.w.people[b]
        return Draft(
            "comparison",
            "younger_birth_year",
            f"In what year was the younger of {pa.name} and {pb.name} born?",
            (str(max(pa.birth_year, pb.birth_year)),),
            (
                self.person_hop(a, "find out when {} was born", "born"),
                self.person_hop(b, "find out when {} was born", "born"),
            ),
            "year",
            (str(min(pa.birth_year, pb.birth_year)),),
        )

    def founded_gap(self):
        n = len(self.w.organisations)
        a, b = self.pick(n), self.pick(n)
        if a == b:
            return None
        oa, ob = self.w.organisations[a], self.w.organisations[b]
        gap = abs(oa.founded - ob.founded)
        if gap == 0:
            return None
        return Draft(
            "comparison",
            "founded_gap",
            f"How many years apart were {oa.name} and {ob.name} founded?",
            _number_aliases(gap),
            (
                self.org_hop(a, "find out when {} was founded", "founded"),
                self.org_hop(b, "find out when {} was founded", "founded"),
            ),
            "gap",
        )

    def earlier_creator(self):
        n = len(self.w.works)
        if n < 2:
            return None
        a, b = self.pick(n), self.pick(n)
        wa, wb = self.w.works[a], self.w.works[b]
        if a == b or wa.year == wb.year or wa.creator == wb.creator:
            return None
        first, second = (wa, wb) if wa.year < wb.year else (wb, wa)
        return Draft(
            "comparison",
            "earlier_creator",
            f'Who made whichever came out first, "{wa.title}" or "{wb.title}"?',
            _person_answers(self.w, first.creator),
            (
                self.work_hop(a, "find out when {} came out and who made it"),
                self.work_hop(b, "find out when {} came out and who made it"),
            ),
            "person",
            (self.w.people[second.creator].name,),
        )


#: (type, template name, weight). Weights: 40% single-hop, 40% bridge, 20% comparison.
TEMPLATES: tuple[tuple[str, str, float], ...] = (
    ("single_hop", "birth_year", 5),
    ("single_hop", "birthplace", 5),
    ("single_hop", "death_year", 3),
    ("single_hop", "employer", 4),
    ("single_hop", "creator", 5),
    ("single_hop", "work_year", 4),
    ("single_hop", "publisher", 4),
    ("single_hop", "founded", 4),
    ("single_hop", "founder", 4),
    ("single_hop", "headquarters", 4),
    ("single_hop", "city_country", 3),
    ("bridge", "creator_birthplace", 6),
    ("bridge", "creator_birth_year", 5),
    ("bridge", "founder_birthplace", 5),
    ("bridge", "founder_birth_year", 4),
    ("bridge", "employer_headquarters", 5),
    ("bridge", "employer_founded", 4),
    ("bridge", "publisher_founder", 5),
    ("bridge", "headquarters_country", 3),
    ("bridge", "birthplace_country", 3),
    ("comparison", "elder_birthplace", 6),
    ("comparison", "younger_birth_year", 5),
    ("comparison", "founded_gap", 4),
    ("comparison", "earlier_creator", 5),
)


#: Template -> for each hop (entity searched), the attributes of that entity the question uses.
TEMPLATE_FACTS: dict[str, tuple[tuple[str, ...], ...]] = {
    "birth_year": (("birth_year",),),
    "birthplace": (("birthplace",),),
    "death_year": (("death_year",),),
    "employer": (("employer",),),
    "creator": (("creator",),),
    "work_year": (("year",),),
    "publisher": (("publisher",),),
    "founded": (("founded",),),
    "founder": (("founder",),),
    "headquarters": (("headquarters",),),
    "city_country": (("country",),),
    "creator_birthplace": (("creator",), ("birthplace",)),
    "creator_birth_year": (("creator",), ("birth_year",)),
    "founder_birthplace": (("founder",), ("birthplace",)),
    "founder_birth_year": (("founder",), ("birth_year",)),
    "employer_headquarters": (("employer",), ("headquarters",)),
    "employer_founded": (("employer",), ("founded",)),
    "publisher_founder": (("publisher",), ("founder",)),
    "headquarters_country": (("headquarters",), ("country",)),
    "birthplace_country": (("birthplace",), ("country",)),
    "elder_birthplace": (("birth_year", "birthplace"), ("birth_year", "birthplace")),
    "younger_birth_year": (("birth_year",), ("birth_year",)),
    "founded_gap": (("founded",), ("founded",)),
    "earlier_creator": (("year", "creator"), ("year", "creator")),
}


def question_facts(template: str, hops: tuple[Hop, ...]) -> frozenset[tuple[int, str]]:
    """The facts a generated question touches: ``(lead passage of the entity, attribute)`` pairs."""
    return frozenset((hop.passage, attr) for hop, attrs in zip(hops, TEMPLATE_FACTS[template]) for attr in attrs)


def _normalise_weights() -> np.ndarray:
    by_type = {t: sum(w for tt, _, w in TEMPLATES if tt == t) for t in QUESTION_TYPES}
    share = {"single_hop": 0.4, "bridge": 0.4, "comparison": 0.2}
    return np.array([w / by_type[t] * share[t] for t, _, w in TEMPLATES])


def _add_options(
    drafts: list[Draft], rng: np.random.Generator, builder: "_Builder"
) -> list[tuple[tuple[str, ...], int]]:
    """``(choices, answer_index)`` for each of ``drafts`` (the generated questions, in order).

    Questions are dealt into blocks of four with distinct golds (:func:`_option_blocks`), and
    every question of a block shows the block's four golds as its options, in its own random
    order. So each option is the answer to a real question drawn by the same process (another
    person's birthplace for a birthplace, another work's year for a work's year), and no
    reading of the options alone can tell them apart: a strategy that sees only the set of
    options (however it also weighs how often each string recurs in the world) picks the same
    string for all four questions of a block, and that string is the gold of exactly one of
    them. Blocks form within a split and, first, within a template and the kind the question
    names ("the film", "the record label"); the few questions left over join blocks of their
    answer type, and a last block of fewer than four is filled with fresh draws of its
    template. No distractor equals a gold answer after :func:`normalize_answer`; the gold's
    letter is uniform.
    """
    out: list[tuple[tuple[str, ...], int]] = [((), -1)] * len(drafts)
    for block in _option_blocks(drafts, rng):
        options = [drafts[k].golds[0] for k in block]
        seen = {normalize_answer(g) for k in block for g in drafts[k].golds}
        first = drafts[block[0]]
        for _ in range(2000):  # a block short of four: fresh draws of its first question's template
            if len(options) == 4:
                break
            other = getattr(builder, first.template)()
            if other is not None and other.stratum == first.stratum and normalize_answer(other.golds[0]) not in seen:
                seen.add(normalize_answer(other.golds[0]))
                options.append(other.golds[0])
        if first.answer_kind in ("year", "gap"):  # tiny worlds: neighbouring numbers
            near = [int(first.golds[0]) + sign * step for step in range(1, 100) for sign in (1, -1)]
            for v in (str(v) for v in near if v > 0):
                if len(options) < 4 and v not in seen:
                    seen.add(v)
                    options.append(v)
        while len(options) < 4:  # and placeholders
            options.append(f"None of the others ({len(options)})")
        for k in block:
            order = rng.permutation(4).tolist()
            choices = tuple(options[i] for i in order)
            out[k] = (choices, choices.index(drafts[k].golds[0]))
    return out


def _option_blocks(drafts: list[Draft], rng: np.random.Generator) -> list[list[int]]:
    """Question indices dealt into blocks of four with distinct golds (after :func:`normalize_answer`).

    Within each split, questions are dealt first by template and stated kind, then what is left
    by answer type and stated kind, then by answer type; the remainder (fewer than four per
    split and answer type, or golds too repeated to separate) forms blocks of fewer than four.
    """
    blocks: list[list[int]] = []
    rest = list(range(len(drafts)))
    keys: tuple[Callable[[int], tuple], ...] = (
        lambda k: (_split_of(k), drafts[k].answer_kind, drafts[k].template, drafts[k].stratum),
        lambda k: (_split_of(k), drafts[k].answer_kind, drafts[k].stratum),
        lambda k: (_split_of(k), drafts[k].answer_kind),
    )
    for key in keys:
        groups: dict[tuple, list[int]] = {}
        for k in rest:
            groups.setdefault(key(k), []).append(k)
        rest = []
        for members in groups.values():
            full, left = _deal(members, [normalize_answer(drafts[k].golds[0]) for k in members], rng)
            blocks += full
            rest += left
        rest.sort()
    groups = {}
    for k in rest:
        groups.setdefault(keys[-1](k), []).append(k)
    for members in groups.values():  # the remainder: blocks of fewer than four, golds distinct
        partial: list[list[int]] = []
        for k in members:
            gold = normalize_answer(drafts[k].golds[0])
            home = next(
                (b for b in partial if len(b) < 4 and all(normalize_answer(drafts[j].golds[0]) != gold for j in b)),
                None,
            )
            if home is None:
                partial.append([k])
            else:
                home.append(k)
        blocks += partial
    return blocks


def _deal(members: list[int], golds: list[str], rng: np.random.Generator) -> tuple[list[list[int]], list[int]]:
    """Deal ``members`` into as many full blocks of four with distinct ``golds`` as round-robin allows; return the rest.

    Members are grouped by gold (the largest groups first, ties and members in random order)
    and dealt round-robin into ``len(members) // 4`` blocks, so no block holds a gold twice;
    the members a full block cannot take are returned.
    """
    n_blocks = len(members) // 4
    if n_blocks == 0:
        return [], list(members)
    by_gold: dict[str, list[int]] = {}
    for m, g in zip(members, golds):
        by_gold.setdefault(g, []).append(m)
    groups = [by_gold[g] for g in sorted(by_gold)]
    order = rng.permutation(len(groups)).tolist()
    groups = [groups[i] for i in order]
    groups.sort(key=len, reverse=True)  # stable: random order among equal sizes
    left: list[int] = []
    dealt: list[int] = []
    for group in groups:
        group = [group[i] for i in rng.permutation(len(group)).tolist()]
        dealt += group[:n_blocks]
        left += group[n_blocks:]  # a gold asked more often than there are blocks
    extra = len(dealt) - 4 * n_blocks
    if extra > 0:  # the last dealt (the least repeated golds) wait for a later pass
        left += dealt[-extra:]
        dealt = dealt[:-extra]
    blocks: list[list[int]] = [[] for _ in range(n_blocks)]
    for i, m in enumerate(dealt):
        blocks[i % n_blocks].append(m)
    full = [b for b in blocks if len(b) == 4]
    left += [m for b in blocks if len(b) < 4 for m in b]
    return full, sorted(left)


def _split_of(index: int) -> str:
    return next(name for name, sl in SPLITS.items() if sl.start <= index and (sl.stop is None or index < sl.stop))


def _replay_earlier_option_draws(
    world: World, draft: Draft, rng: np.random.Generator, same_kind: dict[str, list[int]]
) -> None:
    """Make the draws the earlier option generator made from the question stream, and nothing else.

    Options now come from their own stream (:func:`_add_options`); replaying the earlier draws
    keeps every question, and so every split of the open-answer env, exactly as it was.
    """
    gold = draft.golds[0]
    if draft.answer_kind in ("year", "gap"):
        for _ in range(64):
            rank = int(rng.integers(0, 4))
            values = np.concatenate([[0], np.cumsum(rng.integers(1, 16, size=3))])
            if draft.answer_kind == "year" or (int(gold) + values - values[rank]).min() > 0:
                break
    else:
        seen = {normalize_answer(gold)}
        for trap in draft.traps:
            if len(seen) < 4:
                seen.add(normalize_answer(trap))
        pools = {
            "city": world.cities,
            "country": world.countries,
            "person": world.people,
            "organisation": world.organisations,
        }
        pool = [world.organisations[j] for j in same_kind.get(gold, [])] if draft.answer_kind == "organisation" else []
        pool = pool if len(pool) >= 4 else pools.get(draft.answer_kind, [])
        tries = 0
        while len(seen) < 4 and tries < 200 and pool:
            tries += 1
            seen.add(normalize_answer(pool[int(rng.integers(0, len(pool)))].name))
    rng.permutation(4)


def generate_questions(world: World, rendered: RenderedWorld, *, count: int | None = None) -> list[Question]:
    """Draw ``count`` distinct questions (default: ``min(8000, 2 * passages)``) in split order.

    The order is deterministic from the world's seed; see :data:`SPLITS`. A question touching a
    fact of an earlier split (:func:`question_facts`) is skipped, so the splits share no fact.
    The multiple-choice options are added afterwards, from their own random streams
    (:func:`_add_options`), so they never shift the questions.
    """
    rng = _rng(world.config.seed, 20)
    builder = _Builder(world, rendered, rng)
    weights = _normalise_weights()
    weights = weights / weights.sum()
    target = count if count is not None else min(8000, 2 * len(rendered.corpus))
    by_kind: dict[str, list[int]] = {}
    for j, o in enumerate(world.organisations):
        by_kind.setdefault(o.kind, []).append(j)
    same_kind_orgs = {o.name: by_kind[o.kind] for o in world.organisations}  # gold name -> same-kind orgs (replay only)
    out: list[Question] = []
    drafts: list[Draft] = []
    seen: set[str] = set()
    held: set[tuple[int, str]] = set()  # facts of the earlier splits' questions
    filling: set[tuple[int, str]] = set()  # facts of the split being filled
    boundaries = sorted({sl.stop for sl in SPLITS.values() if sl.stop is not None})
    attempts = 0
    while len(out) < target and attempts < target * 20:
        attempts += 1
        t = int(rng.choice(len(TEMPLATES), p=weights))
        qtype, name, _ = TEMPLATES[t]
        built = getattr(builder, name)()
        if built is None:
            continue
        qtype, template, text, golds, hops = built.type, built.template, built.text, built.golds, built.hops
        if text in seen:
            continue
        if len(out) in boundaries:  # a new split starts: the finished one's facts are held out
            held |= filling
            filling = set()
        facts = question_facts(template, hops)
        if not facts.isdisjoint(held):
            continue
        norm_q = f" {normalize_answer(text)} "
        if any(f" {normalize_answer(g)} " in norm_q for g in golds):
            continue  # the answer would leak from the question
        seen.add(text)
        filling |= facts
        _replay_earlier_option_draws(world, built, rng, same_kind_orgs)
        drafts.append(built)
        out.append(
            Question(
                id=f"gen-{world.config.seed}-{len(out)}",
                question=text,
                golden_answers=tuple(golds),
                type=qtype,
                template=template,
                hops=hops,
            )
        )
    options = _add_options(drafts, _rng(world.config.seed, 21), _Builder(world, rendered, _rng(world.config.seed, 22)))
    return [dataclasses.replace(q, choices=c, answer_index=i) for q, (c, i) in zip(out, options)]


def split_questions(questions: list[Question], split: str) -> list[Question]:
    """The questions of ``split`` ("train", "dev", "test" or "all")."""
    if split == "all":
        return list(questions)
    if split not in SPLITS:
        raise ValueError(f"split must be one of {sorted(SPLITS) + ['all']}, got {split!r}.")
    return questions[SPLITS[split]]
