"""WebShop's reward, term by term (``web_agent_site/engine/goal.py``), as pure functions.

    R = r_type * (n_attr_matched + n_opt_matched + 1[price <= price_upper])
               / (n_goal_attributes + n_goal_options + 1)

* **Attributes**: a goal attribute matches when its fuzzy token-set ratio with one of the
  product's attributes is above 85, or when it is a substring of the lower-cased title, the
  joined bullet points (features) or the description.
* **Options**: every *purchased* option value is normalised (:func:`normalize_color`) and
  matched against the goal's option values: exactly for an option named ``size``, by token-set
  ratio above 85 otherwise, and failing that as a substring of title, features or description.
  (WebShop counts purchased options, so buying more options than the goal names can score
  above 1; we keep that.)
* **Type** (``r_type``): 1.0; lowered to 0.5 when neither the search query, nor two or more
  category levels, nor more than 20% of the goal title's nouns match; to 0.1 when the title
  noun overlap is below 0.1; to 0.0 when it is 0.
* The fuzzy ratio is thefuzz 0.19's ``token_set_ratio`` (WebShop pins ``thefuzz==0.19.0``
  without python-Levenshtein, so its ratio is :class:`difflib.SequenceMatcher`'s), reproduced
  with the standard library: no extra dependency.
* **Title nouns**: WebShop tags the titles with spaCy's ``en_core_web_lg`` and keeps NOUN and
  PROPN tokens. We use a lighter rule, :func:`title_nouns` (tokens with a letter that are not
  function words, numbers, or words from a list of adjectives and verb forms common in product
  titles); ``docs/envs/webshop.md`` reports how often it agrees with spaCy's decision.
"""

from __future__ import annotations

import re
from difflib import SequenceMatcher
from typing import Any, Mapping, Sequence

from .product import Goal, Product
from .vocab import COLOR_SET

__all__ = [
    "normalize_color",
    "token_set_ratio",
    "title_nouns",
    "type_reward",
    "attribute_reward",
    "option_reward",
    "webshop_reward",
    "EXACT_MATCH_OPTIONS",
    "FUZZY_THRESHOLD",
]

#: Option names matched exactly rather than fuzzily (``goal.py``'s ``EXACT_MATCH_OPTS``).
EXACT_MATCH_OPTIONS = ("size",)
#: A fuzzy match needs a token-set ratio strictly above this.
FUZZY_THRESHOLD = 85


def normalize_color(value: str) -> str:
    """The first colour of WebShop's ``COLOR_SET`` contained in ``value``, else ``value``."""
    for color in COLOR_SET:
        if color in value:
            return color
    return value


# ---------------------------------------------------------------- thefuzz 0.19 token_set_ratio
_LATIN1_HIGH = {i: None for i in range(128, 256)}
_NON_ALNUM = re.compile(r"(?ui)\W")


def _full_process(text: str) -> str:
    """thefuzz's ``full_process(force_ascii=True)``: drop chars 128-255, non-alphanumerics to spaces, lower, strip."""
    text = str(text).translate(_LATIN1_HIGH)
    return _NON_ALNUM.sub(" ", text).lower().strip()


def _ratio(a: str, b: str) -> int:
    if not a or not b:
        return 0
    return int(round(100 * SequenceMatcher(None, a, b).ratio()))


def token_set_ratio(s1: str, s2: str) -> int:
    """thefuzz 0.19's ``fuzz.token_set_ratio(s1, s2)`` (0-100; argument order matters a little)."""
    p1, p2 = _full_process(s1), _full_process(s2)
    if not p1 or not p2:
        return 0
    t1, t2 = set(p1.split()), set(p2.split())
    sect = " ".join(sorted(t1 & t2))
    c12 = (sect + " " + " ".join(sorted(t1 - t2))).strip()
    c21 = (sect + " " + " ".join(sorted(t2 - t1))).strip()
    sect = sect.strip()
    return max(_ratio(sect, c12), _ratio(sect, c21), _ratio(c12, c21))


# ---------------------------------------------------------------- title nouns (spaCy stand-in)
_TOKEN = re.compile(r"[^\W_]+(?:[.'’][^\W_]+)*\.?", re.UNICODE)
_NUMBER = re.compile(r"^[\d.,/]+$")
_FUNCTION_WORDS = frozenset(
    """a an the this that these those and or nor but for with without of in on at to from by as into onto
    over under up down off out about per via than then so if is are was were be been being it its it's
    i me my we our you your he she his her they them their all any each every both either neither no not
    only also just very too more most less least much many some such other another own same can will
    would should could may might must do does did has have had""".split()
)
_NON_NOUNS = frozenset(
    """new best great good high low long short large small big little mini extra super ultra soft hard
    light heavy dark bright clear natural organic pure fresh premium professional classic modern vintage
    rustic casual comfortable comfy durable portable adjustable waterproof wireless electric digital
    smart compatible universal original perfect beautiful cute elegant simple easy quick fast slow
    full half double single multi triple heavy-duty lightweight breathable stretchy cozy warm cool hot
    cold wide narrow thick thin slim tall deep sturdy stainless reusable disposable decorative
    functional ergonomic compact foldable removable rechargeable non free friendly safe healthy
    gentle daily everyday intense luxury radiant botanical advanced clinical herbal rich smooth bold
    crunchy wholesome gourmet artisan homestyle active urban essential sport performance heritage
    minimalist contemporary transitional coastal industrial scandinavian farmhouse luxe rugged elite
    pro plus max nano prime turbo core edge
    made designed listed fitted lined padded quilted printed knitted woven sealed baked roasted fried
    salted sweetened unsweetened scented unscented certified tested approved rated handmade
    running washing cooking baking matching""".split()
)


