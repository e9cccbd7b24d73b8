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

from ..core.args import source_arg
from ..core.cache import ProcessCache
from ..core.splits import check_content_split, content_split
from .corpus import Corpus, RenderedWorld, render_corpus
from .generator.questions import QUESTION_TYPES, Question, generate_questions, split_questions
from .generator.world import WorldConfig, generate_world
from .loader import load_questions

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
            print(
                f"agentgym-turn: generating search-QA world seed={seed} scale={scale} "
                f"(about {round(6000 * scale):,} passages) ...",
                file=sys.stderr,
                flush=True,
            )
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


def local_retriever(
    corpus_key: Hashable, corpus: Corpus, kind: str, *, encoder: Any = None, index_dir: str | os.PathLike | None = None
):
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
            raise ValueError(
                "retriever='dense' needs encoder=: a local sentence-transformers model path or an Encoder object."
            )
        if isinstance(encoder, (str, os.PathLike)):
            cache = Path(index_dir) / "embeddings.npy" if index_dir is not None else None
            if cache is not None:
                cache.parent.mkdir(parents=True, exist_ok=True)
            key = ("dense", corpus_key, str(Path(encoder).resolve()), str(cache))
            return SOURCES.get(
                key, lambda: DenseRetriever.build(corpus, SentenceTransformerEncoder(encoder), cache_path=cache)
            )
        return DenseRetriever(corpus, encoder)
    raise ValueError(f"retriever must be 'bm25', 'dense' or a Retriever object, got {kind!r}.")


@dataclass(frozen=True)
class QuestionSource:
    """What a ``TurnSearchQAEnv`` asks, over which corpus: a generated world's ``split`` or a question file,
    narrowed to ``question_types`` and to the questions whose text falls in ``content_split``.

    Everything that decides the questions an env draws, and nothing else (the prompt, the retriever and
    the rewards never change them). Arguments are checked (a ValueError names the bad one).

    Attributes:
        split: ``"train"``, ``"dev"``, ``"test"`` or ``"all"`` of the generated world (ignored for files).
        world_seed, world_scale: Which generated world; the scale multiplies its size.
        question_types: Only questions of these types (``None``: every type).
        content_split: ``"train"``, ``"validation"`` or ``"test"`` by the question's text (``None``: every question).
        dataset_path, corpus_path: A FlashRAG jsonl or Search-R1 parquet of questions and a corpus jsonl instead
            of the generated world (``corpus_path`` may be ``None`` with a remote retriever).
    """

    split: str = "train"
    world_seed: int = 0
    world_scale: float = 1.0
    question_types: tuple[str, ...] | None = None
    content_split: str | None = None
    dataset_path: str | None = None
    corpus_path: str | None = None

    def __post_init__(self) -> None:
        if self.dataset_path is None and self.corpus_path is not None:
            raise ValueError("corpus_path needs dataset_path (the questions asked over that corpus).")
        raw = self.question_types
        types = None if raw is None else (raw,) if isinstance(raw, str) else tuple(raw)
        if types is not None and (not types or not set(types) <= {*QUESTION_TYPES, "dataset"}):
            raise ValueError(
                f"question_types must be None (every type) or a non-empty list of {[*QUESTION_TYPES, 'dataset']}, "
                f"got {raw!r}."
            )
        object.__setattr__(self, "question_types", types)
        object.__setattr__(self, "world_seed", int(self.world_seed))
        object.__setattr__(self, "world_scale", float(self.world_scale))
        object.__setattr__(self, "content_split", check_content_split(self.content_split, "content_split"))

    def load(self) -> tuple[Source, list[Question]]:
        """The loaded source (shared per process) and the questions this source asks, in split order."""
        if self.dataset_path is not None:
            source = file_source(self.dataset_path, self.corpus_path)
            questions = list(source.questions)
        else:
            source = generated_source(self.world_seed, self.world_scale)
            questions = split_questions(source.questions, self.split)
        if self.question_types is not None:  # a curriculum of some types; question_index counts within them
            questions = [q for q in questions if q.type in self.question_types]
        if self.content_split is not None:  # held out by the question's text, across worlds and files
            questions = [q for q in questions if content_split(q.question) == self.content_split]
        if not questions:
            raise ValueError(
                "the chosen split holds no questions"
                + ("" if self.question_types is None else f" of question_types={list(self.question_types)}")
                + ("" if self.content_split is None else f" with content_split={self.content_split!r}")
            )
        return source, questions


#: The keywords of ``TurnSearchQAEnv`` (and ``gymnasium.make``) that build its :class:`QuestionSource`, with their
#: defaults: ``source=`` replaces them.
QUESTION_KEYWORDS: dict[str, Any] = {name: f.default for name, f in QuestionSource.__dataclass_fields__.items()}


def question_source(source: Any, keywords: dict[str, Any], env: str = "TurnSearchQAEnv") -> QuestionSource:
    """The env's question source: ``source`` as given, else one built from the question keywords in ``keywords``
    (:data:`QUESTION_KEYWORDS`). Giving both is an error naming the keywords; an unknown keyword is a TypeError."""
    return source_arg(source, keywords, defaults=QUESTION_KEYWORDS, build=QuestionSource, kinds=QuestionSource, env=env)
