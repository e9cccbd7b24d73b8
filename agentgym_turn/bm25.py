"""BM25 over a list of texts: the one search engine behind WebShop's search bar and the QA retriever.

Built on `bm25s <https://github.com/xhluca/bm25s>`_ (sparse precomputed scores; 100-1000x faster
than ``rank_bm25``), with the settings of the reference systems:

* **Scoring**: Lucene's BM25 with ``k1 = 0.9``, ``b = 0.4``, the Anserini/Pyserini defaults that
  both WebShop's product search and Search-R1's BM25 retriever run with.
* **Analysis** (``analyzer``): ``"bm25s"`` (the default) lower-cases, keeps word tokens of two or
  more characters (``\\b\\w\\w+\\b``), drops Lucene's 33 English stopwords and stems with
  Snowball English (PyStemmer). ``"lucene"`` follows Pyserini's default analyzer (Anserini's
  ``DefaultEnglishAnalyzer``: Lucene's ``StandardTokenizer``, ``EnglishPossessiveFilter``,
  ``LowerCaseFilter``, the same stopwords, ``PorterStemFilter``): single characters are tokens,
  ``3.4``, ``u.s.a`` and ``v1.2`` stay whole (UAX #29 rules for ``.``, ``'``, ``:``, ``,`` between
  letters or digits), a trailing ``'s`` goes, and words are stemmed by :func:`porter_stem`
  (Lucene's Porter stemmer, which PyStemmer's Snowball ``porter`` is not: ``assembly``). Not
  matched: UAX #29's finer rules for Katakana, Hangul and scripts without spaces, and the
  255-character token limit. Text is made encodable first (a lone surrogate becomes ``?``).
* **Length norm** (``length_norm``): ``"exact"`` uses each document's token count; ``"lucene"``
  uses it as Lucene 8 stores it, in one byte (``SmallFloat.intToByte4``: exact below 24 tokens,
  then 4 significant bits), as Pyserini 0.17 scores.
* **Backend**: numba for corpora of :data:`NUMBA_MIN_DOCS` documents or more (about 1 ms a query
  at 1M passages after a one-off JIT compile of a few seconds per process; call :meth:`warmup`),
  numpy below (no compile; sub-millisecond on small corpora). numba is the optional extra
  ``fast-search``; without it every corpus uses numpy (the same scores, to float rounding).

Documents with no query term in common score 0 and are never returned: a result row is padded
with index ``-1`` and score ``0``.
"""

from __future__ import annotations

import json
import os
import re
import threading
import warnings
from functools import lru_cache
from pathlib import Path
from typing import Sequence

import numpy as np

from .extras import install_command, require

#: Anserini/Pyserini default BM25 parameters (used by WebShop and Search-R1).
K1 = 0.9
B = 0.4
#: Corpora at least this large use the numba backend when numba is installed.
NUMBA_MIN_DOCS = 50_000
#: The analyzers :meth:`BM25Index.build` accepts (see the module docstring).
ANALYZERS = ("bm25s", "lucene")
#: The document-length norms :meth:`BM25Index.build` accepts.
LENGTH_NORMS = ("exact", "lucene")
_META = "agentgym_bm25.json"

_stemmer_lock = threading.Lock()
_stemmers: dict[str, object] = {}


def _get_stemmer(algorithm: str = "english"):
    with _stemmer_lock:
        if algorithm not in _stemmers:
            import Stemmer

            _stemmers[algorithm] = Stemmer.Stemmer(algorithm)
        return _stemmers[algorithm]


