"""A retrieval server speaking Search-R1's ``/retrieve`` protocol (``agentgym-turn serve retriever``).

Protocol (as Search-R1's ``search_r1/search/retrieval_server.py``)::

    POST /retrieve   {"queries": ["q1", "q2"], "topk": 3, "return_scores": true}
    200              {"result": [[{"document": {"id": "12", "contents": "\\"Title\\"\\ntext"}, "score": 7.1}, ...], ...]}

With ``"return_scores": false`` (the default) each result list holds the documents themselves.
A missing, null or zero ``topk`` means the server's ``--topk``. ``GET /health`` answers
``{"status": "ok", "num_docs": N}``. Malformed requests get HTTP 400/404/413/422 with
``{"detail": "..."}``.

Built on the standard library's ``ThreadingHTTPServer`` (HTTP/1.1 keep-alive): the protocol is
one JSON endpoint, so a web framework would add a dependency and per-request overhead without
adding anything the endpoint needs. The server binds ``127.0.0.1`` unless told otherwise.
"""

from __future__ import annotations

import argparse
import json
import socket
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Sequence

from .retrieval import Retriever, hits_to_json

__all__ = ["RetrievalServer", "main", "MAX_QUERIES", "MAX_TOPK", "MAX_BODY_BYTES"]

#: Most queries one request may carry.
MAX_QUERIES = 4096
#: Largest ``topk`` a request may ask for.
MAX_TOPK = 1000
#: Largest request body, in bytes.
MAX_BODY_BYTES = 32 * 1024 * 1024


class _RequestError(Exception):
    def __init__(self, status: int, detail: str):
        super().__init__(detail)
        self.status = status
        self.detail = detail


def parse_request(body: bytes, default_topk: int) -> tuple[list[str], int, bool]:
    """Validate a ``/retrieve`` body; return ``(queries, topk, return_scores)`` or raise ``_RequestError``."""
    try:
        payload = json.loads(body)
    except ValueError:
        raise _RequestError(400, "the body is not valid JSON") from None
    if not isinstance(payload, dict):
        raise _RequestError(422, "the body must be a JSON object with 'queries'")
    queries = payload.get("queries")
    if not isinstance(queries, list) or not all(isinstance(q, str) for q in queries):
        raise _RequestError(422, "'queries' must be a list of strings")
    if len(queries) > MAX_QUERIES:
        raise _RequestError(413, f"at most {MAX_QUERIES} queries per request")
    topk = payload.get("topk")
    if topk is None or topk == 0:
        topk = default_topk  # Search-R1's server falls back to its --topk for a falsy topk
    if isinstance(topk, bool) or not isinstance(topk, int) or not 1 <= topk <= MAX_TOPK:
        raise _RequestError(422, f"'topk' must be an integer from 1 to {MAX_TOPK}")
    return_scores = payload.get("return_scores", False)
    if not isinstance(return_scores, bool):
        raise _RequestError(422, "'return_scores' must be true or false")
    return queries, topk, return_scores


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: "_Server"

    def setup(self) -> None:
        super().setup()
        # headers and body go out in two writes: without TCP_NODELAY, Nagle's algorithm and the
        # client's delayed ACK add ~40 ms to every response on a keep-alive connection
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        if self.server.verbose:
            super().log_message(format, *args)

    def _send(self, status: int, payload: Any) -> None:
        body = json.dumps(payload).encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:  # noqa: N802 - stdlib name
        if self.path.split("?", 1)[0] in ("/health", "/"):
            self._send(200, {"status": "ok", "num_docs": self.server.num_docs})
        else:
            self._send(404, {"detail": "not found; POST /retrieve"})

    def do_POST(self) -> None:  # noqa: N802 - stdlib name
        if self.path.split("?", 1)[0].rstrip("/") != "/retrieve":
            self._discard_body()
            self._send(404, {"detail": "not found; POST /retrieve"})
            return
        try:
            length = int(self.headers.get("Content-Length", "0"))
        except ValueError:
            length = -1
        if length < 0 or length > MAX_BODY_BYTES:
            self.close_connection = True
            self._send(413, {"detail": f"the body must be 0 to {MAX_BODY_BYTES} bytes with a Content-Length"})
            return
        body = self.rfile.read(length)
        try:
            queries, topk, return_scores = parse_request(body, self.server.default_topk)
        except _RequestError as err:
            self._send(err.status, {"detail": err.detail})
            return
        try:
            hits = self.server.retriever.retrieve(queries, topk) if queries else []
        except Exception as exc:  # report, keep serving
            self._send(500, {"detail": f"retrieval failed: {type(exc).__name__}: {exc}"})
            return
        self._send(200, {"result": hits_to_json(hits, return_scores=return_scores)})

    def _discard_body(self) -> None:
        try:
            length = int(self.headers.get("Content-Length", "0"))
        except ValueError:
            length = 0
        if 0 < length <= MAX_BODY_BYTES:
            self.rfile.read(length)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, address: tuple[str, int], retriever: Retriever, default_topk: int, num_docs: int | None, verbose: bool):
        self.retriever = retriever
        self.default_topk = default_topk
        self.num_docs = num_docs
        self.verbose = verbose
        super().__init__(address, _Handler)


