"""Clients that do not read their answers cannot hold the retriever's memory (agentgym_turn/serving.py's send
deadline, agentgym_turn/searchqa/server.py's streamed answers).

A large ``/retrieve`` answer is built and sent piece by piece as the client takes it, byte for byte the JSON a
whole body would be; a connection whose client stops reading is aborted after ``ServerLimits.send_timeout``.
Every wait here is bounded; durations appear only as generous deadlines the server must act within.
"""

import http.client
import json
import os
import select
import socket
import struct
import time
import urllib.error
import urllib.request

import pytest

from agentgym_turn.serving import ServerLimits
from agentgym_turn.searchqa.retrieval import Document, Hit, hits_to_json
from agentgym_turn.searchqa.server import ANSWER_PIECE_BYTES, MAX_BODY_BYTES, RetrievalServer
from support.retrievers import bm25  # noqa: F401  (the generated world's BM25 retriever, a fixture)

pytestmark = pytest.mark.skipif(
    not os.path.exists("/proc/self/statm") or not hasattr(socket, "TCP_INFO"),
    reason="reads RSS from /proc and TCP states with TCP_INFO (Linux)",
)

SEND_TIMEOUT = 2.0
LIMITS = ServerLimits(max_body_bytes=MAX_BODY_BYTES, send_timeout=SEND_TIMEOUT)
#: 64 queries x 512 passages with scores: about 10 MB of JSON on the generated world.
BIG = {"queries": [f"novel bank founder river {i}" for i in range(64)], "topk": 512, "return_scores": True}
CLIENTS = 20
TCP_ESTABLISHED = 1


def rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def starlette_json(content) -> bytes:
    """What Starlette's JSONResponse sends for ``content``: the reference a streamed answer must equal."""
    from starlette.responses import JSONResponse

    return bytes(JSONResponse(content).body)


def request_bytes(payload, *, close: bool = False) -> bytes:
    body = json.dumps(payload).encode()
    head = "POST /retrieve HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
    head += "Connection: close\r\n" if close else ""
    return (head + f"Content-Length: {len(body)}\r\n\r\n").encode() + body