# Lucene's ENGLISH_STOP_WORDS_SET (also bm25s's "en" list)
LUCENE_STOPWORDS = frozenset(
    "a an and are as at be but by for if in into is it no not of on or such that the their then there these they this to was will with".split()
)
_IDEO = "\u3040-\u309f\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0002fa1f"  # Hiragana, Han
_EMOJI = "[\u00a9\u00ae\u203c\u2049\u2122\u2139\u2194-\u21aa\u231a-\u23ff\u24c2\u25aa-\u25fe\u2600-\u27bf\u2934\u2935\u2b05-\u2b55\U0001f000-\U0001faff]"
_W = rf"[^\W{_IDEO}]"  # a word character that is not an ideograph
_L = rf"[^\W\d_{_IDEO}]"  # a letter
# UAX #29 word tokens as Lucene's StandardTokenizer forms them: runs of letters, digits and "_"
# (ExtendNumLet), joined across "." "'" "’" between two letters or two digits (MidNumLet), ":"
# between letters (MidLetter) and "," ";" between digits (MidNum); each Han or Hiragana character
# and each emoji is a token of its own (emoji approximated by the main emoji blocks)
_LUCENE_TOKEN = re.compile(
    rf"{_W}+(?:(?:(?<={_L})[.'\u2019:](?={_L})|(?<=\d)[.'\u2019,;](?=\d)){_W}+)*"
    rf"|[{_IDEO}]|{_EMOJI}\ufe0f?(?:\u200d{_EMOJI}\ufe0f?)*"
)


# ---------------------------------------------------------------- Porter stemmer (Lucene's)
_VOWELS = frozenset("aeiou")


class _Porter:
    """Martin Porter's reference stemmer as Lucene's ``PorterStemmer`` implements it (with the
    reference code's two departures from the 1980 paper: ``bli -> ble`` and ``logi -> log``)."""

    __slots__ = ("b", "k", "j")

    def cons(self, i: int) -> bool:
        c = self.b[i]
        if c in _VOWELS:
            return False
        if c == "y":
            return i == 0 or not self.cons(i - 1)
        return True

    def m(self) -> int:
        n, i, j = 0, 0, self.j
        while True:
            if i > j:
                return n
            if not self.cons(i):
                break
            i += 1
        i += 1
        while True:
            while True:
                if i > j:
                    return n
                if self.cons(i):
                    break
                i += 1
            i += 1
            n += 1
            while True:
                if i > j:
                    return n
                if not self.cons(i):
                    break
                i += 1
            i += 1

    def vowel_in_stem(self) -> bool:
        return any(not self.cons(i) for i in range(self.j + 1))

    def doublec(self, j: int) -> bool:
        return j >= 1 and self.b[j] == self.b[j - 1] and self.cons(j)

    def cvc(self, i: int) -> bool:
        if i < 2 or not self.cons(i) or self.cons(i - 1) or not self.cons(i - 2):
            return False
        return self.b[i] not in "wxy"

    def ends(self, s: str) -> bool:
        n = len(s)
        if n > self.k + 1 or "".join(self.b[self.k - n + 1 : self.k + 1]) != s:
            return False
        self.j = self.k - n
        return True

    def setto(self, s: str) -> None:
        self.b[self.j + 1 :] = list(s)
        self.k = self.j + len(s)

    def r(self, s: str) -> None:
        if self.m() > 0:
            self.setto(s)

    def step1ab(self) -> None:
        b = self.b
        if b[self.k] == "s":
            if self.ends("sses"):
                self.k -= 2
            elif self.ends("ies"):
                self.setto("i")
            elif b[self.k - 1] != "s":
                self.k -= 1
            del b[self.k + 1 :]
        if self.ends("eed"):
            if self.m() > 0:
                self.k -= 1
        elif (self.ends("ed") or self.ends("ing")) and self.vowel_in_stem():
            self.k = self.j
            if self.ends("at"):
                self.setto("ate")
            elif self.ends("bl"):
                self.setto("ble")
            elif self.ends("iz"):
                self.setto("ize")
            elif self.doublec(self.k):
                self.k -= 1
                if b[self.k] in "lsz":
                    self.k += 1
            elif self.m() == 1 and self.cvc(self.k):
                self.j = self.k
                self.setto("e")
        del b[self.k + 1 :]

    def step1c(self) -> None:
        if self.ends("y") and self.vowel_in_stem():
            self.b[self.k] = "i"

    _STEP2 = {
        "a": (("ational", "ate"), ("tional", "tion")),
        "c": (("enci", "ence"), ("anci", "ance")),
        "e": (("izer", "ize"),),
        "l": (("bli", "ble"), ("alli", "al"), ("entli", "ent"), ("eli", "e"), ("ousli", "ous")),
        "o": (("ization", "ize"), ("ation", "ate"), ("ator", "ate")),
        "s": (("alism", "al"), ("iveness", "ive"), ("fulness", "ful"), ("ousness", "ous")),
        "t": (("aliti", "al"), ("iviti", "ive"), ("biliti", "ble")),
        "g": (("logi", "log"),),
    }
    _STEP3 = {
        "e": (("icate", "ic"), ("ative", ""), ("alize", "al")),
        "i": (("iciti", "ic"),),
        "l": (("ical", "ic"), ("ful", "")),
        "s": (("ness", ""),),
    }
    _STEP4 = {
        "a": ("al",),
        "c": ("ance", "ence"),
        "e": ("er",),
        "i": ("ic",),
        "l": ("able", "ible"),
        "n": ("ant", "ement", "ment", "ent"),
        "s": ("ism",),
        "t": ("ate", "iti"),
        "u": ("ous",),
        "v": ("ive",),
        "z": ("ize",),
    }

    def _replace(self, table: dict, key: str) -> None:
        for suffix, repl in table.get(key, ()):
            if self.ends(suffix):
                self.r(repl)
                return

    def step4(self) -> None:
        if self.k < 1:
            return
        key = self.b[self.k - 1]
        if key == "o":
            if not ((self.ends("ion") and self.j >= 0 and self.b[self.j] in "st") or self.ends("ou")):
                return
        else:
            if not any(self.ends(s) for s in self._STEP4.get(key, ())):
                return
        if self.m() > 1:
            self.k = self.j

    def step5(self) -> None:
        self.j = self.k
        if self.b[self.k] == "e":
            a = self.m()
            if a > 1 or (a == 1 and not self.cvc(self.k - 1)):
                self.k -= 1
        if self.b[self.k] == "l" and self.doublec(self.k) and self.m() > 1:
            self.k -= 1

    def stem(self, word: str) -> str:
        if len(word) <= 2:
            return word
        self.b, self.k, self.j = list(word), len(word) - 1, 0
        self.step1ab()
        if self.k > 0:
            self.step1c()
            if self.k > 0:
                self._replace(self._STEP2, self.b[self.k - 1])
            self._replace(self._STEP3, self.b[self.k])
            self.step4()
            self.step5()
        return "".join(self.b[: self.k + 1])


