"""Which goals an env draws from: WebShop's ``filter_goals``, ``limit_goals`` and goal weights.

WebShop's ``SimServer`` (``web_agent_site/envs/web_agent_text_env.py``) shuffles its goal list
with ``random.seed(233)``, then

1. ``filter_goals(i, goal)``: keeps the goals for which the function is true (``i`` is the
   goal's position in the shuffled list, ``goal`` the goal record);
2. ``limit_goals=N`` (``-1``: no limit): keeps ``N`` distinct goals drawn one by one with
   probability proportional to their weight (rejecting repeats), from the global ``random``
   stream that the seed-233 shuffle left behind, through ``utils.random_idx``;
3. without a goal index it draws each session's goal by the same weights.

A goal's weight (``goal.py``): 1 for a human goal; for a synthetic goal the mean over its
attributes of ``1 / (how many synthetic goals name that attribute)``, so goals with rare
attributes come up more often.

``random_idx`` bisects the cumulative weights ``[0, w0, w0 + w1, ...]`` and returns the
insertion point itself, capped at ``n - 1``: position 0 is (almost) never drawn, position
``i >= 1`` is drawn with weight ``w[i - 1]``, and the last with ``w[n - 2] + w[n - 1]``.
:func:`draw_limited` keeps that rule and WebShop's random stream, so on the same goal list it
keeps the very goals WebShop keeps. :class:`GoalPool` draws episodes from ``self.np_random``
(our determinism rule) and by the weights as written (``goal i`` with ``w[i]``).

The splits (test: positions 0-499, eval: 500-1499, train: the rest) apply to positions in the
list that filtering and limiting leave, as WebShop's baselines index ``server.goals``.
"""

from __future__ import annotations

import bisect
import itertools
import random
from collections import Counter
from typing import Any, Callable, Sequence

import numpy as np
from tqdm.auto import tqdm

from ..core.args import is_int
from ..core.cache import ProcessCache
from ..core.splits import check_content_split
from ..core.splits import content_split as content_split_of
from .product import Goal, split_range

#: How :class:`GoalPool` draws an episode's goal: uniformly (WebShop's baselines) or by weight (its server).
GOAL_WEIGHTINGS = ("uniform", "weighted")
_SHUFFLE_SEED = 233


def goal_record(goal: Goal, weight: float = 1.0) -> dict[str, Any]:
    """The goal as WebShop's dict (``asin``, ``category``, ``query``, ``name``, ``product_category``,
    ``instruction_text``, ``attributes``, ``price_upper``, ``goal_options``, ``weight``), the
    argument a ``filter_goals`` function written for WebShop reads."""
    options: Any = dict(goal.goal_options) if goal.options_named else list(goal.goal_options.values())
    return {
        "asin": goal.asin,
        "category": goal.category,
        "query": goal.query,
        "name": goal.name,
        "product_category": goal.product_category,
        "instruction_text": goal.instruction_text,
        "attributes": list(goal.attributes),
        "price_upper": goal.price_upper,
        "goal_options": options,
        "weight": float(weight),
    }


def rarity_weights(attribute_lists: Sequence[Sequence[str]]) -> np.ndarray:
    """WebShop's synthetic-goal weights: for each goal, the mean of ``1 / count(attribute)`` over
    its attributes, counts taken over all the goals given (a goal without attributes weighs 0)."""
    counts = Counter(itertools.chain.from_iterable(attribute_lists))
    return np.array([sum(1.0 / counts[a] for a in attrs) / len(attrs) if attrs else 0.0 for attrs in attribute_lists])


#: Goal weights by ``shop.key``, computed once per shop and process.
GOAL_WEIGHTS: ProcessCache[np.ndarray] = ProcessCache("webshop goal weights", 16)
#: The goals of a content split per ``(shop key, split, limit_goals, content split)``: every env of a shop shares them.
SPLIT_GOALS: ProcessCache[tuple[int, ...]] = ProcessCache("webshop content-split goals", 64)


def goal_weights(shop: Any) -> np.ndarray:
    """Every goal's weight, shape ``(num_goals,)``: 1 for human goals (a loaded shop with
    ``human_goals``), else :func:`rarity_weights` over all the shop's goals. Computed once per
    shop and process (it reads every goal: a progress bar shows for large shops)."""

    def build() -> np.ndarray:
        if getattr(shop, "human_goals", False):
            return np.ones(shop.num_goals)
        goals = tqdm(
            range(shop.num_goals),
            desc="WebShop goal weights",
            unit="goal",
            disable=shop.num_goals < 50_000,
            mininterval=2.0,
        )
        return rarity_weights([shop.goal(i).attributes for i in goals])

    return GOAL_WEIGHTS.get(shop.key, build)


def _webshop_random_after_shuffle(num_goals: int) -> random.Random:
    """The state of WebShop's global ``random`` right after ``random.seed(233); random.shuffle(goals)``."""
    rng = random.Random(_SHUFFLE_SEED)
    rng.shuffle([None] * num_goals)  # shuffle's draws depend on the length only
    return rng


