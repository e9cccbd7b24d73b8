"""WebShop's reward (``web_agent_site/engine/goal.py``, ``get_reward``) as pure functions.

    R = r_type * (n_attr_matched + n_opt_matched + 1[price <= price_upper])
               / (n_goal_attributes + n_goal_options + 1)

``reward_mode="original"`` (the default) computes what ``get_reward`` computes:

* **Attributes** (``get_attribute_reward``): a goal attribute matches when its fuzzy token-set
  ratio with one of the product's attributes is above 85, or when it is a substring of the
  lower-cased title, the joined bullet points (features) or the description.
* **Options** (``get_option_reward``): each *goal* option counts once when some purchased value
  has a token-set ratio above 85 with it. Purchased values go through :func:`normalize_color`
  (the first WebShop colour *contained* in the value). A synthetic goal's options are a dict,
  and ``goal.py`` hands its ``.items()`` over, so each goal option is a ``(name, value)`` tuple:
  it becomes a colour only when the name or the value *equals* one, and otherwise thefuzz
  compares the purchased value with the tuple's text ``"('size', 'large')"``, so the option
  name's words take part. Human goals give a list of values, each colour-normalised like a
  purchased value. ``n_opt_matched`` never exceeds the number of goal options.
* **Type** (``get_type_reward``): 1.0; lowered to 0.5 when neither the search query, nor two
  or more category levels, nor more than 20% of the goal title's nouns match; to 0.1 when the
  title noun overlap is below 0.1; to 0.0 when it is 0.

``reward_mode="strict"`` is our opt-in variant: colours are normalised on both sides (by
substring), a goal option named ``size`` is met only by the same purchased ``size`` value, any
other by a token-set ratio above 85 with a purchased value, and each goal option counts once.

In every mode ``0 <= R <= 1``. The fuzzy ratio is thefuzz 0.19's ``token_set_ratio`` (WebShop
pins ``thefuzz==0.19.0`` without python-Levenshtein, so its ratio is
:class:`difflib.SequenceMatcher`'s), reproduced with the standard library. **Title nouns**: WebShop
tags titles with spaCy's ``en_core_web_sm`` and keeps NOUN and PROPN tokens; the default here is a
light rule, :func:`title_nouns`, and any other can be passed as ``nouns=``;
``docs/envs/webshop.md`` reports how often each agrees with the original.
"""

from __future__ import annotations

import re
from difflib import SequenceMatcher
from typing import Any, Callable, Mapping, Sequence

from .product import Goal, Product
from .generator.vocab import COLOR_SET

#: The reward modes: WebShop's ``get_reward`` and our stricter variant (module docstring).
REWARD_MODES = ("original", "strict")
#: Option names that ``"strict"`` matches exactly (``goal.py`` matches every option fuzzily).
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
    salted sweetened unsweetened scented unscented certified tested approved rated handmade cooked wrapped
    running washing cooking baking matching carrying contains""".split()
)


_POSSESSIVE = re.compile(r"['’][sS]$")


def title_nouns(name: str) -> list[str]:
    """The lower-cased noun tokens of a product title, by our light rule (duplicates kept).

    Stands in for WebShop's spaCy ``en_core_web_sm`` NOUN/PROPN tags without spaCy. A token is a
    run of letters/digits (inner ``.`` or ``'`` kept, as in ``D.o.n.``; a final ``'s`` cut off,
    as spaCy splits ``Women's``). It counts as a noun unless it is a number, a function word, or
    a *lower-case* word from a list of adjectives and verb forms common in titles: spaCy tags
    most capitalised words of a Title Case title as proper nouns (``Classic``, ``Ultra``), so
    the list applies only to words written in lower case (measured: this agrees with spaCy more
    often than applying it to every word).
    """
    out = []
    for raw in _TOKEN.findall(name):
        raw = _POSSESSIVE.sub("", raw)
        token = raw.lower()
        if _NUMBER.match(token) or token in _FUNCTION_WORDS:
            continue
        if token in _NON_NOUNS and raw[:1].islower():
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


def _goal_option_for_matching(name: str, value: str, named: bool) -> str:
    """One goal option as ``goal.py``'s option term sees it (see the module docstring)."""
    if not named:
        return normalize_color(value)
    for color in COLOR_SET:  # ``color in (name, value)``: tuple membership, i.e. equality
        if color == name or color == value:
            return color
    return str((name, value))  # thefuzz turns a non-string into its str()


def option_reward(
    goal_options: Mapping[str, str],
    purchased_options: Mapping[str, str],
    *,
    named: bool = True,
    mode: str = "original",
) -> tuple[float | None, int]:
    """``(r_option, n_opt_matched)``: the share and count of goal options met by the purchase.

    ``goal_options`` maps option names to wanted values (``named=False``: the names are mere
    labels, as for WebShop's human goals, which list values only); ``purchased_options`` maps
    the product's option names to the chosen values. ``r_option`` is ``None`` when the goal has
    no options. ``n_opt_matched <= len(goal_options)`` in every mode.
    """
    _check_mode(mode)
    bought = {k: normalize_color(v) for k, v in purchased_options.items()}
    matched = 0
    for name, value in goal_options.items():
        if mode == "original":
            wanted = _goal_option_for_matching(name, value, named)
            hit = any(token_set_ratio(have, wanted) > FUZZY_THRESHOLD for have in bought.values())
        else:
            wanted = normalize_color(value)
            if named and name.lower() in EXACT_MATCH_OPTIONS:
                hit = bought.get(name) == wanted
            else:
                hit = any(token_set_ratio(have, wanted) > FUZZY_THRESHOLD for have in bought.values())
        matched += bool(hit)
    return (matched / len(goal_options) if goal_options else None), matched


def _check_mode(mode: str) -> None:
    if mode not in REWARD_MODES:
        raise ValueError(f"reward_mode must be one of {REWARD_MODES}, got {mode!r}.")


def webshop_reward(
    purchased: Product,
    goal: Goal,
    price: float,
    purchased_options: Mapping[str, str],
    *,
    nouns: Callable[[str], Sequence[str]] = title_nouns,
    mode: str = "original",
) -> tuple[float, dict[str, Any]]:
    """WebShop's reward ``R`` in ``[0, 1]`` for buying ``purchased`` at ``price`` (dollars) with
    ``purchased_options`` (option name -> chosen value), under ``mode`` (see the module docstring).

    Returns ``(R, breakdown)``; ``breakdown`` holds every term (``r_type``, ``query_match``,
    ``category_match``, ``title_score``, ``r_att``, ``n_attr_matched``, ``r_option``,
    ``n_opt_matched``, ``r_price``, ``w_att``, ``w_option``, ``w_price``, ``price``,
    ``price_upper``) so a reader can recompute ``R``.
    """
    _check_mode(mode)
    type_terms = type_reward(purchased, goal, nouns=nouns)
    r_price = bool(price <= goal.price_upper)
    r_att, n_att = attribute_reward(purchased, goal.attributes)
    r_option, n_opt = option_reward(goal.goal_options, purchased_options, named=goal.options_named, mode=mode)
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