_PORTER = threading.local()


@lru_cache(maxsize=200_000)
def porter_stem(word: str) -> str:
    """``word`` stemmed by Lucene's ``PorterStemmer`` (``porter_stem("assembly") == "assembl"``)."""
    stemmer = getattr(_PORTER, "stemmer", None)
    if stemmer is None:
        stemmer = _PORTER.stemmer = _Porter()
    return stemmer.stem(word)


def _lucene_terms(text: str) -> list[str]:
    """Tokens of ``text`` after StandardTokenizer, EnglishPossessiveFilter, LowerCaseFilter and
    StopFilter (not yet stemmed)."""
    out = []
    for token in _LUCENE_TOKEN.findall(text):
        if token.strip("_") == "":
            continue  # UAX #29 gives no word for a run of "_" alone
        if len(token) >= 2 and token[-1] in "sS" and token[-2] in "'\u2019\uff07":
            token = token[:-2]
        token = token.lower()
        if token and token not in LUCENE_STOPWORDS:
            out.append(token)
    return out


_POWERS_OF_TWO = np.array([1 << i for i in range(62)], dtype=np.int64)


def lucene_length(lengths: np.ndarray) -> np.ndarray:
    """Document lengths as Lucene 8 decodes them from its one-byte norm (``SmallFloat.intToByte4``
    then ``byte4ToInt``): exact below 24, then rounded down to 4 significant bits above 24."""
    n = np.asarray(lengths, dtype=np.int64)
    free = 24  # NUM_FREE_VALUES = 255 - longToInt4(Integer.MAX_VALUE)
    x = np.maximum(n - free, 0)
    bit_length = np.searchsorted(_POWERS_OF_TWO, x, side="right")  # Java's 64 - numberOfLeadingZeros
    shift = np.maximum(bit_length - 4, 0)
    kept = (x >> shift) << shift  # longToInt4 keeps the 4 most significant bits
    return np.where(n < free, n, free + kept)