def title_nouns(name: str) -> list[str]:
    """The lower-cased noun tokens of a product title, by our light rule (duplicates kept).

    A token is a run of letters/digits (inner ``.`` or ``'`` kept, as in ``D.o.n.``); it counts
    as a noun unless it is a number, a function word, or in a list of adjectives and verb
    forms common in titles. spaCy would also drop some other adjectives and verbs.
    """
    out = []
    for raw in _TOKEN.findall(name):
        token = raw.lower()
        if _NUMBER.match(token) or token in _FUNCTION_WORDS or token in _NON_NOUNS:
            continue
        if not any(ch.isalpha() for ch in token):
            continue
        out.append(token)
    return out


# ---------------------------------------------------------------- the three terms
def type_reward(purchased: Product, goal: Goal, *, nouns=title_nouns) -> dict[str, Any]:
    """``r_type`` and its inputs: ``query_match``, ``category_match``, ``title_score``."""
    query_match = purchased.query == goal.query
    bought_levels = {x.strip() for x in purchased.product_category.split("›")}
    goal_levels = {x.strip() for x in goal.product_category.split("›")}
    category_match = len(bought_levels & goal_levels) >= 2
    bought_nouns = nouns(purchased.name)
    wanted_nouns = nouns(goal.name)
    if not wanted_nouns:
        title_score = 0.2
    else:
        title_score = len(set(bought_nouns) & set(wanted_nouns)) / len(wanted_nouns)
    r_type = 1.0
    if not (query_match or category_match or title_score > 0.2):
        r_type = 0.5
    if title_score < 0.1:
        r_type = 0.1
    if title_score == 0.0:
        r_type = 0.0
    return {"r_type": r_type, "query_match": query_match, "category_match": category_match, "title_score": title_score}


def _in_text(value: str, purchased: Product) -> bool:
    return (
        value in purchased.title.lower()
        or value in " ".join(purchased.bullet_points).lower()
        or value in purchased.description.lower()
    )


def attribute_reward(purchased: Product, goal_attributes: Sequence[str]) -> tuple[float, int]:
    """``(r_attr, n_attr_matched)``: the share and count of goal attributes the product has."""
    matched = 0
    for wanted in goal_attributes:
        if any(token_set_ratio(have, wanted) > FUZZY_THRESHOLD for have in purchased.attributes):
            matched += 1
        elif _in_text(wanted, purchased):
            matched += 1
    return (matched / len(goal_attributes) if goal_attributes else 0.0), matched


def option_reward(
    purchased: Product, goal_options: Sequence[str], purchased_options: Mapping[str, str]
) -> tuple[float | None, int]:
    """``(r_option, n_opt_matched)``; ``r_option`` is ``None`` when the goal has no options."""
    chosen = {k: normalize_color(v) for k, v in purchased_options.items()}
    wanted = [normalize_color(o) for o in goal_options]
    matched = 0
    for name, value in chosen.items():
        hit = False
        if name.lower() in EXACT_MATCH_OPTIONS:
            hit = value in wanted
        else:
            hit = any(token_set_ratio(w, value) > FUZZY_THRESHOLD for w in wanted)
        if hit or _in_text(value, purchased):
            matched += 1
    return (matched / len(wanted) if wanted else None), matched


def webshop_reward(
    purchased: Product, goal: Goal, price: float, purchased_options: Mapping[str, str], *, nouns=title_nouns
) -> tuple[float, dict[str, Any]]:
    """WebShop's reward ``R`` for buying ``purchased`` at ``price`` with ``purchased_options``.

    Returns ``(R, breakdown)``; ``breakdown`` holds every term (``r_type``, ``query_match``,
    ``category_match``, ``title_score``, ``r_att``, ``n_attr_matched``, ``r_option``,
    ``n_opt_matched``, ``r_price``, ``w_att``, ``w_option``, ``w_price``, ``price``,
    ``price_upper``) so a reader can recompute ``R``.
    """
    type_terms = type_reward(purchased, goal, nouns=nouns)
    r_price = bool(price <= goal.price_upper)
    r_att, n_att = attribute_reward(purchased, goal.attributes)
    goal_values = list(goal.goal_options.values())
    r_option, n_opt = option_reward(purchased, goal_values, purchased_options)
    denominator = len(goal.attributes) + len(goal.goal_options) + 1
    total = (n_att + n_opt + int(r_price)) / denominator * type_terms["r_type"]
    breakdown = dict(type_terms)
    breakdown.update(
        r_att=r_att,
        n_attr_matched=n_att,
        w_att=len(goal.attributes) / denominator,
        r_option=r_option,
        n_opt_matched=n_opt,
        w_option=len(goal.goal_options) / denominator,
        r_price=r_price,
        w_price=1 / denominator,
        price=float(price),
        price_upper=float(goal.price_upper),
    )
    return float(total), breakdown
