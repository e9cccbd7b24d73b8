"""Where ``TurnWebShopEnv``'s products and goals come from: a generated catalog or WebShop's files.

* :class:`ShopSource` – which shop an env plays in, checked by :func:`shop_source` from the env's
  catalog arguments; hashable, the key of the process-wide cache :data:`SHOPS`;
* :func:`shared_shop` – the shop of a source (a :class:`~.generator.catalog.GeneratedShop` or a
  :class:`~.loader.LoadedShop`), made once per process. Goal splits and weights: :mod:`.goals`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..core.args import whole_number
from ..core.cache import ProcessCache
from .generator.catalog import GeneratedShop

__all__ = ["SHOPS", "ShopSource", "shared_shop", "shop_source"]


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
        raise ValueError(f"human_goals must be True, False or None (human goals when the file exists), got {human_goals!r}.")
    n = None if num_products is None else whole_number("num_products", num_products, "1000")
    if data_path is None:
        n = 1000 if n is None else n
        if n < 10:
            raise ValueError(f"num_products must be at least 10 for a generated catalog (e.g. num_products=1000), got {n}.")
        if human_goals:
            raise ValueError("human_goals=True needs WebShop's files: pass data_path=... too (a generated catalog has synthetic goals).")
        return ShopSource("generated", n, seed)
    if not isinstance(data_path, (str, os.PathLike)):
        raise ValueError(f"data_path must be a path to WebShop's data/ folder or an items_shuffle*.json file, got {data_path!r}.")
    if n is not None and n < 1:
        raise ValueError(f"num_products must be at least 1 (or None for every product of the file), got {n}.")
    return ShopSource("files", n, seed, os.fspath(data_path), None if human_goals is None else bool(human_goals))


#: Shops by :class:`ShopSource`, made on first use and shared by every env of the process.
SHOPS: ProcessCache[Any] = ProcessCache("webshop shops", 16)


def shared_shop(source: ShopSource):
    """The process-wide shop of ``source``, made on first use and shared by every env."""
    return SHOPS.get(source, source.build)
