"""A generated WebShop catalog: any number of products and goals from a seed, cheaply.

Products are stored as columns of small integers (which brand, type, attributes, options...):
about 60 bytes a product, so a million products take tens of megabytes. A :class:`Product`
record is built from its columns when a page or the reward needs it, and the search index is
built once from :meth:`GeneratedShop.index_texts`.

Goals follow WebShop's synthetic goals (``goal.py``, ``get_synthetic_goals``): an instruction
naming the product type and some of its attributes, one value for every option of the product
(``" with color: navy, and size: large"``) and a price ceiling drawn WebShop's way (two of the
first four multiples of $10 above the price, the larger one). Goal ``g`` targets product
``permutation[g % num_products]``; its details come from a generator seeded with
``(seed, g)``, so any goal is made in microseconds, in any process, without the others.
"""

from __future__ import annotations

import sys
from functools import lru_cache
from typing import Sequence

import numpy as np

from ..product import Goal, Product, Review
from .vocab import BRANDS, CATEGORIES, OPTION_POOLS, PRICE_RANGE, USES, ProductType

#: A generated shop has ``max(num_products, DEFAULT_NUM_GOALS_MIN)`` goals, so the test (0-499)
#: and eval (500-1499) splits are full and the train split is non-empty at any size.
DEFAULT_NUM_GOALS_MIN = 2_000
#: Goals with no price text use WebShop's sentinel ceiling.
NO_PRICE_UPPER = 1_000_000.0

# ---------------------------------------------------------------- flat type table
_TYPES: list[tuple[int, ProductType]] = [(c, t) for c, spec in enumerate(CATEGORIES) for t in spec.types]
_NUM_TYPES = len(_TYPES)
_MAX_GROUPS = max(len(t.options) for _, t in _TYPES)

# ---------------------------------------------------------------- ASINs
# asin = "B0" + 8 base-36 digits of (index * _A + _C) mod 36**8: a bijection on [0, 36**8), since
# _A is coprime with 36, so an ASIN maps back to its index with one multiplication.
_ALPHABET = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ"
_M = 36**8
_A = 1_103_515_249  # odd and not a multiple of 3
_C = 12_345_678_901 % _M
_A_INV = pow(_A, -1, _M)


def asin_for(index: int, salt: int = 0) -> str:
    """The 10-character ASIN of product ``index`` (``"B0"`` + 8 base-36 characters)."""
    x = (index * _A + _C + salt) % _M
    digits = []
    for _ in range(8):
        x, r = divmod(x, 36)
        digits.append(_ALPHABET[r])
    return "B0" + "".join(reversed(digits))


def index_for_asin(asin: str, salt: int = 0) -> int | None:
    """Inverse of :func:`asin_for`; ``None`` for a string that is no generated ASIN."""
    asin = asin.strip().upper()
    if len(asin) != 10 or not asin.startswith("B0"):
        return None
    x = 0
    for ch in asin[2:]:
        d = _ALPHABET.find(ch)
        if d < 0:
            return None
        x = x * 36 + d
    return ((x - _C - salt) * _A_INV) % _M


def price_upper_for(price: float, rng: np.random.Generator) -> float:
    """WebShop's goal price ceiling: of the first four multiples of $10 above ``price``, draw two
    and keep the larger; with fewer than two such multiples, no ceiling (1,000,000)."""
    above = [p for p in PRICE_RANGE if p > price][:4]
    if len(above) < 2:
        return NO_PRICE_UPPER
    picks = rng.choice(len(above), size=2, replace=False)
    return float(above[int(max(picks))])


def _title_case(words: str) -> str:
    return " ".join(w[:1].upper() + w[1:] for w in words.split(" "))


def _join_and(items: Sequence[str]) -> str:
    items = list(items)
    if len(items) <= 1:
        return "".join(items)
    return ", ".join(items[:-1]) + " and " + items[-1]


