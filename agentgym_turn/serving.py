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
* a **send deadline**: a connection whose client stops reading is aborted (its buffered answer freed)
  once writing has stayed paused for ``ServerLimits.send_timeout`` seconds, or once it is closing or idle
  with unsent bytes for that long; each connection's write buffer pauses at :data:`WRITE_BUFFER_HIGH`
  bytes, so an answer sent in pieces (awaiting each ``send``) holds at most that much plus one piece.
  uvicorn alone waits for a paused connection to drain with no deadline, holding the answer forever;
* :func:`parse_json` refuses deeply nested JSON with a 400 instead of a ``RecursionError``;
* **access control** (:class:`AppServer` wraps every app): :class:`HostOriginGuard` refuses other sites' pages
  and DNS rebinding; :class:`TokenGuard`, with a ``token``, requires ``Authorization: Bearer`` on every request
  and WebSocket handshake but ``GET /health``; :class:`RateLimiter` gives each client IP beyond this machine a
  token bucket (:class:`RateLimit`, 429 past it). The CLIs share :func:`add_allow_host_argument` and
  :func:`add_access_arguments`.

Starlette rather than FastAPI: the endpoints are a handful of JSON and HTML routes whose bounds we
check by hand anyway, so pydantic models would add a dependency and nothing the routes need.
"""

from __future__ import annotations

import asyncio
import hmac
import ipaddress
import json
import logging
import math
import re
import socket
import struct
import threading
import time
from dataclasses import dataclass
from typing import Any, Sequence

from .core.args import is_int, is_number


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
    #: Seconds a client that stops reading may hold its answer: a connection whose writing stays paused
    #: (more than :data:`WRITE_BUFFER_HIGH` bytes unsent) this long, or that is closing or idle with
    #: unsent bytes this long, is aborted and its buffers freed.
    send_timeout: float = 30.0


#: Bytes of unsent answer at which a connection's writing pauses (the sender awaits the client) and
#: resumes below a quarter of that; what a paused connection buffers beyond it is one ``send``'s bytes.
WRITE_BUFFER_HIGH = 64 * 1024


class HTTPError(Exception):
    """Raised inside a route: becomes ``{"detail": ...}`` with ``status`` (see :func:`json_error_handlers`)."""

    def __init__(self, status: int, detail: str):
        super().__init__(detail)
        self.status = status
        self.detail = detail


async def read_body(request: Any, limits: ServerLimits) -> bytes:
    """The request body, refusing more than ``limits.max_body_bytes`` (413), a slow sender (408) or one that left
    mid-body (400, which it never reads)."""
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

    from starlette.requests import ClientDisconnect

    try:
        return await asyncio.wait_for(collect(), timeout=limits.body_timeout)
    except asyncio.TimeoutError:
        raise HTTPError(408, f"the body did not arrive within {limits.body_timeout:g} s") from None
    except ClientDisconnect:  # gone mid-body: an answer nobody reads, not a traceback in the log for each such client
        raise HTTPError(400, "the client closed the connection before its body arrived") from None


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"{text[:40]} is past the range of a float")
    return value


#: ``json.loads`` with hooks builds a new decoder a call; a served session decodes every message with this one.
_STRICT_DECODER = json.JSONDecoder(parse_constant=_no_constant, parse_float=_finite_float)


def loads_strict(text: str | bytes) -> Any:
    """``json.loads`` that refuses ``NaN``, ``Infinity`` and ``-Infinity`` (Python reads them; JSON has
    none) and numbers a float cannot hold (``1e400`` reads as infinity), so that nothing the server echoes
    back is invalid JSON."""
    if isinstance(text, str) and not text.startswith("\ufeff"):  # json.loads's own check of a str, then its decode
        return _STRICT_DECODER.decode(text)
    return json.loads(text, parse_constant=_no_constant, parse_float=_finite_float)


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
                raise ImportError(
                    "http_parser='httptools' needs the httptools package: pip install httptools."
                ) from None
    from uvicorn.protocols.http.h11_impl import H11Protocol

    return H11Protocol


def _guarded_protocol(
    header_timeout: float, max_head_bytes: int, parser: str = "auto", send_timeout: float = 30.0
) -> type:
    """uvicorn's HTTP protocol plus two bounds on a request head and one on sending: a connection with no
    request under way is closed after ``header_timeout`` seconds, and a head (request line and headers) over
    ``max_head_bytes`` is refused with 431. The head's bytes are counted here as they arrive: llhttp buffers a
    header of any length, and h11 bounds only an incomplete head (``h11_max_incomplete_event_size``), so both
    would take a complete oversized head that arrives in one read.

    The send deadline: uvicorn's ``send`` awaits a paused transport's drain with no timeout, and a transport
    closed with unsent bytes waits for a reader forever, so a client that never reads would hold its answer
    (and a connection slot) for good. Writing paused, or a closing or idle connection with unsent bytes, for
    ``send_timeout`` seconds aborts the transport; uvicorn's ``connection_lost`` then ends the response."""
    base = _http_protocol_base(parser)
    counts_head = base.__name__ == "HttpToolsProtocol"

    class GuardedProtocol(base):  # type: ignore[misc, valid-type]
        _deadline: asyncio.TimerHandle | None = None
        _send_deadline: asyncio.TimerHandle | None = None
        _head_bytes = 0
        _in_body = False
        _refused = False
        _parsed_head = 0  # this message's head as the parser reports it (a pipelined head arrives inside another read)

        def _arm(self) -> None:
            if self._deadline is not None:
                self._deadline.cancel()
            self._deadline = self.loop.call_later(header_timeout, self._on_deadline)

        def _on_deadline(self) -> None:
            self._deadline = None
            if self.transport.get_protocol() is not self:  # upgraded to a WebSocket, which owns the connection now
                return
            in_request = self.cycle is not None and not self.cycle.response_complete
            if in_request and not self.transport.is_closing():
                self._arm()  # look again later: uvicorn may yet close this connection with bytes unsent
                return
            if not self.transport.is_closing():
                self.transport.close()
            self._watch_unsent()  # a closed transport still waits for its unsent bytes to be read

        def _watch_unsent(self) -> None:
            """Start the send deadline (unless it runs) when bytes wait for the client."""
            if self._send_deadline is None and self.transport.get_write_buffer_size() > 0:
                self._send_deadline = self.loop.call_later(send_timeout, self._on_send_deadline)

        def _on_send_deadline(self) -> None:
            self._send_deadline = None
            if self.transport.get_protocol() is not self:  # upgraded to a WebSocket, which owns the connection now
                return
            if self.transport.get_write_buffer_size() > 0:  # the client has not taken its answer in time
                sock = self.transport.get_extra_info("socket")
                if sock is not None:  # a reset, not a FIN: the kernel drops what it still holds for the client too
                    try:
                        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                    except OSError:
                        pass
                self.transport.abort()

        def pause_writing(self) -> None:
            super().pause_writing()
            if self._send_deadline is None:
                self._send_deadline = self.loop.call_later(send_timeout, self._on_send_deadline)

        def resume_writing(self) -> None:
            if self._send_deadline is not None:  # the client reads: a fresh deadline for the next pause
                self._send_deadline.cancel()
                self._send_deadline = None
            super().resume_writing()
            if self.transport.is_closing():  # the rest must still be read before the deadline
                self._watch_unsent()

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            sock = transport.get_extra_info("socket")
            if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
                # Served on a pre-bound socket, accepted connections lack TCP_NODELAY: Nagle then held every keep-alive
                # response for the client's delayed ACK (44-56 ms a retrieve request instead of 1.5-1.9 ms).
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            transport.set_write_buffer_limits(high=WRITE_BUFFER_HIGH)
            super().connection_made(transport)
            self._arm()

        def _head_fits(self, data: bytes) -> bool:
            """Count the head so far (up to its blank line when this read holds it, so that a whole head in
            one read is counted before it is parsed; else all of the read); refuse it with 431 when over."""
            end = data.find(b"\r\n\r\n")
            self._head_bytes += len(data) if end < 0 else end + 4
            if self._head_bytes <= max_head_bytes:
                return True
            self._refuse_head()
            return False

        def _refuse_head(self) -> None:
            self._refused = True
            if not self.transport.is_closing():
                detail = b'{"detail":"the request line and headers must be at most %d bytes"}' % max_head_bytes
                self.transport.write(
                    b"HTTP/1.1 431 Request Header Fields Too Large\r\ncontent-type: application/json\r\n"
                    b"connection: close\r\ncontent-length: %d\r\n\r\n%s" % (len(detail), detail)
                )
                self.transport.close()

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

            def on_message_begin(self) -> None:
                self._parsed_head = 0
                super().on_message_begin()

            def _parsed(self, size: int) -> None:
                """Count a parsed piece of the head; over the bound, refuse and stop the parser (its error ends the feed)."""
                self._parsed_head += size
                if self._parsed_head > max_head_bytes:
                    self._refuse_head()
                    raise ValueError("request head over the bound")

            def on_url(self, url: bytes) -> None:
                self._parsed(len(url))
                super().on_url(url)

            def on_header(self, name: bytes, value: bytes) -> None:
                self._parsed(len(name) + len(value) + 4)
                super().on_header(name, value)

            def send_400_response(self, msg: str) -> None:
                if not self._refused:  # a refused head has had its 431
                    super().send_400_response(msg)

        else:  # h11 bounds an incomplete head itself, but takes a complete one of any size in one read

            def data_received(self, data: bytes) -> None:
                if self.cycle is not None and not self.cycle.response_complete:  # a request under way
                    super().data_received(data)
                    return
                if self._head_fits(data):
                    super().data_received(data)
                    if self.cycle is not None:  # a request began: the next head is counted afresh
                        self._head_bytes = 0

            def handle_events(self) -> None:
                import h11

                if self.conn.their_state is h11.IDLE and not self._refused:  # a pipelined head waits in h11's buffer
                    buffered = self.conn.trailing_data[0]
                    end = buffered.find(b"\r\n\r\n")
                    if (len(buffered) if end < 0 else end + 4) > max_head_bytes:
                        self._refuse_head()
                        return
                super().handle_events()

        def on_response_complete(self) -> None:
            super().on_response_complete()
            if not self.transport.is_closing():
                self._arm()
            else:  # answered with "connection: close": closed, but the rest of the answer may still wait
                self._watch_unsent()

        def connection_lost(self, exc: Exception | None) -> None:
            if self._deadline is not None:
                self._deadline.cancel()
                self._deadline = None
            if self._send_deadline is not None:
                self._send_deadline.cancel()
                self._send_deadline = None
            super().connection_lost(exc)

    GuardedProtocol.__name__ = GuardedProtocol.__qualname__ = f"Guarded{base.__name__}"
    return GuardedProtocol


