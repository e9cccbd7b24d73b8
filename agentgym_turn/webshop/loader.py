"""Load WebShop's own data files, so users with the real data run the real benchmark.

Reads the files of ``princeton-nlp/WebShop``'s ``data/`` folder with the field names and
semantics of ``web_agent_site/engine/engine.py`` (``load_products``) and ``goal.py``:

* ``items_shuffle*.json``: a list of products (``asin``, ``name``, ``category``, ``query``,
  ``product_category``, ``full_description``, ``small_description``, ``pricing`` as
  ``"$12.99"`` or ``"$10.00 - $20.00"``, ``customization_options`` as
  ``{name: [{"value": ..., "image": ...}]}``, ``images``);
* ``items_ins_v2*.json``: ``{asin: {"attributes": [...], "instruction": ...,
  "instruction_attributes": [...]}}`` (synthetic goals);
* ``items_human_ins.json``: ``{asin: [{"instruction": ..., "instruction_attributes": [...],
  "instruction_options": [...]}, ...]}`` (human goals);
* ``reviews.json`` (optional): ``[{"asin", "reviews": [{"title", "score"|"stars",
  "review"|"body"}], "average_rating"}]``.

As in WebShop: the first ``num_products`` entries are kept, ASINs ``"nan"`` or longer than 10
characters and repeated ASINs are skipped, option names and values are lower-cased with ``/``
written `` | ``, a product without attributes gets ``["DUMMY_ATTR"]``, synthetic goals are every
option combination of every product with an instruction, and the goal list is shuffled with
``random.seed(233)``, whose order fixes the splits (test 0-499, eval 500-1499, train the rest).
WebShop draws the price of a price range and every goal's ``price_upper`` from Python's
unseeded global RNG, so they change from run to run; we draw them from ``random.Random(seed)``.
Malformed entries never raise: missing text becomes ``""``, an unreadable price $100, and a
blank option value is dropped (``click[]`` could never select it).

Bounds (a data file is untrusted input): files are read through
:mod:`agentgym_turn.core.files` (no FIFOs, devices or directories; at most ``max_file_bytes``,
default 8 GiB, above WebShop's largest file; invalid JSON or UTF-8 is reported as ``FILE:LINE``).
A product whose option groups multiply to more than ``max_goal_combinations`` (default 10,000)
synthetic goals gets that many combinations drawn at random (seeded by ``seed`` and the ASIN)
instead of all of them, with a warning naming the file, the product and the limit; more than
``max_goals`` goals in all (default 5,000,000) is an error naming the file and the fix. A review
score that is not a finite number (``"inf"``, ``NaN``, ``"great"``) is shown as 0 stars; finite
scores are clamped to 0-5. A product whose ASIN or option value is a page button's name
(``Next >``, ``< Prev``, ``buy now``...) loads as WebShop loads it; the env keeps it from acting
as that button (its link is shown as ``buy now (product)``; a fixed button wins an option's name).
"""

from __future__ import annotations

import glob
import itertools
import json
import math
import os
import random
import re
import sys
import warnings
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any

from tqdm.auto import tqdm

from ..core.files import DataFileError, check_data_path, read_data_bytes
from .generator.catalog import NO_PRICE_UPPER
from .product import Goal, Product, Review
from .generator.vocab import PRICE_RANGE

_SHUFFLE_SEED = 233
#: Default byte limit of one data file (WebShop's full ``items_shuffle.json`` is about 5 GB).
MAX_FILE_BYTES = 8 << 30
#: Default limit of synthetic goals (option combinations) per product.
MAX_GOAL_COMBINATIONS = 10_000
#: Default limit of goals in all.
MAX_GOALS = 5_000_000
_PROGRESS_FROM = 50_000  # items: below this a load is quick and shows no progress bar


def _text_or_empty(x: Any) -> str:
    """``x`` as text, ``""`` for a missing (None) field of WebShop's json."""
    return "" if x is None else str(x)


