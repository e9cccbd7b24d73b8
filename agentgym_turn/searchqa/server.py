"""A retrieval server speaking Search-R1's ``/retrieve`` protocol (``agentgym-turn serve retriever``).

Protocol (as Search-R1's ``search_r1/search/retrieval_server.py``)::

    POST /retrieve   {"queries": ["q1", "q2"], "topk": 3, "return_scores": true}
    200              {"result": [[{"document": {"id": "12", "contents": "\\"Title\\"\\ntext"}, "score": 7.1}, ...], ...]}

With ``"return_scores": false`` (the default) each result list holds the documents themselves.
A missing, null or zero ``topk`` means the server's ``--topk``. ``GET /health`` answers
``{"status": "ok", "num_docs": N}``. Malformed requests get HTTP 400/404/413/422 with
``{"detail": "..."}``.

Built on the project's one server stack (:mod:`agentgym_turn.serving`: Starlette on
uvicorn): no thread per connection, a listen backlog of 2048, a deadline for silent or slow
clients, bounded bodies, JSON depth, queries, ``topk`` and passages per request, and large requests
answered in chunks so that one client cannot hold the retriever for long. A large answer is also *sent* in
chunks: each part of the JSON is built once the client has taken the earlier ones (chunked transfer
encoding; the document is byte for byte the one a whole body would hold), so a client that does not read
holds a bounded buffer until the send deadline (``ServerLimits.send_timeout``) drops it. Small answers go
out as one body with ``Content-Length``. The server binds ``127.0.0.1`` unless told otherwise; with
``--token`` (or ``AGENTGYM_TOKEN``) every request but ``GET /health`` must carry ``Authorization: Bearer
<token>``, and each client beyond this machine is rate-limited (``--rate-limit``; 429 with ``Retry-After``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Sequence

from ..core.args import is_int
from ..serving import (
    AppServer,
    HTTPError,
    RateLimit,
    ServerLimits,
    access_options,
    add_access_arguments,
    add_allow_host_argument,
    json_error_handlers,
    parse_json,
    read_body,
)
from .retrieval import Retriever, hits_to_json

#: Most queries one request may carry.
MAX_QUERIES = 4096
#: Largest ``topk`` a request may ask for.
MAX_TOPK = 1000
#: Most passages one request may ask for (``len(queries) * topk``): bounds the response's size.
MAX_PASSAGES = 32_768
#: Largest request body, in bytes.
MAX_BODY_BYTES = 8 * 1024 * 1024
#: Queries scored per retriever call; other clients' requests interleave between chunks.
CHUNK_QUERIES = 64
#: Passages per retriever call at most: a call takes ``CHUNK_PASSAGES // topk`` queries (1 to ``CHUNK_QUERIES``),
#: so that what one call returns, and holds while its part of the answer waits for the client, is bounded.
CHUNK_PASSAGES = 1024
#: An answer goes out in writes of about this many bytes, each built once the client has taken the earlier
#: ones; an answer shorter than this is one body with ``Content-Length``.
ANSWER_PIECE_BYTES = 64 * 1024
#: Threads per server process that run retrievals, so a slow retriever never blocks the event loop
#: (anyio's default limit for ``run_in_threadpool`` is also 40).
RETRIEVAL_THREADS = 40


def parse_request(payload: Any, default_topk: int) -> tuple[list[str], int, bool]:
    """Validate a decoded ``/retrieve`` body; return ``(queries, topk, return_scores)`` or raise :class:`HTTPError`."""
    if not isinstance(payload, dict):
        raise HTTPError(422, "the body must be a JSON object with 'queries'")
    queries = payload.get("queries")
    if not isinstance(queries, list) or not all(isinstance(q, str) for q in queries):
        raise HTTPError(422, "'queries' must be a list of strings")
    if len(queries) > MAX_QUERIES:
        raise HTTPError(413, f"at most {MAX_QUERIES} queries per request")
    topk = payload.get("topk")
    if topk is None or topk == 0:
        topk = default_topk  # Search-R1's server falls back to its --topk for a falsy topk
    if not is_int(topk, 1, MAX_TOPK):
        raise HTTPError(422, f"'topk' must be an integer from 1 to {MAX_TOPK}")
    if len(queries) * topk > MAX_PASSAGES:
        raise HTTPError(413, f"len(queries) * topk must be at most {MAX_PASSAGES:,}; split the request")
    return_scores = payload.get("return_scores", False)
    if not isinstance(return_scores, bool):
        raise HTTPError(422, "'return_scores' must be true or false")
    return queries, topk, return_scores


_POOL: tuple[int, ThreadPoolExecutor] | None = None
_POOL_LOCK = threading.Lock()


def _retrieval_pool() -> ThreadPoolExecutor:
    """This process's retrieval threads, shared by every server app in it (as anyio's default limiter is);
    a forked copy of the server (``--processes``) starts its own. A plain executor: the hop costs about
    0.1-0.15 ms less CPU a request than anyio's ``run_in_threadpool``."""
    global _POOL
    pool = _POOL
    if pool is None or pool[0] != os.getpid():
        with _POOL_LOCK:  # servers in threads of one process may ask at once
            if _POOL is None or _POOL[0] != os.getpid():
                _POOL = (os.getpid(), ThreadPoolExecutor(RETRIEVAL_THREADS, thread_name_prefix="retrieve"))
            pool = _POOL
    return pool[1]