def draw_limited(weights: Sequence[float], limit: int, rng: random.Random) -> list[int]:
    """Positions of ``limit`` distinct goals drawn as WebShop's ``limit_goals`` draws them
    (``random_idx`` on the cumulative ``weights``, repeats rejected), in drawing order."""
    cum = [0.0, *itertools.accumulate(float(w) for w in weights)]
    n = len(weights)
    drawable = len({min(p, n - 1) for p in range(1, n + 1) if weights[p - 1] > 0})  # bisect gives p iff w[p-1] > 0
    if limit > drawable:
        raise ValueError(
            f"limit_goals={limit} asks for more goals than WebShop's draw can reach among {len(weights)} (at most {drawable})."
        )
    picked: list[int] = []
    seen: set[int] = set()
    while len(picked) < limit:
        idx = min(bisect.bisect(cum, rng.uniform(0, cum[-1])), len(cum) - 2)
        if idx not in seen:
            seen.add(idx)
            picked.append(idx)
    return picked


def select_goals(
    shop: Any,
    *,
    filter_goals: Callable[[int, dict[str, Any]], bool] | None = None,
    limit_goals: int = -1,
) -> Sequence[int]:
    """The shop's goal indices that WebShop's ``filter_goals`` / ``limit_goals`` keep, in order.

    ``shop`` has ``key``, ``num_goals`` and ``goal(i)``; its goal order is WebShop's shuffled
    order. ``filter_goals(i, record)`` gets the position and :func:`goal_record`; ``limit_goals``
    is ``-1`` (no limit) or a positive count. Raises ``ValueError`` naming the parameter when an
    argument is malformed or nothing is left.
    """
    if filter_goals is not None and not callable(filter_goals):
        raise ValueError(
            f"filter_goals must be a function (index, goal dict) -> bool, got {type(filter_goals).__name__}."
        )
    if not is_int(limit_goals, numpy=True) or (limit_goals != -1 and limit_goals < 1):
        raise ValueError(f"limit_goals must be -1 (no limit) or a positive int, got {limit_goals!r}.")
    kept: Sequence[int] = range(shop.num_goals)
    if filter_goals is None and (limit_goals == -1 or limit_goals >= shop.num_goals):
        return kept
    weights = goal_weights(shop)
    if filter_goals is not None:
        kept = [i for i in kept if filter_goals(i, goal_record(shop.goal(i), weights[i]))]
        if not kept:
            raise ValueError(f"filter_goals kept none of the {shop.num_goals} goals; loosen the filter.")
    if limit_goals != -1 and limit_goals < len(kept):
        rng = _webshop_random_after_shuffle(shop.num_goals)
        kept = [kept[p] for p in draw_limited([weights[i] for i in kept], int(limit_goals), rng)]
    return kept


class GoalPool:
    """The goals one env draws from: a split of the selected goals, and how to draw one.

    Args:
        shop: the catalog (``key``, ``num_goals``, ``goal(i)``).
        split: ``"train"``, ``"eval"``, ``"test"`` or ``"all"``: positions in the selected list.
        filter_goals, limit_goals: WebShop's options (:func:`select_goals`).
        weighting: ``"uniform"`` (default, as WebShop's baselines draw) or ``"weighted"`` (by
            :func:`goal_weights`, as WebShop's server draws a session's goal).
        content_split: ``None``, or ``"train"``, ``"validation"`` or ``"test"``: keep only the goals
            whose instruction falls in that split by content (:mod:`agentgym_turn.core.splits`), so
            the same instruction lands in the same split in every catalog.
    """

    def __init__(
        self,
        shop: Any,
        split: str = "train",
        *,
        filter_goals: Callable[[int, dict[str, Any]], bool] | None = None,
        limit_goals: int = -1,
        weighting: str = "uniform",
        content_split: str | None = None,
    ):
        check_content_split(content_split, "content_split")
        if weighting not in GOAL_WEIGHTINGS:
            raise ValueError(f"goal_weighting must be one of {GOAL_WEIGHTINGS}, got {weighting!r}.")
        selected = select_goals(shop, filter_goals=filter_goals, limit_goals=limit_goals)
        positions = split_range(split, len(selected))
        self.indices: Sequence[int] = selected[positions.start : positions.stop]
        if content_split is not None:
            chosen = self.indices

            def in_split() -> tuple[int, ...]:
                return tuple(i for i in chosen if content_split_of(shop.goal(i).instruction_text) == content_split)

            # every env of a shop would read the same instructions again; a filter function may not be pure
            key = (shop.key, split, limit_goals, content_split)
            self.indices = in_split() if filter_goals is not None else SPLIT_GOALS.get(key, in_split)
        if len(self.indices) == 0:
            raise ValueError(
                f"goal_split={split!r}"
                + ("" if content_split is None else f" with content_split={content_split!r}")
                + f" is empty: {len(selected)} goals are selected (test is 0-499, eval 500-1499, train 1500+)."
            )
        self.weighting = weighting
        self._cumulative: np.ndarray | None = None
        if weighting == "weighted":
            self._cumulative = np.cumsum(goal_weights(shop)[np.asarray(self.indices)])
            if not self._cumulative[-1] > 0:
                raise ValueError("goal_weighting='weighted': every goal of this split weighs 0.")

    def __len__(self) -> int:
        return len(self.indices)

    def draw(self, rng: np.random.Generator) -> int:
        """A goal index of the shop, drawn from ``rng`` (uniformly, or by weight)."""
        if self._cumulative is None:
            return int(self.indices[int(rng.integers(0, len(self.indices)))])
        pos = int(np.searchsorted(self._cumulative, rng.random() * self._cumulative[-1], side="right"))
        return int(self.indices[min(pos, len(self.indices) - 1)])
