"""The one server stack of the suite: Starlette apps on uvicorn, with bounds on every input.

Every server the project runs (the Search-R1 retriever, the WebShop site, served envs) is a
Starlette application run by :class:`AppServer`, which adds what a public-facing server needs and
uvicorn leaves open:

* a **request deadline**: a connection that has not sent a complete request head within
  ``ServerLimits.header_timeout`` seconds (a silent or slow-loris client) is closed; a body is read
  by :func:`read_body` under ``body_timeout`` and ``max_body_bytes`` (408 / 413 otherwise);
* a **backlog** of 2048 and **no thread per connection** (asyncio), so hundreds of clients that
  open a connection per request (as Search-R1's client does) are not reset;
* **bounded concurrency**: beyond ``max_connections`` open connections uvicorn answers 503;
* :func:`parse_json` refuses deeply nested JSON with a 400 instead of a ``RecursionError``.

Starlette rather than FastAPI: the endpoints are a handful of JSON and HTML routes whose bounds we
check by hand anyway, so pydantic models would add a dependency and nothing the routes need.
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
import logging
import socket
import threading
import time
from dataclasses import dataclass
from typing import Any, Sequence

__all__ = ["ServerLimits", "AppServer", "HTTPError", "HostOriginGuard", "LOOPBACK_NAMES", "add_allow_host_argument", "read_body", "loads_strict", "parse_json", "json_error_handlers"]


@dataclass(frozen=True)
class ServerLimits:
    """Bounds every server applies (seconds and bytes)."""

    #: Seconds a connection may take to send a complete request head (and idle between requests).
    header_timeout: float = 10.0
    #: Seconds a request body may take to arrive.
    body_timeout: float = 30.0
    #: Largest request body.
    max_body_bytes: int = 4 * 1024 * 1024
    #: Largest request head (request line and headers); a longer one gets 431 (or 400 from h11).
    max_head_bytes: int = 64 * 1024
    #: Open connections beyond this get HTTP 503.
    max_connections: int = 1024
    #: Seconds an idle keep-alive connection stays open.
    keep_alive: float = 5.0
    #: Listen backlog (pending connections the kernel queues before resetting).
    backlog: int = 2048


class HTTPError(Exception):
    """Raised inside a route: becomes ``{"detail": ...}`` with ``status`` (see :func:`json_error_handlers`)."""

    def __init__(self, status: int, detail: str):
        super().__init__(detail)
        self.status = status
        self.detail = detail


async def read_body(request: Any, limits: ServerLimits) -> bytes:
    """The request body, refusing more than ``limits.max_body_bytes`` (413) or a slow sender (408)."""
    declared = request.headers.get("content-length")
    if declared is not None:
        try:
            size = int(declared)
        except ValueError:
            raise HTTPError(400, "Content-Length is not a number") from None
        if size < 0 or size > limits.max_body_bytes:
            raise HTTPError(413, f"the body must be at most {limits.max_body_bytes:,} bytes")

    async def collect() -> bytes:
        chunks: list[bytes] = []
        total = 0
        async for chunk in request.stream():
            total += len(chunk)
            if total > limits.max_body_bytes:
                raise HTTPError(413, f"the body must be at most {limits.max_body_bytes:,} bytes")
            chunks.append(chunk)
        return b"".join(chunks)

    try:
        return await asyncio.wait_for(collect(), timeout=limits.body_timeout)
    except asyncio.TimeoutError:
        raise HTTPError(408, f"the body did not arrive within {limits.body_timeout:g} s") from None


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def loads_strict(text: str | bytes) -> Any:
    """``json.loads`` that refuses ``NaN``, ``Infinity`` and ``-Infinity`` (Python reads them; JSON has
    none), so that nothing the server echoes back in an error is invalid JSON."""
    return json.loads(text, parse_constant=_no_constant)


def parse_json(body: bytes) -> Any:
    """Decode a JSON body; malformed (``NaN`` included), non-UTF-8 or too deeply nested input is an :class:`HTTPError` 400."""
    try:
        return loads_strict(body)
    except RecursionError:
        raise HTTPError(400, "the JSON is nested too deeply") from None
    except (ValueError, UnicodeDecodeError):
        raise HTTPError(400, "the body is not valid JSON") from None


def json_error_handlers() -> dict:
    """Starlette ``exception_handlers`` that answer every error as ``{"detail": ...}`` JSON, never a traceback."""
    from starlette.exceptions import HTTPException
    from starlette.responses import JSONResponse

    async def on_http_error(request: Any, exc: HTTPError) -> JSONResponse:
        return JSONResponse({"detail": exc.detail}, status_code=exc.status)

    async def on_starlette_error(request: Any, exc: HTTPException) -> JSONResponse:
        return JSONResponse({"detail": exc.detail}, status_code=exc.status_code)

    async def on_crash(request: Any, exc: Exception) -> JSONResponse:
        return JSONResponse({"detail": f"internal error: {type(exc).__name__}: {exc}"}, status_code=500)

    return {HTTPError: on_http_error, HTTPException: on_starlette_error, Exception: on_crash}


def _http_protocol_base(parser: str = "auto") -> type:
    """uvicorn's HTTP/1.1 protocol class for ``parser``: ``"httptools"`` (llhttp, a C parser), ``"h11"``
    (pure Python), or ``"auto"``: httptools where it is installed, else h11."""
    if parser not in ("auto", "httptools", "h11"):
        raise ValueError(f"http_parser must be 'auto', 'httptools' or 'h11', got {parser!r}.")
    if parser != "h11":
        try:
            from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

            return HttpToolsProtocol
        except ImportError:
            if parser == "httptools":
                raise ImportError("http_parser='httptools' needs the httptools package: pip install httptools.") from None
    from uvicorn.protocols.http.h11_impl import H11Protocol

    return H11Protocol


def _guarded_protocol(header_timeout: float, max_head_bytes: int, parser: str = "auto") -> type:
    """uvicorn's HTTP protocol plus two bounds on a request head: a connection with no request under
    way is closed after ``header_timeout`` seconds, and a head (request line and headers) over
    ``max_head_bytes`` is refused with 431. The head's bytes are counted here as they arrive: llhttp buffers a
    header of any length, and h11 bounds only an incomplete head (``h11_max_incomplete_event_size``), so both
    would take a complete oversized head that arrives in one read."""
    base = _http_protocol_base(parser)
    counts_head = base.__name__ == "HttpToolsProtocol"

    class GuardedProtocol(base):  # type: ignore[misc, valid-type]
        _deadline: asyncio.TimerHandle | None = None
        _head_bytes = 0
        _in_body = False

        def _arm(self) -> None:
            if self._deadline is not None:
                self._deadline.cancel()
            self._deadline = self.loop.call_later(header_timeout, self._on_deadline)

        def _on_deadline(self) -> None:
            self._deadline = None
            if self.transport.get_protocol() is not self:  # upgraded to a WebSocket, which owns the connection now
                return
            in_request = self.cycle is not None and not self.cycle.response_complete
            if not in_request and not self.transport.is_closing():
                self.transport.close()

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            sock = transport.get_extra_info("socket")
            if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
                # Served on a pre-bound socket, accepted connections lack TCP_NODELAY: Nagle then held every keep-alive
                # response for the client's delayed ACK (44-56 ms a retrieve request instead of 1.5-1.9 ms).
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            super().connection_made(transport)
            self._arm()

        def _head_fits(self, data: bytes) -> bool:
            """Count the head so far (up to its blank line when this read holds it, so that a whole head in
            one read is counted before it is parsed; else all of the read); refuse it with 431 when over."""
            end = data.find(b"\r\n\r\n")
            self._head_bytes += len(data) if end < 0 else end + 4
            if self._head_bytes <= max_head_bytes:
                return True
            if not self.transport.is_closing():
                detail = b'{"detail":"the request line and headers must be at most %d bytes"}' % max_head_bytes
                self.transport.write(
                    b"HTTP/1.1 431 Request Header Fields Too Large\r\ncontent-type: application/json\r\n"
                    b"connection: close\r\ncontent-length: %d\r\n\r\n%s" % (len(detail), detail)
                )
                self.transport.close()
            return False

        if counts_head:  # llhttp buffers a header of any length: every read of a head is counted

            def data_received(self, data: bytes) -> None:
                if self._in_body or self._head_fits(data):
                    super().data_received(data)

            def on_headers_complete(self) -> None:
                self._in_body = True
                super().on_headers_complete()

            def on_message_complete(self) -> None:
                self._in_body = False
                self._head_bytes = 0
                super().on_message_complete()

        else:  # h11 bounds an incomplete head itself, but takes a complete one of any size in one read

            def data_received(self, data: bytes) -> None:
                if self.cycle is not None and not self.cycle.response_complete:  # a request under way
                    super().data_received(data)
                    return
                if self._head_fits(data):
                    super().data_received(data)
                    if self.cycle is not None:  # a request began: the next head is counted afresh
                        self._head_bytes = 0

        def on_response_complete(self) -> None:
            super().on_response_complete()
            if not self.transport.is_closing():
                self._arm()

        def connection_lost(self, exc: Exception | None) -> None:
            if self._deadline is not None:
                self._deadline.cancel()
                self._deadline = None
            super().connection_lost(exc)

    GuardedProtocol.__name__ = GuardedProtocol.__qualname__ = f"Guarded{base.__name__}"
    return GuardedProtocol


def _exit_on_signal(signum: int, frame: Any) -> None:
    raise SystemExit(128 + signum)


def _serve_copy(server: "AppServer") -> None:
    """A forked copy of ``server``'s process: serve its listening socket with a fresh uvicorn server until told to stop."""
    import signal
    import sys

    if sys.platform.startswith("linux"):  # exit with the parent even if it is killed outright
        import ctypes

        try:
            ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
        except (AttributeError, OSError):
            pass
    import uvicorn

    server._server = uvicorn.Server(server._server.config)
    try:
        server._run()
    except KeyboardInterrupt:  # Ctrl-C reaches the whole process group; the parent reports it
        pass