def non_reading_socket(server, payload) -> socket.socket:
    """A connection that sends ``payload`` and never reads (a small receive window, so the server's writes back up)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.settimeout(10)
    sock.connect((server.host, server.port))
    sock.sendall(request_bytes(payload))
    return sock


def tcp_state(sock: socket.socket) -> int:
    """The kernel's TCP state of ``sock`` (1: established; the server's FIN or reset moves it on), read without consuming data."""
    return struct.unpack("B", sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 8)[:1])[0]


def wait_closed_by_server(socks, deadline: float) -> list:
    """Wait until the server has closed every socket (or ``deadline``); the sockets still open."""
    open_ = list(socks)
    while open_ and time.monotonic() < deadline:
        open_ = [s for s in open_ if tcp_state(s) == TCP_ESTABLISHED]
        time.sleep(0.1)
    return open_


def post(url, payload):
    req = urllib.request.Request(
        url, data=json.dumps(payload).encode(), headers={"Content-Type": "application/json"}, method="POST"
    )
    with urllib.request.urlopen(req, timeout=30) as resp:
        return resp.status, resp.headers, resp.read()


@pytest.fixture(scope="module")
def server(bm25):
    with RetrievalServer(bm25, limits=LIMITS) as srv:
        yield srv


def test_non_reading_clients_hold_bounded_memory_and_are_cut_off(server, bm25):
    """20 clients ask for ~10 MB each and never read: RSS rises by far less than their answers (it rose by
    ~230 MB when each answer was built whole), the server closes them at the send deadline, and serves on."""
    status, _, whole = post(server.url, BIG)  # warm the allocator and the retrieval threads; size the answer
    assert status == 200 and len(whole) > 5_000_000
    del whole
    base = rss_mb()
    socks = [non_reading_socket(server, BIG) for _ in range(CLIENTS)]
    try:
        opened = time.monotonic()
        pending, peak = list(socks), base
        while pending and time.monotonic() < opened + 60:  # every client is being answered (bytes wait unread)
            readable = select.select(pending, [], [], 0.1)[0]
            pending = [s for s in pending if s not in readable]
            peak = max(peak, rss_mb())
        assert not pending, "the server never began answering"
        still_open = list(socks)
        while still_open and time.monotonic() < opened + SEND_TIMEOUT + 10:  # held, then dropped at the deadline
            peak = max(peak, rss_mb())
            still_open = wait_closed_by_server(still_open, time.monotonic() + 0.1)
        assert peak - base < 150, f"RSS rose {peak - base:.0f} MB with {CLIENTS} non-reading clients"
        assert not still_open, (
            f"{len(still_open)} non-reading connections still open {SEND_TIMEOUT + 10:g} s after they stalled"
        )
    finally:
        for s in socks:
            s.close()
    status, _, body = post(server.url, {"queries": ["Kalvoren novel"], "topk": 3, "return_scores": True})
    assert status == 200 and json.loads(body)["result"][0]


@pytest.mark.parametrize("parser", ["httptools", "h11"])
def test_send_deadline_with_either_parser(parser):
    """The deadline hooks uvicorn's flow control for both HTTP parsers: a stalled answer's connection is aborted,
    whether the client kept the connection alive or asked for ``Connection: close``."""
    row = [Hit(Document(str(i), '"T"\n' + "x" * 500), 1.0) for i in range(1000)]

    class Large:
        def retrieve(self, queries, topk):
            return [row[:topk] for _ in queries]

    with RetrievalServer(Large(), limits=LIMITS, http_parser=parser) as srv:
        payload = {"queries": ["q"] * 32, "topk": 1000}  # ~16 MB
        socks = [non_reading_socket(srv, payload)]
        close = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        close.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        close.connect((srv.host, srv.port))
        close.sendall(request_bytes(payload, close=True))
        socks.append(close)
        try:
            assert not wait_closed_by_server(socks, time.monotonic() + SEND_TIMEOUT + 10)
        finally:
            for s in socks:
                s.close()
        status, _, body = post(srv.url, {"queries": ["q"], "topk": 2})
        assert status == 200 and len(json.loads(body)["result"][0]) == 2


def test_streamed_answer_is_the_whole_body_json(server, bm25):
    """A mid-size answer goes out in pieces (chunked) and is byte for byte the JSON of the whole answer;
    a small one is still one body with Content-Length."""
    for payload, streamed in [
        ({"queries": [f"founder of the bank {i}" for i in range(40)], "topk": 50, "return_scores": True}, True),
        ({"queries": [f"river city {i}" for i in range(30)], "topk": 40}, True),
        ({"queries": ["Kalvoren novel", "founder born"], "topk": 3, "return_scores": True}, False),
        ({"queries": []}, False),
    ]:
        status, headers, body = post(server.url, payload)
        hits = bm25.retrieve(payload["queries"], payload.get("topk", 3)) if payload["queries"] else []
        assert status == 200
        assert body == starlette_json({"result": hits_to_json(hits, return_scores=payload.get("return_scores", False))})
        assert (headers.get("Transfer-Encoding") == "chunked") is streamed
        assert (headers.get("Content-Length") is None) is streamed
        assert headers.get("Content-Type") == "application/json"


def test_streamed_non_ascii_answer_matches_json_response():
    """Non-ASCII passages are sent as UTF-8 (``ensure_ascii=False``, as JSONResponse), never split inside a character."""
    row = [
        Hit(Document(f"ü{i}", f'"Ärzte ✓ {i}"\n' + "日本語のテキスト" * 40 + "\U0001f600"), 0.5 + i) for i in range(200)
    ]

    class Unicode:
        def retrieve(self, queries, topk):
            return [row[:topk] for _ in queries]

    with RetrievalServer(Unicode(), limits=LIMITS) as srv:
        payload = {"queries": ["ß"] * 20, "topk": 200, "return_scores": True}
        status, headers, body = post(srv.url, payload)
        assert status == 200 and headers.get("Transfer-Encoding") == "chunked" and len(body) > 4 * ANSWER_PIECE_BYTES
        assert body == starlette_json({"result": hits_to_json([row] * 20, return_scores=True)})


def test_slow_but_reading_client_gets_the_whole_answer(server, bm25):
    """A client that reads steadily but takes longer than ``send_timeout`` over the whole answer is never cut off:
    the deadline bounds each stall, not the answer."""
    payload = {"queries": BIG["queries"][:32], "topk": 512, "return_scores": True}  # ~5 MB
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16384)
    sock.settimeout(30)
    sock.connect((server.host, server.port))
    conn = http.client.HTTPConnection(server.host, server.port, timeout=30)
    conn.sock = sock
    conn.request("POST", "/retrieve", body=json.dumps(payload).encode(), headers={"Content-Type": "application/json"})
    resp = conn.getresponse()
    assert resp.status == 200
    parts, reads = [], 0
    while part := resp.read(16384):
        parts.append(part)
        reads += 1
        time.sleep(0.01)
    conn.close()
    # by construction the client spent over send_timeout reading: at least reads x 10 ms asleep
    assert reads * 0.01 > SEND_TIMEOUT
    assert b"".join(parts) == starlette_json(
        {"result": hits_to_json(bm25.retrieve(payload["queries"], 512), return_scores=True)}
    )


def test_retrieval_failing_after_the_answer_began_closes_the_connection(server):
    """Before the first byte a failure is a JSON 500; after it the status cannot change, so the answer is cut
    short and the connection closed: the client sees an incomplete body, never a complete wrong document."""
    row = [Hit(Document(str(i), '"T"\n' + "y" * 200), 1.0) for i in range(1000)]

    class FailsLater:
        def retrieve(self, queries, topk):
            if queries[0] == "fail":
                raise RuntimeError("index went away")
            return [row[:topk] for _ in queries]

    with RetrievalServer(FailsLater(), limits=LIMITS) as srv:
        conn = http.client.HTTPConnection(srv.host, srv.port, timeout=30)
        conn.request(
            "POST",
            "/retrieve",
            body=json.dumps({"queries": ["ok", "fail"], "topk": 1000}).encode(),
            headers={"Content-Type": "application/json"},
        )
        resp = conn.getresponse()
        assert resp.status == 200  # the first query's ~200 KB went out before the second failed
        with pytest.raises(http.client.IncompleteRead):
            resp.read()
        conn.close()
        req = urllib.request.Request(
            srv.url, data=json.dumps({"queries": ["fail"], "topk": 1000}).encode(), method="POST"
        )
        with pytest.raises(urllib.error.HTTPError) as err:
            urllib.request.urlopen(req, timeout=30)
        assert err.value.code == 500 and "index went away" in json.loads(err.value.read())["detail"]
        status, _, body = post(srv.url, {"queries": ["ok"], "topk": 3})
        assert status == 200 and len(json.loads(body)["result"][0]) == 3