def _exit_on_signal(signum: int, frame: Any) -> None:
    raise SystemExit(128 + signum)


def _serve_copy(server: "AppServer", parent: int) -> None:
    """A forked copy of ``server``'s process (``parent``: the pid that forked it): serve its listening socket with a
    fresh uvicorn server until told to stop."""
    import os
    import signal
    import sys

    # The parent's handler raises SystemExit, which Python swallows when the signal lands in a weakref callback or a
    # destructor ("Exception ignored in ..."), and the copy would live on. The default action ends the process
    # wherever the signal lands; while uvicorn serves, its own handler shuts down gracefully, then re-raises SIGTERM.
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    if sys.platform.startswith("linux"):  # exit with the parent even if it is killed outright
        import ctypes

        try:
            ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
        except (AttributeError, OSError):
            pass
    if os.getppid() != parent:  # the parent died before the death signal was armed: nobody would send it
        return
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
    """The host of a ``Host`` header or an origin's authority, lower-case, without port or brackets. A bracketed
    address followed by anything but ``:port`` (``[::1].evil.example``) is returned whole: no name it could match."""
    value = value.strip().lower()
    if value.startswith("["):
        end = value.find("]")
        rest = value[end + 1 :] if end >= 0 else None
        return value[1:end] if rest is not None and (rest == "" or re.fullmatch(r":\d{1,5}", rest)) else value
    return value.rsplit(":", 1)[0] if value.count(":") == 1 else value


