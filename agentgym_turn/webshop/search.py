"""Product search: BM25 over WebShop's indexed fields, top 50 hits, 10 to a results page.

WebShop indexes, per product, ``Title + Description + BulletPoints[0] + option text``
(lower-cased; ``search_engine/convert_product_file_format.py``) with Lucene BM25 through
Pyserini and returns the top :data:`SEARCH_RETURN_N` = 50 hits. We use the project's shared
:class:`~agentgym_turn.bm25.BM25Index` (bm25s; Lucene's BM25 with Anserini's k1=0.9,
b=0.4), built once per catalog and shared by every env of the process.

For a generated catalog the index is built from pre-analysed pieces (each distinct brand,
attribute, option value... is analysed once, see ``catalog._index_layout``), which gives the
same token ids as analysing each document's text and is several times faster at a million
products.
"""

from __future__ import annotations

import threading
from typing import Callable, Sequence

import numpy as np

#: Hits a search returns (WebShop's ``SEARCH_RETURN_N``).
SEARCH_RETURN_N = 50
#: Products on a results page (WebShop's ``PRODUCT_WINDOW``).
PRODUCT_WINDOW = 10
#: Analyzer and length norm of the product index: Pyserini's (see :mod:`agentgym_turn.bm25`).
ANALYZER = "lucene"
LENGTH_NORM = "lucene"


def index_from_layout(pieces: list[str], slots: np.ndarray, backend: str):
    """A :class:`BM25Index` whose document ``i`` is the concatenation of the pieces in ``slots[i]``."""
    from ..bm25 import BM25Index, tokenize_many

    stems = tokenize_many(pieces, analyzer=ANALYZER)
    vocab: dict[str, int] = {}
    piece_tokens = [np.array([vocab.setdefault(t, len(vocab)) for t in toks], dtype=np.int32) for toks in stems]
    lengths = np.array([len(p) for p in piece_tokens], dtype=np.int32)
    starts = np.zeros(len(lengths), dtype=np.int64)
    np.cumsum(lengths[:-1], out=starts[1:])
    flat_pieces = np.concatenate(piece_tokens) if piece_tokens else np.zeros(0, np.int32)
    del piece_tokens, stems
    # memory matters at a million products: int32 where it fits, intermediates freed early
    doc_len = np.where(slots >= 0, lengths[np.maximum(slots, 0)], 0).sum(axis=1, dtype=np.int64)
    ids = slots.ravel()
    ids = ids[ids >= 0]
    count = lengths[ids]
    first = np.repeat(starts[ids].astype(np.int64), count)
    run_start = np.cumsum(count, dtype=np.int64) - count
    first -= np.repeat(run_start, count)
    del run_start, ids, count
    first += np.arange(len(first), dtype=np.int64)
    flat = flat_pieces[first]
    del first
    offsets = np.zeros(len(doc_len) + 1, dtype=np.int64)
    np.cumsum(doc_len, out=offsets[1:])
    return BM25Index.from_token_ids(flat, offsets, vocab, backend=backend, analyzer=ANALYZER, length_norm=LENGTH_NORM)


#: Hits fetched by top-k before a tie at the k-th score is resolved from the full score vector.
_FULL_SCORES_AFTER = 1_024


def rank_hits(index, query: str, asin_of: Callable[[int], str], k: int = SEARCH_RETURN_N) -> list[int]:
    """The best ``k`` documents of ``index`` for ``query`` in Pyserini's order.

    Pyserini's ``LuceneSearcher.search`` takes the top ``k`` by score, ties by document id (here
    the ASIN, ``asin_of(i)``), then Anserini's ``ScoreTiesAdjusterReranker`` rounds each score to
    4 decimals and orders by rounded score, ties again by id; so do we. Every document tied at the
    ``k``-th score takes part, however many (past ~1,000, at the cost of one pass over all scores).
    """
    want = min(k, index.num_docs)
    fetch = min(index.num_docs, want + 16)
    while True:
        ids, top = index.search([query], fetch)
        found = int((ids[0] >= 0).sum())
        tie_cut = found == fetch < index.num_docs and top[0, fetch - 1] >= top[0, want - 1]
        if not tie_cut or fetch >= _FULL_SCORES_AFTER:
            break
        fetch = min(index.num_docs, fetch * 4)  # top-k is cheap: widen before scoring everything
    if tie_cut:
        # the tie at the k-th score runs past what was fetched: take it whole from every score
        scores = index.scores(query)
        hit = np.flatnonzero(scores > 0)
        kth = np.partition(scores[hit], len(hit) - want)[len(hit) - want]
        hit = hit[scores[hit] >= kth]
        pairs = zip(scores[hit].tolist(), hit.tolist())
    else:
        pairs = zip(top[0, :found].tolist(), ids[0, :found].tolist())
    ranked = sorted(((score, asin_of(i), i) for score, i in pairs), key=lambda h: (-h[0], h[1]))[:want]
    ranked.sort(key=lambda h: (-round(h[0], 4), h[1]))
    return [i for _, _, i in ranked]


class _Asins:
    """``asins(i)``: product ``i``'s ASIN (the id Pyserini breaks ties by), without building the
    whole product where the shop can say it cheaply (a generated shop computes it)."""

    def __init__(self, shop):
        from .generator.catalog import GeneratedShop, asin_for

        self._shop = shop
        self._fast = (lambda i: asin_for(i, shop.seed)) if isinstance(shop, GeneratedShop) else None

    def __call__(self, i: int) -> str:
        return self._fast(i) if self._fast is not None else self._shop.product(i).asin


class ProductSearch:
    """The search engine of one catalog: ``search(query)`` gives up to 50 product indices."""

    def __init__(self, shop, *, backend: str = "auto", index=None):
        """``index``: the shop's index built and warmed up beforehand (:func:`index_from_layout`), used as is."""
        from ..bm25 import BM25Index

        self.shop = shop
        if index is None:
            layout = getattr(shop, "index_layout", None)
            if layout is not None:
                index = index_from_layout(*layout(), backend=backend)
            else:
                index = BM25Index.build(
                    list(shop.index_texts()), backend=backend, analyzer=ANALYZER, length_norm=LENGTH_NORM
                )
            index.warmup()
        self.index = index
        self.asin_of = _Asins(shop)

    def search(self, query: str, k: int = SEARCH_RETURN_N) -> list[int]:
        """Indices of the best ``k`` products for ``query`` in Pyserini's order (:func:`rank_hits`;
        fewer when fewer share a term with it)."""
        return rank_hits(self.index, query.lower(), self.asin_of, k)

    def search_many(self, queries: Sequence[str], k: int = SEARCH_RETURN_N) -> list[list[int]]:
        """:meth:`search` for several queries."""
        return [self.search(q, k) for q in queries]


_CACHE: dict[tuple, ProductSearch] = {}
_LOCK = threading.Lock()


def search_for(shop, *, backend: str = "auto", index=None) -> ProductSearch:
    """The process-wide :class:`ProductSearch` of ``shop`` (built on first use, keyed by ``shop.key``;
    ``index``: a prebuilt index that first use takes instead of building one)."""
    key = (shop.key, backend)
    with _LOCK:
        found = _CACHE.get(key)
        if found is None:
            found = _CACHE[key] = ProductSearch(shop, backend=backend, index=index)
        return found
