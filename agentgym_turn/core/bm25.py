"""BM25 over a list of texts: the one search engine behind WebShop's search bar and the QA retriever.

Built on `bm25s <https://github.com/xhluca/bm25s>`_ (sparse precomputed scores; 100-1000x faster
than ``rank_bm25``), with the settings of the reference systems:

* **Scoring**: Lucene's BM25 with ``k1 = 0.9``, ``b = 0.4``, the Anserini/Pyserini defaults that
  both WebShop's product search and Search-R1's BM25 retriever run with.
* **Analysis**: lower-case, word tokens of two or more characters (``\\b\\w\\w+\\b``), English
  stopwords removed, Snowball English stemming (PyStemmer). Pyserini's default analyzer uses the
  Porter stemmer; Snowball English is its successor ("Porter2"), so a few rare words stem
  differently. Text is made encodable first (a lone surrogate becomes ``?``), so any query works.
* **Backend**: numba for corpora of :data:`NUMBA_MIN_DOCS` documents or more (about 1 ms a query
  at 1M passages after a one-off JIT compile of a few seconds per process; call :meth:`warmup`),
  numpy below (no compile; sub-millisecond on small corpora).

Documents with no query term in common score 0 and are never returned: a result row is padded
with index ``-1`` and score ``0``.
"""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from typing import Sequence

import numpy as np

__all__ = ["BM25Index", "tokenize", "tokenize_many", "K1", "B", "NUMBA_MIN_DOCS"]

#: Anserini/Pyserini default BM25 parameters (used by WebShop and Search-R1).
K1 = 0.9
B = 0.4
#: Corpora at least this large use the numba backend when numba is installed.
NUMBA_MIN_DOCS = 50_000
_META = "agentgym_bm25.json"

_stemmer_lock = threading.Lock()
_stemmer = None


def _get_stemmer():
    global _stemmer
    with _stemmer_lock:
        if _stemmer is None:
            import Stemmer

            _stemmer = Stemmer.Stemmer("english")
        return _stemmer


def _encodable(text: str) -> str:
    """``text`` with anything UTF-8 cannot encode (lone surrogates) replaced by ``?``."""
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return text.encode("utf-8", errors="replace").decode("utf-8")


def tokenize_many(texts: Sequence[str], *, show_progress: bool = False) -> list[list[str]]:
    """Analyse ``texts`` into lists of stemmed terms (see the module docstring)."""
    import bm25s

    cleaned = [_encodable(t) for t in texts]
    return bm25s.tokenize(
        cleaned, stopwords="en", stemmer=_get_stemmer(), return_ids=False, show_progress=show_progress
    )


def tokenize(text: str) -> list[str]:
    """Analyse one text into its stemmed terms: ``tokenize("Red running shoes") == ["red", "run", "shoe"]``."""
    return tokenize_many([text])[0]


def _numba_available() -> bool:
    try:
        import numba  # noqa: F401
    except ImportError:
        return False
    return True


def _choose_backend(backend: str, num_docs: int) -> str:
    if backend == "auto":
        return "numba" if num_docs >= NUMBA_MIN_DOCS and _numba_available() else "numpy"
    if backend not in ("numpy", "numba"):
        raise ValueError(f"backend must be 'auto', 'numpy' or 'numba', got {backend!r}.")
    if backend == "numba" and not _numba_available():
        raise ImportError("backend='numba' needs numba: pip install numba (or use backend='auto').")
    return backend


class BM25Index:
    """A BM25 index over ``num_docs`` texts; documents are identified by their position."""

    def __init__(self, retriever, num_docs: int):
        self._retriever = retriever
        self.num_docs = int(num_docs)
        self._warm = False

    @property
    def backend(self) -> str:
        return self._retriever.backend

    @classmethod
    def build(
        cls,
        texts: Sequence[str],
        *,
        k1: float = K1,
        b: float = B,
        backend: str = "auto",
        show_progress: bool = False,
    ) -> "BM25Index":
        """Index ``texts`` (document ``i`` is ``texts[i]``)."""
        import bm25s

        if len(texts) == 0:
            raise ValueError("Cannot build a BM25 index over zero texts.")
        tokens = tokenize_many(texts, show_progress=show_progress)
        retriever = bm25s.BM25(k1=k1, b=b, method="lucene", backend=_choose_backend(backend, len(texts)))
        retriever.index(tokens, show_progress=show_progress)
        return cls(retriever, len(texts))

    def search(self, queries: Sequence[str], k: int) -> tuple[np.ndarray, np.ndarray]:
        """Top-``k`` documents for each query.

        Returns:
            ``(indices, scores)``, both of shape ``(len(queries), k)``, best first; ``indices`` is
            ``int64`` with ``-1`` where fewer than ``k`` documents share a term with the query,
            ``scores`` is ``float32`` with ``0`` there.
        """
        if k < 1:
            raise ValueError(f"k must be at least 1, got {k}.")
        n = len(queries)
        indices = np.full((n, k), -1, dtype=np.int64)
        scores = np.zeros((n, k), dtype=np.float32)
        if n == 0:
            return indices, scores
        query_tokens = tokenize_many(list(queries))
        k_eff = min(k, self.num_docs)
        kwargs = {"n_threads": 1} if self.backend == "numba" else {}
        docs, vals = self._retriever.retrieve(query_tokens, k=k_eff, show_progress=False, **kwargs)
        docs = np.asarray(docs, dtype=np.int64).reshape(n, k_eff)
        vals = np.asarray(vals, dtype=np.float32).reshape(n, k_eff)
        hit = vals > 0
        indices[:, :k_eff] = np.where(hit, docs, -1)
        scores[:, :k_eff] = np.where(hit, vals, 0.0)
        return indices, scores

    def warmup(self) -> None:
        """Run one query so that a numba backend compiles now rather than on the first real search."""
        if not self._warm:
            self._retriever.retrieve([["warmup"]], k=1, show_progress=False)
            self._warm = True

    def save(self, directory: str | os.PathLike) -> None:
        """Write the index to ``directory`` (numpy arrays, loadable memory-mapped)."""
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        self._retriever.save(str(directory), show_progress=False)
        (directory / _META).write_text(json.dumps({"num_docs": self.num_docs, "format": 1}))

    @classmethod
    def load(cls, directory: str | os.PathLike, *, mmap: bool = True, backend: str = "auto") -> "BM25Index":
        """Load an index written by :meth:`save`; ``mmap=True`` maps the arrays instead of reading them."""
        import bm25s

        directory = Path(directory)
        meta_path = directory / _META
        if not meta_path.exists():
            raise FileNotFoundError(f"{directory} holds no index written by BM25Index.save ({_META} is missing).")
        meta = json.loads(meta_path.read_text())
        num_docs = int(meta["num_docs"])
        retriever = bm25s.BM25.load(str(directory), mmap=mmap, show_progress=False, verbosity=0)
        chosen = _choose_backend(backend, num_docs)
        if chosen != retriever.backend:
            retriever.backend = chosen
            if chosen == "numba":
                retriever.compile(activate_numba=True, warmup=False)
        return cls(retriever, num_docs)