def _encodable(text: str) -> str:
    """``text`` with anything UTF-8 cannot encode (lone surrogates) replaced by ``?``."""
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return text.encode("utf-8", errors="replace").decode("utf-8")


def top_k(scores: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """The (at most) ``k`` documents of positive score, best first, equal scores by lower index.

    Equal BM25 scores are common (documents with the same term counts and length), and numpy's
    partition and sort order equal values differently on different SIMD targets (AVX-512, AVX2,
    baseline); fixing the order here makes every search, and so every episode, the same on
    every CPU. Returns ``(indices int64, scores float32)``, shorter than ``k`` when fewer
    documents score above 0.
    """
    n = scores.shape[0]
    if k < n:
        kth = np.partition(scores, n - k)[n - k]  # the k-th largest value: one value, whatever the algorithm
        candidates = np.flatnonzero(scores >= kth) if kth > 0 else np.flatnonzero(scores > 0)
    else:
        candidates = np.flatnonzero(scores > 0)
    chosen = candidates[np.lexsort((candidates, -scores[candidates]))[:k]]
    return chosen.astype(np.int64), scores[chosen].astype(np.float32)


def _check_analyzer(analyzer: str) -> None:
    if analyzer not in ANALYZERS:
        raise ValueError(f"analyzer must be one of {ANALYZERS}, got {analyzer!r}.")


def tokenize_many(texts: Sequence[str], *, show_progress: bool = False, analyzer: str = "bm25s") -> list[list[str]]:
    """Analyse ``texts`` into lists of stemmed terms with ``analyzer`` (see the module docstring)."""
    _check_analyzer(analyzer)
    cleaned = [_encodable(t) for t in texts]
    if analyzer == "lucene":
        return [[porter_stem(w) for w in _lucene_terms(t)] for t in cleaned]
    if not show_progress and len(cleaned) <= _SMALL_BATCH:
        return _bm25s_terms(cleaned)
    import bm25s

    return bm25s.tokenize(
        cleaned, stopwords="en", stemmer=_get_stemmer(), return_ids=False, show_progress=show_progress
    )


#: Up to this many texts (queries, a page of titles) are analysed by :func:`_bm25s_terms`; larger batches (an
#: index build) by ``bm25s.tokenize``, which stems each distinct word once.
_SMALL_BATCH = 64
_BM25S_TOKEN = re.compile(r"(?u)\b\w\w+\b")  # bm25s's (and scikit-learn's) default token pattern


def _bm25s_terms(texts: Sequence[str]) -> list[list[str]]:
    """What ``bm25s.tokenize(texts, stopwords="en", stemmer=<English>, return_ids=False)`` returns, without
    its per-call progress-bar objects (four tqdm constructions a call: half the analysis time of one query,
    which a retrieval server pays per request). Lower-case, the token pattern, the English stopwords, stemming."""
    stem = _get_stemmer().stemWords
    out = []
    for text in texts:
        words = [w for w in _BM25S_TOKEN.findall(text.lower()) if w not in LUCENE_STOPWORDS]
        out.append(list(stem(words)) if words else [])
    return out


def tokenize(text: str, *, analyzer: str = "bm25s") -> list[str]:
    """Analyse one text into its stemmed terms: ``tokenize("Red running shoes") == ["red", "run", "shoe"]``."""
    return tokenize_many([text], analyzer=analyzer)[0]


def _numba_available() -> bool:
    try:
        import numba  # noqa: F401
    except ImportError:
        return False
    return True


def _choose_backend(backend: str, num_docs: int) -> str:
    """``"numba"`` or ``"numpy"`` for ``backend`` over ``num_docs`` documents. numba is the optional
    ``fast-search`` extra: ``"auto"`` falls back to numpy without it (the same scores to float rounding,
    slower queries on large corpora, said once in a warning); an explicit ``"numba"`` without it is an error naming the extra."""
    if backend == "auto":
        if num_docs < NUMBA_MIN_DOCS:
            return "numpy"
        if _numba_available():
            return "numba"
        warnings.warn(
            f"BM25 over {num_docs:,} documents runs on numpy: numba is not installed. For faster queries: "
            f"{install_command('fast-search')}.",
            RuntimeWarning,
            stacklevel=3,
        )
        return "numpy"
    if backend not in ("numpy", "numba"):
        raise ValueError(f"backend must be 'auto', 'numpy' or 'numba', got {backend!r}.")
    if backend == "numba":
        require("fast-search", "BM25 backend='numba'", alternative="use backend='auto' (numpy without numba)")
    return backend


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


def _fast_bm25_class():
    """``bm25s.BM25`` with a vectorised ``build_index_from_ids`` for a flat token-id corpus.

    bm25s documents ``build_index_from_ids`` as the method to override "to build the index in a
    different way". Its own version loops over documents in Python (about a minute for a
    million documents); this one computes the same arrays with numpy, using bm25s's own idf and
    term-frequency scorers and its CSC layout, so the index is identical (tested) and the
    retrieval code is bm25s's. With ``length_norm = "lucene"`` the term-frequency part sees each
    document's length as Lucene stores it (:func:`lucene_length`), the average stays exact.
    """
    import bm25s
    from bm25s.scoring import _select_idf_scorer, _select_tfc_scorer

    class FastIdsBM25(bm25s.BM25):
        length_norm = "exact"

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
            scored_len = lucene_length(doc_len) if self.length_norm == "lucene" else doc_len
            # bm25s's scorer on float32 counts and a float64 average length computes in float64
            tfc = _select_tfc_scorer(self.method)(
                tf_array=tf.astype(self.dtype),
                l_d=scored_len[pair_doc],
                l_avg=avg_doc_len,
                k1=self.k1,
                b=self.b,
                delta=self.delta,
            )
            data = (idf[pair_tok] * tfc).astype(self.dtype)
            indptr = np.zeros(n_vocab + 1, dtype=np.int64)
            np.cumsum(df, out=indptr[1:])
            indices = pair_doc.astype(self.int_dtype)
            return {"data": data.astype(self.dtype), "indices": indices, "indptr": indptr, "num_docs": n_docs}

    return FastIdsBM25


class BM25Index:
    """A BM25 index over ``num_docs`` texts; documents are identified by their position.

    ``analyzer`` is the analyzer its documents were indexed with; queries are analysed alike.
    """

    def __init__(self, retriever, num_docs: int, *, analyzer: str = "bm25s"):
        _check_analyzer(analyzer)
        self._retriever = retriever
        self.num_docs = int(num_docs)
        self.analyzer = analyzer
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
        analyzer: str = "bm25s",
        length_norm: str = "exact",
    ) -> "BM25Index":
        """Index ``texts`` (document ``i`` is ``texts[i]``) with ``analyzer`` and ``length_norm``
        (see the module docstring; ``"lucene"`` for both scores as Pyserini does)."""
        import bm25s

        if len(texts) == 0:
            raise ValueError("Cannot build a BM25 index over zero texts.")
        if length_norm not in LENGTH_NORMS:
            raise ValueError(f"length_norm must be one of {LENGTH_NORMS}, got {length_norm!r}.")
        tokens = tokenize_many(texts, show_progress=show_progress, analyzer=analyzer)
        if analyzer == "bm25s" and length_norm == "exact":
            retriever = bm25s.BM25(k1=k1, b=b, method="lucene", backend=_choose_backend(backend, len(texts)))
            retriever.index(tokens, show_progress=show_progress)
            return cls(retriever, len(texts))
        vocab: dict[str, int] = {}
        ids = [np.array([vocab.setdefault(t, len(vocab)) for t in doc], dtype=np.int32) for doc in tokens]
        offsets = np.zeros(len(ids) + 1, dtype=np.int64)
        np.cumsum([len(d) for d in ids], out=offsets[1:])
        flat = np.concatenate(ids) if ids else np.zeros(0, np.int32)
        return cls.from_token_ids(
            flat, offsets, vocab, k1=k1, b=b, backend=backend, analyzer=analyzer, length_norm=length_norm
        )

    @classmethod
    def from_token_ids(
        cls,
        flat: np.ndarray,
        offsets: np.ndarray,
        vocab: dict[str, int],
        *,
        k1: float = K1,
        b: float = B,
        backend: str = "auto",
        analyzer: str = "bm25s",
        length_norm: str = "exact",
    ) -> "BM25Index":
        """An index over documents already analysed into token ids: document ``i`` is
        ``flat[offsets[i]:offsets[i + 1]]`` and ``vocab`` maps each term to its id (``analyzer`` is
        what made the terms; queries are analysed with it)."""
        if length_norm not in LENGTH_NORMS:
            raise ValueError(f"length_norm must be one of {LENGTH_NORMS}, got {length_norm!r}.")
        vocab.setdefault("", len(vocab))  # bm25s's empty token, as its own tokenizer adds it
        n = len(offsets) - 1
        retriever = _fast_bm25_class()(k1=k1, b=b, method="lucene", backend=_choose_backend(backend, n))
        retriever.length_norm = length_norm
        retriever.index(_Tokenized(_LazyDocs(flat, offsets), vocab), show_progress=False)
        return cls(retriever, n, analyzer=analyzer)

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
        vocab = self._retriever.vocab_dict
        query_tokens = [
            [t for t in toks if t in vocab] for toks in tokenize_many(list(queries), analyzer=self.analyzer)
        ]
        # a query with no indexed term matches nothing (bm25s's numba path rejects an empty one)
        rows = [i for i, toks in enumerate(query_tokens) if toks]
        if not rows:
            return indices, scores
        k_eff = min(k, self.num_docs)
        if self.backend == "numba":  # its compiled top-k, then the same tie order as below
            docs, vals = self._retriever.retrieve(
                [query_tokens[i] for i in rows], k=k_eff, show_progress=False, n_threads=1
            )
            docs = np.asarray(docs, dtype=np.int64).reshape(len(rows), k_eff)
            vals = np.asarray(vals, dtype=np.float32).reshape(len(rows), k_eff)
            order = np.lexsort((docs, -vals), axis=-1)
            docs, vals = np.take_along_axis(docs, order, -1), np.take_along_axis(vals, order, -1)
        else:
            docs = np.zeros((len(rows), k_eff), dtype=np.int64)
            vals = np.zeros((len(rows), k_eff), dtype=np.float32)
            for j, i in enumerate(rows):
                found, best = top_k(np.asarray(self._retriever.get_scores(query_tokens[i]), dtype=np.float32), k_eff)
                docs[j, : len(found)], vals[j, : len(found)] = found, best
        hit = vals > 0
        indices[rows, :k_eff] = np.where(hit, docs, -1)
        scores[rows, :k_eff] = np.where(hit, vals, 0.0)
        return indices, scores

    def scores(self, query: str) -> np.ndarray:
        """The BM25 score of every document for ``query``: ``float32``, shape ``(num_docs,)``, 0
        where the document shares no term with it."""
        tokens = tokenize_many([query], analyzer=self.analyzer)[0]
        known = [t for t in tokens if t in self._retriever.vocab_dict]
        if not known:
            return np.zeros(self.num_docs, dtype=np.float32)
        return np.asarray(self._retriever.get_scores(known), dtype=np.float32)

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
        (directory / _META).write_text(json.dumps({"num_docs": self.num_docs, "format": 1, "analyzer": self.analyzer}))

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
        return cls(retriever, num_docs, analyzer=str(meta.get("analyzer", "bm25s")))
