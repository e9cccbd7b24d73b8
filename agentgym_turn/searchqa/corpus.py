"""Passages: the corpus type, its jsonl format, and the rendering of a world into passages.

A corpus line is Search-R1's / FlashRAG's wiki-18 format: ``{"id": "0", "contents":
"\\"Title\\"\\ntext"}``: the first line of ``contents`` is the title (in double quotes in
wiki-18), the rest is the passage text. :func:`render_corpus` writes a generated world in that
format: one lead passage per entity (the passage that states its facts), a second passage for
some people, and distractor passages (surname pages and event pages) that mention many
entities without stating their facts.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Iterator, Sequence

import numpy as np

from ..core.files import DataFileError, iter_text_lines
from .generator.world import WORK_ROLES, World, _rng

#: Largest corpus file read in-process (uncompressed bytes); wiki-18 (about 14 GB) fits.
MAX_CORPUS_BYTES = 64 << 30
#: Longest corpus line (one passage record), in characters.
MAX_PASSAGE_CHARS = 1_000_000


def split_contents(contents: str) -> tuple[str, str]:
    """``(title, text)`` of a ``contents`` string: the first line and the rest (Search-R1's split)."""
    title, _, text = contents.partition("\n")
    return title, text


#: A sentence ends at ``.``, ``!`` or ``?`` (closing quotes and brackets kept) before whitespace.
_SENTENCE_END = re.compile(r"[.!?][\"')\]]*(?=\s)")


def first_sentences(contents: str, n: int) -> str:
    """``contents`` (title line, then text) with its text cut after the ``n``-th sentence.

    A sentence ends at ``.``, ``!`` or ``?`` (with any closing quotes or brackets) followed by
    whitespace; text with ``n`` sentences or fewer comes back unchanged, and the title line is
    always kept. Linear in the length of ``contents``.
    """
    if n < 1:
        raise ValueError(f"n must be a positive number of sentences, got {n!r}.")
    title, sep, text = contents.partition("\n")
    for k, m in enumerate(_SENTENCE_END.finditer(text), start=1):
        if k == n:
            return title + sep + text[: m.end()]
    return contents


def open_text(path: str | os.PathLike, mode: str = "r") -> io.TextIOBase:
    """Open a text file as UTF-8, transparently gunzipping ``*.gz`` (for writing; loaders read through :mod:`agentgym_turn.core.files`)."""
    path = Path(path)
    if path.suffix == ".gz":
        return gzip.open(path, mode + "t", encoding="utf-8")  # type: ignore[return-value]
    return open(path, mode, encoding="utf-8")


def iter_json_objects(
    path: str | os.PathLike, *, max_bytes: int, max_line_chars: int, what: str, fields: str
) -> Iterator[tuple[int, dict]]:
    """``(line number, object)`` for each non-blank line of a jsonl file (``.gz`` allowed); a line
    that is not a JSON object raises :class:`DataFileError` naming ``FILE:LINE`` and the ``fields``
    expected."""
    for lineno, line in iter_text_lines(path, max_bytes=max_bytes, max_line_chars=max_line_chars, what=what):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise DataFileError(
                f"{path}:{lineno}: not valid JSON ({exc.msg}); write one JSON object per line."
            ) from None
        except RecursionError:
            raise DataFileError(
                f"{path}:{lineno}: JSON nested too deeply to read; expected a JSON object with {fields}."
            ) from None
        except ValueError as exc:  # e.g. an integer past Python's 4,300-digit conversion limit
            raise DataFileError(
                f"{path}:{lineno}: a JSON value cannot be read ({exc}); expected a JSON object with {fields}."
            ) from None
        if not isinstance(row, dict):
            raise DataFileError(f"{path}:{lineno}: expected a JSON object with {fields}.")
        yield lineno, row


@dataclass
class Corpus:
    """Passages with string ids; passage ``i`` is ``(ids[i], contents[i])``."""

    ids: list[str]
    contents: list[str]
    _fingerprint: str | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if len(self.ids) != len(self.contents):
            raise ValueError(f"{len(self.ids)} ids for {len(self.contents)} passages")

    def fingerprint(self) -> str:
        """SHA-256 (hex) of every id and passage, in order: a saved index is reused only for the same corpus."""
        if self._fingerprint is None:
            h = hashlib.sha256()
            for i, c in zip(self.ids, self.contents):
                for part in (i, c):
                    data = part.encode("utf-8", "surrogatepass")
                    h.update(len(data).to_bytes(8, "little"))
                    h.update(data)
            self._fingerprint = h.hexdigest()
        return self._fingerprint

    def __len__(self) -> int:
        return len(self.contents)

    def title(self, i: int) -> str:
        """The first line of passage ``i`` (quotes included, as Search-R1 shows it)."""
        return split_contents(self.contents[i])[0]

    @classmethod
    def from_jsonl(
        cls,
        path: str | os.PathLike,
        *,
        limit: int | None = None,
        max_bytes: int = MAX_CORPUS_BYTES,
        max_line_chars: int = MAX_PASSAGE_CHARS,
    ) -> "Corpus":
        """Load a corpus jsonl (``.gz`` allowed).

        Each line holds ``contents`` (or ``title`` and ``text``, joined as ``"title"\\ntext``) and
        optionally ``id`` (default: the line number, from 0). Blank lines are skipped.

        Raises:
            DataFileError: naming the file (and line) for a missing or special file (FIFO,
                device), invalid UTF-8, a corrupt ``.gz``, a line over ``max_line_chars``, more
                than ``max_bytes``, a malformed record, or no passage at all.
        """
        ids: list[str] = []
        contents: list[str] = []
        rows = iter_json_objects(
            path,
            max_bytes=max_bytes,
            max_line_chars=max_line_chars,
            what="corpus file",
            fields="'contents' (or 'title' and 'text')",
        )
        for lineno, row in rows:
            if isinstance(row.get("contents"), str):
                text = row["contents"]
            elif isinstance(row.get("text"), str):
                text = f'"{row.get("title", "")}"\n{row["text"]}'
            else:
                raise DataFileError(f"{path}:{lineno}: a passage needs a string 'contents' (or 'title' and 'text').")
            ids.append(str(row.get("id", len(ids))))
            contents.append(text)
            if limit is not None and len(contents) >= limit:
                break
        if not contents:
            raise DataFileError(f"{path}: holds no passages; give a jsonl file with one passage per line.")
        return cls(ids, contents)

    def to_jsonl(self, path: str | os.PathLike) -> None:
        """Write the corpus as jsonl (``.gz`` allowed), one ``{"id", "contents"}`` per line."""
        with open_text(path, "w") as f:
            for i, c in zip(self.ids, self.contents):
                f.write(json.dumps({"id": i, "contents": c}, ensure_ascii=False))
                f.write("\n")

    def rows(self, indices: Iterable[int]) -> Iterator[dict[str, str]]:
        for i in indices:
            yield {"id": self.ids[i], "contents": self.contents[i]}


@dataclass
class RenderedWorld:
    """A world's corpus and where each entity's lead passage (the one stating its facts) lies."""

    corpus: Corpus
    person_passage: list[int]
    city_passage: list[int]
    country_passage: list[int]
    organisation_passage: list[int]
    work_passage: list[int]


def _article(word: str) -> str:
    return "an" if word[0].lower() in "aeiou" else "a"


def _join(items: Sequence[str]) -> str:
    if len(items) <= 1:
        return "".join(items)
    return ", ".join(items[:-1]) + " and " + items[-1]


_PERSON_FILLERS = (
    "{P} was known among contemporaries for a patient and exacting manner.",
    "Letters written by {last} survive in several private collections.",
    "{P} travelled widely in early life and kept detailed notebooks.",
    "Later in life {pro} settled in {residence}, where {pro} lived for many years.",
    "{last} rarely gave interviews and avoided public ceremonies.",
    "A street in {residence} was later named after {obj}.",
    "{P} taught a small circle of students who continued the work.",
)
_ORG_FILLERS = (
    "By its fiftieth year it employed about {staff} people.",
    "Its archives are open to researchers by appointment.",
    "The organisation went through several reorganisations during its history.",
    "Its main building was rebuilt after a fire.",
    "It is governed by a board of trustees.",
)
_WORK_FILLERS = (
    "It received mixed reviews at first and was later reassessed.",
    "Critics praised its structure and restraint.",
    "It was reissued several times.",
    "It remains the best-known work of its creator.",
    "Parts of it were adapted for the stage.",
)
_CITY_FILLERS = (
    "Its old quarter is known for narrow streets and covered markets.",
    "The local economy relies on trade, crafts and river transport.",
    "A university district grew up on the northern bank.",
    "The city holds a market fair every autumn.",
)


def _person_text(world: World, i: int, rng: np.random.Generator) -> str:
    p = world.people[i]
    pro = p.pronoun
    Pro = pro.capitalize()
    obj = "him" if pro == "he" else "her"
    poss = "his" if pro == "he" else "her"
    city = world.cities[p.birthplace].name
    org = world.organisations[p.employer].name
    occ = p.occupation
    life = f"{p.birth_year}–{p.death_year}" if p.death_year is not None else f"born {p.birth_year}"
    variant = int(rng.integers(0, 3))
    if variant == 0:
        lead = f"{p.name} ({life}) was {_article(occ)} {occ}. {Pro} was born in {city} in {p.birth_year}."
    elif variant == 1:
        lead = f"{p.name} was {_article(occ)} {occ}, born in {p.birth_year} in the city of {city}."
    else:
        lead = f"{p.name} ({life}) was {_article(occ)} {occ} from {city}, where {pro} was born in {p.birth_year}."
    parts = [lead]
    if p.death_year is not None and variant == 1:
        parts.append(f"{Pro} died in {p.death_year}.")
    elif p.death_year is not None:
        parts.append(f"{p.last} died in {p.death_year}.")
    parts.append(f"From {p.employer_since} {pro} worked for {org}.")
    works = world.works_by_person.get(i, [])
    if works:
        shown = [world.works[j] for j in works[:3]]
        listing = _join([f'the {w.kind} "{w.title}" ({w.year})' for w in shown])
        parts.append(f"{Pro} is known for {listing}.")
    fillers = rng.choice(len(_PERSON_FILLERS), size=2, replace=False)
    for k in fillers.tolist():
        parts.append(
            _PERSON_FILLERS[k].format(
                P=p.last,
                last=p.last,
                pro=pro,
                obj=obj,
                poss=poss,
                residence=world.cities[p.residence].name,
            )
        )
    return " ".join(parts)


def _person_second_text(world: World, i: int, rng: np.random.Generator) -> str:
    p = world.people[i]
    colleagues = [c for c in world.staff_by_org.get(p.employer, []) if c != i][:2]
    org = world.organisations[p.employer].name
    parts = [f"In {p.last}'s later years the work at {org} changed direction."]
    if colleagues:
        names = _join([world.people[c].short_name for c in colleagues])
        parts.append(f"Among colleagues there were {names}.")
    parts.append(
        f"Exhibitions and retrospectives about {p.short_name} were held in "
        f"{world.cities[p.residence].name} and elsewhere."
    )
    return " ".join(parts)


def _org_text(world: World, j: int, rng: np.random.Generator) -> str:
    o = world.organisations[j]
    city = world.cities[o.headquarters]
    country = world.countries[city.country].name
    founder = world.people[o.founder].name
    variant = int(rng.integers(0, 2))
    if variant == 0:
        lead = f"{o.name} is {_article(o.kind)} {o.kind} founded in {o.founded} by {founder}. It is headquartered in {city.name}, {country}."
    else:
        lead = f"{o.name} is {_article(o.kind)} {o.kind} headquartered in {city.name}, {country}. It was founded by {founder} in {o.founded}."
    parts = [lead]
    staff = [s for s in world.staff_by_org.get(j, [])][:2]
    if staff:
        parts.append(f"People who worked there include {_join([world.people[s].short_name for s in staff])}.")
    k = int(rng.integers(0, len(_ORG_FILLERS)))
    parts.append(_ORG_FILLERS[k].format(staff=o.staff))
    return " ".join(parts)


def _work_text(world: World, j: int, rng: np.random.Generator) -> str:
    w = world.works[j]
    creator = world.people[w.creator]
    org = world.organisations[w.publisher].name
    _, creator_verb, org_verb, role = WORK_ROLES[w.kind]
    lead = f'"{w.title}" is {_article(w.kind)} {w.kind} by the {creator.occupation} {creator.name}, from {w.year}.'
    if org_verb == "holds":
        org_sentence = f"It is held in the collection of {org}."
    else:
        org_sentence = f"It was {org_verb} by {org}."
    k = int(rng.integers(0, len(_WORK_FILLERS)))
    return " ".join([lead, org_sentence, _WORK_FILLERS[k]])


def _city_text(world: World, c: int, rng: np.random.Generator) -> str:
    city = world.cities[c]
    country = world.countries[city.country]
    is_capital = country.capital == c
    lead = (
        f"{city.name} is the capital city of {country.name}."
        if is_capital
        else f"{city.name} is a city in {country.name}."
    )
    parts = [
        lead,
        f"It lies on the {city.river}, was founded in {city.founded} and has about {city.population:,} inhabitants.",
    ]
    born = world.people_by_city.get(c, [])[:3]
    if born:
        parts.append(f"People born in {city.name} include {_join([world.people[i].short_name for i in born])}.")
    k = int(rng.integers(0, len(_CITY_FILLERS)))
    parts.append(_CITY_FILLERS[k])
    return " ".join(parts)


def _country_text(world: World, k: int, cities_of: dict[int, list[int]]) -> str:
    country = world.countries[k]
    capital = world.cities[country.capital].name
    others = [world.cities[i].name for i in cities_of.get(k, []) if i != country.capital][:4]
    parts = [f"{country.name} is a country. Its capital is {capital}."]
    if others:
        parts.append(f"Other cities include {_join(others)}.")
    return " ".join(parts)


def _surname_text(world: World, surname: str, people: list[int]) -> str:
    entries = [
        f"{world.people[i].name}, {_article(world.people[i].occupation)} {world.people[i].occupation}"
        for i in people[:6]
    ]
    return f"{surname} is a surname. People with the surname include " + "; ".join(entries) + "."


def _event_text(world: World, e: int) -> str:
    ev = world.events[e]
    city = world.cities[ev.city]
    shown = [f'"{world.works[j].title}" by {world.people[world.works[j].creator].short_name}' for j in ev.works]
    return f"The {ev.name} took place in {city.name} in {ev.year}. Works presented there included {_join(shown)}."


def render_corpus(world: World) -> RenderedWorld:
    """Render ``world`` into passages (deterministic: fillers are drawn from the world's seed).

    Passage order: people, organisations, works, cities, countries, second passages of some
    people, surname pages, event pages. Ids are ``"0"``, ``"1"``, ... in that order.
    """
    rng = _rng(world.config.seed, 10)
    contents: list[str] = []

    def add(title: str, text: str) -> int:
        contents.append(f'"{title}"\n{text}')
        return len(contents) - 1

    person_passage = [add(p.name, _person_text(world, i, rng)) for i, p in enumerate(world.people)]
    organisation_passage = [add(o.name, _org_text(world, j, rng)) for j, o in enumerate(world.organisations)]
    work_passage = [add(w.title, _work_text(world, j, rng)) for j, w in enumerate(world.works)]
    city_passage = [add(c.name, _city_text(world, k, rng)) for k, c in enumerate(world.cities)]
    cities_of: dict[int, list[int]] = {}
    for i, c in enumerate(world.cities):
        cities_of.setdefault(c.country, []).append(i)
    country_passage = [add(c.name, _country_text(world, k, cities_of)) for k, c in enumerate(world.countries)]
    second = rng.random(len(world.people)) < 0.3
    for i in np.flatnonzero(second).tolist():
        add(world.people[i].name, _person_second_text(world, i, rng))
    for surname, members in world.people_by_surname.items():
        if len(members) >= 2:
            add(f"{surname} (surname)", _surname_text(world, surname, members))
    for e in range(len(world.events)):
        add(world.events[e].name, _event_text(world, e))
    corpus = Corpus([str(i) for i in range(len(contents))], contents)
    return RenderedWorld(corpus, person_passage, city_passage, country_passage, organisation_passage, work_passage)
