import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as hst

from agentgym_turn.bm25 import B, K1, BM25Index, _bm25s_terms, _encodable, _get_stemmer, tokenize, tokenize_many
from agentgym_turn.testing import strategies as st_turn

DOCS = [
    "red running shoes for men",
    "blue summer dress for women",
    "a red wine glass set of four",
    "men's leather running belt",
    "the cat sat on the mat",
]


def test_tokenize__lowercases_drops_stopwords_and_stems():
    assert tokenize("The Red RUNNING shoes, for men!") == ["red", "run", "shoe", "men"]
    assert tokenize("a the of") == []


@given(hst.lists(st_turn.responses(), max_size=5))
def test_small_batch_analysis__equals_bm25s_tokenize(texts):
    """Queries skip ``bm25s.tokenize``'s progress bars; their terms must stay exactly bm25s's (index and query agree)."""
    import bm25s

    cleaned = [_encodable(t) for t in texts]
    expected = (
        bm25s.tokenize(cleaned, stopwords="en", stemmer=_get_stemmer(), return_ids=False, show_progress=False)
        if cleaned
        else []
    )
    assert _bm25s_terms(cleaned) == [list(t) for t in expected]
    assert tokenize_many(texts) == [list(t) for t in expected]


def test_search__ranks_by_lucene_bm25_hand_computed():
    index = BM25Index.build(DOCS)
    ids, scores = index.search(["red shoes"], k=3)
    assert ids[0].tolist() == [0, 2, -1] and scores[0, 2] == 0.0
    # Lucene BM25 by hand: idf = ln(1 + (N - df + 0.5) / (df + 0.5)); tf part = tf / (tf + k1 (1 - b + b dl / avgdl))
    lengths = [len(tokenize(d)) for d in DOCS]
    avgdl = sum(lengths) / len(lengths)

    def term(df, dl):
        idf = math.log(1 + (len(DOCS) - df + 0.5) / (df + 0.5))
        return idf * 1 / (1 + K1 * (1 - B + B * dl / avgdl))

    expected_doc0 = term(2, lengths[0]) + term(1, lengths[0])  # "red" in docs 0, 2; "shoe" in doc 0
    expected_doc2 = term(2, lengths[2])
    assert scores[0, 0] == pytest.approx(expected_doc0, rel=1e-5)
    assert scores[0, 1] == pytest.approx(expected_doc2, rel=1e-5)


def test_search__pads_when_k_exceeds_the_corpus_and_handles_empty_queries():
    index = BM25Index.build(DOCS[:2])
    ids, scores = index.search(["", "zzz", "dress"], k=4)
    assert ids.shape == (3, 4) and (ids[:2] == -1).all() and ids[2].tolist() == [1, -1, -1, -1]


def test_save_and_load_memory_mapped_gives_the_same_results(tmp_path):
    index = BM25Index.build(DOCS)
    index.save(tmp_path / "idx")
    loaded = BM25Index.load(tmp_path / "idx", mmap=True)
    for q in ("red", "running men", "mat cat"):
        a, b = index.search([q], 5), loaded.search([q], 5)
        assert np.array_equal(a[0], b[0]) and np.allclose(a[1], b[1])


def test_numba_backend_agrees_with_numpy():
    pytest.importorskip("numba")
    texts = [
        f"item {i} colour {c} size {s}"
        for i, (c, s) in enumerate(zip(["red", "blue", "green"] * 40, ["small", "large"] * 60))
    ]
    a = BM25Index.build(texts, backend="numpy")
    b = BM25Index.build(texts, backend="numba")
    for q in ("red small", "green", "item 7 large"):
        ra, rb = a.search([q], 10), b.search([q], 10)
        assert np.allclose(ra[1], rb[1], atol=1e-5)


@given(st_turn.responses())
def test_search__any_query_string_is_safe(query):
    ids, scores = _SMALL.search([query[:5000]], k=3)
    assert ids.shape == (1, 3) and np.isfinite(scores).all()


_SMALL = BM25Index.build(DOCS)


# ---------------------------------------------------------------- Pyserini's analyzer and norms
def test_lucene_analyzer__tokens_as_pyserini_017_printed_them():
    # Analyzer(get_lucene_analyzer()).analyze(...) in pyserini 0.17.0 (Anserini DefaultEnglishAnalyzer)
    text = "Blue summer dress for women, 3.4 fl oz U.S.A men's x-large 4x e.g. color:red a.1 v1.2 The running"
    assert tokenize(text, analyzer="lucene") == [
        "blue",
        "summer",
        "dress",
        "women",
        "3.4",
        "fl",
        "oz",
        "u.s.a",
        "men",
        "x",
        "larg",
        "4x",
        "e.g",
        "color:r",
        "1",
        "v1.2",
        "run",
    ]
    assert tokenize('Café ☕ mug – 350 ml, 10" / 8" pan', analyzer="lucene") == [
        "café",
        "☕",
        "mug",
        "350",
        "ml",
        "10",
        "8",
        "pan",
    ]
    assert tokenize("\udfff x", analyzer="lucene") == ["x"]


