"""Access control shared by the three servers: an optional bearer token (every HTTP request and WebSocket
handshake but ``GET /health``; the WebShop site also takes it once as ``?token=`` and then a cookie), the
project's clients sending it, a per-client rate limit (429 with ``Retry-After``) whose table of clients
stays bounded, and a warning when a server is bound beyond this machine without a token."""

import argparse
import asyncio
import json

import gymnasium as gym
import pytest
from websockets.exceptions import InvalidStatus
from websockets.sync.client import connect

import agentgym_turn  # noqa: F401
from agentgym_turn.serving import (
    TOKEN_ENV,
    AppServer,
    RateLimit,
    RateLimiter,
    TokenGuard,
    access_options,
    add_access_arguments,
    is_loopback,
)
from agentgym_turn.remote.client import RemoteTurnEnv
from agentgym_turn.remote.server import EnvServer
from agentgym_turn.searchqa.corpus import Corpus
from agentgym_turn.searchqa.retrieval import BM25Retriever, HTTPRetriever, RetrieverError
from agentgym_turn.searchqa.server import RetrievalServer
from agentgym_turn.webshop.server import WebShopServer
from support.raw_http import raw_exchange
from support.http_request import request

TOKEN = "s3cret-Token_for.tests~0123456789"
CORPUS = Corpus(ids=["1", "2"], contents=['"A"\nalpha beta', '"B"\ngamma delta'])


def _server(kind, **kwargs):
    """A server of ``kind`` (not started) and a path it serves with 200 to an authorised GET."""
    if kind == "env":
        return EnvServer("TurnSokoban-v0", **kwargs), "/metadata"
    if kind == "site":
        return WebShopServer(num_products=50, goal_split="all", **kwargs), "/static/style.css"
    return RetrievalServer(BM25Retriever(CORPUS), **kwargs), "/"


@pytest.fixture(scope="module", params=["env", "site", "retriever"])
def guarded(request):
    server, path = _server(request.param, token=TOKEN)
    server.start()
    yield request.param, server, path
    server.stop()


def bearer(token):
    return {"Authorization": f"Bearer {token}"}


# ---------------------------------------------------------------------------- the token
@pytest.mark.parametrize(
    "headers",
    [
        {},
        bearer("wrong"),
        bearer(TOKEN + "x"),
        bearer(TOKEN[:-1]),
        {"Authorization": TOKEN},
        {"Authorization": f"Basic {TOKEN}"},
        bearer("\u00e9t\u00e9"),
    ],
)
def test_requests_without_the_right_token_get_401_json(guarded, headers):
    _, server, path = guarded
    headers = {k: v.encode("utf-8").decode("latin-1") for k, v in headers.items()}
    for method, target in (("GET", path), ("GET", "/no/such/path"), ("POST", "/sessions"), ("POST", "/retrieve")):
        status, answer, body = request(server, method, target, "{}", {**headers, "Content-Type": "application/json"})
        assert status == 401, (method, target, status)
        assert answer["content-type"] == "application/json" and answer["www-authenticate"].startswith("Bearer")
        assert "token" in json.loads(body)["detail"] and TOKEN not in body


def test_the_right_token_is_served_and_health_stays_open(guarded):
    _, server, path = guarded
    assert request(server, "GET", path, headers=bearer(TOKEN))[0] == 200
    assert (
        request(server, "GET", path, headers={"Authorization": f"bearer  {TOKEN} "})[0] == 200
    )  # scheme is case-blind
    assert request(server, "GET", "/health")[0] == 200  # a liveness probe needs no secret


