"""Retrievers: BM25 and dense in-process, and an HTTP client for any Search-R1 ``/retrieve`` server.

Every retriever has one method, ``retrieve(queries, topk) -> list[list[Hit]]`` (one best-first
list of at most ``topk`` hits per query), so the env, the server and the benchmarks treat
them alike:

* :class:`BM25Retriever` ranks with the shared :class:`~agentgym_turn.bm25.BM25Index`
  (Lucene BM25, ``k1=0.9``, ``b=0.4``, as Pyserini); passages sharing no term with the query
  are never returned, so a hit list can be shorter than ``topk`` (Search-R1's BM25 does the same).
* :class:`DenseRetriever` ranks by the inner product of embeddings from an :class:`Encoder`:
  :class:`SentenceTransformerEncoder` wraps a *local* sentence-transformers model (lazy import,
  never downloads); :class:`HashingEncoder` is a deterministic, dependency-free stand-in
  (hashed bag of words) for tests and smoke runs, not a semantic model.
* :class:`HTTPRetriever` posts ``{"queries", "topk", "return_scores": true}`` to a server and
  reads ``{"result": [[{"document": {...}, "score": s}, ...], ...]}``; it also accepts a
  server that returns bare documents, and documents without ``id`` (Search-R1's BM25 server
  returns ``title``, ``text`` and ``contents``).

:func:`format_information` renders hits exactly as Search-R1 shows them to the model:
``Doc 1(Title: <first line>) <rest>\\n`` per hit.
"""

from __future__ import annotations

import http.client
import json
import os
import socket
import sys
import threading
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, Sequence, runtime_checkable
from urllib.parse import urlsplit

import numpy as np

from ..core.args import is_int, token_arg
from ..core.contract import InfraError
from ..extras import require
from .corpus import Corpus
from .protocol import format_passages


@dataclass(frozen=True)
class Document:
    """A passage: ``contents`` is ``"Title"\\ntext``; ``id`` is ``""`` when a server sends none."""

    id: str
    contents: str


@dataclass(frozen=True)
class Hit:
    document: Document
    score: float


class RetrieverError(ConnectionError, InfraError):
    """A retrieval server could not be reached, did not answer in time, failed (HTTP 5xx) or sent an answer outside
    the protocol. An :class:`~agentgym_turn.core.contract.InfraError`: raised inside a turn, it ends the episode
    with ``exit_status="infra_error"`` (``reward_valid=False``) instead of scoring the policy."""


@runtime_checkable
class Retriever(Protocol):
    def retrieve(self, queries: Sequence[str], topk: int) -> list[list[Hit]]:
        """For each query, at most ``topk`` hits, best first."""
        ...


def format_information(hits: Sequence[Hit]) -> str:
    """Search-R1's rendering of retrieved passages: ``Doc i(Title: T) text`` lines."""
    return format_passages(h.document.contents for h in hits)


def hits_to_json(hits: Sequence[Sequence[Hit]], *, return_scores: bool) -> list[list[dict[str, Any]]]:
    """The ``result`` field of a ``/retrieve`` response."""
    if return_scores:
        return [
            [{"document": {"id": h.document.id, "contents": h.document.contents}, "score": float(h.score)} for h in row]
            for row in hits
        ]
    return [[{"id": h.document.id, "contents": h.document.contents} for h in row] for row in hits]


def _check_topk(topk: int) -> int:
    if not is_int(topk, 1, numpy=True):
        raise ValueError(f"topk must be a positive integer, got {topk!r}.")
    return int(topk)


class _LockedPickle:
    """Pickles without the instance's ``_lock`` (a ``threading.Lock``) and gives the copy a new one."""

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        del state["_lock"]
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()


#: Corpora at least this large log their indexing with a progress bar (it takes over ~2 s).
PROGRESS_MIN_PASSAGES = 100_000
_STAMP = "agentgym_corpus.json"