#: Starlette's ``JSONResponse`` rendering, so that an answer sent in parts is the bytes a whole body would be.
_render = json.JSONEncoder(ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode
_log = logging.getLogger(__name__)


async def _until_disconnected(receive: Any) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass


class _Answer:
    """The ASGI response to a valid ``/retrieve`` request: ``{"result": [...]}`` built row by row as the
    retriever's calls return, sent in writes of :data:`ANSWER_PIECE_BYTES` (each awaits the client's reading,
    through uvicorn's flow control) or as one body when it is smaller. A retrieval that fails before the first
    byte is an :class:`HTTPError` 500; after it, the answer cannot change status, so it is left incomplete and
    uvicorn closes the connection (the client sees a truncated body, never a wrong document)."""

    __slots__ = ("retriever", "queries", "topk", "return_scores")

    def __init__(self, retriever: Retriever, queries: list[str], topk: int, return_scores: bool):
        self.retriever, self.queries, self.topk, self.return_scores = retriever, queries, topk, return_scores

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        loop = asyncio.get_running_loop()
        queries, topk, return_scores = self.queries, self.topk, self.return_scores
        per_call = max(1, min(CHUNK_QUERIES, CHUNK_PASSAGES // topk))
        body = bytearray(b'{"result":[')
        first = True
        gone: asyncio.Task | None = None  # once the answer has begun: done when the client has gone
        try:
            for start in range(0, len(queries), per_call):
                hits = await loop.run_in_executor(
                    _retrieval_pool(), self.retriever.retrieve, queries[start : start + per_call], topk
                )
                for row in hits:
                    if not first:
                        body += b","
                    first = False
                    body += _render(hits_to_json([row], return_scores=return_scores)[0]).encode("utf-8")
                    if len(body) >= ANSWER_PIECE_BYTES:
                        if gone is None:
                            await send(
                                {
                                    "type": "http.response.start",
                                    "status": 200,
                                    "headers": [(b"content-type", b"application/json")],
                                }
                            )
                            gone = loop.create_task(_until_disconnected(receive))
                        piece, body = bytes(body), bytearray()
                        await send(
                            {"type": "http.response.body", "body": piece, "more_body": True}
                        )  # waits while the client does not read
                        if gone.done():  # aborted (send deadline) or closed by the client: build no more
                            return
        except Exception as exc:  # report, keep serving
            failure = f"retrieval failed: {type(exc).__name__}: {exc}"
            if gone is None:
                raise HTTPError(500, failure) from None
            _log.warning("%s; the answer had begun, so its connection is closed", failure)
            return  # an incomplete answer: uvicorn closes the connection
        finally:
            if gone is not None:
                gone.cancel()
        body += b"]}"
        if gone is None:
            await send(
                {
                    "type": "http.response.start",
                    "status": 200,
                    "headers": [(b"content-length", b"%d" % len(body)), (b"content-type", b"application/json")],
                }
            )
        await send({"type": "http.response.body", "body": bytes(body), "more_body": False})


def build_app(retriever: Retriever, *, default_topk: int = 3, limits: ServerLimits | None = None):
    """The Starlette app: ``POST /retrieve``, ``GET /health`` (and ``/``)."""
    from starlette.applications import Starlette
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    limits = limits or ServerLimits(max_body_bytes=MAX_BODY_BYTES)
    corpus = getattr(retriever, "corpus", None)
    num_docs = len(corpus) if corpus is not None else None

    async def health(request: Any) -> JSONResponse:
        return JSONResponse({"status": "ok", "num_docs": num_docs})

    async def retrieve(request: Any) -> _Answer:
        payload = parse_json(await read_body(request, limits))
        queries, topk, return_scores = parse_request(payload, default_topk)
        return _Answer(retriever, queries, topk, return_scores)

    async def not_found(request: Any) -> JSONResponse:
        return JSONResponse({"detail": "not found; POST /retrieve"}, status_code=404)

    routes = [
        Route("/retrieve", retrieve, methods=["POST"]),
        Route("/retrieve/", retrieve, methods=["POST"]),
        Route("/health", health, methods=["GET"]),
        Route("/", health, methods=["GET"]),
        Route("/{path:path}", not_found, methods=["GET", "POST", "PUT", "DELETE", "PATCH"]),
    ]
    return Starlette(routes=routes, exception_handlers=json_error_handlers())


class RetrievalServer(AppServer):
    """Serve a retriever over HTTP; usable as a context manager that runs it in a thread.

    Args:
        retriever: Any object with ``retrieve(queries, topk)`` (BM25, dense, ...).
        host: Interface to bind (default ``127.0.0.1``: this machine only).
        port: TCP port; 0 picks a free one (read it back from :attr:`port`).
        default_topk: ``topk`` for requests that give none (Search-R1's ``--topk``, 3).
        verbose: Log every request to stderr.
        limits: Time and size bounds (:class:`~agentgym_turn.serving.ServerLimits`).
        http_parser: ``"auto"`` (httptools where installed), ``"httptools"`` or ``"h11"``
            (:class:`~agentgym_turn.serving.AppServer`).
        allowed_hosts: Domain names accepted in ``Host``/``Origin`` beside this machine's (``--allow-host``).
        token: A secret every request but ``GET /health`` must carry as ``Authorization: Bearer <token>``
            (clients: ``HTTPRetriever(url, token=...)``, ``TurnSearchQA-v0``'s ``retriever_token``); ``None``: none.
        rate_limit: Requests per client IP beyond this machine (:class:`~agentgym_turn.serving.RateLimit`); ``None``: no limit.

    Example::

        with RetrievalServer(BM25Retriever(corpus)) as server:
            env = gym.make("TurnSearchQA-v0", retriever_url=server.url)
    """

    def __init__(
        self,
        retriever: Retriever,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        default_topk: int = 3,
        verbose: bool = False,
        limits: ServerLimits | None = None,
        http_parser: str = "auto",
        allowed_hosts: Sequence[str] = (),
        token: str | None = None,
        rate_limit: RateLimit | None = RateLimit(),
    ):
        if not is_int(default_topk, 1, MAX_TOPK):
            raise ValueError(f"default_topk must be an integer from 1 to {MAX_TOPK}, got {default_topk!r}.")
        limits = limits or ServerLimits(max_body_bytes=MAX_BODY_BYTES)
        app = build_app(retriever, default_topk=default_topk, limits=limits)
        super().__init__(
            app,
            host=host,
            port=port,
            limits=limits,
            verbose=verbose,
            http_parser=http_parser,
            allowed_hosts=allowed_hosts,
            token=token,
            rate_limit=rate_limit,
        )

    @property
    def url(self) -> str:
        """The ``/retrieve`` endpoint."""
        return f"{self.base_url}/retrieve"

    def __enter__(self) -> "RetrievalServer":
        self.start()
        return self


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="agentgym-turn serve retriever",
        description='Serve a corpus over Search-R1\'s /retrieve protocol (POST {"queries", "topk", "return_scores"}).',
    )
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument(
        "--corpus", metavar="PATH", help='corpus jsonl ({"id", "contents"} lines, wiki-18 format; .gz allowed)'
    )
    src.add_argument("--generated", action="store_true", help="serve the generated TurnSearchQA world's corpus")
    p.add_argument("--world-seed", type=int, default=0, help="seed of the generated world (default 0)")
    p.add_argument(
        "--world-scale", type=float, default=1.0, help="size multiplier of the generated world (default 1.0)"
    )
    p.add_argument("--retriever", choices=("bm25", "dense"), default="bm25", help="ranking (default bm25)")
    p.add_argument(
        "--encoder",
        metavar="DIR",
        help="local sentence-transformers model directory (for --retriever dense; never downloaded)",
    )
    p.add_argument("--index-dir", metavar="DIR", help="save the index here, or load it if it is there")
    p.add_argument("--topk", type=int, default=3, help="passages per query when a request gives no topk (default 3)")
    p.add_argument("--host", default="127.0.0.1", help="interface to bind (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=8000, help="port (default 8000; 0 picks a free one)")
    p.add_argument(
        "--processes",
        type=int,
        default=1,
        metavar="N",
        help="serve from N processes sharing the port and the index (forked copies; POSIX): requests use N cores "
        "(default 1)",
    )
    add_allow_host_argument(p)
    add_access_arguments(p)
    p.add_argument("--verbose", action="store_true", help="log every request")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``agentgym-turn serve retriever``."""
    args = build_parser().parse_args(list(argv) if argv is not None else None)
    from .source import corpus_source, file_key, generated_source, local_retriever

    if args.processes < 1:
        print(f"--processes must be at least 1, got {args.processes}.", file=sys.stderr)
        return 2
    if args.retriever == "dense" and not args.encoder:
        print("--retriever dense needs --encoder DIR (a local sentence-transformers model).", file=sys.stderr)
        return 2
    try:
        access = access_options(args)  # before the index is built
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    if args.generated:
        source = generated_source(args.world_seed, args.world_scale)
        corpus, key = source.corpus, source.key
    else:
        corpus, key = corpus_source(args.corpus), ("corpus", file_key(args.corpus))
    assert corpus is not None
    print(f"Indexing {len(corpus):,} passages ({args.retriever}) ...", file=sys.stderr, flush=True)
    retriever = local_retriever(key, corpus, args.retriever, encoder=args.encoder, index_dir=args.index_dir)
    warm = getattr(retriever, "warmup", None)
    if callable(warm):
        warm()
    try:
        server = RetrievalServer(
            retriever,
            host=args.host,
            port=args.port,
            default_topk=args.topk,
            verbose=args.verbose,
            allowed_hosts=args.allow_host,
            **access,
        )
    except (OSError, ValueError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    copies = f" from {args.processes} processes" if args.processes > 1 else ""
    return server.run_until_interrupted(
        f"Serving {len(corpus):,} passages at {server.url}{copies} (Ctrl-C stops)", args.processes
    )


if __name__ == "__main__":
    sys.exit(main())