def add_allow_host_argument(parser: Any) -> None:
    """``--allow-host NAME`` (repeatable) on a server's CLI: the ``allowed_hosts`` of :class:`AppServer`."""
    parser.add_argument(
        "--allow-host",
        action="append",
        default=[],
        metavar="NAME",
        help="a domain name clients and web pages may reach this server by (repeatable; this machine's "
        "names and IP addresses always work; '*': any)",
    )


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

    def _refusal(self, headers: dict[bytes, bytes], counts: dict[bytes, int] | None = None) -> str | None:
        repeated = sorted(k.decode("latin-1") for k, n in (counts or {}).items() if n > 1 and k in (b"host", b"origin"))
        if repeated:  # which copy a proxy or a browser meant is ambiguous: judge none of them
            return f"a request with more than one {' and '.join(repeated)} header is refused"
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
            pairs = [(k.lower(), v) for k, v in scope.get("headers", [])]
            counts: dict[bytes, int] = {}
            for k, _ in pairs:
                counts[k] = counts.get(k, 0) + 1
            refusal = self._refusal(dict(pairs), counts)
            if refusal is not None:
                if scope["type"] == "websocket":
                    await send({"type": "websocket.close", "code": 1008, "reason": refusal[:120]})
                    return
                body = json.dumps({"detail": refusal}).encode()
                await send(
                    {
                        "type": "http.response.start",
                        "status": 403,
                        "headers": [
                            (b"content-type", b"application/json"),
                            (b"content-length", str(len(body)).encode()),
                        ],
                    }
                )
                await send({"type": "http.response.body", "body": body})
                return
        await self.app(scope, receive, send)