def write_index_stamp(index_dir: str | os.PathLike, corpus: Corpus, name: str = _STAMP, **extra: Any) -> None:
    """Record which corpus (and encoder, in ``extra``) the index saved in ``index_dir`` belongs to."""
    Path(index_dir).mkdir(parents=True, exist_ok=True)
    stamp = {"fingerprint": corpus.fingerprint(), "passages": len(corpus), **extra}
    (Path(index_dir) / name).write_text(json.dumps(stamp))


def check_index_stamp(
    index_dir: str | os.PathLike, corpus: Corpus, what: str, name: str = _STAMP, **extra: Any
) -> None:
    """Raise ``ValueError`` naming ``index_dir`` unless its index was saved for ``corpus`` (and ``extra``)."""
    path = Path(index_dir) / name
    fix = "delete the directory (it is rebuilt) or choose another index_dir"
    try:
        stamp = json.loads(path.read_text())
    except (OSError, ValueError):
        raise ValueError(
            f"index_dir {index_dir}: holds a {what} without a readable corpus fingerprint ({name}), so it cannot "
            f"be checked against this corpus; {fix}."
        ) from None
    expected = {"fingerprint": corpus.fingerprint(), "passages": len(corpus), **extra}
    if not isinstance(stamp, dict) or any(stamp.get(k) != v for k, v in expected.items()):
        raise ValueError(
            f"index_dir {index_dir}: holds the {what} of another corpus or encoder "
            f"({stamp.get('passages') if isinstance(stamp, dict) else '?'} passages, fingerprint "
            f"{str(stamp.get('fingerprint') if isinstance(stamp, dict) else '?')[:12]}; this corpus: {len(corpus)} passages, "
            f"{corpus.fingerprint()[:12]}); {fix}."
        )


class BM25Retriever(_LockedPickle):
    """BM25 over a :class:`Corpus` (indexes ``contents``: title and text).

    Args:
        corpus: The passages.
        index: A prebuilt index over ``corpus.contents`` (e.g. from :meth:`build` with
            ``index_dir``); built here when ``None``.
    """

    def __init__(self, corpus: Corpus, index: Any = None):
        from ..bm25 import BM25Index

        self.corpus = corpus
        self.index = index if index is not None else BM25Index.build(corpus.contents)
        if self.index.num_docs != len(corpus):
            raise ValueError(f"the index holds {self.index.num_docs} documents, the corpus {len(corpus)}")
        self._lock = threading.Lock()  # the stemmer and numba kernels are not re-entrant

    @classmethod
    def build(
        cls,
        corpus: Corpus,
        *,
        index_dir: str | os.PathLike | None = None,
        show_progress: bool | None = None,
        warmup: bool = True,
    ) -> "BM25Retriever":
        """Index ``corpus``; with ``index_dir``, load the index saved there or build and save it.

        A saved index is used only if it was saved for this very corpus (its
        :meth:`Corpus.fingerprint` is stored beside it); an index of another corpus, or one
        without a fingerprint, is an error naming ``index_dir``. ``show_progress`` (default:
        for :data:`PROGRESS_MIN_PASSAGES` passages or more) logs the build to stderr with a
        progress bar. ``warmup`` compiles the numba kernels now, so the first search is as fast
        as the rest.
        """
        from ..bm25 import BM25Index

        if show_progress is None:
            show_progress = len(corpus) >= PROGRESS_MIN_PASSAGES
        if index_dir is not None and (Path(index_dir) / "agentgym_bm25.json").exists():
            check_index_stamp(index_dir, corpus, "BM25 index")
            index = BM25Index.load(index_dir, mmap=True)
        else:
            if show_progress:
                print(f"agentgym-turn: indexing {len(corpus):,} passages with BM25 ...", file=sys.stderr, flush=True)
            index = BM25Index.build(corpus.contents, show_progress=show_progress)
        retriever = cls(corpus, index)
        if index_dir is not None and not (Path(index_dir) / _STAMP).exists():
            retriever.save(index_dir)
        if warmup:
            retriever.warmup()
        return retriever

    def save(self, index_dir: str | os.PathLike) -> None:
        """Save the index to ``index_dir`` with the corpus fingerprint that :meth:`build` checks."""
        self.index.save(index_dir)
        write_index_stamp(index_dir, self.corpus)

    def warmup(self) -> None:
        """Compile the numba kernels now (large corpora) instead of on the first query."""
        self.index.warmup()

    def retrieve(self, queries: Sequence[str], topk: int) -> list[list[Hit]]:
        topk = _check_topk(topk)
        if not queries:
            return []
        with self._lock:
            indices, scores = self.index.search(list(queries), topk)
        ids, contents = self.corpus.ids, self.corpus.contents
        return [
            [Hit(Document(ids[i], contents[i]), float(s)) for i, s in zip(row_i.tolist(), row_s.tolist()) if i >= 0]
            for row_i, row_s in zip(indices, scores)
        ]


