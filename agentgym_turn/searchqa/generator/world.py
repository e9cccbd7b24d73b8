"""A seeded knowledge base of fictional entities: countries, cities, people, organisations, works.

The world is a set of typed entities with attributes (years, places) and relations (born in,
worked for, founded, created, published by). Everything is fictional and named with coined
words (:mod:`.names`), so no fact can be known in advance; :mod:`.corpus` renders the world into
encyclopedia passages and :mod:`.questions` asks single-hop, bridge and comparison questions
about it. The world is a pure function of :class:`WorldConfig`: the same config gives the same
world in every process.

Consistency rules (so that passages never contradict each other):

* a person is born 1750-1995 in one city, dies 45-95 years later if born before 1935;
* an organisation is founded 25-55 years after its founder's birth, in a city (its headquarters);
* a person works for an organisation of a kind that fits the occupation (a composer for a record
  label or a university, an astronomer for an observatory, ...);
* a work is made by a creative person (novelist, poet, film director, composer, painter)
  20-70 years after birth, and published, produced, released or held by an organisation of the
  matching kind founded before the work appeared (when one exists).
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass, field

import numpy as np

from .names import Coiner

#: Creative occupation -> the kind of work it produces.
OCCUPATION_WORK: dict[str, str] = {
    "novelist": "novel",
    "poet": "poetry collection",
    "film director": "film",
    "composer": "album",
    "painter": "painting",
}
_OTHER_OCCUPATIONS = (
    "physicist",
    "chemist",
    "mathematician",
    "astronomer",
    "botanist",
    "historian",
    "cartographer",
    "engineer",
    "economist",
    "architect",
)
OCCUPATIONS: tuple[str, ...] = tuple(OCCUPATION_WORK) + _OTHER_OCCUPATIONS

#: Work kind -> (organisation kind that publishes it, verb for the creator, verb for the
#: organisation, role noun of the creator).
WORK_ROLES: dict[str, tuple[str, str, str, str]] = {
    "novel": ("publishing house", "wrote", "published", "author"),
    "poetry collection": ("publishing house", "wrote", "published", "author"),
    "film": ("film studio", "directed", "produced", "director"),
    "album": ("record label", "recorded", "released", "composer"),
    "painting": ("museum", "painted", "holds", "painter"),
}

#: Organisation kind -> name patterns ({w} and {v} are coined words).
ORG_PATTERNS: dict[str, tuple[str, ...]] = {
    "publishing house": ("{w} Press", "{w} Books", "{w} and {v} Publishers"),
    "film studio": ("{w} Pictures", "{w} Studios", "{w} Film Company"),
    "record label": ("{w} Records", "{w} Sound", "{w} Music Group"),
    "museum": ("{w} Museum of Art", "{w} Gallery", "Museum of {w} Art"),
    "university": ("University of {w}", "{w} College", "{w} Institute of Technology"),
    "observatory": ("{w} Observatory", "{w} Astronomical Society"),
    "trading company": ("{w} Trading Company", "{w} Merchants"),
    "shipyard": ("{w} Shipyards", "{w} Shipbuilding"),
    "bank": ("{w} Bank", "Bank of {w}"),
    "engineering firm": ("{w} Engineering", "{w} Works"),
}
ORG_KINDS: tuple[str, ...] = tuple(ORG_PATTERNS)

#: Occupation -> organisation kinds it can work for.
EMPLOYER_KINDS: dict[str, tuple[str, ...]] = {
    "novelist": ("publishing house", "university"),
    "poet": ("publishing house", "university"),
    "film director": ("film studio",),
    "composer": ("record label", "university"),
    "painter": ("museum", "university"),
    "physicist": ("university",),
    "chemist": ("university",),
    "mathematician": ("university",),
    "astronomer": ("observatory", "university"),
    "botanist": ("university", "museum"),
    "historian": ("university", "museum"),
    "cartographer": ("trading company", "university"),
    "engineer": ("shipyard", "engineering firm"),
    "economist": ("bank", "trading company", "university"),
    "architect": ("engineering firm",),
}

_TITLE_ADJECTIVES = (
    "Silent",
    "Hollow",
    "Crimson",
    "Distant",
    "Broken",
    "Quiet",
    "Bitter",
    "Amber",
    "Velvet",
    "Wandering",
    "Hidden",
    "Burning",
    "Frozen",
    "Pale",
    "Restless",
    "Forgotten",
    "Endless",
    "Gentle",
    "Savage",
    "Lonely",
    "Patient",
    "Narrow",
    "Copper",
    "Scarlet",
    "Ivory",
    "Shallow",
    "Drowned",
    "Crooked",
    "Tender",
    "Weary",
    "Sleeping",
    "Painted",
    "Secret",
    "Fading",
    "Northern",
    "Southern",
    "Eastern",
    "Western",
    "Brass",
    "Marble",
    "Paper",
    "Glass",
    "Salt",
)
_TITLE_NOUNS = (
    "Lantern",
    "Harbour",
    "Orchard",
    "Mirror",
    "Meadow",
    "Cathedral",
    "Compass",
    "Lighthouse",
    "Violin",
    "Monsoon",
    "Garden",
    "Tide",
    "Season",
    "Kingdom",
    "Frontier",
    "Archive",
    "Carnival",
    "Voyage",
    "Island",
    "Letter",
    "Shadow",
    "Fountain",
    "Orchestra",
    "Horizon",
    "Pilgrim",
    "Furnace",
    "Citadel",
    "Feather",
    "Caravan",
    "Ember",
    "Prairie",
    "Glacier",
    "Sparrow",
    "Harvest",
    "Anchor",
    "Chapel",
    "Ferry",
    "Thread",
    "Window",
    "Ledger",
    "Valley",
)
_TITLE_PATTERNS = (
    "The {a} {n}",
    "{a} {n}s",
    "The {n} of {w}",
    "{w} {n}",
    "A {n} for {w}",
    "The {a} {n}s of {w}",
    "{n}s in {w}",
)
_EVENT_KINDS = ("Exhibition", "Festival", "Biennale", "Salon", "Fair")
_COUNTRY_ENDINGS = ("ia", "and", "ora", "istan", "ey", "ica", "eth")


@dataclass(frozen=True)
class WorldConfig:
    """Sizes and seed of a generated world. ``WorldConfig.scaled(s)`` multiplies every count.

    The default world renders to about 6,000 passages and yields about 8,000 questions.
    """

    seed: int = 0
    num_countries: int = 24
    num_cities: int = 300
    num_people: int = 2400
    num_organisations: int = 480
    num_works: int = 1800
    num_events: int = 300

    @classmethod
    def scaled(cls, scale: float = 1.0, *, seed: int = 0) -> "WorldConfig":
        """The default world with every count multiplied by ``scale`` (countries grow as its square root)."""
        if not (scale > 0 and math.isfinite(scale)):
            raise ValueError(f"scale must be a positive number, got {scale!r}.")
        d = cls()
        return cls(
            seed=seed,
            num_countries=max(4, round(d.num_countries * math.sqrt(scale))),
            num_cities=max(8, round(d.num_cities * scale)),
            num_people=max(40, round(d.num_people * scale)),
            num_organisations=max(12, round(d.num_organisations * scale)),
            num_works=max(30, round(d.num_works * scale)),
            num_events=max(4, round(d.num_events * scale)),
        )


@dataclass(frozen=True)
class Country:
    name: str
    capital: int  # city index


@dataclass(frozen=True)
class City:
    name: str
    country: int
    founded: int
    population: int
    river: str


@dataclass(frozen=True)
class Person:
    name: str  # display name, with a middle name for some people
    short_name: str  # first and last name
    first: str
    last: str
    pronoun: str  # "he" or "she"
    birth_year: int
    death_year: int | None
    birthplace: int  # city index
    residence: int  # city index of later life (may equal birthplace)
    occupation: str
    employer: int  # organisation index
    employer_since: int  # year


@dataclass(frozen=True)
class Organisation:
    name: str
    kind: str
    founded: int
    headquarters: int  # city index
    founder: int  # person index
    staff: int


@dataclass(frozen=True)
class Work:
    title: str
    kind: str
    year: int
    creator: int  # person index
    publisher: int  # organisation index


@dataclass(frozen=True)
class Event:
    name: str
    year: int
    city: int
    works: tuple[int, ...]


@dataclass
class World:
    """All entities of a generated world (lists indexed by entity number)."""

    config: WorldConfig
    countries: list[Country]
    cities: list[City]
    people: list[Person]
    organisations: list[Organisation]
    works: list[Work]
    events: list[Event]
    works_by_person: dict[int, list[int]] = field(default_factory=dict)
    people_by_city: dict[int, list[int]] = field(default_factory=dict)
    staff_by_org: dict[int, list[int]] = field(default_factory=dict)
    people_by_surname: dict[str, list[int]] = field(default_factory=dict)


def _rng(seed: int, part: int) -> np.random.Generator:
    # one independent stream per part of the world, so changing one count keeps the rest stable
    return np.random.default_rng(np.random.SeedSequence([int(seed), 7919, part]))


def _pick(rng: np.random.Generator, options: tuple | list):
    return options[int(rng.integers(0, len(options)))]


def generate_world(config: WorldConfig | None = None) -> World:
    """Generate the world described by ``config`` (default: :class:`WorldConfig()`).

    Each part draws from its own random stream (``_rng(seed, k)``), in this order, so a part's
    draws never shift another's; the coined names come from one :class:`Coiner` in the same order.
    """
    cfg = config or WorldConfig()
    if min(cfg.num_countries, cfg.num_cities, cfg.num_people, cfg.num_organisations) < 1:
        raise ValueError("a world needs at least one country, city, person and organisation")
    if cfg.num_cities < cfg.num_countries:
        raise ValueError("a world needs at least one city per country (num_cities >= num_countries)")
    coiner = Coiner(_rng(cfg.seed, 0))
    coiner.reserve([w.lower() for w in _TITLE_ADJECTIVES + _TITLE_NOUNS + _EVENT_KINDS])
    countries, cities = _countries_and_cities(cfg, coiner, _rng(cfg.seed, 1))
    people_raw = _people_fields(cfg, coiner, _rng(cfg.seed, 2))
    organisations = _organisations(cfg, coiner, _rng(cfg.seed, 3), people_raw)
    employers = _OrgPicker(organisations)
    people = _employ(people_raw, employers, _rng(cfg.seed, 4))
    works = _works(cfg, coiner, _rng(cfg.seed, 5), people, employers)
    events = _events(cfg, _rng(cfg.seed, 6), cities, works)
    world = World(cfg, countries, cities, people, organisations, works, events)
    for j, wk in enumerate(works):
        world.works_by_person.setdefault(wk.creator, []).append(j)
    for i, p in enumerate(people):
        world.people_by_city.setdefault(p.birthplace, []).append(i)
        world.staff_by_org.setdefault(p.employer, []).append(i)
        world.people_by_surname.setdefault(p.last, []).append(i)
    return world


def _countries_and_cities(
    cfg: WorldConfig, coiner: Coiner, rng: np.random.Generator
) -> tuple[list[Country], list[City]]:
    """Countries (each with a capital: its first city) and cities, each country with at least one city."""
    stems = coiner.words(cfg.num_countries)
    country_names = []
    for stem in stems:
        base = stem.rstrip("aeiouy") or stem
        country_names.append(base + _pick(rng, _COUNTRY_ENDINGS))
    coiner.reserve(country_names)
    city_names = coiner.words(cfg.num_cities)
    river_names = coiner.words(max(4, cfg.num_cities // 3))
    city_country = np.concatenate(
        [np.arange(cfg.num_countries), rng.integers(0, cfg.num_countries, cfg.num_cities - cfg.num_countries)]
    )
    cities = [
        City(
            name=city_names[i],
            country=int(city_country[i]),
            founded=int(rng.integers(800, 1850)),
            population=int(round(float(rng.lognormal(11.0, 1.1)), -2)) + 1000,
            river=f"{_pick(rng, river_names)} River",
        )
        for i in range(cfg.num_cities)
    ]
    capital_of = {}
    for i, c in enumerate(cities):  # the first city of each country is its capital
        capital_of.setdefault(c.country, i)
    return [Country(country_names[k], capital_of[k]) for k in range(cfg.num_countries)], cities


def _people_fields(cfg: WorldConfig, coiner: Coiner, rng: np.random.Generator) -> list[dict]:
    """Every person's fields but the employer (assigned once organisations exist); short names are unique."""
    n_first = max(60, cfg.num_people // 4)
    n_last = max(90, (cfg.num_people * 3) // 8)
    firsts = coiner.words(n_first)
    lasts = coiner.words(n_last)
    people_raw: list[dict] = []
    seen_short: set[str] = set()
    while len(people_raw) < cfg.num_people:
        first, last = _pick(rng, firsts), _pick(rng, lasts)
        short = f"{first} {last}"
        if short in seen_short:
            continue
        seen_short.add(short)
        middle = _pick(rng, firsts) if rng.random() < 0.25 else None
        name = f"{first} {middle} {last}" if middle and middle != first else short
        birth = int(rng.integers(1750, 1996))
        death = birth + int(rng.integers(45, 96)) if birth < 1935 else None
        if death is not None and death > 2020:
            death = 2020 - int(rng.integers(0, 10))
        birthplace = int(rng.integers(0, cfg.num_cities))
        residence = birthplace if rng.random() < 0.4 else int(rng.integers(0, cfg.num_cities))
        people_raw.append(
            dict(
                name=name,
                short_name=short,
                first=first,
                last=last,
                pronoun="he" if rng.random() < 0.5 else "she",
                birth_year=birth,
                death_year=death,
                birthplace=birthplace,
                residence=residence,
                occupation=_pick(rng, OCCUPATIONS),
            )
        )
    return people_raw


def _organisations(
    cfg: WorldConfig, coiner: Coiner, rng: np.random.Generator, people_raw: list[dict]
) -> list[Organisation]:
    """Organisations (every kind at least once when there are enough), founded 25-55 years after the founder's birth."""
    org_words = coiner.words(cfg.num_organisations * 2)
    eligible_founders = [i for i, p in enumerate(people_raw) if p["birth_year"] <= 1960] or list(range(len(people_raw)))
    organisations = []
    seen_org: set[str] = set()
    kinds_needed = list(ORG_KINDS)
    w = 0
    for j in range(cfg.num_organisations):
        kind = kinds_needed[j] if j < len(kinds_needed) else _pick(rng, ORG_KINDS)
        pattern = _pick(rng, ORG_PATTERNS[kind])
        name = pattern.format(w=org_words[w], v=org_words[w + 1])
        w += 2
        if name in seen_org:  # cannot happen with unique words, kept as a guard
            continue
        seen_org.add(name)
        founder = int(_pick(rng, eligible_founders))
        founded = min(2015, people_raw[founder]["birth_year"] + int(rng.integers(25, 56)))
        organisations.append(
            Organisation(
                name=name,
                kind=kind,
                founded=founded,
                headquarters=int(rng.integers(0, cfg.num_cities)),
                founder=founder,
                staff=int(round(float(rng.lognormal(6.0, 1.2)), -1)) + 20,
            )
        )
    return organisations


class _OrgPicker:
    """Draws an organisation of some kinds that existed by a year (employers, publishers)."""

    def __init__(self, organisations: list[Organisation]):
        self.organisations = organisations
        self.by_kind: dict[str, list[int]] = {k: [] for k in ORG_KINDS}
        for j, o in enumerate(organisations):
            self.by_kind[o.kind].append(j)
        # organisations of each kind sorted by founding year, so "founded by year y" is a prefix
        self.by_year = {k: sorted(v, key=lambda j: (organisations[j].founded, j)) for k, v in self.by_kind.items()}
        self.years = {k: [organisations[j].founded for j in v] for k, v in self.by_year.items()}

    def existing_kinds(self, kinds: list[str]) -> list[str]:
        """The kinds of ``kinds`` that have an organisation, else every kind that has one."""
        return [k for k in kinds if self.by_kind[k]] or [k for k in ORG_KINDS if self.by_kind[k]]

    def pick(self, rng: np.random.Generator, kinds: list[str], year: int) -> int:
        """A random organisation of ``kinds`` founded by ``year`` (any of ``kinds`` if none was)."""
        counts = [bisect.bisect_right(self.years[k], year) for k in kinds]
        total = sum(counts)
        if total == 0:
            counts = [len(self.by_year[k]) for k in kinds]
            total = sum(counts)
        r = int(rng.integers(0, total))
        for k, n in zip(kinds, counts):
            if r < n:
                return self.by_year[k][r]
            r -= n
        raise AssertionError("unreachable")


def _employ(people_raw: list[dict], orgs: _OrgPicker, rng: np.random.Generator) -> list[Person]:
    """People with employers: a fitting organisation, preferably one that existed in the person's career."""
    people: list[Person] = []
    for p in people_raw:
        start = p["birth_year"] + int(rng.integers(21, 36))
        employer = orgs.pick(rng, orgs.existing_kinds(list(EMPLOYER_KINDS[p["occupation"]])), start)
        people.append(Person(**p, employer=employer, employer_since=max(start, orgs.organisations[employer].founded)))
    return people


def _works(
    cfg: WorldConfig, coiner: Coiner, rng: np.random.Generator, people: list[Person], orgs: _OrgPicker
) -> list[Work]:
    """Works by creative people, with unique titles, published by an organisation of the fitting kind."""
    creatives = [i for i, p in enumerate(people) if p.occupation in OCCUPATION_WORK]
    works: list[Work] = []
    seen_titles: set[str] = set()
    adjectives, nouns = _TITLE_ADJECTIVES, _TITLE_NOUNS
    title_words = coiner.words(max(16, cfg.num_works))
    tw = 0
    while creatives and len(works) < cfg.num_works:
        creator = int(_pick(rng, creatives))
        person = people[creator]
        kind = OCCUPATION_WORK[person.occupation]
        last = min(person.death_year or 2020, 2020, person.birth_year + 70)
        year = int(rng.integers(person.birth_year + 20, max(last, person.birth_year + 20) + 1))
        for attempt in range(6):
            pattern = _pick(rng, _TITLE_PATTERNS)
            if attempt == 5 and "{w}" not in pattern:
                pattern = "{w} {n}"
            word = title_words[tw % len(title_words)]
            title = pattern.format(a=_pick(rng, adjectives), n=_pick(rng, nouns), w=word)
            if title not in seen_titles:
                if "{w}" in pattern:
                    tw += 1
                break
        else:  # six collisions in a row: a fresh coined word makes it unique
            title = f"{coiner.words(1)[0]} {_pick(rng, nouns)}"
        seen_titles.add(title)
        publisher = orgs.pick(rng, orgs.existing_kinds([WORK_ROLES[kind][0]]), year)
        works.append(
            Work(
                title=title,
                kind=kind,
                year=max(year, orgs.organisations[publisher].founded),
                creator=creator,
                publisher=publisher,
            )
        )
    return works


def _events(cfg: WorldConfig, rng: np.random.Generator, cities: list[City], works: list[Work]) -> list[Event]:
    """Exhibitions and festivals that mention works (distractor passages)."""
    events: list[Event] = []
    seen_events: set[str] = set()
    tries = 0
    while works and len(events) < cfg.num_events and tries < cfg.num_events * 20:
        tries += 1
        year = int(rng.integers(1800, 2021))
        shown = [j for j in rng.integers(0, len(works), 12).tolist() if works[j].year <= year]
        shown = list(dict.fromkeys(shown))[:4]
        if len(shown) < 2:
            continue
        city = int(rng.integers(0, cfg.num_cities))
        name = f"{year} {cities[city].name} {_pick(rng, _EVENT_KINDS)}"
        if name in seen_events:
            continue
        seen_events.add(name)
        events.append(Event(name=name, year=year, city=city, works=tuple(shown)))
    return events