def parse_pricing(pricing: Any) -> tuple[tuple[float, ...], str]:
    """WebShop's price parsing: ``("$10.00 - $20.00") -> ((10.0, 20.0), "$10.0 to $20.0")``."""
    values: list[float] = []
    if isinstance(pricing, str) and pricing:
        for piece in pricing.split("$")[1:]:
            digits = re.sub(r"[^\d.]", "", piece)
            try:
                values.append(float(Decimal(digits)))
            except (InvalidOperation, ValueError):
                continue
    values = [v for v in values if v == v and v not in (float("inf"),)]
    if not values:
        return (100.0,), "$100.0"
    if len(values) == 1:
        return (values[0],), f"${values[0]}"
    return (values[0], values[1]), f"${values[0]} to ${values[1]}"


def item_record(product: Product) -> dict[str, Any]:
    """``product`` as one entry of WebShop's ``items_shuffle*.json`` (the inverse of loading it),
    so generated catalogs can be written in WebShop's format for its own code to read."""
    low, *high = product.pricing
    price = f"${low:.2f}" + (f" - ${high[0]:.2f}" if high else "")
    return {
        "asin": product.asin,
        "name": product.name,
        "category": product.category,
        "query": product.query,
        "product_category": product.product_category,
        "full_description": product.description,
        "small_description": list(product.bullet_points),
        "pricing": price,
        "customization_options": {
            k: [{"value": v, "image": None} for v in vals] for k, vals in product.options.items()
        },
        "images": [""],
    }


def review_score(value: Any) -> int:
    """A review's stars as shown: the number's integer part clamped to 0-5; 0 for anything
    that is not a finite number (``"inf"``, ``NaN``, ``None``, ``"great"``)."""
    try:
        x = float(value)
    except (TypeError, ValueError, OverflowError):
        return 0
    if not math.isfinite(x):
        return 0
    return max(0, min(5, int(x)))


def _read_json(path: str | None, max_bytes: int, what: str) -> Any:
    """The JSON value of ``path`` (``None`` for no path), read within ``max_bytes``."""
    if path is None:
        return None
    p = check_data_path(path, what=what)
    if p.stat().st_size > 50_000_000:  # a multi-second parse: say so
        print(f"Reading {p} ({p.stat().st_size / 1e6:,.0f} MB)...", file=sys.stderr, flush=True)
    raw = read_data_bytes(p, max_bytes=max_bytes, what=what)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as err:
        line = raw.count(b"\n", 0, err.start) + 1
        raise DataFileError(f"{p}:{line}: not valid UTF-8; convert the file to UTF-8.") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as err:
        raise DataFileError(
            f"{p}:{err.lineno}: not valid JSON ({err.msg}, column {err.colno}); fix or re-download the file."
        ) from None
    except RecursionError:
        raise DataFileError(f"{p}: JSON nested too deeply to read; this is not a WebShop data file.") from None
    except ValueError as err:  # e.g. an integer past Python's 4,300-digit conversion limit
        raise DataFileError(f"{p}: a JSON value cannot be read ({err}); this is not a WebShop data file.") from None


def _combinations(groups: list[tuple[str, ...]], limit: int, rng: random.Random) -> tuple[list[tuple[str, ...]], int]:
    """The option combinations of ``groups`` in ``itertools.product`` order, or ``limit`` of
    them drawn without replacement (kept in that order) when there are more; and their total."""
    total = math.prod(len(g) for g in groups)
    if total <= limit:
        return list(itertools.product(*groups)), total
    picked = sorted(rng.sample(range(total), limit))  # a range is sampled without being built
    out = []
    for k in picked:
        combo = []
        for g in reversed(groups):  # mixed radix: the last group varies fastest, as in itertools.product
            k, r = divmod(k, len(g))
            combo.append(g[r])
        out.append(tuple(reversed(combo)))
    return out, total


