"""Pages, text modes and available actions of TurnWebShop-v0 against the original WebShop text env.

    python benchmarks/webshop_pages_agreement.py PEER_DIR [--episodes 60] [--write-fixtures]

``PEER_DIR`` is a checkout of princeton-nlp/WebShop (its ``web_agent_site`` is imported from
there, never copied here). Run it with a Python that has this package's dependencies and the
original's: Flask, gym, thefuzz, cleantext, rich, tqdm, rank_bm25 (beautifulsoup4 4.11.1 as the
original pins). Three imports of the original are stubbed because they are unused by pages or
cannot be installed offline: ``torch`` (image features only), ``spacy`` (the type reward's noun
extraction; the reward is compared by ``tests/agentgym_turn/webshop/test_reward.py``, so the score line of the
done page is compared with its number masked) and ``pyserini``: the original's one search call
(``init_search_engine``) is replaced by a searcher that returns our BM25 ranking, so both envs
show the same products and pages can be compared in lock step. Ranking against Pyserini itself
is measured by ``benchmarks/webshop_ranking.py``.

Both envs load the same catalog, written in WebShop's file format (``items_shuffle.json``,
``items_ins_v2.json``, ``items_human_ins.json``) from our generator plus edge-case products
(options with ``"``, non-ASCII text, an empty description, one option group, none). Each episode
takes the same goal in both (the goal lists are shuffled with the same seed; the goal's
instruction text is copied to the original because WebShop draws price ceilings from an
unseeded RNG), then a seeded random shopper picks each action from the original's available
actions, searches (also from item pages), or writes an unknown click. After every step the
``text`` and ``text_rich`` observations and the available actions of both are compared.

Prints a summary and writes ``benchmarks/results/webshop_pages_agreement.json``; with
``--write-fixtures`` it also records the original's observations of the first episodes in
``tests/data/webshop_pages_original.json`` for ``tests/agentgym_turn/webshop/test_pages.py``.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import sys
import tempfile
import types
from pathlib import Path

try:  # python -m benchmarks.webshop_pages_agreement, or imported by the tests
    from benchmarks import common
except ModuleNotFoundError:  # python benchmarks/webshop_pages_agreement.py: this folder comes first on the import path
    import common

ROOT = common.ROOT
RESULTS = common.RESULTS / "webshop_pages_agreement.json"
FIXTURES = ROOT / "tests" / "data" / "webshop_pages_original.json"

#: Products added to the generated ones to exercise the original's quirks.
EDGE_PRODUCTS = [
    {
        "asin": "B0EDGE0001",
        "name": 'Quoted 12" Pan & Lid',
        "category": "home",
        "query": "frying pan",
        "product_category": "Home & Kitchen › Kitchen › Pans",
        "full_description": "",
        "small_description": ["  non-stick coating  ", "oven safe"],
        "pricing": "$19.99",
        "customization_options": {
            "Size": [{"value": '12"'}, {"value": '10" / 8"'}],
            "Color": [{"value": "Crème Brûlée"}, {"value": "Red"}],
        },
        "images": [""],
    },
    {
        "asin": "B0EDGE0002",
        "name": "Café ☕ mug – 350 ml",
        "category": "home",
        "query": "coffee mug",
        "product_category": "Home & Kitchen › Kitchen › Mugs",
        "full_description": "A mug for café au lait.",
        "small_description": ["dishwasher safe"],
        "pricing": "$5.00 - $9.50",
        "customization_options": {"Color": [{"value": "Noir"}, {"value": "Blanc"}]},
        "images": [""],
    },
    {
        "asin": "B0EDGE0003",
        "name": "Plain frying pan with no options",
        "category": "home",
        "query": "frying pan",
        "product_category": "Home & Kitchen › Kitchen › Pans",
        "full_description": "A plain frying pan.",
        "small_description": ["cast iron"],
        "pricing": "$30.00",
        "customization_options": None,
        "images": [""],
    },
]


def write_catalog(folder: Path, n: int) -> None:
    """A catalog of ``n`` generated products plus :data:`EDGE_PRODUCTS` in WebShop's file format,
    with synthetic (``items_ins_v2.json``) and human (``items_human_ins.json``) goals."""
    from agentgym_turn.webshop.generator.catalog import GeneratedShop
    from agentgym_turn.webshop.loader import item_record

    shop = GeneratedShop(n, seed=0)
    items, attrs, human = [], {}, {}
    for i in range(n):
        items.append(item_record(shop.product(i)))
    for g in range(n):
        goal = shop.goal(g)
        if goal.asin in attrs:
            continue
        product = shop.product(shop.index_of(goal.asin))
        attrs[goal.asin] = {
            "attributes": list(product.attributes),
            "instruction": goal.instruction_text.split(" with ")[0].split(", and price")[0],
            "instruction_attributes": list(goal.attributes),
        }
        human[goal.asin] = [
            {
                "instruction": goal.instruction_text.split(", and price")[0] + ".",
                "instruction_attributes": list(goal.attributes),
                "instruction_options": list(goal.goal_options.values()),
            }
        ]
    for p in EDGE_PRODUCTS:
        items.insert(3, p)
        attrs[p["asin"]] = {
            "attributes": ["easy clean"],
            "instruction": f"i want a {p['query']}",
            "instruction_attributes": ["easy clean"],
        }
        human[p["asin"]] = [
            {
                "instruction": f"i want a {p['query']}",
                "instruction_attributes": ["easy clean"],
                "instruction_options": [],
            }
        ]
    (folder / "items_shuffle.json").write_text(json.dumps(items))
    (folder / "items_ins_v2.json").write_text(json.dumps(attrs))
    (folder / "items_human_ins.json").write_text(json.dumps(human))


def _stub_modules() -> None:
    """Stand-ins for the original's imports that pages never use (see the module docstring)."""
    torch = types.ModuleType("torch")
    torch.load = lambda *a, **k: None  # type: ignore[attr-defined]
    torch.zeros = lambda *a, **k: None  # type: ignore[attr-defined]
    torch.Tensor = type("Tensor", (), {})  # type: ignore[attr-defined]  # scipy probes for it
    sys.modules.setdefault("torch", torch)
    spacy = types.ModuleType("spacy")
    spacy.load = lambda name: lambda text: []  # type: ignore[attr-defined]
    sys.modules.setdefault("spacy", spacy)
    for name in ("pyserini", "pyserini.search", "pyserini.search.lucene"):
        sys.modules.setdefault(name, types.ModuleType(name))
    sys.modules["pyserini.search.lucene"].LuceneSearcher = object  # type: ignore[attr-defined]


