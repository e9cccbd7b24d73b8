"""The records of a shop: a product (WebShop's product dict, typed) and a goal.

Field names follow WebShop's loaded product (``web_agent_site/engine/engine.py``,
``load_products``) and goal (``goal.py``, ``get_synthetic_goals`` / ``get_human_goals``), so the
reward reads the same fields the original reads.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol, Sequence


@dataclass(frozen=True)
class Review:
    """One customer review: a title, a 1-5 star ``score`` and a ``body``."""

    title: str
    score: int
    body: str


@dataclass(frozen=True)
class Product:
    """A product as the pages and the reward see it.

    ``name`` is WebShop's raw ``name`` (its type reward parses it); ``title`` is ``Title`` (the
    same text, shown on pages). ``pricing`` is one price or a ``[low, high]`` range in dollars,
    ``price_tag`` its display (``"$12.99"`` or ``"$10.5 to $20.0"``) and ``price`` the price the
    reward compares with the goal's ``price_upper`` (for a range, a seeded uniform draw in it,
    as WebShop draws one). ``options`` maps a lower-case option name to its lower-case values.
    """

    asin: str
    name: str
    title: str
    category: str
    query: str
    product_category: str
    description: str
    bullet_points: tuple[str, ...]
    attributes: tuple[str, ...]
    pricing: tuple[float, ...]
    price_tag: str
    price: float
    options: dict[str, tuple[str, ...]] = field(default_factory=dict)
    rating: str = "N.A."
    reviews: tuple[Review, ...] = ()
    main_image: str = ""


@dataclass(frozen=True)
class Goal:
    """What the shopper is asked to buy (WebShop's goal dict, typed).

    ``attributes`` are the goal's attribute phrases, ``goal_options`` maps option names to the
    wanted values, and ``price_upper`` is the price ceiling in dollars (1,000,000 when the
    instruction names none). WebShop's human goals give only a list of option values: then
    the names are labels (``"option 1"``, ``"option 2"``...) and ``options_named`` is false,
    which changes how the original reward reads them (see :mod:`.reward`).
    """

    index: int
    asin: str
    instruction_text: str
    attributes: tuple[str, ...]
    goal_options: dict[str, str]
    price_upper: float
    query: str
    category: str
    product_category: str
    name: str
    options_named: bool = True


#: Goal index ranges of each split (WebShop's: test 0-499, eval 500-1499, train the rest).
GOAL_SPLITS: dict[str, tuple[int, int | None]] = {
    "test": (0, 500),
    "eval": (500, 1500),
    "train": (1500, None),
}


def split_range(split: str, num_goals: int) -> range:
    """The goal indices of ``split`` ("train", "eval", "test" or "all") among ``num_goals`` goals."""
    if split == "all":
        return range(num_goals)
    if split not in GOAL_SPLITS:
        raise ValueError(f"goal_split must be one of {sorted(GOAL_SPLITS) + ['all']}, got {split!r}.")
    start, stop = GOAL_SPLITS[split]
    stop = num_goals if stop is None else min(stop, num_goals)
    return range(min(start, num_goals), stop)


class Shop(Protocol):
    """What the env needs from a catalog: products by index, goals by index, index texts."""

    key: tuple
    num_products: int
    num_goals: int

    def product(self, index: int) -> Product: ...

    def index_of(self, asin: str) -> int | None: ...

    def goal(self, index: int) -> Goal: ...

    def index_texts(self) -> Sequence[str]: ...
