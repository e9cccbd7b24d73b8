"""Hostile and slow clients against the servers' shared stack (agentgym_turn/serving.py).

Every bad input gets a clean 4xx JSON answer or a closed connection, never a 500, a hang or a
traceback; every loop here is bounded in count, and sockets have timeouts so nothing can hang.
"""

import json
import socket
import threading
import time
import urllib.error
import urllib.request

import pytest

from agentgym_turn.serving import ServerLimits, _http_protocol_base
from agentgym_turn.searchqa.retrieval import Document, Hit
from agentgym_turn.searchqa.server import MAX_PASSAGES, MAX_TOPK, RetrievalServer
from support.raw_http import raw_exchange

LIMITS = ServerLimits(header_timeout=1.0, body_timeout=1.0, max_body_bytes=64 * 1024, keep_alive=1.0)


class WordRetriever:
    """Document ``i`` is the only match of ``word{i}``: enough to tell answers apart."""

    def retrieve(self, queries, topk):
        out = []
        for q in queries:
            i = int(q[4:]) if q.startswith("word") and q[4:].isdigit() else 0
            out.append([Hit(Document(str(i), f'"Doc {i}"\nword{i}'), 1.0)][:topk])
        return out


@pytest.fixture(scope="module")
def server():
    with RetrievalServer(WordRetriever(), limits=LIMITS) as srv:
        yield srv


def post(url, body: bytes, headers=None):
    req = urllib.request.Request(
        url, data=body, headers={"Content-Type": "application/json", **(headers or {})}, method="POST"
    )
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