class _ClientFaultsInOneLine(logging.Filter):
    """uvicorn logs a client's text frame of invalid UTF-8 at ERROR with a traceback, though the fault is the
    client's and the connection is closed with code 1007: one warning line instead, so a hostile client
    cannot flood the log with tracebacks."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.getMessage().startswith("Invalid UTF-8 sequence received from client"):
            record.exc_info, record.exc_text = None, None
            record.levelno, record.levelname = logging.WARNING, "WARNING"
        return True


def _quiet_client_faults() -> None:
    log = logging.getLogger("uvicorn.error")
    if not any(isinstance(f, _ClientFaultsInOneLine) for f in log.filters):
        log.addFilter(_ClientFaultsInOneLine())


#: Host names every server accepts in ``Host`` and ``Origin``: this machine's.
LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})


def _hostname(value: str) -> str:
    """The host of a ``Host`` header or an origin's authority, lower-case, without port or brackets."""
    value = value.strip().lower()
    if value.startswith("["):
        return value[1:value.find("]")] if "]" in value else value[1:]
    return value.rsplit(":", 1)[0] if value.count(":") == 1 else value


def add_allow_host_argument(parser: Any) -> None:
    """``--allow-host NAME`` (repeatable) on a server's CLI: the ``allowed_hosts`` of :class:`AppServer`."""
    parser.add_argument("--allow-host", action="append", default=[], metavar="NAME",
                        help="a domain name clients and web pages may reach this server by (repeatable; this machine's "
                             "names and IP addresses always work; '*': any)")