_REVIEW_TITLES = (
    ("Exactly as described", 5),
    ("Great value", 5),
    ("Love it", 5),
    ("Pretty good", 4),
    ("Does the job", 4),
    ("Okay for the price", 3),
    ("Not what I expected", 2),
    ("Would not buy again", 1),
)
_REVIEW_BODIES = (
    "I bought this for {use} and it has held up well.",
    "The {material} feels better than I expected for the price.",
    "Shipping was quick and it matches the photos.",
    "It works, but the sizing runs a little different than other brands.",
    "My second one; I keep coming back to it.",
)
_INSTRUCTIONS = (
    "i am looking for {a} {noun}{for_whom} that is {attrs}",
    "i need {attrs} {noun}{for_whom}",
    "find me {attrs} {noun}{for_whom}",
    "i want to buy {a} {attrs} {noun}{for_whom}",
    "i'm looking for {attrs} {noun}{for_whom}",
)


class GeneratedShop:
    """``num_products`` products and their goals, generated from ``seed``.

    Args:
        num_products: How many products (at least 10).
        seed: The catalog seed; the same ``(num_products, seed)`` gives the same shop in any process.
        num_goals: How many goals; default ``max(num_products, 2000)``.
    """

    def __init__(self, num_products: int = 1000, seed: int = 0, num_goals: int | None = None):
        if int(num_products) < 10:
            raise ValueError(f"num_products must be at least 10, got {num_products}.")
        self.num_products = n = int(num_products)
        self.seed = int(seed)
        self.num_goals = int(num_goals) if num_goals is not None else max(n, DEFAULT_NUM_GOALS_MIN)
        self.key = ("generated", n, self.seed, self.num_goals)
        rng = np.random.default_rng(np.random.SeedSequence([self.seed, n, 0x5EB5]))
        i32, i16, u8 = np.int32, np.int16, np.uint8
        self.type_id = rng.integers(0, _NUM_TYPES, n, dtype=i16)
        self.brand = rng.integers(0, len(BRANDS), n, dtype=i16)
        self.modifier = rng.integers(0, 1 << 15, n, dtype=i16)  # taken modulo the pool size
        self.material = rng.integers(0, 1 << 15, n, dtype=i16)
        self.for_whom = rng.integers(0, 1 << 15, n, dtype=i16)
        self.use = rng.integers(0, len(USES), n, dtype=u8)
        # attributes: k distinct entries (start + j * step) mod P of the department's prime-sized pool
        self.attr_start = rng.integers(0, 1 << 15, n, dtype=i16)
        self.attr_step = rng.integers(0, 1 << 15, n, dtype=i16)
        self.attr_count = rng.integers(3, 6, n, dtype=u8)
        self.title_attr = rng.random(n) < 0.5  # the first attribute also appears in the title
        self.model = rng.integers(0, 26 * 26 * 1000, n, dtype=i32)
        self.has_model = rng.random(n) < 0.6
        # options: per group, m values (start + j * step) mod P; no options for 8% of products
        self.opt_start = rng.integers(0, 1 << 15, (n, _MAX_GROUPS), dtype=i16)
        self.opt_step = rng.integers(0, 1 << 15, (n, _MAX_GROUPS), dtype=i16)
        self.opt_count = rng.integers(2, 7, (n, _MAX_GROUPS), dtype=u8)
        self.opt_count[rng.random(n) < 0.08] = 0
        base = np.array([t.price for _, t in _TYPES], dtype=np.float32)[self.type_id]
        low = np.round(base * rng.lognormal(0.0, 0.45, n).astype(np.float32), 2)
        self.price_low = np.maximum(low, 1.99).astype(np.float32)
        ranged = rng.random(n) < 0.2
        high = np.round(self.price_low * (1.1 + 0.5 * rng.random(n, dtype=np.float32)), 2)
        self.price_high = np.where(ranged, high, 0).astype(np.float32)
        frac = rng.random(n, dtype=np.float32)
        self.price_draw = np.where(ranged, self.price_low + frac * (self.price_high - self.price_low), self.price_low)
        self.rating10 = np.where(rng.random(n) < 0.3, 0, rng.integers(30, 51, n)).astype(u8)  # 0 = N.A.
        self.review_seed = rng.integers(0, 1 << 30, n, dtype=i32)
        self.goal_permutation = rng.permutation(n).astype(i32)
        self._cached_product = lru_cache(maxsize=4096)(self._make_product)

    # ------------------------------------------------------------ products
    def __len__(self) -> int:
        return self.num_products

    def index_of(self, asin: str) -> int | None:
        """The index of the product with this ASIN, or ``None``."""
        i = index_for_asin(asin, self.seed)
        return i if i is not None and i < self.num_products else None

    def product(self, index: int) -> Product:
        """Product ``index`` (cached: the most recent 4,096 are kept)."""
        return self._cached_product(int(index))

    def _parts(self, i: int) -> dict:
        c, ptype = _TYPES[int(self.type_id[i])]
        spec = CATEGORIES[c]
        pool = spec.attributes
        p = len(pool)
        start, step = int(self.attr_start[i]) % p, 1 + int(self.attr_step[i]) % (p - 1)
        attrs = tuple(pool[(start + j * step) % p] for j in range(int(self.attr_count[i])))
        options: dict[str, tuple[str, ...]] = {}
        for g, pool_id in enumerate(ptype.options):
            m = int(self.opt_count[i, g])
            if m == 0:
                continue
            name, values = OPTION_POOLS[pool_id]
            q = len(values)
            s, d = int(self.opt_start[i, g]) % q, 1 + int(self.opt_step[i, g]) % (q - 1)
            options[name] = tuple(values[(s + j * d) % q] for j in range(min(m, q)))
        whom = ptype.for_whom[int(self.for_whom[i]) % len(ptype.for_whom)]
        model = int(self.model[i])
        return dict(
            spec=spec,
            ptype=ptype,
            attrs=attrs,
            options=options,
            whom=whom,
            brand=BRANDS[int(self.brand[i])],
            modifier=spec.modifiers[int(self.modifier[i]) % len(spec.modifiers)],
            material=spec.materials[int(self.material[i]) % len(spec.materials)],
            use=USES[int(self.use[i])],
            model=f"{chr(65 + model // 26000)}{chr(65 + model // 1000 % 26)}{model % 1000}"
            if self.has_model[i]
            else "",
        )

    def _title(self, x: dict, i: int) -> str:
        title = f"{x['brand']} {_title_case(x['modifier'])} {_title_case(x['material'])} {_title_case(x['ptype'].noun)}"
        if x["whom"]:
            title += f" {_title_case(x['whom'])}"
        if self.title_attr[i]:
            title += f", {_title_case(x['attrs'][0])}"
        if x["model"]:
            title += f" - {x['model']}"
        return title

    @staticmethod
    def _description(x: dict) -> str:
        noun, attrs = x["ptype"].noun, x["attrs"]
        return (
            f"This {x['modifier']} {noun} from {x['brand']} is made of {x['material']} and is "
            f"{_join_and(attrs[1:3])}. Designed for {x['use']}."
        )

    @staticmethod
    def _features(x: dict) -> tuple[str, ...]:
        spec, attrs = x["spec"], x["attrs"]
        out = []
        for j, template in enumerate(spec.feature_templates[: 2 + len(attrs) // 2]):
            attr = attrs[j % len(attrs)]
            out.append(template.format(Attr=attr[:1].upper() + attr[1:], material=x["material"], use=x["use"]))
        return tuple(out)

    @staticmethod
    def _option_text(options: dict[str, tuple[str, ...]]) -> str:
        return ", and ".join(f"{name}: {', '.join(values)}" for name, values in options.items())

    def _make_product(self, i: int) -> Product:
        if not 0 <= i < self.num_products:
            raise IndexError(f"product index {i} is out of range [0, {self.num_products}).")
        x = self._parts(i)
        title = self._title(x, i)
        low, high = float(self.price_low[i]), float(self.price_high[i])
        low, high = round(low, 2), round(high, 2)
        pricing = (low, high) if high > 0 else (low,)
        price_tag = f"${low} to ${high}" if high > 0 else f"${low}"
        rating = "N.A." if self.rating10[i] == 0 else f"{self.rating10[i] / 10:.1f}"
        rrng = np.random.default_rng(int(self.review_seed[i]))
        reviews = []
        for _ in range(int(rrng.integers(0, 4))):
            t, score = _REVIEW_TITLES[int(rrng.integers(0, len(_REVIEW_TITLES)))]
            body = _REVIEW_BODIES[int(rrng.integers(0, len(_REVIEW_BODIES)))].format(
                use=x["use"], material=x["material"]
            )
            reviews.append(Review(t, score, body))
        spec, ptype = x["spec"], x["ptype"]
        return Product(
            asin=asin_for(i, self.seed),
            name=title,
            title=title,
            category=spec.name,
            query=ptype.query,
            product_category=" › ".join((spec.department,) + ptype.path),
            description=self._description(x),
            bullet_points=self._features(x),
            attributes=x["attrs"],
            pricing=pricing,
            price_tag=price_tag,
            price=round(float(self.price_draw[i]), 2),
            options=x["options"],
            rating=rating,
            reviews=tuple(reviews),
        )

    def index_texts(self) -> list[str]:
        """One search document per product: WebShop's indexed fields (title, description, first
        feature, option text) joined by spaces and lower-cased."""
        out = []
        for i in range(self.num_products):
            x = self._parts(i)
            features = self._features(x)
            out.append(
                " ".join(
                    (
                        self._title(x, i),
                        self._description(x),
                        features[0] if features else "",
                        self._option_text(x["options"]),
                    )
                ).lower()
            )
        return out

    # ------------------------------------------------------------ goals
    def goal(self, index: int) -> Goal:
        """Goal ``index`` (see the module docstring); any index in ``[0, num_goals)``."""
        g = int(index)
        if not 0 <= g < self.num_goals:
            raise IndexError(f"goal index {g} is out of range [0, {self.num_goals}).")
        i = int(self.goal_permutation[g % self.num_products])
        product = self.product(i)
        x = self._parts(i)
        rng = np.random.default_rng(np.random.SeedSequence([self.seed, self.num_products, 0x60A1, g]))
        attrs = product.attributes
        k = int(rng.integers(1, min(3, len(attrs)) + 1))
        chosen = tuple(attrs[j] for j in sorted(rng.choice(len(attrs), size=k, replace=False)))
        goal_options = {
            name: values[int(rng.integers(0, len(values)))] for name, values in sorted(product.options.items())
        }
        price_upper = price_upper_for(product.price, rng)
        whom = f" {x['whom']}" if x["whom"] else ""
        noun = x["ptype"].noun
        template = _INSTRUCTIONS[int(rng.integers(0, len(_INSTRUCTIONS)))]
        article = "an" if noun[0] in "aeiou" else "a"
        text = template.format(a=article, noun=noun, for_whom=whom, attrs=_join_and(chosen))
        if goal_options:
            text += " with " + ", and ".join(f"{k}: {v}" for k, v in goal_options.items())
        if price_upper < NO_PRICE_UPPER:
            text += f", and price lower than {price_upper:.2f} dollars"
        return Goal(
            index=g,
            asin=product.asin,
            instruction_text=text,
            attributes=chosen,
            goal_options=goal_options,
            price_upper=price_upper,
            query=product.query,
            category=product.category,
            product_category=product.product_category,
            name=product.name,
        )


# ---------------------------------------------------------------- index layout (fast path)
_FIELD = __import__("re").compile(r"\{(Attr|material|use)\}")


class _Pieces:
    """A table of distinct text pieces; ``id(text)`` registers a piece once."""

    def __init__(self) -> None:
        self.texts: list[str] = []
        self._ids: dict[str, int] = {}

    def id(self, text: str) -> int:
        text = text.lower()
        found = self._ids.get(text)
        if found is None:
            found = self._ids[text] = len(self.texts)
            self.texts.append(text)
        return found


def _index_layout(shop: "GeneratedShop") -> tuple[list[str], np.ndarray]:
    """Every search document of ``shop`` as a row of piece ids, ``-1`` for an empty slot.

    Joining a row's pieces with spaces gives the text of :meth:`GeneratedShop.index_texts` up to
    punctuation and spacing, which the search analyser ignores; so the token ids of a document
    are the concatenated token ids of its pieces, and each distinct piece is analysed once.
    Returns ``(pieces, slots)`` with ``slots`` of shape ``(num_products, K)``.
    """
    P = _Pieces()
    n = shop.num_products
    if n >= 50_000:  # the layout, the BM25 build and numba's first compile take seconds to a minute: say so
        print(
            f"Indexing {n:,} WebShop products for search (numba compiles once per process)...",
            file=sys.stderr,
            flush=True,
        )
    type_cat = np.array([c for c, _ in _TYPES], dtype=np.int64)
    t = shop.type_id.astype(np.int64)
    cat = type_cat[t]
    # Piece ids are handed out in first-use order: the calls below keep one fixed order.
    words = _word_columns(P, shop, t, cat)
    model = _model_column(P, shop)
    feature = _feature_columns(P, cat, words, n)
    options = _option_columns(P, shop, t)
    c_this, c_from, c_made, c_andis, c_and, c_designed = (
        P.id("this"),
        P.id("from"),
        P.id("is made of"),
        P.id("and is"),
        P.id("and"),
        P.id("designed for"),
    )
    const = lambda pid: np.full(n, pid, dtype=np.int64)  # noqa: E731
    brand, modifier, material, noun, whom, use, attr = (
        words["brand"],
        words["modifier"],
        words["material"],
        words["noun"],
        words["whom"],
        words["use"],
        words["attr"],
    )
    columns = [
        brand,
        modifier,
        material,
        noun,
        whom,
        np.where(shop.title_attr, attr[0], -1),
        model,  # title
        const(c_this),
        modifier,
        noun,
        const(c_from),
        brand,
        const(c_made),
        material,
        const(c_andis),
        attr[1],
        const(c_and),
        attr[2],
        const(c_designed),
        use,  # description
        *feature,
        *options,
    ]
    slots = np.empty((n, len(columns)), dtype=np.int32)
    for j, column in enumerate(columns):
        slots[:, j] = column
    return P.texts, slots


def _piece_table(P: _Pieces, rows: list[list[str]]) -> tuple[np.ndarray, np.ndarray]:
    """``rows`` of texts as a padded table of piece ids (``-1`` for padding) and each row's length."""
    width = max(len(r) for r in rows)
    out = np.full((len(rows), width), -1, dtype=np.int64)
    for r, row in enumerate(rows):
        for c, text in enumerate(row):
            out[r, c] = P.id(text) if text else -1
    return out, np.array([len(r) for r in rows], dtype=np.int64)


def _word_columns(P: _Pieces, shop: "GeneratedShop", t: np.ndarray, cat: np.ndarray) -> dict:
    """Each product's brand, modifier, material, noun, for-whom, use (one piece id column each)
    and its three attributes (``"attr"``: a list of three columns)."""
    brand_tab = np.array([P.id(b) for b in BRANDS], dtype=np.int64)
    mod_tab, mod_len = _piece_table(P, [list(s.modifiers) for s in CATEGORIES])
    mat_tab, mat_len = _piece_table(P, [list(s.materials) for s in CATEGORIES])
    attr_tab, attr_len = _piece_table(P, [list(s.attributes) for s in CATEGORIES])
    noun_tab = np.array([P.id(tp.noun) for _, tp in _TYPES], dtype=np.int64)
    whom_tab, whom_len = _piece_table(P, [list(tp.for_whom) for _, tp in _TYPES])
    use_tab = np.array([P.id(u) for u in USES], dtype=np.int64)
    p = attr_len[cat]
    start = shop.attr_start.astype(np.int64) % p
    step = 1 + shop.attr_step.astype(np.int64) % (p - 1)
    return {
        "brand": brand_tab[shop.brand.astype(np.int64)],
        "modifier": mod_tab[cat, shop.modifier.astype(np.int64) % mod_len[cat]],
        "material": mat_tab[cat, shop.material.astype(np.int64) % mat_len[cat]],
        "noun": noun_tab[t],
        "whom": whom_tab[t, shop.for_whom.astype(np.int64) % whom_len[t]],
        "use": use_tab[shop.use.astype(np.int64)],
        "attr": [attr_tab[cat, (start + j * step) % p] for j in range(3)],
    }


def _model_column(P: _Pieces, shop: "GeneratedShop") -> np.ndarray:
    """Each product's model code piece (``-1`` without one); only the codes in use are registered."""
    codes = shop.model.astype(np.int64)
    used = np.unique(codes[shop.has_model])
    first = len(P.texts)
    for m in used.tolist():
        P.id(f"{chr(65 + m // 26000)}{chr(65 + m // 1000 % 26)}{m % 1000}")
    return np.where(shop.has_model, first + np.searchsorted(used, codes), -1)


def _feature_columns(P: _Pieces, cat: np.ndarray, words: dict, n: int) -> list[np.ndarray]:
    """The first feature's five segments: the department's first template split at its fields."""
    seg_rows = []
    for spec in CATEGORIES:
        parts = _FIELD.split(spec.feature_templates[0])  # const, field, const, field, const...
        seg_rows.append(parts + [""] * (5 - len(parts)))
    fields = {"Attr": words["attr"][0], "material": words["material"], "use": words["use"]}
    feature = []
    for s in range(5):
        col = np.full(n, -1, dtype=np.int64)
        for c, row in enumerate(seg_rows):
            mask = cat == c
            piece = row[s]
            if s % 2 == 1 and piece:  # a field
                col[mask] = fields[piece][mask]
            elif piece.strip():
                col[mask] = P.id(piece)
        feature.append(col)
    return feature


def _option_columns(P: _Pieces, shop: "GeneratedShop", t: np.ndarray) -> list[np.ndarray]:
    """The option text ``"name: v1, v2, and name2: w1"`` as columns: per option group its name,
    then up to six values."""
    pool_ids = list(OPTION_POOLS)
    opt_tab, opt_len = _piece_table(P, [list(OPTION_POOLS[k][1]) for k in pool_ids])
    name_tab = np.array([P.id(OPTION_POOLS[k][0]) for k in pool_ids], dtype=np.int64)
    type_pool = np.full((len(_TYPES), _MAX_GROUPS), -1, dtype=np.int64)
    for r, (_, tp) in enumerate(_TYPES):
        for g, pool in enumerate(tp.options):
            type_pool[r, g] = pool_ids.index(pool)
    options = []
    for g in range(_MAX_GROUPS):
        pool = type_pool[t, g]
        has = pool >= 0
        safe = np.where(has, pool, 0)
        q = opt_len[safe]
        m = np.where(has, np.minimum(shop.opt_count[:, g].astype(np.int64), q), 0)
        s0 = shop.opt_start[:, g].astype(np.int64) % q
        d = 1 + shop.opt_step[:, g].astype(np.int64) % (q - 1)
        options.append(np.where(m > 0, name_tab[safe], -1))
        for j in range(6):
            options.append(np.where(j < m, opt_tab[safe, (s0 + j * d) % q], -1))
    return options


GeneratedShop.index_layout = _index_layout  # type: ignore[attr-defined]