def find_data_files(data_path: str | os.PathLike) -> dict[str, str | None]:
    """Locate ``products``, ``attributes``, ``human`` and ``reviews`` files for ``data_path``.

    ``data_path`` is WebShop's ``data/`` folder or one ``items_shuffle*.json`` file in it. In a
    folder with several product files, ``items_shuffle.json`` (the full catalog) is used; the
    attribute file with the same suffix (``items_ins_v2_1000.json`` for
    ``items_shuffle_1000.json``) is preferred.
    """
    path = Path(data_path)
    if path.exists() and not path.is_dir():
        folder, products = path.parent, str(check_data_path(path, what="WebShop products file"))
    elif path.is_dir():
        folder = path
        found = sorted(glob.glob(str(path / "items_shuffle*.json")))
        if not found:
            raise FileNotFoundError(
                f"No items_shuffle*.json in {path}; pass WebShop's data/ folder or a products file."
            )
        full = path / "items_shuffle.json"
        products = str(full) if full.exists() else found[0]
    else:
        raise FileNotFoundError(f"data_path {str(data_path)!r} does not exist.")
    suffix = Path(products).stem.removeprefix("items_shuffle")
    attributes = None
    for name in (f"items_ins_v2{suffix}.json", "items_ins_v2.json"):
        if (folder / name).exists():
            attributes = str(folder / name)
            break
    else:
        others = sorted(glob.glob(str(folder / "items_ins_v2*.json")))
        attributes = others[0] if others else None
    human = folder / "items_human_ins.json"
    reviews = folder / "reviews.json"
    return {
        "products": products,
        "attributes": attributes,
        "human": str(human) if human.exists() else None,
        "reviews": str(reviews) if reviews.exists() else None,
    }


