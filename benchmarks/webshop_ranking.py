"""WebShop search ranking against Pyserini, the original's search engine, on the same catalog.

    python benchmarks/webshop_ranking.py [--products 1000 5000] [--queries 1000]

Run it with a Python that has this package's dependencies, ``pyserini==0.17.0`` (the version
WebShop pins) and a Java runtime (Java 11+; measured with OpenJDK 17). For each catalog size it
writes a catalog in WebShop's file format (``webshop_pages_agreement.write_catalog``: our
generator plus edge-case products), writes the search documents as WebShop's
``search_engine/convert_product_file_format.py`` does (title, description, first feature and
option text, lower-cased; ``LoadedShop.index_texts``), indexes them with
``python -m pyserini.index.lucene`` exactly as WebShop's ``run_indexing.sh`` does, and asks
Pyserini's ``LuceneSearcher.search(query, k=50)`` and ours the same queries: every goal's
instruction, the instruction without its price clause (what the expert searches) and random
2-6 word subsets of it (what agents write). Several configurations of ours are scored so the
effect of each part (analyzer, length norm, score rounding and tie order) is visible.

Agreement is reported as: same top-1 product, mean overlap of the top-10 sets, same top-10 in
the same order, same 50 hits in the same order. Results go to
``benchmarks/results/webshop_ranking.json``.
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

try:  # python -m benchmarks.webshop_ranking, or imported by the tests
    from benchmarks import common, webshop_pages_agreement
except ModuleNotFoundError:  # python benchmarks/webshop_ranking.py: this folder comes first on the import path
    import common
    import webshop_pages_agreement

RESULTS = common.RESULTS / "webshop_ranking.json"


def _queries(shop, n: int, rng: random.Random) -> list[str]:
    out = []
    for g in rng.sample(range(shop.num_goals), min(n // 3 + 1, shop.num_goals)):
        text = shop.goal(g).instruction_text
        words = text.split(", and price")[0].split()
        out += [text, text.split(", and price")[0], " ".join(rng.sample(words, k=min(len(words), rng.randint(2, 6))))]
    return [q.lower() for q in out[:n]]


def _pyserini_index(texts: list[str], ids: list[str], folder: Path) -> Path:
    docs = folder / "resources"
    docs.mkdir()
    with open(docs / "documents.jsonl", "w") as f:
        for i, t in zip(ids, texts):
            f.write(json.dumps({"id": i, "contents": t}) + "\n")
    index = folder / "indexes"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pyserini.index.lucene",
            "--collection",
            "JsonCollection",
            "--input",
            str(docs),
            "--index",
            str(index),
            "--generator",
            "DefaultLuceneDocumentGenerator",
            "--threads",
            "1",
            "--storePositions",
            "--storeDocvectors",
            "--storeRaw",
        ],
        check=True,
        capture_output=True,
    )
    return index


def _agreement(theirs: list[list[str]], ours: list[list[str]]) -> dict:
    n = len(theirs)
    top1 = sum(bool(t) == bool(o) and (not t or t[0] == o[0]) for t, o in zip(theirs, ours))
    overlap = [
        len(set(t[:10]) & set(o[:10])) / max(1, min(10, len(t))) if t else float(not o) for t, o in zip(theirs, ours)
    ]
    return {
        "top1_same": round(top1 / n, 4),
        "top10_overlap_mean": round(sum(overlap) / n, 4),
        "top10_same_order": round(sum(t[:10] == o[:10] for t, o in zip(theirs, ours)) / n, 4),
        "top50_same_order": round(sum(t == o for t, o in zip(theirs, ours)) / n, 4),
    }


def measure(num_products: int, num_queries: int) -> dict:
    from agentgym_turn.bm25 import BM25Index
    from agentgym_turn.webshop.loader import LoadedShop
    from agentgym_turn.webshop.search import SEARCH_RETURN_N, rank_hits
    from pyserini.search.lucene import LuceneSearcher

    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        webshop_pages_agreement.write_catalog(folder, num_products)
        shop = LoadedShop(folder, human_goals=False)
        texts = shop.index_texts()
        asins = [shop.product(i).asin for i in range(shop.num_products)]
        t = time.perf_counter()
        searcher = LuceneSearcher(str(_pyserini_index(texts, asins, folder)))
        pyserini_build_s = time.perf_counter() - t
        queries = _queries(shop, num_queries, random.Random(num_products))
        theirs = [[h.docid for h in searcher.search(q, k=SEARCH_RETURN_N)] for q in queries]
        configs = {
            "bm25s analyzer, exact lengths, index order (before)": ("bm25s", "exact", False),
            "lucene analyzer, exact lengths": ("lucene", "exact", True),
            "lucene analyzer, lucene lengths (default)": ("lucene", "lucene", True),
        }
        out = {
            "num_products": shop.num_products,
            "queries": len(queries),
            "pyserini_index_s": round(pyserini_build_s, 2),
            "configs": {},
        }
        for name, (analyzer, norm, tie_rule) in configs.items():
            index = BM25Index.build(texts, analyzer=analyzer, length_norm=norm, backend="numpy")
            ours = []
            for q in queries:
                if tie_rule:
                    ours.append([asins[i] for i in rank_hits(index, q, asins.__getitem__, SEARCH_RETURN_N)])
                else:
                    ids, _ = index.search([q], SEARCH_RETURN_N)
                    ours.append([asins[i] for i in ids[0] if i >= 0])
            out["configs"][name] = _agreement(theirs, ours)
            print(num_products, name, out["configs"][name], flush=True)
        # where they differ, show a few queries (for the docs)
        index = BM25Index.build(texts, analyzer="lucene", length_norm="lucene", backend="numpy")
        ours = [[asins[i] for i in rank_hits(index, q, asins.__getitem__, 10)] for q in queries[:300]]
        out["examples_top10_differ"] = [q for q, t, o in zip(queries, theirs, ours) if t[:10] != o][:5]
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--products", type=int, nargs="+", default=[1000, 5000], help="generated catalog sizes")
    parser.add_argument("--queries", type=int, default=1000, help="queries per catalog")
    args = parser.parse_args(argv)
    import pyserini

    results = {
        "what": "our WebShop search vs Pyserini LuceneSearcher (WebShop's engine) on the same WebShop-format catalog and queries",
        "pyserini": getattr(pyserini, "__version__", "?"),
        "java": subprocess.run(["java", "-version"], capture_output=True, text=True).stderr.splitlines()[0],
        "sizes": [measure(n, args.queries) for n in args.products],
    }
    common.write_json(RESULTS, results, indent=2)
    print(f"wrote {common.shown(RESULTS)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