#: Environment variable a server CLI reads its token from when ``--token`` is not given: a value on the command
#: line shows in ``ps`` to every user of the machine, an environment variable does not.
TOKEN_ENV = "AGENTGYM_TOKEN"
#: Characters a token may hold (RFC 6750's ``b64token``): safe in a header, a cookie and a query string.
_TOKEN_RE = re.compile(r"[A-Za-z0-9._~+/-]+=*")


def check_token(token: Any) -> str | None:
    """``token`` if it is a usable bearer token (``None``: no token), else ``ValueError``."""
    if token is None:
        return None
    if not isinstance(token, str) or not _TOKEN_RE.fullmatch(token) or len(token) > 4096:
        raise ValueError(
            "the token must be 1 to 4,096 characters among letters, digits and - . _ ~ + / (then = padding), "
            "e.g. python -c 'import secrets; print(secrets.token_urlsafe(32))'."
        )
    return token


def is_loopback(host: str) -> bool:
    """Whether ``host`` (an address or a name) is this machine only: ``localhost``, ``127.0.0.0/8``, ``::1``."""
    name = _hostname(host) if not _is_ip(host) else host
    if name == "localhost":
        return True
    try:
        address = ipaddress.ip_address(name)
    except ValueError:
        return False
    mapped = getattr(address, "ipv4_mapped", None)
    return bool((mapped or address).is_loopback)


def add_access_arguments(parser: Any) -> None:
    """``--token`` and ``--rate-limit``/``--rate-burst`` on a server's CLI; :func:`access_options` reads them back."""
    parser.add_argument(
        "--token",
        default=None,
        metavar="TOKEN",
        help=f"require 'Authorization: Bearer TOKEN' on every request but GET /health (default: the "
        f"{TOKEN_ENV} environment variable, which unlike this option does not show in ps; unset: no "
        "token). Set one whenever --host is beyond this machine",
    )
    parser.add_argument(
        "--rate-limit",
        type=float,
        default=RateLimit.rate,
        metavar="R",
        help=f"requests a second each client IP address beyond this machine may send (token bucket; "
        f"default {RateLimit.rate:g}; 0: no limit); beyond it: 429 with Retry-After",
    )
    parser.add_argument(
        "--rate-burst",
        type=int,
        default=RateLimit.burst,
        metavar="B",
        help=f"requests a client may send at once before --rate-limit applies (default {RateLimit.burst})",
    )