class _OurRanking:
    """The original's ``LuceneSearcher`` interface (``search``, ``doc(...).raw()``) over our BM25."""

    def __init__(self, shop, engine):
        self.shop, self.engine = shop, engine

    def search(self, keywords: str, k: int = 50):
        return [types.SimpleNamespace(docid=self.shop.product(i).asin) for i in self.engine.search(keywords, k)]

    def doc(self, docid: str):
        raw = json.dumps({"id": docid})
        return types.SimpleNamespace(raw=lambda: raw)


def make_original(peer_dir: Path, folder: Path, human_goals: bool, show_attrs: bool, ours):
    """The original ``WebAgentTextEnv`` on the catalog in ``folder``, searching with our ranking."""
    _stub_modules()
    common.import_package(peer_dir / "web_agent_site")
    from web_agent_site.engine import engine
    from web_agent_site.envs import web_agent_text_env as text_env

    engine.DEFAULT_ATTR_PATH = str(folder / "items_ins_v2.json")  # data paths are module constants
    engine.HUMAN_ATTR_PATH = str(folder / "items_human_ins.json")
    ranking = _OurRanking(ours.shop, ours.search_engine)
    text_env.init_search_engine = lambda num_products=None: ranking
    env = text_env.WebAgentTextEnv(
        observation_mode="text",
        file_path=str(folder / "items_shuffle.json"),
        human_goals=human_goals,
        show_attrs=show_attrs,
    )
    return env


