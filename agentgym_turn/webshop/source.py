"""Where ``TurnWebShopEnv``'s products and goals come from: a generated catalog or WebShop's files.

* :class:`ShopSource` – which shop an env plays in, checked by :func:`shop_source` from the env's
  catalog arguments; hashable, the key of the process-wide cache :data:`SHOPS`;
* :func:`shared_shop` – the shop of a source (a :class:`~.generator.catalog.GeneratedShop` or a
  :class:`~.loader.LoadedShop`), made once per process. Goal splits and weights: :mod:`.goals`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..core.args import source_arg, whole_number
from ..core.cache import ProcessCache
from .generator.catalog import GeneratedShop


@dataclass(frozen=True)
class ShopSource:
    """Which shop an env plays in: a generated catalog (``kind="generated"``) or WebShop's files
    (``kind="files"``, ``path``), with the catalog arguments that change it. Hashable: the key of
    the process-wide shop cache."""

    kind: str
    num_products: int | None
    seed: int
    path: str | None = None
    human_goals: bool | None = None

    def build(self):
        """Make the shop (slow: generate or read the catalog); envs share it through the cache."""
        if self.kind == "generated":
            return GeneratedShop(num_products=self.num_products, seed=self.seed)
        from .loader import LoadedShop  # a generated shop never needs the file reader (nor tqdm)

        return LoadedShop(self.path, num_products=self.num_products, human_goals=self.human_goals, seed=self.seed)


def shop_source(*, num_products=None, data_path=None, human_goals=None, catalog_seed=0) -> ShopSource:
    """The :class:`ShopSource` that ``TurnWebShop-v0``'s catalog arguments describe, checked.

    A generated shop without ``data_path`` (``num_products`` defaults to 1,000, at least 10), else
    WebShop's files at ``data_path`` (``num_products=None``: every product of the file).
    A malformed argument raises ``ValueError`` naming it and an accepted value.
    """
    seed = whole_number("catalog_seed", catalog_seed, "0")
    if human_goals is not None and not isinstance(human_goals, (bool, np.bool_)):
        raise ValueError(
            f"human_goals must be True, False or None (human goals when the file exists), got {human_goals!r}."
        )
    n = None if num_products is None else whole_number("num_products", num_products, "1000")
    if data_path is None:
        n = 1000 if n is None else n
        if n < 10:
            raise ValueError(
                f"num_products must be at least 10 for a generated catalog (e.g. num_products=1000), got {n}."
            )
        if human_goals:
            raise ValueError(
                "human_goals=True needs WebShop's files: pass data_path=... too (a generated catalog has synthetic goals)."
            )
        return ShopSource("generated", n, seed)
    if not isinstance(data_path, (str, os.PathLike)):
        raise ValueError(
            f"data_path must be a path to WebShop's data/ folder or an items_shuffle*.json file, got {data_path!r}."
        )
    if n is not None and n < 1:
        raise ValueError(f"num_products must be at least 1 (or None for every product of the file), got {n}.")
    return ShopSource("files", n, seed, os.fspath(data_path), None if human_goals is None else bool(human_goals))


#: Shops by :class:`ShopSource`, made on first use and shared by every env of the process.
SHOPS: ProcessCache[Any] = ProcessCache("webshop shops", 16)


def shared_shop(source: ShopSource):
    """The process-wide shop of ``source``, made on first use and shared by every env."""
    return SHOPS.get(source, source.build)


@dataclass(frozen=True)
class ShopTasks:
    """What a WebShop env plays: the shop (a generated catalog or WebShop's files) and the goals drawn in it.

    Everything that decides the tasks, and nothing else (pages, rewards and the expert never change them).
    The catalog arguments are checked when made (:func:`shop_source`); the goal arguments when an env
    draws from them (:class:`~.goals.GoalPool`).

    Attributes:
        num_products, data_path, human_goals, catalog_seed: The shop (:func:`shop_source`).
        goal_split: ``"train"`` (goals 1500+), ``"eval"`` (500-1499), ``"test"`` (0-499) or ``"all"``.
        content_split: ``None``, ``"train"``, ``"validation"`` or ``"test"``: the goals of ``goal_split``
            whose instruction falls in that split by its text.
        filter_goals, limit_goals: WebShop's goal options (:func:`~.goals.select_goals`).
        goal_weighting: ``"uniform"`` or ``"weighted"`` (WebShop's server: by attribute rarity).
    """

    num_products: int | None = None
    data_path: str | None = None
    human_goals: bool | None = None
    catalog_seed: int = 0
    goal_split: str = "train"
    content_split: str | None = None
    filter_goals: Any = None
    limit_goals: int = -1
    goal_weighting: str = "uniform"
    #: The shop these tasks play in (the key of :data:`SHOPS`).
    shop: ShopSource = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(
            self,
            "shop",
            shop_source(
                num_products=self.num_products,
                data_path=self.data_path,
                human_goals=self.human_goals,
                catalog_seed=self.catalog_seed,
            ),
        )

    def goals(self, shop: Any):
        """The :class:`~.goals.GoalPool` of these tasks in ``shop`` (this source's shop, made)."""
        from .goals import GoalPool

        return GoalPool(
            shop,
            self.goal_split,
            filter_goals=self.filter_goals,
            limit_goals=self.limit_goals,
            weighting=self.goal_weighting,
            content_split=self.content_split,
        )


#: The keywords of the WebShop envs (and ``gymnasium.make``) that build their :class:`ShopTasks`, with their defaults:
#: ``source=`` replaces them.
TASK_KEYWORDS: dict[str, Any] = {name: f.default for name, f in ShopTasks.__dataclass_fields__.items() if f.init}


def split_task_keywords(kwargs: dict[str, Any]) -> dict[str, Any]:
    """Remove the :data:`TASK_KEYWORDS` from ``kwargs`` (an env's keyword arguments) and return them."""
    return {name: kwargs.pop(name) for name in list(kwargs) if name in TASK_KEYWORDS}


def shop_tasks(source: Any, keywords: dict[str, Any], env: str) -> ShopTasks:
    """The env's tasks: ``source`` as given, else one built from the task keywords in ``keywords``. Giving both is an
    error naming the keywords."""
    return source_arg(source, keywords, defaults=TASK_KEYWORDS, build=ShopTasks, kinds=ShopTasks, env=env)
