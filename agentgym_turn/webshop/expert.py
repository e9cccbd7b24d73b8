"""The oracle shopper behind ``TurnWebShopEnv.expert_action()``.

It knows the goal and the catalog. On the search page it searches with the goal's words (the
instruction without its price clause); if none of the 50 hits can earn ``R = 1`` it searches
the target's title instead. With ``expert_query="product"`` (an env option) it first searches
the product phrase alone (:func:`product_phrase`, e.g. ``makeup brush set``; with ``"clause"``, the
instruction's opening clause, :func:`instruction_clause`), then falls back to
the instruction and then the title the same way. On the results it walks the pages to the target product, or to
another product that earns ``R = 1`` when the target is not listed, opens it, picks the goal's
option values, and buys. With ``expert_browse="first_match"`` it opens the first listed product that
earns ``R = 1`` instead of the target, so that what it opens can be told from the page in view. From any other state (an agent's own search, a wrong product, a
sub-page) it steers back onto that plan.
"""

from __future__ import annotations

import re
from typing import Mapping

from .product import Goal, Product
from .reward import EXACT_MATCH_OPTIONS, FUZZY_THRESHOLD, normalize_color, title_nouns, token_set_ratio, webshop_reward

#: ``expert_query`` values: the instruction as the first query (WebShop's oracle), the product phrase, or the
#: instruction's opening clause.
EXPERT_QUERIES = ("instruction", "product", "clause")
#: ``expert_browse`` values: open the target (WebShop's oracle), or the first listed product that earns ``R = 1``.
EXPERT_BROWSING = ("target", "first_match")

_PRICE_MARK = "and price lower than "
# Matched from one known start (never searched), so a run of spaces cannot make it quadratic.
_PRICE_TAIL = re.compile(r"and price lower than [\d.,]+ dollars\s*$")


def strip_price_clause(text: str) -> str:
    """``text`` without a final ``, and price lower than X dollars`` (WebShop's instruction tail), stripped."""
    start = text.rfind(_PRICE_MARK)
    if start >= 0 and _PRICE_TAIL.match(text, start):
        text = text[:start].rstrip()
        text = text[:-1] if text.endswith(",") else text
    return text.strip()


def goal_query(goal: Goal) -> str:
    """The expert's first query: the instruction without its price clause."""
    return strip_price_clause(goal.instruction_text) or goal.name


_WORD = re.compile(r"[a-z0-9]+(?:['&.-][a-z0-9]+)*")


def _words(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def instruction_clause(goal: Goal) -> str:
    """The instruction up to its option and price clauses: the product and its attributes, as said.
    E.g. ``find me dermatologist tested makeup brush set`` for ``find me dermatologist tested makeup
    brush set with color: black, and price lower than 50.00 dollars``; the instruction's start, so a
    small model copies it from the start."""
    text = strip_price_clause(goal.instruction_text)
    if goal.goal_options:  # the option clause: " with name: value, and ..."
        first = next(iter(goal.goal_options))
        cut = text.rfind(f" with {first}:")
        text = text[:cut] if cut >= 0 else text
    return text.strip()


def product_phrase(goal: Goal) -> str:
    """The words that name the goal's product: the longest run of consecutive words of the
    instruction (its option and price clauses left out) that the goal product's title also holds
    as consecutive words, preferring a run in the title's head (before its first comma, where
    titles name the product; after it they list attributes), then the longer, then the earlier
    in the title. ``""`` when they share no word. E.g. ``find me dermatologist tested makeup
    brush set with color: black`` and ``Calina Botanical Collagen Makeup Brush Set, Dermatologist
    Tested - RN373`` give ``makeup brush set``."""
    said = _words(instruction_clause(goal))  # option values are no product name
    head = goal.name.split(",", 1)[0]
    title = _words(goal.name)
    n_head = len(_words(head))
    best: tuple[int, int, int] = (0, 0, 0)  # (in head, length, -start in title)
    phrase = ""
    for i in range(len(title)):
        for j in range(len(said)):
            k = 0
            while i + k < len(title) and j + k < len(said) and title[i + k] == said[j + k]:
                k += 1
            key = (int(i + k <= n_head), k, -i)
            if k and key > best:
                best, phrase = key, " ".join(title[i : i + k])
    return phrase


def expert_queries(goal: Goal, style: str = "instruction") -> list[str]:
    """The queries the expert tries on the search page, in order (it keeps the first whose hits
    hold a product that earns ``R = 1``, else the last): for ``style="instruction"`` the
    instruction (:func:`goal_query`) then the title; for ``"product"`` :func:`product_phrase`
    first, for ``"clause"`` :func:`instruction_clause` first. ``style`` is one of :data:`EXPERT_QUERIES`."""
    queries = [goal_query(goal), goal.name]
    first = {"product": product_phrase, "clause": instruction_clause}.get(style)
    phrase = first(goal) if first is not None else ""
    return [phrase, *queries] if phrase and phrase != queries[0] else queries


def best_options(product: Product, goal: Goal) -> dict[str, str]:
    """For every option of ``product``, the value a goal option asks for: an exact match first, else
    the first value the reward's rule accepts (exact for ``size``, token-set ratio above 85 otherwise:
    ``apple cinnamon`` passes for ``cinnamon``, but is not what was asked); groups with no matching
    value are left unchosen."""
    wanted = [normalize_color(v) for v in goal.goal_options.values()]
    chosen: dict[str, str] = {}
    if not wanted:
        return chosen
    for name, values in product.options.items():
        exact = [value for value in values if normalize_color(value) in wanted]
        if exact or name.lower() in EXACT_MATCH_OPTIONS:  # the value asked for, before one that only resembles it
            if exact:
                chosen[name] = exact[0]
            continue
        fuzzy = [v for v in values if any(token_set_ratio(w, normalize_color(v)) > FUZZY_THRESHOLD for w in wanted)]
        if fuzzy:
            chosen[name] = fuzzy[0]
    return chosen


def best_reward(product: Product, goal: Goal, nouns=title_nouns) -> tuple[float, dict[str, str]]:
    """The reward the expert can earn by buying ``product`` with :func:`best_options` (title nouns by ``nouns``)."""
    options = best_options(product, goal)
    return webshop_reward(product, goal, product.price, options, nouns=nouns)[0], options


def pick(results: list[int], shop, goal: Goal, target: int | None, nouns=title_nouns) -> int | None:
    """Position in ``results`` of the product to buy: the target when listed (and given), else the first
    product that earns ``R = 1``, else ``None``."""
    if target is not None and target in results:
        return results.index(target)
    for pos, i in enumerate(results):
        if best_reward(shop.product(i), goal, nouns)[0] >= 1.0:
            return pos
    return None


def options_to_click(product: Product, goal: Goal, current: Mapping[str, str]) -> list[str]:
    """The option values still to click on ``product``'s page."""
    return [v for k, v in best_options(product, goal).items() if current.get(k) != v]