_SCORE = re.compile(r"(Your score \(min 0\.0, max 1\.0\)(?: \[SEP\] |\n))([-\d.e]+)")


def _mask_score(text: str) -> str:
    return _SCORE.sub(r"\1<score>", text)


def _choose(
    rng: random.Random, clickables: list[str], goal_text: str, page_kind: str, target: str | None = None
) -> str:
    """The shopper's next action: mostly a listed click, sometimes a search or a bad click; with a
    ``target`` ASIN it opens that product when listed and clicks its options before buying."""
    roll = rng.random()
    if target is not None and page_kind == "search_results" and target.lower() in clickables and roll < 0.9:
        return f"click[{target.lower()}]"
    if target is not None and page_kind == "item_page" and roll < 0.7:
        fixed = {"back to search", "< prev", "description", "features", "reviews", "attributes", "buy now"}
        values = [c for c in clickables if c not in fixed]
        if values:
            return f"click[{rng.choice(values)}]"
    words = goal_text.split(" with ")[0].split(", and price")[0].split()
    query = " ".join(rng.sample(words, k=min(len(words), rng.randint(2, 6))))
    if page_kind == "search" or roll < 0.04:
        return f"search[{query}]"
    if roll < 0.07:
        return "click[no such button]"
    options = [c for c in clickables if c != "search"]
    if not options:
        return f"search[{query}]"
    buy = "buy now" in options
    if buy and rng.random() < 0.25:
        return "click[buy now]"
    return f"click[{rng.choice([c for c in options if c != 'buy now'] or options)}]"