class RetrievalServer:
    """Serve a retriever over HTTP; usable as a context manager that runs it in a thread.

    Args:
        retriever: Any object with ``retrieve(queries, topk)`` (BM25, dense, ...).
        host: Interface to bind (default ``127.0.0.1``: this machine only).
        port: TCP port; 0 picks a free one (read it back from :attr:`port`).
        default_topk: ``topk`` for requests that give none (Search-R1's ``--topk``, 3).
        verbose: Log every request to stderr.

    Example::

        with RetrievalServer(BM25Retriever(corpus)) as server:
            env = gym.make("TurnSearchQA-v0", retriever_url=server.url)
    """

    def __init__(self, retriever: Retriever, *, host: str = "127.0.0.1", port: int = 0, default_topk: int = 3, verbose: bool = False):
        if default_topk < 1:
            raise ValueError("default_topk must be positive")
        corpus = getattr(retriever, "corpus", None)
        self._httpd = _Server((host, port), retriever, default_topk, len(corpus) if corpus is not None else None, verbose)
        self._thread: threading.Thread | None = None

    @property
    def host(self) -> str:
        return str(self._httpd.server_address[0])

    @property
    def port(self) -> int:
        return int(self._httpd.server_address[1])

    @property
    def url(self) -> str:
        """The ``/retrieve`` endpoint."""
        return f"http://{self.host}:{self.port}/retrieve"

    def start(self) -> "RetrievalServer":
        """Serve in a daemon thread and return at once."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._httpd.serve_forever, name="retrieval-server", daemon=True)
            self._thread.start()
        return self

    def serve_forever(self) -> None:
        """Serve in this thread until :meth:`stop` (or Ctrl-C)."""
        self._httpd.serve_forever()

    def stop(self) -> None:
        """Stop serving and release the port."""
        if self._thread is not None:
            self._httpd.shutdown()
            self._thread.join()
            self._thread = None
        self._httpd.server_close()

    def __enter__(self) -> "RetrievalServer":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="agentgym-turn serve retriever",
        description="Serve a corpus over Search-R1's /retrieve protocol (POST {\"queries\", \"topk\", \"return_scores\"}).",
    )
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--corpus", metavar="PATH", help="corpus jsonl ({\"id\", \"contents\"} lines, wiki-18 format; .gz allowed)")
    src.add_argument("--generated", action="store_true", help="serve the generated TurnSearchQA world's corpus")
    p.add_argument("--world-seed", type=int, default=0, help="seed of the generated world (default 0)")
    p.add_argument("--world-scale", type=float, default=1.0, help="size multiplier of the generated world (default 1.0)")
    p.add_argument("--retriever", choices=("bm25", "dense"), default="bm25", help="ranking (default bm25)")
    p.add_argument("--encoder", metavar="DIR", help="local sentence-transformers model directory (for --retriever dense; never downloaded)")
    p.add_argument("--index-dir", metavar="DIR", help="save the index here, or load it if it is there")
    p.add_argument("--topk", type=int, default=3, help="passages per query when a request gives no topk (default 3)")
    p.add_argument("--host", default="127.0.0.1", help="interface to bind (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=8000, help="port (default 8000; 0 picks a free one)")
    p.add_argument("--verbose", action="store_true", help="log every request")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``agentgym-turn serve retriever``."""
    args = build_parser().parse_args(list(argv) if argv is not None else None)
    from .sources import corpus_source, file_key, generated_source, local_retriever

    if args.retriever == "dense" and not args.encoder:
        print("--retriever dense needs --encoder DIR (a local sentence-transformers model).", file=sys.stderr)
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
    server = RetrievalServer(retriever, host=args.host, port=args.port, default_topk=args.topk, verbose=args.verbose)
    print(f"Serving {len(corpus):,} passages at {server.url} (Ctrl-C stops)", file=sys.stderr, flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