@runtime_checkable
class Encoder(Protocol):
    """Maps texts to embeddings, shape ``(len(texts), dim)``, float32; rows should be unit-norm."""

    def encode(self, texts: Sequence[str], *, is_query: bool) -> np.ndarray: ...


class HashingEncoder:
    """Deterministic hashed bag-of-words embeddings (a stand-in encoder, not a semantic model).

    Lower-cased word tokens are hashed with CRC-32 (stable across processes, unlike ``hash``)
    into ``dim`` buckets with a hashed sign, then the vector is L2-normalised.
    """

    def __init__(self, dim: int = 512):
        if dim < 1:
            raise ValueError("dim must be positive")
        self.dim = int(dim)

    def encode(self, texts: Sequence[str], *, is_query: bool) -> np.ndarray:
        import re

        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            for token in re.findall(r"\w+", text.lower()):
                h = zlib.crc32(token.encode("utf-8", errors="replace"))
                out[row, h % self.dim] += 1.0 if (h >> 31) & 1 else -1.0
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        np.divide(out, norms, out=out, where=norms > 0)
        return out


class SentenceTransformerEncoder:
    """A local sentence-transformers model (needs ``pip install sentence-transformers``).

    Args:
        model_path: A directory holding the model. Nothing is ever downloaded: a path that does
            not exist is an error.
        query_prefix: Prepended to queries (E5 models want ``"query: "``).
        passage_prefix: Prepended to passages (E5 models want ``"passage: "``).
        batch_size: Encoding batch size.
        device: Torch device string (default: the library's choice).
    """

    def __init__(
        self,
        model_path: str | os.PathLike,
        *,
        query_prefix: str = "",
        passage_prefix: str = "",
        batch_size: int = 64,
        device: str | None = None,
    ):
        path = Path(model_path)
        if not path.is_dir():
            raise FileNotFoundError(
                f"{model_path} is not a local model directory. The dense retriever only loads local "
                "models and never downloads one; pass the path of a saved sentence-transformers model."
            )
        require("dense", "TurnSearchQA's dense retriever")
        from sentence_transformers import SentenceTransformer

        try:
            self.model = SentenceTransformer(str(path), device=device, local_files_only=True)
        except TypeError:  # older sentence-transformers without local_files_only
            self.model = SentenceTransformer(str(path), device=device)
        self.model_path = str(path.resolve())
        self.query_prefix = query_prefix
        self.passage_prefix = passage_prefix
        self.batch_size = batch_size

    def encode(self, texts: Sequence[str], *, is_query: bool) -> np.ndarray:
        prefix = self.query_prefix if is_query else self.passage_prefix
        emb = self.model.encode(
            [prefix + t for t in texts],
            batch_size=self.batch_size,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=False,
        )
        return np.asarray(emb, dtype=np.float32)