def access_options(args: Any) -> dict[str, Any]:
    """``token`` and ``rate_limit`` keyword arguments of :class:`AppServer` from :func:`add_access_arguments`'
    options (``--token``, else the ``AGENTGYM_TOKEN`` environment variable). ``ValueError`` on bad values."""
    import os

    token = args.token if args.token is not None else (os.environ.get(TOKEN_ENV) or None)
    if args.rate_limit < 0:
        raise ValueError(
            f"--rate-limit must be 0 (no limit) or a positive number of requests a second, got {args.rate_limit:g}."
        )
    limit = RateLimit(rate=args.rate_limit, burst=args.rate_burst) if args.rate_limit > 0 else None
    return {"token": check_token(token), "rate_limit": limit}


def _bearer(headers: list[tuple[bytes, bytes]]) -> tuple[bytes | None, list[bytes]]:
    """The bearer token of the ``Authorization`` header (or ``None``) and the raw ``Cookie`` headers."""
    bearer, cookies = None, []
    for key, value in headers:
        key = key.lower()
        if key == b"authorization":
            scheme, _, credentials = value.strip().partition(b" ")
            if scheme.lower() == b"bearer":
                bearer = credentials.strip()
        elif key == b"cookie":
            cookies.append(value)
    return bearer, cookies


async def _refuse(scope: Any, send: Any, status: int, detail: str, headers: Sequence[tuple[bytes, bytes]] = ()) -> None:
    """Answer ``status`` with ``{"detail": ...}``; a WebSocket handshake is refused with that answer where the server
    supports ASGI's ``websocket.http.response`` (uvicorn does), else closed (code 1008) before it is accepted."""
    body = json.dumps({"detail": detail}).encode()
    head = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()), *headers]
    if scope["type"] == "websocket":
        if "websocket.http.response" not in scope.get("extensions", {}):
            await send({"type": "websocket.close", "code": 1008, "reason": detail[:120]})
            return
        await send({"type": "websocket.http.response.start", "status": status, "headers": head})
        await send({"type": "websocket.http.response.body", "body": body})
        return
    await send({"type": "http.response.start", "status": status, "headers": head})
    await send({"type": "http.response.body", "body": body})


class TokenGuard:
    """ASGI middleware that requires a shared secret: every HTTP request and WebSocket handshake must carry
    ``Authorization: Bearer <token>`` (compared in constant time), else 401 ``{"detail": ...}`` (a handshake is
    refused). ``GET /health`` stays open so that a supervisor or load balancer can probe a server without the
    secret; it tells only that the server runs and its counts.

    ``cookie_login``: a path (the WebShop site's ``/``) where a browser, which cannot add a header, presents the
    token once as ``?token=...``; the answer sets an HttpOnly, ``SameSite=Strict`` cookie (named after the port:
    cookies ignore ports) that stands for the header from then on, and is never sent by another site's page.
    """

    def __init__(self, app: Any, token: str, *, cookie_login: str | None = None):
        self.app = app
        self._token = check_token(token).encode()  # type: ignore[union-attr]
        self.cookie_login = cookie_login

    def _matches(self, presented: bytes | None) -> bool:
        return presented is not None and hmac.compare_digest(presented, self._token)

    @staticmethod
    def cookie_name(scope: Any) -> str:
        server = scope.get("server") or ("", 0)
        return f"agentgym_token_{server[1] or 0}"

    def _cookie(self, scope: Any, cookies: list[bytes]) -> bytes | None:
        name = self.cookie_name(scope).encode()
        for header in cookies:
            for part in header.split(b";"):
                key, _, value = part.strip().partition(b"=")
                if key == name and self._matches(value.strip()):
                    return value.strip()
        return None

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] not in ("http", "websocket") or (
            scope["type"] == "http" and scope["method"] in ("GET", "HEAD") and scope["path"] == "/health"
        ):
            await self.app(scope, receive, send)
            return
        bearer, cookies = _bearer(scope.get("headers", []))
        if self._matches(bearer) or (self.cookie_login is not None and self._cookie(scope, cookies) is not None):
            await self.app(scope, receive, send)
            return
        if (
            self.cookie_login is not None
            and scope["type"] == "http"
            and scope["method"] in ("GET", "HEAD")
            and scope["path"] == self.cookie_login
        ):
            from urllib.parse import parse_qs

            query = parse_qs(scope.get("query_string", b"").decode("latin-1"), max_num_fields=64)
            given = query.get("token", [])
            if len(given) == 1 and self._matches(given[0].encode("latin-1", "replace")):
                cookie = f"{self.cookie_name(scope)}={given[0]}; Path=/; HttpOnly; SameSite=Strict".encode()

                async def send_with_cookie(message: Any) -> None:
                    if message["type"] == "http.response.start":
                        extra = [
                            (b"set-cookie", cookie),
                            (b"referrer-policy", b"same-origin"),
                            (b"cache-control", b"no-store"),
                        ]
                        message = {**message, "headers": [*message.get("headers", []), *extra]}
                    await send(message)

                await self.app(scope, receive, send_with_cookie)
                return
        how = "send the header 'Authorization: Bearer <token>'"
        if self.cookie_login is not None:
            how += f" (a browser: open {self.cookie_login}?token=<token> once)"
        await _refuse(
            scope,
            send,
            401,
            f"this server needs its token: {how}",
            [(b"www-authenticate", b'Bearer realm="agentgym-turn"')],
        )


