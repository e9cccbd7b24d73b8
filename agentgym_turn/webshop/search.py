"""Product search: BM25 over WebShop's indexed fields, top 50 hits, 10 to a results page.

WebShop indexes, per product, ``Title + Description + BulletPoints[0] + option text``
(lower-cased; ``search_engine/convert_product_file_format.py``) with Lucene BM25 through
Pyserini and returns the top :data:`SEARCH_RETURN_N` = 50 hits. We use the project's shared
:class:`~agentgym_turn.core.bm25.BM25Index` (bm25s; Lucene's BM25 with Anserini's k1=0.9,
b=0.4), built once per catalog and shared by every env of the process.

For a generated catalog the index is built from pre-analysed pieces (each distinct brand,
attribute, option value... is analysed once, see ``catalog._index_layout``), which gives the
same token ids as analysing each document's text and is several times faster at a million
products.
"""

from __future__ import annotations

import threading
from typing import Sequence

import numpy as np

__all__ = ["ProductSearch", "SEARCH_RETURN_N", "PRODUCT_WINDOW", "search_for"]

#: Hits a search returns (WebShop's ``SEARCH_RETURN_N``).
SEARCH_RETURN_N = 50
#: Products on a results page (WebShop's ``PRODUCT_WINDOW``).
PRODUCT_WINDOW = 10


class _LazyDocs:
    """Document token-id lists made on the fly from one flat array (no 40M Python ints at once)."""

    def __init__(self, flat: np.ndarray, offsets: np.ndarray):
        self.flat, self.offsets = flat, offsets

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def __iter__(self):
        flat, off = self.flat, self.offsets
        for i in range(len(off) - 1):
            yield flat[off[i] : off[i + 1]].tolist()


class _Tokenized:
    """What ``bm25s.BM25.index`` takes: ``ids`` (per-document token ids) and ``vocab`` (stem -> id)."""

    def __init__(self, ids, vocab: dict[str, int]):
        self.ids, self.vocab = ids, vocab


def _index_from_layout(pieces: list[str], slots: np.ndarray, backend: str):
    """A :class:`BM25Index` whose document ``i`` is the concatenation of the pieces in ``slots[i]``."""
    import bm25s

    from ..core.bm25 import B, K1, NUMBA_MIN_DOCS, BM25Index, tokenize_many

    stems = tokenize_many(pieces)
    vocab: dict[str, int] = {}
    piece_tokens = [np.array([vocab.setdefault(s, len(vocab)) for s in toks], dtype=np.int32) for toks in stems]
    vocab.setdefault("", len(vocab))  # bm25s's empty token, as its own tokenizer adds it
    lengths = np.array([len(p) for p in piece_tokens], dtype=np.int64)
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])
    flat_pieces = np.concatenate(piece_tokens) if piece_tokens else np.zeros(0, np.int32)
    ids = slots.reshape(-1).astype(np.int64)
    valid = ids >= 0
    ids = ids[valid]
    count = lengths[ids]
    first = np.repeat(starts[ids], count)
    within = np.arange(count.sum()) - np.repeat(np.cumsum(count) - count, count)
    flat = flat_pieces[first + within]
    per_doc = np.zeros(slots.shape[0], dtype=np.int64)
    np.add.at(per_doc, np.nonzero(valid)[0] // slots.shape[1], lengths[slots.reshape(-1)[valid]])
    offsets = np.concatenate([[0], np.cumsum(per_doc)])
    n = slots.shape[0]
    if backend == "auto":
        try:
            import numba  # noqa: F401

            backend = "numba" if n >= NUMBA_MIN_DOCS else "numpy"
        except ImportError:
            backend = "numpy"
    retriever = bm25s.BM25(k1=K1, b=B, method="lucene", backend=backend)
    retriever.index(_Tokenized(_LazyDocs(flat, offsets), vocab), show_progress=False)
    return BM25Index(retriever, n)


class ProductSearch:
    """The search engine of one catalog: ``search(query)`` gives up to 50 product indices."""

    def __init__(self, shop, *, backend: str = "auto"):
        from ..core.bm25 import BM25Index

        self.shop = shop
        layout = getattr(shop, "index_layout", None)
        if layout is not None:
            self.index = _index_from_layout(*layout(), backend=backend)
        else:
            self.index = BM25Index.build(list(shop.index_texts()), backend=backend)
        self.index.warmup()

    def search(self, query: str, k: int = SEARCH_RETURN_N) -> list[int]:
        """Indices of the best ``k`` products for ``query`` (best first; fewer when fewer match)."""
        indices, _ = self.index.search([query.lower()], k)
        row = indices[0]
        return [int(i) for i in row[row >= 0]]

    def search_many(self, queries: Sequence[str], k: int = SEARCH_RETURN_N) -> list[list[int]]:
        """:meth:`search` for several queries at once."""
        indices, _ = self.index.search([q.lower() for q in queries], k)
        return [[int(i) for i in row[row >= 0]] for row in indices]


_CACHE: dict[tuple, ProductSearch] = {}
_LOCK = threading.Lock()


def search_for(shop, *, backend: str = "auto") -> ProductSearch:
    """The process-wide :class:`ProductSearch` of ``shop`` (built on first use, keyed by ``shop.key``)."""
    key = (shop.key, backend)
    with _LOCK:
        found = _CACHE.get(key)
        if found is None:
            found = _CACHE[key] = ProductSearch(shop, backend=backend)
        return found
