"""The shopping dialog's customer side: what a goal's facts are, what a message discloses, and the
scripted customer who answers questions about them.

A goal (:class:`agentgym_turn.webshop.Goal`) holds the facts an assistant must learn to buy well:
the product (the instruction's description), its attributes, each option value and the price
limit. A fact is *disclosed* once its text appears in something the customer said (any customer:
scripted, a person or a model), so the expert assistant asks for exactly what it still lacks.

The scripted customer reads a question by keywords (``price``, ``color``, ``size``, ``options``,
``features``, ``what kind of product``...) and answers truthfully from the goal; a question with
none of those words gets a vague answer (the category again). ``terseness="terse"`` answers one
item of a list per question (one option, one attribute), so the assistant has to ask again.
All functions here are pure and linear in the length of the question.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterable

from ..webshop.expert import strip_price_clause

#: How much the scripted customer says per answer: every asked item, or one item of a list.
TERSENESS = ("full", "terse")
#: A goal without a price clause carries this ``price_upper`` (WebShop's "no limit").
NO_PRICE_LIMIT = 1_000_000.0

_WORD = re.compile(r"[a-z0-9]+")
_OPENERS = (
    "i am looking for",
    "i'm looking for",
    "im looking for",
    "i want to buy",
    "i would like",
    "i'd like",
    "i need",
    "i want",
    "find me",
    "get me",
    "buy me",
    "show me",
    "search for",
    "looking for",
)
_ARTICLES = ("a ", "an ", "some ", "the ")

# Keywords of each question topic (whole lower-case words of the question).
_PRICE_WORDS = frozenset(
    {
        "price",
        "prices",
        "budget",
        "cost",
        "costs",
        "spend",
        "expensive",
        "cheap",
        "afford",
        "dollar",
        "dollars",
        "money",
        "limit",
        "much",
    }
)
_PRODUCT_NEEDS = frozenset({"product", "item", "kind", "type", "describe", "exactly", "looking"})
_ATTRIBUTE_WORDS = frozenset(
    {
        "attribute",
        "attributes",
        "feature",
        "features",
        "requirement",
        "requirements",
        "require",
        "property",
        "properties",
        "must",
        "special",
        "qualities",
        "quality",
        "characteristics",
    }
)
_OPTION_WORDS = frozenset(
    {"option", "options", "variant", "variants", "preference", "preferences", "choices", "choice"}
)
#: Option names people ask about; a question naming one the goal lacks gets "no preference".
COMMON_OPTION_NAMES = frozenset(
    {
        "color",
        "colour",
        "size",
        "style",
        "flavor",
        "flavour",
        "scent",
        "pattern",
        "material",
        "count",
        "length",
        "width",
        "capacity",
        "model",
        "fit",
        "design",
    }
)
_SYNONYMS = {"colour": "color", "flavour": "flavor"}


@dataclass(frozen=True)
class GoalFacts:
    """What the customer knows, as text: ``product`` (a description, never empty), ``category``
    (the vague request), ``attributes``, ``options`` (name -> value, in the goal's order) and
    ``price_limit`` in dollars (``None``: no limit)."""

    product: str
    category: str
    attributes: tuple[str, ...]
    options: tuple[tuple[str, str], ...]
    price_limit: float | None

    def fact_names(self) -> list[str]:
        """The facts an assistant must learn: ``product``, ``attribute:<a>``, ``option:<name>``, ``price``."""
        names = ["product", *(f"attribute:{a}" for a in self.attributes), *(f"option:{n}" for n, _ in self.options)]
        return names + (["price"] if self.price_limit is not None else [])


def _description(instruction: str) -> str:
    """The instruction without its opener, price clause and option clause."""
    text = strip_price_clause(instruction.strip().lower())
    for opener in _OPENERS:
        if text.startswith(opener + " "):
            text = text[len(opener) + 1 :]
            break
    for article in _ARTICLES:
        if text.startswith(article):
            text = text[len(article) :]
            break
    cut = text.find(" with ")
    while cut >= 0:  # the option clause starts at "with <name>:"; "with" inside a description stays
        if ":" in text[cut + 6 : cut + 40].split(",")[0]:
            text = text[:cut]
            break
        cut = text.find(" with ", cut + 1)
    return text.strip(" ,.")


def goal_facts(goal) -> GoalFacts:
    """The facts of a WebShop goal (an :class:`agentgym_turn.webshop.Goal`)."""
    category = (goal.category or goal.query or "something").strip().lower()
    product = _description(goal.instruction_text) or (goal.query or goal.name or category).lower()
    price = float(goal.price_upper)
    return GoalFacts(
        product=product,
        category=category,
        attributes=tuple(a.lower() for a in goal.attributes),
        options=tuple((str(k).lower(), str(v).lower()) for k, v in goal.goal_options.items()),
        price_limit=None if price >= NO_PRICE_LIMIT else price,
    )


def opening_request(facts: GoalFacts) -> str:
    """The customer's first, vague message: only the category."""
    return f"Hi! I'm looking for something in {facts.category}. Can you help me find it?"


def _price_text(price: float) -> str:
    return f"{price:.2f} dollars"


def _fact_text(facts: GoalFacts, name: str) -> str:
    """The text whose presence in a customer message discloses fact ``name``."""
    if name == "product":
        return facts.product
    if name == "price":
        return _price_text(facts.price_limit or 0.0)
    kind, _, key = name.partition(":")
    if kind == "attribute":
        return key
    return dict(facts.options)[key]


def disclosed(facts: GoalFacts, customer_messages: Iterable[str]) -> list[str]:
    """The facts (names as in :meth:`GoalFacts.fact_names`) whose text some customer message contains."""
    said = "\n".join(m.lower() for m in customer_messages)
    # whole words only: size "13" is not disclosed by "130.00 dollars"
    return [
        name
        for name in facts.fact_names()
        if re.search(rf"(?<![a-z0-9]){re.escape(_fact_text(facts, name))}(?![a-z0-9])", said)
    ]


def question_topics(question: str, facts: GoalFacts) -> list[str]:
    """The topics a question asks about, in a fixed order: ``product``, ``attributes``,
    ``option:<name>`` (named options; ``options`` when none is named but options are asked
    about), ``no-option:<name>`` (a common option name the goal lacks) and ``price``."""
    words = set(_WORD.findall(question.lower()))
    words |= {_SYNONYMS[w] for w in words if w in _SYNONYMS}
    topics: list[str] = []
    if words & _PRODUCT_NEEDS or {"what", "want"} <= words or {"what", "need"} <= words:
        topics.append("product")
    if words & _ATTRIBUTE_WORDS:
        topics.append("attributes")
    named = [n for n, _ in facts.options if set(_WORD.findall(n)) & words]
    topics += [f"option:{n}" for n in named]
    goal_words = {w for n, _ in facts.options for w in _WORD.findall(n)}
    topics += [f"no-option:{w}" for w in sorted(words & COMMON_OPTION_NAMES - goal_words)]
    if not named and words & _OPTION_WORDS:
        topics.append("options")
    if words & _PRICE_WORDS:
        topics.append("price")
    return topics


def customer_answer(question: str, facts: GoalFacts, *, terseness: str = "full", already: Iterable[str] = ()) -> str:
    """The scripted customer's truthful answer to ``question``.

    ``terseness="terse"`` gives one item of a list (the first one not in ``already``, the
    disclosed fact names) and only the first topic asked; ``"full"`` answers every topic asked in
    full. A question with no known topic gets a vague answer that names only the category.
    """
    if terseness not in TERSENESS:
        raise ValueError(f"terseness must be one of {TERSENESS}, got {terseness!r}.")
    topics = question_topics(question, facts)
    if not topics:
        return f"Just something nice in {facts.category}. Could you ask me something more specific?"
    known = set(already)
    terse = terseness == "terse"
    if terse:
        topics = topics[:1]
    parts: list[str] = []
    for topic in topics:
        if topic == "product":
            parts.append(f"I want {facts.product}.")
        elif topic == "attributes":
            items = list(facts.attributes)
            if terse:
                items = [a for a in items if f"attribute:{a}" not in known][:1] or items[:1]
            parts.append(f"It should be {' and '.join(items)}." if items else "Nothing special about its features.")
        elif topic == "options":
            items = list(facts.options)
            if terse:
                items = [(n, v) for n, v in items if f"option:{n}" not in known][:1] or items[:1]
            parts.append(
                "I'd like " + ", and ".join(f"{n}: {v}" for n, v in items) + "."
                if items
                else "I have no preference on options."
            )
        elif topic.startswith("option:"):
            name = topic.partition(":")[2]
            parts.append(f"{name}: {dict(facts.options)[name]}.")
        elif topic.startswith("no-option:"):
            parts.append(f"No preference on {topic.partition(':')[2]}.")
        elif topic == "price":
            limit = facts.price_limit
            parts.append(
                f"My budget is lower than {_price_text(limit)}." if limit is not None else "Any price is fine."
            )
    return " ".join(parts)