def compare(peer_dir: Path, episodes: int, products: int, fixture_episodes: int) -> dict:
    from agentgym_turn.webshop.env import TurnWebShopEnv

    report: dict = {
        "episodes": 0,
        "steps": 0,
        "pages": {},
        "mismatches": [],
        "fixtures": [],
        "edge_item_pages": 0,
        "edge_item_pages_with_quote_or_non_ascii_choice": 0,
    }
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        write_catalog(folder, products)
        edge_asins = {p["asin"] for p in EDGE_PRODUCTS}
        for human in (False, True):  # synthetic goals without the Attributes button, human goals with it
            ours = {
                mode: TurnWebShopEnv(
                    data_path=str(folder),
                    human_goals=human,
                    observation_mode=mode,
                    goal_split="all",
                    list_actions=False,
                    show_attributes=human,
                    render_mode="ansi",
                )
                for mode in ("text", "text_rich")
            }
            original = make_original(peer_dir, folder, human, human, ours["text"])
            goals = original.server.goals
            assert len(goals) == ours["text"].shop.num_goals, (len(goals), ours["text"].shop.num_goals)
            edge_goals = [i for i, goal in enumerate(goals) if goal["asin"] in edge_asins]
            rng = random.Random(1 + human)
            for e in range(episodes // 2):
                g = rng.choice(edge_goals) if e % 4 == 1 else rng.randrange(len(goals))  # every 4th on an edge product
                ours_goal = ours["text"].shop.goal(g)
                assert goals[g]["asin"] == ours_goal.asin, (g, goals[g]["asin"], ours_goal.asin)
                goals[g]["instruction_text"] = ours_goal.instruction_text
                original.reset(session=g)
                infos = {mode: env.reset(seed=e, options={"goal_index": g})[1] for mode, env in ours.items()}
                record = {"goal_index": g, "human_goals": human, "steps": []}
                action = None
                for t in range(16):
                    html = original.state["html"]
                    theirs = {
                        "text": original.convert_html_to_text(html, simple=True),
                        "text_rich": original.convert_html_to_text(html, simple=False),
                        "available_actions": original.get_available_actions()["clickables"],
                    }
                    kind = original.server.get_page_name(original.state["url"]) or "search"
                    mine = {  # render() is the page; the info of the last reset or step lists its clickables
                        "text": ours["text"].render(),
                        "text_rich": ours["text_rich"].render(),
                        "available_actions": infos["text"]["available_actions"],
                    }
                    report["steps"] += 1
                    page = report["pages"].setdefault(
                        kind, {"seen": 0, "text": 0, "text_rich": 0, "available_actions": 0}
                    )
                    page["seen"] += 1
                    session = original.server.user_sessions[original.session]
                    if kind == "item_page" and session["asin"] in edge_asins:
                        report["edge_item_pages"] += 1
                        report["edge_item_pages_with_quote_or_non_ascii_choice"] += any(
                            '"' in v or not v.isascii() for v in session["options"].values()
                        )
                    for key in ("text", "text_rich", "available_actions"):
                        a, b = theirs[key], mine[key]
                        if kind == "done" and key != "available_actions":
                            a, b = _mask_score(a), _mask_score(b)
                        if a == b:
                            page[key] += 1
                        elif len(report["mismatches"]) < 300:
                            report["mismatches"].append(
                                {
                                    "goal": g,
                                    "human": human,
                                    "after": action,
                                    "page": kind,
                                    "key": key,
                                    "original": a,
                                    "ours": b,
                                }
                            )
                    record["steps"].append({"action": action, "page": kind, **theirs})
                    if kind == "done":
                        break
                    target = ours_goal.asin if ours_goal.asin in edge_asins else None
                    action = _choose(rng, theirs["available_actions"], ours_goal.instruction_text, kind, target)
                    original.step(action)
                    infos = {mode: env.step(action)[4] for mode, env in ours.items()}
                report["episodes"] += 1
                if len(report["fixtures"]) < fixture_episodes * (1 + human) and e < fixture_episodes:
                    report["fixtures"].append(record)
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("peer_dir", type=Path, help="checkout of princeton-nlp/WebShop")
    parser.add_argument(
        "--episodes", type=int, default=60, help="lock-step episodes (half synthetic, half human goals)"
    )
    parser.add_argument("--products", type=int, default=300, help="generated products in the catalog")
    parser.add_argument(
        "--write-fixtures", action="store_true", help=f"record the original's pages in {FIXTURES.relative_to(ROOT)}"
    )
    parser.add_argument("--fixture-episodes", type=int, default=4, help="episodes per goal kind recorded as fixtures")
    args = parser.parse_args(argv)
    report = compare(args.peer_dir.resolve(), args.episodes, args.products, args.fixture_episodes)
    fixtures = report.pop("fixtures")
    summary = {
        "what": "TurnWebShop-v0 pages against the original WebAgentTextEnv in lock step (same catalog, goal, actions; our ranking in both)",
        "episodes": report["episodes"],
        "pages_compared": report["steps"],
        "per_page_kind": report["pages"],
        "edge_item_pages": report["edge_item_pages"],
        "edge_item_pages_with_quote_or_non_ascii_choice": report["edge_item_pages_with_quote_or_non_ascii_choice"],
        "equal_fraction": {
            key: round(sum(p[key] for p in report["pages"].values()) / max(1, report["steps"]), 4)
            for key in ("text", "text_rich", "available_actions")
        },
        "first_mismatches": report["mismatches"][:10],
    }
    common.write_json(RESULTS, summary, indent=2, ensure_ascii=False)
    print(
        json.dumps(
            {
                k: summary[k]
                for k in (
                    "episodes",
                    "pages_compared",
                    "edge_item_pages",
                    "edge_item_pages_with_quote_or_non_ascii_choice",
                    "equal_fraction",
                )
            },
            indent=1,
        )
    )
    shown = set()
    for m in report["mismatches"]:
        if (m["page"], m["key"]) in shown:
            continue
        shown.add((m["page"], m["key"]))
        print("---", m["page"], m["key"], "after", m["after"])
        print("ORIGINAL:", repr(m["original"])[:1500])
        print("OURS:    ", repr(m["ours"])[:1500])
    if args.write_fixtures:
        catalog = {"products": args.products, "edge_products": len(EDGE_PRODUCTS)}
        FIXTURES.write_text(json.dumps({"catalog": catalog, "episodes": fixtures}, ensure_ascii=False, indent=0) + "\n")
        print(f"wrote {FIXTURES}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
