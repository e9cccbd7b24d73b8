"""A pipelined request head over the bound, on every server of the suite (the env server, the site, the
retriever, in test_serving_bounds.py with both parsers): the parser counts it as it reads it, so it is never served."""

from __future__ import annotations

import pytest

from agentgym_turn.remote.server import EnvServer
from agentgym_turn.webshop.server import WebShopServer
from support.raw_http import raw_exchange

SERVERS = {
    "env server": lambda: EnvServer("TurnSokoban-v0", port=0),
    "site": lambda: WebShopServer(num_products=100, goal_split="all"),
}


@pytest.mark.parametrize("name", sorted(SERVERS))
def test_a_pipelined_oversized_head_is_never_served(name):
    small = b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
    big = b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Long: " + b"b" * (70 * 1024) + b"\r\n\r\n"
    with SERVERS[name]() as server:
        reply = raw_exchange(server, small + big)
    assert reply.count(b"HTTP/1.1 200") <= 1, reply[:300]