def test_a_raw_request_without_a_token_is_refused_before_the_app(guarded):
    _, server, path = guarded
    reply = raw_exchange(server, f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n".encode())
    assert reply.startswith(b"HTTP/1.1 401")
    reply = raw_exchange(
        server,
        f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {TOKEN}\r\nConnection: close\r\n\r\n".encode(),
    )
    assert reply.startswith(b"HTTP/1.1 200")


def test_the_env_servers_websocket_handshake_needs_the_token():
    with EnvServer("TurnSokoban-v0", token=TOKEN) as server:
        for headers in ({}, bearer("wrong")):
            with pytest.raises(InvalidStatus) as refused:
                connect(server.ws_url, proxy=None, additional_headers=headers, open_timeout=30)
            assert refused.value.response.status_code == 401
        assert server.sessions.opened == 0  # refused before a session (and its env) was made
        with connect(server.ws_url, proxy=None, additional_headers=bearer(TOKEN), open_timeout=30) as ws:
            ws.send('{"type": "reset", "data": {"seed": 0}}')
            assert json.loads(ws.recv(timeout=30))["type"] == "observation"


def test_the_remote_env_client_passes_the_token():
    with EnvServer("TurnSokoban-v0", token=TOKEN) as server:
        with pytest.raises(ConnectionError, match="token"):
            gym.make("agentgym_turn/Remote-v0", base_url=server.base_url)
        with pytest.raises(ConnectionError, match="token"):
            RemoteTurnEnv(server.base_url, token="wrong")
        env = gym.make("agentgym_turn/Remote-v0", base_url=server.base_url, env_id="TurnSokoban-v0", token=TOKEN)
        try:
            observation, _ = env.reset(seed=0)
            local = gym.make("TurnSokoban-v0")
            assert observation == local.reset(seed=0)[0]
            assert env.step("Up")[0] == local.step("Up")[0]
        finally:
            env.close()


def test_the_retriever_clients_pass_the_token():
    with RetrievalServer(BM25Retriever(CORPUS), token=TOKEN) as server:
        with pytest.raises(RetrieverError, match="401"):
            HTTPRetriever(server.url, retries=0).retrieve(["alpha"], 1)
        with pytest.raises(RetrieverError, match="401"):
            HTTPRetriever(server.url, retries=0, token="wrong").retrieve(["alpha"], 1)
        hits = HTTPRetriever(server.url, token=TOKEN).retrieve(["alpha"], 1)
        assert hits[0][0].document.id == "1"
        env = gym.make("TurnSearchQA-v0", retriever_url=server.url, retriever_token=TOKEN, topk=1)
        env.reset(seed=0)
        observation, _, _, _, info = env.step("<search> gamma </search>")
        assert info["action_is_valid"] and info["retrieved_ids"] == ["2"] and "gamma delta" in observation


def test_the_site_takes_the_token_once_then_a_strict_httponly_cookie():
    with WebShopServer(num_products=50, goal_split="all", token=TOKEN) as server:
        assert request(server, "GET", "/?goal=3")[0] == 401
        assert request(server, "GET", "/?goal=3&token=wrong")[0] == 401
        status, headers, body = request(server, "GET", f"/?goal=3&token={TOKEN}")
        assert status == 200 and 'value="3"' in body
        cookie = headers["set-cookie"]
        assert cookie.startswith(f"agentgym_token_{server.port}={TOKEN};")
        assert "HttpOnly" in cookie and "SameSite=Strict" in cookie and "Path=/" in cookie
        assert (
            headers["referrer-policy"] == "same-origin" and "replaceState" in body
        )  # the token leaves the address bar
        jar = {"Cookie": cookie.split(";", 1)[0]}
        form = {**jar, "Content-Type": "application/x-www-form-urlencoded"}
        status, headers, _ = request(server, "POST", "/start", "goal=3", form)
        assert status == 303
        assert request(server, "GET", headers["location"], headers=jar)[0] == 200
        assert request(server, "GET", headers["location"])[0] == 401  # no cookie, no header
        assert request(server, "GET", "/", headers={"Cookie": f"agentgym_token_{server.port}=wrong"})[0] == 401
        assert (
            request(server, "GET", "/", headers={"Cookie": f"agentgym_token_1={TOKEN}"})[0] == 401
        )  # another port's name
    with RetrievalServer(BM25Retriever(CORPUS), token=TOKEN) as server:  # no browser login on the other servers
        assert request(server, "GET", f"/?token={TOKEN}")[0] == 401
        assert request(server, "GET", "/", headers={"Cookie": f"agentgym_token_{server.port}={TOKEN}"})[0] == 401


def test_tokens_and_the_cli_options_are_checked(monkeypatch):
    for bad in ("", "has space", "semi;colon", "caf\u00e9", 12345, "a" * 5000):
        with pytest.raises(ValueError, match="token"):
            TokenGuard(None, bad)
    parser = argparse.ArgumentParser()
    add_access_arguments(parser)
    monkeypatch.delenv(TOKEN_ENV, raising=False)
    assert access_options(parser.parse_args([]))["token"] is None
    monkeypatch.setenv(TOKEN_ENV, TOKEN)
    options = access_options(parser.parse_args([]))
    assert options["token"] == TOKEN and options["rate_limit"] == RateLimit()
    assert access_options(parser.parse_args(["--token", "other"]))["token"] == "other"  # the option wins
    assert access_options(parser.parse_args(["--rate-limit", "0"]))["rate_limit"] is None
    assert access_options(parser.parse_args(["--rate-limit", "5", "--rate-burst", "7"]))["rate_limit"] == RateLimit(
        rate=5, burst=7
    )
    monkeypatch.setenv(TOKEN_ENV, "not a token")
    with pytest.raises(ValueError, match="token"):
        access_options(parser.parse_args([]))
    with pytest.raises(ValueError):
        RateLimit(rate=0)
    with pytest.raises(ValueError):
        RateLimit(max_clients=0)


def test_a_server_bound_beyond_this_machine_without_a_token_warns(capsys):
    from starlette.applications import Starlette

    for host, token, warns in (("0.0.0.0", None, True), ("0.0.0.0", TOKEN, False), ("127.0.0.1", None, False)):
        server = AppServer(Starlette(), host=host, token=token)
        server.stop()
        err = capsys.readouterr().err
        assert ("WARNING" in err and TOKEN_ENV in err) == warns, (host, token, err)
    assert is_loopback("127.0.0.1") and is_loopback("::1") and is_loopback("localhost") and is_loopback("127.1.2.3")
    assert not is_loopback("0.0.0.0") and not is_loopback("::") and not is_loopback("10.0.0.1")


# ---------------------------------------------------------------------------- the rate limit
@pytest.mark.parametrize("kind", ["env", "site", "retriever"])
def test_past_the_burst_a_client_gets_429_with_retry_after(kind):
    # refilled at one request in 1,000 s: the burst is all a test sees, whatever the machine's speed
    server, path = _server(kind, rate_limit=RateLimit(rate=0.001, burst=3, loopback=True))
    with server:
        assert [request(server, "GET", path)[0] for _ in range(3)] == [200] * 3
        status, headers, body = request(server, "GET", path)
        assert status == 429 and int(headers["retry-after"]) >= 1
        assert "too many requests" in json.loads(body)["detail"]
        assert request(server, "GET", "/health")[0] == 429  # every request counts, open ones too
        if kind == "env":
            with pytest.raises(InvalidStatus) as refused:
                connect(server.ws_url, proxy=None, open_timeout=30)
            assert refused.value.response.status_code == 429
            assert refused.value.response.headers["Retry-After"]


def test_this_machines_clients_are_not_limited_by_default():
    server, path = _server("retriever", rate_limit=RateLimit(rate=0.001, burst=1))
    with server:
        assert {request(server, "GET", path)[0] for _ in range(20)} == {200}


def _exchange(limiter, ip):
    sent = []

    async def receive():
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message):
        sent.append(message)

    scope = {"type": "http", "method": "GET", "path": "/", "headers": [], "client": (ip, 40000), "query_string": b""}
    asyncio.run(limiter(scope, receive, send))
    return sent[0]["status"], dict(sent[0]["headers"])