def _is_ip(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


class HostOriginGuard:
    """ASGI middleware against browser-borne requests: a ``Host`` that names a domain outside ``allowed``
    (DNS rebinding: a page of evil.example whose name resolves to this machine) and an ``Origin`` outside
    ``allowed`` (any web page the user opens, driving a local server) get 403 (WebSocket: refused before
    the handshake). Clients that are not browsers send no ``Origin``; an IP-literal ``Host`` cannot be
    rebound, so it passes. ``allowed``: this machine's names, the bound address, and the server's
    ``allowed_hosts`` (``--allow-host``); ``"*"`` allows every name."""

    def __init__(self, app: Any, allowed: frozenset[str]):
        self.app = app
        self.allowed = allowed

    def _refusal(self, headers: dict[bytes, bytes]) -> str | None:
        if "*" in self.allowed:
            return None
        host = headers.get(b"host")
        if host is not None:
            name = _hostname(host.decode("latin-1"))
            if name not in self.allowed and not _is_ip(name):
                return f"Host {name!r} is not served here; start the server with --allow-host {name} to serve it"
        origin = headers.get(b"origin")
        if origin is not None:
            text = origin.decode("latin-1").strip()
            name = _hostname(text.split("://", 1)[1]) if "://" in text else ""
            if name not in self.allowed:
                return f"requests from the web origin {text[:100]!r} are refused (only this machine's pages may call this server)"
        return None

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] in ("http", "websocket"):
            refusal = self._refusal({k.lower(): v for k, v in scope.get("headers", [])})
            if refusal is not None:
                if scope["type"] == "websocket":
                    await send({"type": "websocket.close", "code": 1008, "reason": refusal[:120]})
                    return
                body = json.dumps({"detail": refusal}).encode()
                await send({"type": "http.response.start", "status": 403,
                            "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
                await send({"type": "http.response.body", "body": body})
                return
        await self.app(scope, receive, send)


class AppServer:
    """Run an ASGI app on uvicorn, in a background thread (``start``/``stop``, a context manager)
    or in the calling thread (``serve_forever``).

    Args:
        app: The ASGI application.
        host: Interface to bind (default ``127.0.0.1``: this machine only).
        port: TCP port; 0 picks a free one (read it back from :attr:`port`).
        limits: The bounds of :class:`ServerLimits`.
        verbose: Log every request (uvicorn's access log).
        http_parser: ``"auto"`` (httptools, a C parser, where installed; else h11), ``"httptools"`` or
            ``"h11"``. Both enforce every bound of ``limits``.
        allowed_hosts: Domain names accepted in ``Host`` and ``Origin`` beside this machine's and the bound
            address (:class:`HostOriginGuard`); ``["*"]`` accepts any.
    """

    def __init__(self, app: Any, *, host: str = "127.0.0.1", port: int = 0, limits: ServerLimits | None = None, verbose: bool = False,
                 http_parser: str = "auto", allowed_hosts: Sequence[str] = ()):
        import uvicorn

        app = HostOriginGuard(app, LOOPBACK_NAMES | {_hostname(host)} | {h.strip().lower() for h in allowed_hosts})

        self.limits = limits or ServerLimits()
        protocol = _guarded_protocol(self.limits.header_timeout, self.limits.max_head_bytes, http_parser)  # fails before a socket opens
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self._socket = socket.socket(family, socket.SOCK_STREAM)
        self._socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            self._socket.bind((host, port))
        except OSError as err:
            self._socket.close()
            raise OSError(f"cannot listen on {host}:{port} ({err.strerror}); pick another --port or stop the other server.") from None
        self._socket.listen(self.limits.backlog)
        self._socket.set_inheritable(True)
        config = uvicorn.Config(
            app,
            http=protocol,
            h11_max_incomplete_event_size=self.limits.max_head_bytes,
            loop="auto",  # uvloop where installed (with httptools, about a quarter less server CPU a request), else asyncio
            lifespan="off",
            log_level="info" if verbose else "warning",
            access_log=verbose,
            timeout_keep_alive=self.limits.keep_alive,
            limit_concurrency=self.limits.max_connections,
            backlog=self.limits.backlog,
            timeout_graceful_shutdown=2,
        )
        _quiet_client_faults()  # after uvicorn.Config, which configures its loggers
        self._server = uvicorn.Server(config)
        self._thread: threading.Thread | None = None

    @property
    def host(self) -> str:
        return str(self._socket.getsockname()[0])

    @property
    def port(self) -> int:
        return int(self._socket.getsockname()[1])

    @property
    def base_url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    def start(self) -> "AppServer":
        """Serve in a daemon thread; return once the server accepts connections."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="agentgym-server", daemon=True)
            self._thread.start()
            deadline = time.monotonic() + 30
            while not self._server.started:
                if not self._thread.is_alive() or time.monotonic() > deadline:
                    raise RuntimeError("the server did not start; see the log above.")
                time.sleep(0.01)
        return self

    def _run(self) -> None:
        self._server.run(sockets=[self._socket])

    def serve_forever(self, processes: int = 1) -> None:
        """Serve in this thread until Ctrl-C or SIGTERM (uvicorn handles both) or :meth:`stop`.

        ``processes`` > 1 (POSIX, stateless apps only): this process and ``processes - 1`` forked
        copies of it (the app and whatever it holds, an index for example, shared copy-on-write)
        accept on the one listening socket, so requests use that many cores. Every bound of
        :class:`ServerLimits` then applies per process. The copies exit with this one.
        """
        if isinstance(processes, bool) or not isinstance(processes, int) or processes < 1:
            raise ValueError(f"processes must be a positive integer, got {processes!r}.")
        if processes == 1:
            self._run()
            return
        import multiprocessing
        import signal

        if "fork" not in multiprocessing.get_all_start_methods():
            raise RuntimeError("processes > 1 needs os.fork (Linux, macOS); serve with processes=1 here.")
        # uvicorn re-raises the SIGTERM it caught once it has shut down: exit through `finally`, which stops the copies.
        # Set first: outside the main thread this raises before any copy exists.
        previous = signal.signal(signal.SIGTERM, _exit_on_signal)
        context = multiprocessing.get_context("fork")
        children = [context.Process(target=_serve_copy, args=(self,), name=f"agentgym-server-{i + 1}", daemon=True)
                    for i in range(processes - 1)]
        try:
            for child in children:
                child.start()
            self._run()
        finally:
            signal.signal(signal.SIGTERM, previous)
            children = [child for child in children if child.pid is not None]  # started
            for child in children:
                child.terminate()
            for child in children:
                child.join(timeout=10)
                if child.is_alive():
                    child.kill()
                    child.join()

    def run_until_interrupted(self, banner: str, processes: int = 1) -> int:
        """Print ``banner`` to stderr, serve in this thread until Ctrl-C, stop; the CLI's exit status (0).

        ``processes``: as :meth:`serve_forever`.
        """
        import sys

        print(banner, file=sys.stderr, flush=True)
        try:
            self.serve_forever(processes)
        except KeyboardInterrupt:
            pass
        finally:
            self.stop()
        return 0

    def stop(self) -> None:
        """Stop serving, close open connections and release the port."""
        self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None
        self._socket.close()

    def __enter__(self) -> "AppServer":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()