@pytest.mark.parametrize(
    "body, status",
    [
        (b"[" * 50_000, 400),  # deep nesting: RecursionError in a naive server
        (b"\xff\xfe not utf-8", 400),
        (json.dumps({"queries": ["x"], "topk": MAX_TOPK + 1}).encode(), 422),
        (json.dumps({"queries": ["x"], "topk": 10**9}).encode(), 422),
        (json.dumps({"queries": ["x"] * 100, "topk": MAX_PASSAGES // 50}).encode(), 413),
        (json.dumps({"queries": ["x"], "topk": 1.5}).encode(), 422),
        (json.dumps({"queries": [{"$gt": 1}]}).encode(), 422),
        (b"x" * (LIMITS.max_body_bytes + 1), 413),
    ],
)
def test_retriever__bad_bodies_get_a_clean_4xx(server, body, status):
    got, payload = post(server.url, body)
    assert got == status and isinstance(payload["detail"], str)


def test_retriever__lying_content_length_is_refused(server):
    reply = raw_exchange(server, b"POST /retrieve HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 99999999999\r\n\r\n{}")
    assert reply.startswith(b"HTTP/1.1 413")


def test_retriever__oversized_query_string_and_headers_are_refused(server):
    reply = raw_exchange(server, b"GET /health?" + b"a" * 200_000 + b" HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
    assert reply == b"" or reply.startswith(b"HTTP/1.1 4")


def test_retriever__silent_client_is_cut_off(server):
    start = time.monotonic()
    reply = raw_exchange(server, b"", wait=LIMITS.header_timeout * 8)
    assert reply == b""  # closed by the server's deadline, not by our socket timeout
    assert time.monotonic() - start < LIMITS.header_timeout * 8


def test_retriever__slow_body_gets_408(server):
    with socket.create_connection((server.host, server.port), timeout=10) as sock:
        sock.sendall(
            b'POST /retrieve HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"qu'
        )
        reply = sock.recv(65536)
    assert reply.startswith(b"HTTP/1.1 408")


def test_retriever__many_clients_opening_a_connection_per_request(server):
    errors = []
    expected = json.dumps({"queries": ["word3"], "topk": 1, "return_scores": True}).encode()

    def client():
        for _ in range(5):
            try:
                status, payload = post(server.url, expected)
                if status != 200 or payload["result"][0][0]["document"]["id"] != "3":
                    errors.append((status, payload))
            except OSError as err:  # a reset or refused connection
                errors.append(repr(err))

    threads = [threading.Thread(target=client) for _ in range(100)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not errors


def test_retriever__server_still_healthy_after_abuse(server):
    with urllib.request.urlopen(f"{server.base_url}/health", timeout=10) as resp:
        assert json.loads(resp.read())["status"] == "ok"


# ---------------------------------------------------------------------- the request head, with either HTTP parser
@pytest.fixture(scope="module", params=["httptools", "h11"])
def parser_server(request):
    with RetrievalServer(WordRetriever(), limits=LIMITS, http_parser=request.param) as srv:
        yield request.param, srv


def test_default_parser_is_httptools():
    """make test installs httptools (pyproject): the C parser serves by default."""
    assert _http_protocol_base().__name__ == "HttpToolsProtocol"
    with pytest.raises(ValueError, match="http_parser"):
        RetrievalServer(WordRetriever(), http_parser="llhttp")


def test_head_within_the_bound_is_served(parser_server):
    _, srv = parser_server
    padding = "a" * (LIMITS.max_head_bytes // 2)
    status, payload = post(
        srv.url, json.dumps({"queries": ["word4"], "topk": 1, "return_scores": True}).encode(), {"X-Padding": padding}
    )
    assert status == 200 and payload["result"][0][0]["document"]["id"] == "4"


@pytest.mark.parametrize("where", ["header", "url", "many_headers"])
def test_head_over_the_bound_is_refused_as_it_arrives(parser_server, where):
    """A 32 MB head sent in 4 KB pieces is refused (4xx, connection closed) long before it ends (the
    loopback socket buffers hold far less): the server does not buffer a header of any length."""
    parser, srv = parser_server
    total = 32 * 1024 * 1024
    if where == "header":
        start, piece = b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Long: ", b"b" * 4096
    elif where == "url":
        start, piece = b"GET /health?", b"q" * 4096
    else:
        start, piece = (
            b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n",
            b"".join(b"X-%d: v\r\n" % i for i in range(500))[:4096],
        )
    sent = 0
    with socket.create_connection((srv.host, srv.port), timeout=10) as sock:
        sock.sendall(start)
        try:
            while sent < total:
                sock.sendall(piece)
                sent += len(piece)
        except (BrokenPipeError, ConnectionResetError):  # closed by the server: the point of the test
            pass
        reply = b""
        try:
            while chunk := sock.recv(65536):
                reply += chunk
        except ConnectionResetError:
            pass
    assert reply.startswith(b"HTTP/1.1 4"), reply[:80]
    if parser == "httptools":
        assert reply.startswith(b"HTTP/1.1 431") and b"at most" in reply
    assert sent < total  # refused while the head was still arriving
    with urllib.request.urlopen(f"{srv.base_url}/health", timeout=10) as resp:  # and still serving
        assert json.loads(resp.read())["status"] == "ok"


def test_pipelined_requests_after_a_large_body_are_served(parser_server):
    """Head bytes are counted per request: a body near max_head_bytes and the next request on the same
    connection are fine."""
    _, srv = parser_server
    body = json.dumps({"queries": ["word7"], "topk": 1, "pad": "p" * (LIMITS.max_head_bytes - 100)}).encode()
    one = (
        b"POST /retrieve HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
        % (len(body), body)
    )
    two = b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
    reply = raw_exchange(srv, one + two)
    assert reply.count(b"HTTP/1.1 200") == 2, reply[:200]


@pytest.mark.parametrize("extra_kb", [70, 100])
def test_a_pipelined_head_over_the_bound_is_refused_as_a_first_one_is(parser_server, extra_kb):
    """A small request and then, in the same write, one whose head is over the bound: the second is counted as
    the parser reads it (it arrives inside the first one's read), refused, and the connection closed (the 431 may
    be lost to the reset of a client still sending, so only "never served" is asserted)."""
    _, srv = parser_server
    small = b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
    big = b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Long: " + b"b" * (extra_kb * 1024) + b"\r\n\r\n"
    reply = raw_exchange(srv, small + big)
    assert reply.count(b"HTTP/1.1 200") <= 1, reply[:300]
    with urllib.request.urlopen(f"{srv.base_url}/health", timeout=10) as resp:  # and still serving
        assert json.loads(resp.read())["status"] == "ok"


def test_a_whole_head_over_the_bound_in_one_write_is_refused(parser_server):
    """A complete head over the bound, sent at once (so one read may hold all of it), is refused too."""
    parser, srv = parser_server
    head = (
        b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Long: "
        + b"b" * (LIMITS.max_head_bytes + 36 * 1024)
        + b"\r\n\r\n"
    )
    reply = raw_exchange(srv, head)
    assert reply.startswith(b"HTTP/1.1 4"), reply[:80]
    if parser == "httptools":
        assert reply.startswith(b"HTTP/1.1 431") and b"at most" in reply