def test_the_table_of_clients_stays_bounded_and_refills():
    async def ok(scope, receive, send):
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    now = [0.0]
    limiter = RateLimiter(ok, RateLimit(rate=1.0, burst=2, max_clients=100), clock=lambda: now[0])
    for k in range(5000):  # a flood of addresses (or spoofed-looking ones) cannot grow the table
        limiter.wait(f"10.{k // 65536}.{k // 256 % 256}.{k % 256}")
        assert len(limiter) <= 100
    assert len(limiter) == 100
    for k in range(50):  # one IPv6 host holds a whole /64: counted as one client
        limiter.wait(f"2001:db8:1:2::{k:x}")
    assert len(limiter) == 100 and limiter.wait("2001:db8:1:2::ffff") > 0
    assert [_exchange(limiter, "203.0.113.9")[0] for _ in range(3)] == [200, 200, 429]
    status, headers = _exchange(limiter, "203.0.113.9")
    assert status == 429 and headers[b"retry-after"] == b"1"
    assert _exchange(limiter, "203.0.113.10")[0] == 200  # another client has its own bucket
    now[0] += 1.0  # one request's worth refilled
    assert [_exchange(limiter, "203.0.113.9")[0] for _ in range(2)] == [200, 429]
    assert _exchange(limiter, "::ffff:203.0.113.9")[0] == 429  # the same IPv4 client written as IPv6
    assert _exchange(limiter, "127.0.0.1")[0] == 200 and len(limiter) <= 100  # loopback: not limited, not stored


def test_the_cli_reads_the_token_from_the_environment(tmp_path):
    import os
    import re
    import subprocess
    import sys

    from support.retriever_cli import write_corpus

    env = {**os.environ, TOKEN_ENV: TOKEN}
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "agentgym_turn.cli",
            "serve",
            "retriever",
            "--corpus",
            str(write_corpus(tmp_path / "corpus.jsonl")),
            "--port",
            "0",
        ],
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        url = None
        for line in proc.stderr:
            m = re.search(r"at (http://127\.0\.0\.1:\d+/retrieve)", line)
            if m:
                url = m.group(1)
                break
        assert url, f"no banner (exit status {proc.poll()})"
        with pytest.raises(RetrieverError, match="401"):
            HTTPRetriever(url, retries=0).retrieve(["word3"], 1)
        assert HTTPRetriever(url, token=TOKEN).retrieve(["word3"], 1)[0][0].document.id == "3"
    finally:
        proc.terminate()
        proc.wait(timeout=20)


def test_the_clis_refuse_a_malformed_token_before_building_anything(monkeypatch, capsys):
    from agentgym_turn.remote.server import main as env_main
    from agentgym_turn.searchqa.server import main as retriever_main
    from agentgym_turn.webshop.server import main as site_main

    monkeypatch.setenv(TOKEN_ENV, "not a token")
    assert site_main(["--port", "0"]) == 2
    assert retriever_main(["--generated", "--port", "0"]) == 2
    with pytest.raises(SystemExit) as exit_info:
        env_main(["TurnSokoban-v0", "--port", "0"])
    assert exit_info.value.code == 2
    assert capsys.readouterr().err.count("token") >= 3