@dataclass(frozen=True)
class RateLimit:
    """Requests each client may send: a token bucket per client IP address, holding ``burst`` requests and
    refilled at ``rate`` a second; a request that finds it empty gets 429 with ``Retry-After`` (a WebSocket
    handshake counts as one request; its messages do not). IPv6 clients are counted per /64 (one host holds a
    whole /64). The table of clients keeps the ``max_clients`` most recent (least recently seen dropped first),
    so that the limiter's own memory is bounded whatever addresses arrive. Loopback clients (this machine: the
    trainer, its workers, the benchmarks) are not limited unless ``loopback``. Per process (``processes`` > 1:
    per copy)."""

    #: Requests a second, sustained, per client.
    rate: float = 1000.0
    #: Requests a client may send at once.
    burst: int = 2000
    #: Clients remembered at most.
    max_clients: int = 10_000
    #: Limit this machine's clients too.
    loopback: bool = False

    def __post_init__(self) -> None:
        if not is_number(self.rate) or not self.rate > 0:
            raise ValueError(f"rate must be a positive number of requests a second, got {self.rate!r}.")
        for name in ("burst", "max_clients"):
            value = getattr(self, name)
            if not is_int(value, 1):
                raise ValueError(f"{name} must be a positive integer, got {value!r}.")


def _client_key(ip: str) -> str:
    """The address a client is counted under: an IPv4 address (IPv4-mapped IPv6 included) or an IPv6 /64."""
    try:
        address = ipaddress.ip_address(ip.split("%", 1)[0])
    except ValueError:
        return ip[:64]
    if address.version == 6:
        if address.ipv4_mapped is not None:
            return str(address.ipv4_mapped)
        return str(ipaddress.ip_network(f"{address}/64", strict=False))
    return str(address)


class RateLimiter:
    """ASGI middleware applying a :class:`RateLimit` per client (429 with ``Retry-After`` past it)."""

    def __init__(self, app: Any, limit: RateLimit, *, clock: Any = time.monotonic):
        from collections import OrderedDict

        self.app = app
        self.limit = limit
        self._clock = clock
        self._buckets: OrderedDict[str, list[float]] = OrderedDict()  # key -> [tokens, time]; least recently seen first

    def __len__(self) -> int:
        return len(self._buckets)

    def wait(self, ip: str) -> float:
        """Take one request from ``ip``'s bucket: 0 when it may proceed, else seconds until it may."""
        limit, now = self.limit, self._clock()
        key = _client_key(ip)
        bucket = self._buckets.get(key)
        if bucket is None:
            if len(self._buckets) >= limit.max_clients:
                self._buckets.popitem(last=False)
            bucket = self._buckets[key] = [float(limit.burst), now]
        else:
            self._buckets.move_to_end(key)
            bucket[0] = min(float(limit.burst), bucket[0] + (now - bucket[1]) * limit.rate)
            bucket[1] = now
        if bucket[0] >= 1.0:
            bucket[0] -= 1.0
            return 0.0
        return (1.0 - bucket[0]) / limit.rate

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] in ("http", "websocket"):
            client = scope.get("client")
            ip = client[0] if client else None
            if ip and (self.limit.loopback or ip not in ("127.0.0.1", "::1") and not is_loopback(ip)):
                wait = self.wait(ip)
                if wait > 0:
                    seconds = str(max(1, math.ceil(wait))).encode()
                    await _refuse(
                        scope,
                        send,
                        429,
                        f"too many requests from {_client_key(ip)}: at most {self.limit.rate:g} a "
                        f"second (bursts of {self.limit.burst}); retry after {seconds.decode()} s",
                        [(b"retry-after", seconds)],
                    )
                    return
        await self.app(scope, receive, send)