class LoadedShop:
    """A shop read from WebShop's files (see the module docstring).

    Args:
        data_path: WebShop's ``data/`` folder, or one ``items_shuffle*.json`` file.
        num_products: Keep the first ``num_products`` entries (``None``: all).
        human_goals: Use ``items_human_ins.json`` goals (``True``), synthetic goals from
            ``items_ins_v2*.json`` (``False``), or the human ones when that file exists (``None``).
        seed: Seed of the price draws (see the module docstring).
        max_file_bytes: Refuse a data file with more bytes than this.
        max_goal_combinations: Synthetic goals per product at most (a random sample beyond).
        max_goals: Goals in all at most (an error beyond).
    """

    def __init__(
        self,
        data_path: str | os.PathLike,
        num_products: int | None = None,
        human_goals: bool | None = None,
        seed: int = 0,
        *,
        max_file_bytes: int = MAX_FILE_BYTES,
        max_goal_combinations: int = MAX_GOAL_COMBINATIONS,
        max_goals: int = MAX_GOALS,
    ):
        self.max_goal_combinations, self.max_goals = int(max_goal_combinations), int(max_goals)
        files = find_data_files(data_path)
        self.files = files
        if human_goals is None:
            human_goals = files["human"] is not None
        if human_goals and files["human"] is None:
            raise FileNotFoundError(f"human_goals=True needs items_human_ins.json beside {files['products']}.")
        self.human_goals = bool(human_goals)
        self.seed = int(seed)
        self.key = ("files", os.path.abspath(files["products"]), num_products, self.human_goals, self.seed)
        raw = _read_json(files["products"], max_file_bytes, "WebShop products file")
        if not isinstance(raw, list):
            raise DataFileError(
                f"{files['products']}: must hold a JSON list of products (WebShop's items_shuffle format)."
            )
        if num_products is not None:
            raw = raw[: int(num_products)]
        attributes = _read_json(files["attributes"], max_file_bytes, "WebShop attributes file") or {}
        human = (
            _read_json(files["human"], max_file_bytes, "WebShop human instructions file") if self.human_goals else None
        )
        reviews: dict[str, tuple[list, Any]] = {}
        review_rows = _read_json(files["reviews"], max_file_bytes, "WebShop reviews file") or []
        for r in review_rows if isinstance(review_rows, list) else []:
            if isinstance(r, dict) and "asin" in r:
                reviews[_text_or_empty(r["asin"])] = (r.get("reviews") or [], r.get("average_rating", "N.A."))
        rng = random.Random(self.seed)
        self._products: list[Product] = []
        self._index: dict[str, int] = {}
        self._instructions: list[dict | list | None] = []
        for p in tqdm(raw, desc="WebShop products", unit="product", disable=len(raw) < _PROGRESS_FROM, mininterval=2.0):
            if not isinstance(p, dict):
                continue
            asin = _text_or_empty(p.get("asin")).strip()
            if not asin or asin == "nan" or len(asin) > 10 or asin in self._index:
                continue
            product = self._product(p, asin, attributes, reviews, rng)
            self._index[asin] = len(self._products)
            self._products.append(product)
            if self.human_goals:
                self._instructions.append(human.get(asin) if isinstance(human, dict) else None)
            else:
                self._instructions.append(attributes.get(asin) if isinstance(attributes, dict) else None)
        if not self._products:
            raise DataFileError(
                f"{files['products']}: holds no usable product (each needs an 'asin' of at most 10 characters)."
            )
        self.num_products = len(self._products)
        self._goals = self._make_goals(random.Random(self.seed + 1))
        self.num_goals = len(self._goals)
        if self.num_goals == 0:
            raise ValueError(f"No goals: no product of {files['products']} has an instruction.")

    @staticmethod
    def _product(p: dict, asin: str, attributes: Any, reviews: dict, rng: random.Random) -> Product:
        pricing, price_tag = parse_pricing(p.get("pricing"))
        price = pricing[0] if len(pricing) == 1 else rng.uniform(*pricing[:2])
        options: dict[str, tuple[str, ...]] = {}
        custom = p.get("customization_options")
        if isinstance(custom, dict):
            for name, contents in custom.items():
                if not isinstance(contents, list):
                    continue
                values = []
                for c in contents:
                    value = c.get("value") if isinstance(c, dict) else None
                    text = _text_or_empty(value).strip().replace("/", " | ").lower() if value is not None else ""
                    if text:  # a blank value would be a button nobody can click: click[] is empty
                        values.append(text)
                options[_text_or_empty(name).lower()] = tuple(values)
        info = attributes.get(asin) if isinstance(attributes, dict) else None
        attrs = info.get("attributes") if isinstance(info, dict) else None
        attrs = tuple(_text_or_empty(a) for a in attrs) if isinstance(attrs, list) and attrs else ("DUMMY_ATTR",)
        small = p.get("small_description")
        bullets = tuple(_text_or_empty(b) for b in (small if isinstance(small, list) else [small]) if b is not None)
        found_reviews, rating = reviews.get(asin, ([], "N.A."))
        review_list = []
        for r in found_reviews if isinstance(found_reviews, list) else []:
            if not isinstance(r, dict):
                continue
            score = review_score(r.get("score", r.get("stars", 0)))
            review_list.append(
                Review(_text_or_empty(r.get("title")), score, _text_or_empty(r.get("review", r.get("body"))))
            )
        images = p.get("images")
        name = _text_or_empty(p.get("name"))
        return Product(
            asin=asin,
            name=name,
            title=name,
            category=_text_or_empty(p.get("category")),
            query=_text_or_empty(p.get("query")).lower().strip(),
            product_category=_text_or_empty(p.get("product_category")),
            description=_text_or_empty(p.get("full_description")),
            bullet_points=bullets,
            attributes=attrs,
            pricing=pricing,
            price_tag=price_tag,
            price=float(price),
            options=options,
            rating=_text_or_empty(rating) if rating is not None else "N.A.",
            reviews=tuple(review_list),
            main_image=_text_or_empty(images[0]) if isinstance(images, list) and images else "",
        )

    def _price_upper(self, price: float, rng: random.Random) -> tuple[float, str]:
        above = [q for q in PRICE_RANGE if q > price][:4]
        if len(above) >= 2:
            _, upper = sorted(rng.sample(above, 2))
            return upper, f", and price lower than {upper:.2f} dollars"
        return NO_PRICE_UPPER, ""

    def _make_goals(self, rng: random.Random) -> list[Goal]:
        goals: list[Goal] = []
        pairs = zip(self._products, self._instructions)
        for product, ins in tqdm(
            pairs,
            desc="WebShop goals",
            unit="product",
            total=len(self._products),
            disable=len(self._products) < _PROGRESS_FROM,
            mininterval=2.0,
        ):
            if self.human_goals:
                for entry in ins if isinstance(ins, list) else []:
                    if not isinstance(entry, dict):
                        continue
                    attrs = entry.get("instruction_attributes") or []
                    if not isinstance(attrs, list) or not attrs:
                        continue
                    upper, price_text = self._price_upper(product.price, rng)
                    opts = entry.get("instruction_options") or []
                    named = isinstance(opts, dict)
                    if named:
                        goal_options = {_text_or_empty(k): _text_or_empty(v) for k, v in opts.items()}
                    else:
                        goal_options = {
                            f"option {i + 1}": _text_or_empty(v)
                            for i, v in enumerate(opts if isinstance(opts, list) else [])
                        }
                    goal = self._goal(
                        product,
                        _text_or_empty(entry.get("instruction")).strip(".") + price_text,
                        attrs,
                        goal_options,
                        upper,
                        product.name,
                    )
                    goals.append(Goal(**{**goal.__dict__, "options_named": named}))
                    if len(goals) > self.max_goals:
                        raise DataFileError(
                            f"{self.files['human']}: more than max_goals={self.max_goals:,} human goals; "
                            "pass num_products=N to load fewer products."
                        )
            else:
                if not isinstance(ins, dict) or ins.get("instruction") is None:
                    continue
                attrs = ins.get("instruction_attributes") or []
                if not isinstance(attrs, list) or not attrs:
                    continue
                upper, price_text = self._price_upper(product.price, rng)
                names = sorted(product.options)
                sampler = random.Random(f"{self.seed}:{product.asin}")  # str seeds are stable across processes
                combos, total = _combinations([product.options[n] for n in names], self.max_goal_combinations, sampler)
                if total > len(combos):
                    warnings.warn(
                        f"{self.files['products']}: product {product.asin} has {total:,} option combinations; kept a random "
                        f"{len(combos):,} as synthetic goals (max_goal_combinations={self.max_goal_combinations:,}).",
                        stacklevel=3,
                    )
                if len(goals) + len(combos) > self.max_goals:
                    raise DataFileError(
                        f"{self.files['attributes']}: more than max_goals={self.max_goals:,} synthetic goals; "
                        "pass num_products=N to load fewer products, or lower max_goal_combinations."
                    )
                for combo in combos:
                    goal_options = dict(zip(names, combo))
                    option_text = ", and ".join(f"{k}: {v}" for k, v in goal_options.items())
                    option_text = " with " + option_text if option_text else ""
                    text = f"{_text_or_empty(ins.get('instruction'))}{option_text}{price_text}"
                    goals.append(self._goal(product, text, attrs, goal_options, upper, product.title))
        random.Random(_SHUFFLE_SEED).shuffle(goals)
        return [Goal(**{**g.__dict__, "index": i}) for i, g in enumerate(goals)]

    @staticmethod
    def _goal(product: Product, text: str, attrs: list, goal_options: dict, upper: float, name: str) -> Goal:
        return Goal(
            index=-1,
            asin=product.asin,
            instruction_text=text,
            attributes=tuple(_text_or_empty(a) for a in attrs),
            goal_options=goal_options,
            price_upper=float(upper),
            query=product.query,
            category=product.category,
            product_category=product.product_category,
            name=name,
        )

    def __len__(self) -> int:
        return self.num_products

    def product(self, index: int) -> Product:
        return self._products[int(index)]

    def index_of(self, asin: str) -> int | None:
        return self._index.get(asin.strip().upper(), self._index.get(asin.strip()))

    def goal(self, index: int) -> Goal:
        return self._goals[int(index)]

    def index_texts(self) -> list[str]:
        """WebShop's search documents: title, description, first feature, option text; lower-cased."""
        out = []
        for p in self._products:
            option_text = ", and ".join(f"{n}: {', '.join(v)}" for n, v in p.options.items())
            out.append(
                " ".join((p.title, p.description, p.bullet_points[0] if p.bullet_points else "", option_text)).lower()
            )
        return out