class DenseRetriever(_LockedPickle):
    """Inner-product search over passage embeddings (exact, in memory).

    Args:
        corpus: The passages.
        encoder: Any :class:`Encoder`.
        embeddings: Precomputed passage embeddings ``(len(corpus), dim)``; computed with
            ``encoder`` in batches of ``batch_size`` when ``None``.
        batch_size: Passages per ``encode`` call while indexing.

    Ties are broken by passage order, so rankings are deterministic.
    """

    def __init__(
        self, corpus: Corpus, encoder: Encoder, *, embeddings: np.ndarray | None = None, batch_size: int = 256
    ):
        self.corpus = corpus
        self.encoder = encoder
        if embeddings is None:
            parts = [
                np.asarray(encoder.encode(corpus.contents[s : s + batch_size], is_query=False), dtype=np.float32)
                for s in range(0, len(corpus), batch_size)
            ]
            embeddings = np.concatenate(parts, axis=0)
        embeddings = np.asarray(embeddings, dtype=np.float32)
        if embeddings.ndim != 2 or embeddings.shape[0] != len(corpus):
            raise ValueError(f"embeddings must have shape ({len(corpus)}, dim), got {embeddings.shape}")
        self.embeddings = embeddings
        self._lock = threading.Lock()

    @classmethod
    def build(
        cls, corpus: Corpus, encoder: Encoder, *, cache_path: str | os.PathLike | None = None
    ) -> "DenseRetriever":
        """Like the constructor, loading/saving the passage embeddings at ``cache_path`` (``.npy``).

        Saved embeddings are used only for the corpus and encoder they were computed for (a
        stamp beside them holds the corpus fingerprint and the encoder's name); else ``ValueError``.
        """
        name = Path(cache_path).name + ".json" if cache_path is not None else ""
        who = {"encoder": _encoder_name(encoder)}
        if cache_path is not None and Path(cache_path).exists():
            check_index_stamp(Path(cache_path).parent, corpus, "passage embeddings", name, **who)
            emb = np.load(cache_path, mmap_mode="r")
            return cls(corpus, encoder, embeddings=emb)
        retriever = cls(corpus, encoder)
        if cache_path is not None:
            np.save(cache_path, retriever.embeddings)
            write_index_stamp(Path(cache_path).parent, corpus, name, **who)
        return retriever

    def retrieve(self, queries: Sequence[str], topk: int) -> list[list[Hit]]:
        topk = _check_topk(topk)
        if not queries:
            return []
        with self._lock:
            q = np.asarray(self.encoder.encode(list(queries), is_query=True), dtype=np.float32)
        scores = q @ self.embeddings.T  # (Q, N)
        k = min(topk, scores.shape[1])
        out = []
        for row in scores:
            part = np.argpartition(-row, k - 1)[:k] if k < row.shape[0] else np.arange(row.shape[0])
            # best first; equal scores in passage order
            order = part[np.lexsort((part, -row[part]))]
            out.append(
                [Hit(Document(self.corpus.ids[i], self.corpus.contents[i]), float(row[i])) for i in order.tolist()]
            )
        return out


def _encoder_name(encoder: Any) -> str:
    """What identifies an encoder's embeddings: its class and model path when it has one."""
    path = getattr(encoder, "model_path", None)
    name = f"{type(encoder).__name__}:{path}" if path is not None else type(encoder).__name__
    if getattr(encoder, "dim", None) is not None:
        name += f":dim={encoder.dim}"
    prefixes = (getattr(encoder, "query_prefix", ""), getattr(encoder, "passage_prefix", ""))
    return name + (f":{prefixes}" if any(prefixes) else "")


def _document_from_json(doc: Any) -> Document:
    if not isinstance(doc, dict):
        raise RetrieverError(f"a retrieved document must be a JSON object, got {type(doc).__name__}")
    contents = doc.get("contents")
    if not isinstance(contents, str):
        if isinstance(doc.get("text"), str):  # title/text documents without contents
            contents = f'"{doc.get("title", "")}"\n{doc["text"]}'
        else:
            raise RetrieverError("a retrieved document has no 'contents' (nor 'title' and 'text')")
    return Document(str(doc.get("id", "")), contents)