def _exposure_warning(host: str, token: str | None) -> None:
    """Say on stderr that a server reachable from other machines has no token: anyone who can connect can use it."""
    if token is None and not is_loopback(host):
        import sys

        print(
            f"WARNING: serving on {host}, beyond this machine, without a token: anyone who can reach this port can "
            f"use the server. Set the {TOKEN_ENV} environment variable (or --token; AppServer(token=...)) and give the "
            "token to the clients, or bind 127.0.0.1.",
            file=sys.stderr,
            flush=True,
        )


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
        token: A shared secret every request but ``GET /health`` must carry as ``Authorization: Bearer <token>``
            (:class:`TokenGuard`; 401 otherwise); ``None``: none. Binding beyond this machine without one prints a warning.
        cookie_login: With ``token``: the path where a browser presents it once as ``?token=`` (:class:`TokenGuard`).
        rate_limit: Requests per client IP address (:class:`RateLimit`; 429 past it); ``None``: no limit.
    """

    def __init__(
        self,
        app: Any,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        limits: ServerLimits | None = None,
        verbose: bool = False,
        http_parser: str = "auto",
        allowed_hosts: Sequence[str] = (),
        token: str | None = None,
        cookie_login: str | None = None,
        rate_limit: RateLimit | None = RateLimit(),
    ):
        import uvicorn

        self.token = check_token(token)
        if self.token is not None:
            app = TokenGuard(app, self.token, cookie_login=cookie_login)
        app = HostOriginGuard(app, LOOPBACK_NAMES | {_hostname(host)} | {h.strip().lower() for h in allowed_hosts})
        if rate_limit is not None:
            app = RateLimiter(app, rate_limit)

        self.limits = limits or ServerLimits()
        protocol = _guarded_protocol(
            self.limits.header_timeout, self.limits.max_head_bytes, http_parser, self.limits.send_timeout
        )  # fails before a socket opens
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self._socket = socket.socket(family, socket.SOCK_STREAM)
        self._socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            self._socket.bind((host, port))
        except OSError as err:
            self._socket.close()
            raise OSError(
                f"cannot listen on {host}:{port} ({err.strerror}); pick another --port or stop the other server."
            ) from None
        self._socket.listen(self.limits.backlog)
        self._socket.set_inheritable(True)
        _exposure_warning(host, self.token)
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
        if not is_int(processes, 1):
            raise ValueError(f"processes must be a positive integer, got {processes!r}.")
        if processes == 1:
            self._run()
            return
        import multiprocessing
        import os
        import signal

        if "fork" not in multiprocessing.get_all_start_methods():
            raise RuntimeError("processes > 1 needs os.fork (Linux, macOS); serve with processes=1 here.")
        # uvicorn re-raises the SIGTERM it caught once it has shut down: exit through `finally`, which stops the copies.
        # Set first: outside the main thread this raises before any copy exists.
        previous = signal.signal(signal.SIGTERM, _exit_on_signal)
        context = multiprocessing.get_context("fork")
        children = [
            context.Process(target=_serve_copy, args=(self, os.getpid()), name=f"agentgym-server-{i + 1}", daemon=True)
            for i in range(processes - 1)
        ]
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
