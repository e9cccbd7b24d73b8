"""Where an env's questions and passages come from, loaded once per process and shared.

Questions and their corpus come from a generated world (:func:`generated_source`) or from
files (:func:`file_source`, :func:`corpus_source`); :func:`local_retriever` indexes a corpus.

Generating a world, reading a corpus file and building an index are the slow parts of making a
TurnSearchQA env; every env (and the retrieval server) in a process that asks for the same
source gets the same objects, so ``gymnasium.make`` is cheap after the first call and vector
envs do not multiply memory within one process.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Hashable

from ..core.cache import ProcessCache
from .corpus import Corpus, RenderedWorld, render_corpus
from .generator.questions import Question, generate_questions
from .generator.world import WorldConfig, generate_world
from .loader import load_questions

__all__ = ["SOURCES", "Source", "generated_source", "file_source", "corpus_source", "local_retriever", "file_key"]

#: World scales from which making a generated source logs a line (it takes over ~2 s).
PROGRESS_MIN_SCALE = 10.0

#: Sources, corpora and retrievers by key, built once per process (a few of each: they are large).
SOURCES: ProcessCache[Any] = ProcessCache("search-QA sources", 32)


@dataclass
class Source:
    """Questions (all splits, in split order) and the corpus they are asked over (may be ``None``)."""

    key: Hashable
    questions: list[Question]
    corpus: Corpus | None
    rendered: RenderedWorld | None = None


def generated_source(seed: int = 0, scale: float = 1.0) -> Source:
    """The generated world ``WorldConfig.scaled(scale, seed=seed)``: its corpus and questions."""
    key = ("generated", int(seed), float(scale))

    def build() -> Source:
        if scale >= PROGRESS_MIN_SCALE:  # generating and indexing take over ~2 s: say so
            print(f"agentgym-turn: generating search-QA world seed={seed} scale={scale} "
                  f"(about {round(6000 * scale):,} passages) ...", file=sys.stderr, flush=True)
        world = generate_world(WorldConfig.scaled(scale, seed=seed))
        rendered = render_corpus(world)
        return Source(key, generate_questions(world, rendered), rendered.corpus, rendered)

    return SOURCES.get(key, build)


def file_key(path: str | os.PathLike) -> tuple[str, int, int]:
    """``(resolved path, size, mtime)`` of a data file: the process cache's key (a changed file is re-read)."""
    from ..core.files import check_data_path

    p = check_data_path(path).resolve()
    st = p.stat()
    return (str(p), st.st_size, st.st_mtime_ns)


def corpus_source(corpus_path: str | os.PathLike) -> Corpus:
    """A corpus jsonl file, read once per process (re-read when the file changes)."""
    key = ("corpus", file_key(corpus_path))
    return SOURCES.get(key, lambda: Corpus.from_jsonl(corpus_path))


def file_source(dataset_path: str | os.PathLike, corpus_path: str | os.PathLike | None) -> Source:
    """Questions from a FlashRAG jsonl or Search-R1 parquet file, over a corpus jsonl file (``None`` with a remote retriever)."""
    key = ("file", file_key(dataset_path), file_key(corpus_path) if corpus_path is not None else None)

    def build() -> Source:
        corpus = corpus_source(corpus_path) if corpus_path is not None else None
        return Source(key, load_questions(dataset_path), corpus)

    return SOURCES.get(key, build)


def local_retriever(corpus_key: Hashable, corpus: Corpus, kind: str, *, encoder: Any = None,
                    index_dir: str | os.PathLike | None = None):
    """A BM25 or dense retriever over ``corpus``, shared per process.

    ``kind`` is ``"bm25"`` or ``"dense"``. A dense retriever needs ``encoder``: a local
    sentence-transformers model directory (str or path) or any object with ``encode``; only
    path encoders are shared (an encoder object is the caller's, so its retriever is not cached).
    """
    from .retrieval import BM25Retriever, DenseRetriever, SentenceTransformerEncoder

    if kind == "bm25":
        key = ("bm25", corpus_key, str(index_dir) if index_dir is not None else None)
        return SOURCES.get(key, lambda: BM25Retriever.build(corpus, index_dir=index_dir))
    if kind == "dense":
        if encoder is None:
            raise ValueError("retriever='dense' needs encoder=: a local sentence-transformers model path or an Encoder object.")
        if isinstance(encoder, (str, os.PathLike)):
            cache = Path(index_dir) / "embeddings.npy" if index_dir is not None else None
            if cache is not None:
                cache.parent.mkdir(parents=True, exist_ok=True)
            key = ("dense", corpus_key, str(Path(encoder).resolve()), str(cache))
            return SOURCES.get(key, lambda: DenseRetriever.build(corpus, SentenceTransformerEncoder(encoder), cache_path=cache))
        return DenseRetriever(corpus, encoder)
    raise ValueError(f"retriever must be 'bm25', 'dense' or a Retriever object, got {kind!r}.")