def parse_retrieve_response(payload: Any, num_queries: int) -> list[list[Hit]]:
    """Hits from a ``/retrieve`` response body (already JSON-decoded)."""
    if not isinstance(payload, dict) or not isinstance(payload.get("result"), list):
        raise RetrieverError("the response has no 'result' list")
    result = payload["result"]
    if len(result) != num_queries:
        raise RetrieverError(f"sent {num_queries} queries, got {len(result)} result lists")
    out = []
    for row in result:
        if not isinstance(row, list):
            raise RetrieverError("each entry of 'result' must be a list")
        hits = []
        for item in row:
            if isinstance(item, dict) and "document" in item:
                score = item.get("score", 0.0)
                hits.append(
                    Hit(_document_from_json(item["document"]), float(score) if isinstance(score, (int, float)) else 0.0)
                )
            else:
                hits.append(Hit(_document_from_json(item), 0.0))
        out.append(hits)
    return out


class HTTPRetriever:
    """Client of a Search-R1 style retrieval server.

    Args:
        url: The endpoint, e.g. ``"http://127.0.0.1:8000/retrieve"`` (a URL without a path gets
            ``/retrieve``).
        timeout: Seconds per request.
        retries: Extra attempts after a connection failure.
        token: The server's token (``agentgym-turn serve retriever --token`` or ``AGENTGYM_TOKEN``), sent as
            ``Authorization: Bearer <token>``; ``None``: none.

    One persistent HTTP/1.1 connection per thread; the client pickles without it.
    """

    def __init__(self, url: str, *, timeout: float = 30.0, retries: int = 2, token: str | None = None):
        parts = urlsplit(url)
        token_arg(token, "the retriever's --token")
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"retriever_url must be an http(s) URL, got {url!r}.")
        self.url = url
        self.timeout = float(timeout)
        self.retries = int(retries)
        self._scheme = parts.scheme
        self._host = parts.hostname
        self._port = parts.port
        self._path = (parts.path or "") if parts.path not in ("", "/") else "/retrieve"
        if parts.query:
            self._path += "?" + parts.query
        self._headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if token is not None:
            self._headers["Authorization"] = f"Bearer {token}"
        self._local = threading.local()

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        del state["_local"]
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._local = threading.local()

    def _connection(self) -> http.client.HTTPConnection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            cls = http.client.HTTPSConnection if self._scheme == "https" else http.client.HTTPConnection
            conn = cls(self._host, self._port, timeout=self.timeout)
            conn.connect()
            conn.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # no Nagle delay per request
            self._local.conn = conn
        return conn

    def close(self) -> None:
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None

    def retrieve(self, queries: Sequence[str], topk: int) -> list[list[Hit]]:
        """Post ``queries``; a refused or dropped connection is retried ``retries`` times, a timeout is not (the wait
        stays bounded by ``timeout``). Any failure is a :class:`RetrieverError` naming the URL and the cause."""
        topk = _check_topk(topk)
        if not queries:
            return []
        body = json.dumps({"queries": list(queries), "topk": topk, "return_scores": True}).encode("utf-8")
        headers = self._headers
        last: Exception | None = None
        for _ in range(self.retries + 1):
            try:
                conn = self._connection()
                conn.request("POST", self._path, body=body, headers=headers)
                resp = conn.getresponse()
                data = resp.read()
            except TimeoutError as exc:  # socket.timeout: a slow server is not retried, so the wait stays bounded
                self.close()
                raise RetrieverError(
                    f"the retriever at {self.url} did not answer within {self.timeout:g} s ({exc or 'timed out'})"
                ) from exc
            except (OSError, http.client.HTTPException) as exc:
                last = exc
                self.close()
                continue
            if resp.status != 200:
                raise RetrieverError(f"{self.url} answered HTTP {resp.status}: {data[:200].decode('utf-8', 'replace')}")
            try:
                payload = json.loads(data)
            except ValueError as exc:
                raise RetrieverError(f"{self.url} sent a body that is not JSON") from exc
            try:
                hits = parse_retrieve_response(payload, len(queries))
            except RetrieverError as exc:
                raise RetrieverError(f"{self.url} sent a malformed answer: {exc}") from None
            return [row[:topk] for row in hits]
        raise RetrieverError(f"cannot reach the retriever at {self.url}: {type(last).__name__}: {last}")
