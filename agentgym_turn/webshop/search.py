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


def _fast_bm25_class():
    """``bm25s.BM25`` with a vectorised ``build_index_from_ids`` for a flat token-id corpus.

    bm25s documents ``build_index_from_ids`` as the method to override "to build the index in a
    different way". Its own version loops over documents in Python (about a minute for a
    million products); this one computes the same arrays with numpy, using bm25s's own idf and
    term-frequency scorers and its CSC layout, so the index is identical (tested) and the
    retrieval code is bm25s's.
    """
    import bm25s
    from bm25s.scoring import _select_idf_scorer, _select_tfc_scorer

    class FastIdsBM25(bm25s.BM25):
        def build_index_from_ids(self, unique_token_ids, corpus_token_ids, show_progress=True, leave_progress=False):
            if not isinstance(corpus_token_ids, _LazyDocs) or self.method in self.methods_requiring_nonoccurrence:
                return super().build_index_from_ids(unique_token_ids, corpus_token_ids, show_progress, leave_progress)
            self.nonoccurrence_array = None  # as bm25s sets it for methods without one
            flat, offsets = corpus_token_ids.flat, corpus_token_ids.offsets
            n_docs, n_vocab = len(offsets) - 1, len(unique_token_ids)
            doc_len = np.diff(offsets)
            avg_doc_len = doc_len.mean()
            # (token, document) keys sorted once give the pairs already in CSC order (by token, then
            # document), which is the order bm25s's own CSC step sorts into
            keys = flat.astype(np.int64) * n_docs
            keys += np.repeat(np.arange(n_docs, dtype=np.int64), doc_len)
            keys.sort()
            new = np.empty(len(keys), dtype=bool)
            new[:1] = True
            np.not_equal(keys[1:], keys[:-1], out=new[1:])
            first = np.flatnonzero(new)
            del new
            tf = np.diff(np.append(first, len(keys)))
            pairs = keys[first]
            del keys, first
            pair_tok, pair_doc = pairs // n_docs, pairs % n_docs
            del pairs
            df = np.bincount(pair_tok, minlength=n_vocab)
            idf_fn = _select_idf_scorer(self.idf_method)
            values, which = np.unique(df, return_inverse=True)
            per_value = np.array([idf_fn(v, N=n_docs) if v else 0.0 for v in values.tolist()])  # bm25s's scalar idf
            idf = per_value[which].astype(self.dtype)
            # bm25s's scorer on float32 counts and a float64 average length computes in float64
            tfc = _select_tfc_scorer(self.method)(
                tf_array=tf.astype(self.dtype), l_d=doc_len[pair_doc], l_avg=avg_doc_len, k1=self.k1, b=self.b, delta=self.delta
            )
            data = (idf[pair_tok] * tfc).astype(self.dtype)
            indptr = np.zeros(n_vocab + 1, dtype=np.int64)
            np.cumsum(df, out=indptr[1:])
            indices = pair_doc.astype(self.int_dtype)
            return {"data": data.astype(self.dtype), "indices": indices, "indptr": indptr, "num_docs": n_docs}

    return FastIdsBM25


class _Tokenized:
    """What ``bm25s.BM25.index`` takes: ``ids`` (per-document token ids) and ``vocab`` (stem -> id)."""

    def __init__(self, ids, vocab: dict[str, int]):
        self.ids, self.vocab = ids, vocab


def _index_from_layout(pieces: list[str], slots: np.ndarray, backend: str):
    """A :class:`BM25Index` whose document ``i`` is the concatenation of the pieces in ``slots[i]``."""
    from ..core.bm25 import B, K1, NUMBA_MIN_DOCS, BM25Index, tokenize_many

    stems = tokenize_many(pieces)
    vocab: dict[str, int] = {}
    piece_tokens = [np.array([vocab.setdefault(t, len(vocab)) for t in toks], dtype=np.int32) for toks in stems]
    vocab.setdefault("", len(vocab))  # bm25s's empty token, as its own tokenizer adds it
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
    n = slots.shape[0]
    if backend == "auto":
        try:
            import numba  # noqa: F401

            backend = "numba" if n >= NUMBA_MIN_DOCS else "numpy"
        except ImportError:
            backend = "numpy"
    retriever = _fast_bm25_class()(k1=K1, b=B, method="lucene", backend=backend)
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