def test_porter_stem__lucene_porter_not_snowball():
    from agentgym_turn.bm25 import porter_stem

    cases = {
        "assembly": "assembl",
        "archaeology": "archaeolog",
        "generalizations": "gener",
        "oscillators": "oscil",
        "conditional": "condit",
        "caresses": "caress",
        "ponies": "poni",
        "hopping": "hop",
        "filing": "file",
        "happy": "happi",
        "sensibiliti": "sensibl",
        "adoption": "adopt",
        "controll": "control",
        "a": "a",
        "is": "is",
    }
    assert {w: porter_stem(w) for w in cases} == cases


def test_lucene_length__smallfloat_byte4_round_trip():
    from agentgym_turn.bm25 import lucene_length

    def java(n):  # SmallFloat.byte4ToInt(SmallFloat.intToByte4(n)), written out from Lucene 8
        if n < 24:
            return n
        x = n - 24
        shift = max(x.bit_length() - 4, 0)
        return 24 + ((x >> shift) << shift)

    ns = np.array([0, 1, 23, 24, 39, 40, 41, 55, 56, 57, 100, 1000, 65_535, 2**31 - 1])
    assert lucene_length(ns).tolist() == [java(int(n)) for n in ns] and lucene_length(ns)[[9, 10]].tolist() == [56, 96]


def test_lucene_length_norm__scores_with_the_stored_length():
    docs = [" ".join(f"w{i}" for i in range(n)) + " red" for n in (3, 60, 100)]
    exact = BM25Index.build(docs, analyzer="lucene", length_norm="exact")
    lucene = BM25Index.build(docs, analyzer="lucene", length_norm="lucene")
    lengths = [4, 61, 101]
    avgdl = sum(lengths) / 3
    idf = math.log(1 + (3 - 3 + 0.5) / (3 + 0.5))

    def score(dl):
        return idf / (1 + K1 * (1 - B + B * dl / avgdl))

    for index, used in (
        (exact, lengths),
        (lucene, [4, 60, 96]),
    ):  # 61 -> 24 + (37 >> 2 << 2), 101 -> 24 + (77 >> 3 << 3)
        ids, scores = index.search(["red"], k=3)
        assert sorted(scores[0].tolist(), reverse=True) == pytest.approx(
            sorted((score(d) for d in used), reverse=True), rel=1e-5
        )


def test_analyzer__survives_save_and_load(tmp_path):
    index = BM25Index.build(DOCS, analyzer="lucene", length_norm="lucene")
    index.save(tmp_path / "idx")
    loaded = BM25Index.load(tmp_path / "idx")
    assert loaded.analyzer == "lucene"
    a, b = index.search(["men's running"], 5), loaded.search(["men's running"], 5)
    assert np.array_equal(a[0], b[0]) and np.allclose(a[1], b[1])
    with pytest.raises(ValueError, match="analyzer"):
        BM25Index.build(DOCS, analyzer="snowball")


@pytest.mark.parametrize("backend", ["numpy", "numba"])
def test_search__a_query_with_no_indexed_term_matches_nothing_on_every_backend(backend):
    if backend == "numba":
        pytest.importorskip("numba")
    index = BM25Index.build(DOCS * 3, backend=backend)
    ids, scores = index.search(["", "the of", "zzz", "red"], k=2)
    assert (ids[:3] == -1).all() and (scores[:3] == 0).all() and (ids[3] >= 0).all()
    assert not index.scores("the").any() and index.scores("red").shape == (15,)


@given(hst.lists(hst.sampled_from([0.0, 0.5, 1.25, 1.25, 2.0, 3.5]), max_size=60), hst.integers(1, 70))
def test_top_k__best_first_equal_scores_by_lower_index(values, k):
    """The order every CPU gives: score descending, then document index; zero scores are never returned."""
    from agentgym_turn.bm25 import top_k

    scores = np.asarray(values, dtype=np.float32)
    indices, best = top_k(scores, k)
    expected = sorted((i for i in range(len(values)) if values[i] > 0), key=lambda i: (-values[i], i))[:k]
    assert indices.tolist() == expected and best.tolist() == [values[i] for i in expected]
    assert indices.dtype == np.int64 and best.dtype == np.float32


@pytest.mark.parametrize("backend", ["numpy", "numba"])
def test_search__documents_with_equal_scores_come_in_index_order_on_every_backend(backend):
    """Identical documents tie exactly; numpy's SIMD sorts would order them by CPU, so the index decides.

    Which of the documents tied at the k-th place get in: numpy takes the lowest indices; numba's
    compiled heap keeps its own (scalar, so CPU-independent) choice, ordered the same way."""
    if backend == "numba":
        pytest.importorskip("numba")
    docs = ["red shoe"] * 7 + ["blue shoe", "red red shoe"] + ["red shoe"] * 5
    index = BM25Index.build(docs, backend=backend)
    indices, scores = index.search(["red shoe"], 6)
    assert indices[0, 0] == 8 and scores[0, 1] == scores[0, 5] < scores[0, 0]
    tied = indices[0, 1:].tolist()
    assert tied == sorted(tied) and not {7, 8} & set(tied)
    if backend == "numpy":
        assert tied == [0, 1, 2, 3, 4]
