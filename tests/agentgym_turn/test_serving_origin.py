"""Every server refuses browser-borne requests: a Host that names a foreign domain (DNS rebinding) and
an Origin of another site (any web page the user opens) get 403, on HTTP and on the env server's
WebSocket, while this machine's names, IP literals and ``allowed_hosts`` are served."""

import json

import pytest
from websockets.exceptions import InvalidStatus
from websockets.sync.client import connect

import agentgym_turn  # noqa: F401
from agentgym_turn.remote.server import EnvServer
from agentgym_turn.searchqa.corpus import Corpus
from agentgym_turn.searchqa.retrieval import BM25Retriever
from agentgym_turn.searchqa.server import RetrievalServer
from agentgym_turn.webshop.server import WebShopServer
from support.raw_http import raw_exchange


def _server(kind, allowed=()):
    """A server of ``kind`` (not started) and a path it serves with 200."""
    if kind == "env":
        return EnvServer("TurnSokoban-v0", port=0, allowed_hosts=allowed), "/health"
    if kind == "site":
        return WebShopServer(num_products=50, port=0, allowed_hosts=allowed), "/static/style.css"
    corpus = Corpus(ids=["1", "2"], contents=['"A"\nalpha beta', '"B"\ngamma delta'])
    return RetrievalServer(BM25Retriever(corpus), port=0, allowed_hosts=allowed), "/health"


@pytest.fixture(scope="module", params=["env", "site", "retriever"])
def served(request):
    server, path = _server(request.param, ["shop.internal"])
    server.start()
    yield server, path
    server.stop()


def _status(server, path, host, origin=None):
    head = f"GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n"
    if origin is not None:
        head += f"Origin: {origin}\r\n"
    reply = raw_exchange(server, (head + "\r\n").encode())
    return int(reply.split(b" ", 2)[1]), reply


@pytest.mark.parametrize(
    "host",
    ["127.0.0.1:{port}", "localhost:{port}", "LOCALHOST", "[::1]:{port}", "10.1.2.3:{port}", "shop.internal:{port}"],
)
def test_this_machine_ip_literals_and_allowed_names_are_served(served, host):
    server, path = served
    status, reply = _status(server, path, host.format(port=server.port))
    assert status == 200, reply[:200]
    status, _ = _status(server, path, host.format(port=server.port), origin=f"http://localhost:{server.port}")
    assert status == 200


@pytest.mark.parametrize(
    "host, origin",
    [
        ("evil.example", None),
        ("evil.example:80", None),
        ("localhost.evil.example", None),
        ("127.0.0.1", "http://evil.example"),
        ("127.0.0.1", "null"),
        ("127.0.0.1", "https://1.2.3.4"),
    ],
)
def test_foreign_hosts_and_origins_are_refused_with_403(served, host, origin):
    server, path = served
    status, reply = _status(server, path, host, origin)
    assert status == 403, reply[:200]
    detail = json.loads(reply.split(b"\r\n\r\n", 1)[1])["detail"]
    assert ("--allow-host" in detail) if origin is None else ("origin" in detail)


@pytest.mark.parametrize("origin", ["http://[::1].evil.example", "http://[::1]x:80", "http://[::1]:80.evil.example"])
def test_an_origin_that_only_starts_like_a_loopback_address_is_refused(served, origin):
    server, path = served
    status, reply = _status(server, path, "127.0.0.1", origin)
    assert status == 403, reply[:200]


@pytest.mark.parametrize(
    "pair",
    [
        ("Host: 127.0.0.1", "Host: evil.example"),
        ("Origin: http://localhost", "Origin: http://evil.example"),
        ("Origin: http://localhost", "Origin: http://localhost"),
    ],
)
def test_a_repeated_host_or_origin_header_is_refused_whichever_copy_comes_last(served, pair):
    server, path = served
    for first, second in (pair, pair[::-1]):
        host = [] if first.startswith("Host") else ["Host: 127.0.0.1"]
        lines = [f"GET {path} HTTP/1.1", *host, first, second, "Connection: close"]
        reply = raw_exchange(server, ("\r\n".join(lines) + "\r\n\r\n").encode())
        assert int(reply.split(b" ", 2)[1]) == 403, reply[:200]


def test_the_env_servers_websocket_refuses_a_foreign_origin_before_the_handshake():
    with EnvServer("TurnSokoban-v0", port=0) as server:
        with pytest.raises(InvalidStatus) as refused:
            connect(server.ws_url, proxy=None, additional_headers={"Origin": "http://evil.example"})
        assert refused.value.response.status_code == 403
        with connect(server.ws_url, proxy=None, additional_headers={"Origin": f"http://127.0.0.1:{server.port}"}) as ws:
            ws.send('{"type": "reset", "data": {"seed": 0}}')
            assert json.loads(ws.recv(timeout=30))["type"] == "observation"


def test_a_star_allows_every_name():
    server, path = _server("retriever", ["*"])
    with server:
        assert _status(server, path, "anything.example", "http://anything.example")[0] == 200
