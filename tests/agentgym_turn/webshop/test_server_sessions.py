"""The WebShop site opens sessions only on a POST that another site's page cannot send: a GET of the
start page (a link, an ``<img>``, a prefetcher) opens none, ``POST /sessions`` takes JSON alone, and
the start form is refused when it comes from another origin."""

import http.client
import json
import re
from urllib.parse import urlencode

import pytest

from agentgym_turn.serving import ServerLimits
from agentgym_turn.webshop.server import MAX_BODY_BYTES, WebShopServer, main
from support.raw_http import raw_exchange

FORM = {"Content-Type": "application/x-www-form-urlencoded"}
LIMITS = ServerLimits(header_timeout=2.0, body_timeout=2.0, max_body_bytes=MAX_BODY_BYTES, keep_alive=2.0)


@pytest.fixture
def server():
    with WebShopServer(num_products=100, goal_split="all", max_sessions=1000, limits=LIMITS) as srv:
        yield srv


def request(server, method, path, body=None, headers=None, conn=None):
    own = conn is None
    conn = conn or http.client.HTTPConnection(server.host, server.port, timeout=30)
    try:
        conn.request(method, path, body=body, headers=headers or {})
        resp = conn.getresponse()
        return resp.status, dict(resp.getheaders()), resp.read().decode("utf-8")
    finally:
        if own:
            conn.close()


def sessions(server):
    status, _, body = request(server, "GET", "/health")
    assert status == 200
    return json.loads(body)["sessions"]


def test_a_thousand_gets_of_the_start_page_open_no_session(server):
    conn = http.client.HTTPConnection(server.host, server.port, timeout=30)
    try:
        for k in range(1000):
            status, headers, body = request(server, "GET", "/" if k % 2 else f"/?goal={k % 50}", conn=conn)
            assert status == 200 and headers["content-type"].startswith("text/html"), (k, status)
    finally:
        conn.close()
    assert 'id="start"' in body and 'method="post" action="/start"' in body  # a Start button that POSTs
    assert request(server, "HEAD", "/")[0] == 200
    assert sessions(server) == 0


def test_the_start_page_preselects_a_goal_and_keeps_goal_errors_400(server):
    status, _, body = request(server, "GET", "/?goal=7")
    assert status == 200 and re.search(r'<input[^>]*name="goal"[^>]*value="7"', body)
    status, _, body = request(server, "GET", "/?seed=123")
    assert status == 200 and '<input type="hidden" name="seed" value="123">' in body
    for bad in ("/?goal=100000", "/?goal=-1", "/?goal=x", "/?seed=x"):
        assert request(server, "GET", bad)[0] == 400, bad
    assert sessions(server) == 0


def test_the_start_form_opens_a_session_on_its_goal(server):
    status, headers, _ = request(server, "POST", "/start", urlencode({"goal": 7}), FORM)
    assert status == 303 and re.fullmatch(r"/s/[A-Za-z0-9_-]+", headers["location"])
    state = json.loads(request(server, "GET", headers["location"] + "/state")[2])
    assert state["instruction"] == server.site.template.shop.goal(7).instruction_text and state["page"] == "search"
    assert "goal_index" not in state and "goal_index" not in state["info"]  # the oracle's key: only with --expert
    # the same origin's page, as a browser sends it
    same = {**FORM, "Origin": f"http://127.0.0.1:{server.port}", "Sec-Fetch-Site": "same-origin"}
    assert request(server, "POST", "/start", "goal=", same)[0] == 303  # empty: a random goal
    status, headers, _ = request(server, "POST", "/start", urlencode({"seed": 5}), FORM)
    assert status == 303
    assert sessions(server) == 3
    assert request(server, "POST", "/start", "goal=100000", FORM)[0] == 400
    assert sessions(server) == 3


@pytest.mark.parametrize(
    "headers",
    [
        {"Origin": "http://evil.example"},  # another site's form: refused by the Origin check
        {"Origin": "null"},  # a sandboxed frame or a data: page
        {"Sec-Fetch-Site": "cross-site"},
        {"Sec-Fetch-Site": "same-site"},  # another port of this host: the same site, not the same origin
    ],
)
def test_the_start_form_from_another_origin_is_refused(server, headers):
    status, _, _ = request(server, "POST", "/start", "goal=3", {**FORM, **headers})
    assert status == 403
    assert sessions(server) == 0


@pytest.mark.parametrize("kind", ["text/plain", "multipart/form-data; boundary=x", None])
def test_the_start_form_takes_only_a_urlencoded_form(server, kind):
    status, *_ = request(server, "POST", "/start", "goal=3", {} if kind is None else {"Content-Type": kind})
    assert status == 415
    assert sessions(server) == 0


@pytest.mark.parametrize(
    "kind", ["text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x", None]
)
def test_post_sessions_takes_json_only(server, kind):
    headers = {} if kind is None else {"Content-Type": kind}
    status, _, body = request(server, "POST", "/sessions", '{"goal_index": 3}', headers)
    assert status == 415 and "application/json" in json.loads(body)["detail"]
    assert sessions(server) == 0
    status, _, body = request(
        server, "POST", "/sessions", '{"goal_index": 3}', {"Content-Type": "application/json; charset=utf-8"}
    )
    assert (
        status == 201 and json.loads(body)["state"]["instruction"] == server.site.template.shop.goal(3).instruction_text
    )
    assert sessions(server) == 1


def test_a_cross_site_simple_request_over_a_raw_socket_opens_nothing(server):
    # exactly what a page of evil.example sends with fetch(..., {mode: "no-cors", body: "{}"})
    for path, kind in (("/sessions", "text/plain;charset=UTF-8"), ("/start", "application/x-www-form-urlencoded")):
        head = (
            f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nOrigin: http://evil.example\r\nContent-Type: {kind}\r\n"
            "Content-Length: 2\r\nConnection: close\r\n\r\n{}"
        )
        reply = raw_exchange(server, head.encode())
        assert reply.startswith(b"HTTP/1.1 403"), reply[:100]
    assert sessions(server) == 0


def test_the_cli_help_names_the_start_form(capsys):
    with pytest.raises(SystemExit):
        main(["--help"])
    out = capsys.readouterr().out
    assert "Start" in out and "--token" in out and "--rate-limit" in out


@pytest.mark.parametrize("expert", [False, True])
def test_state_names_the_goal_index_only_on_a_site_that_serves_the_oracle(expert):
    with WebShopServer(num_products=100, goal_split="all", expert=expert, limits=LIMITS) as site:
        status, _, body = request(site, "POST", "/sessions", '{"goal_index": 4}', {"Content-Type": "application/json"})
        state = json.loads(body)["state"]
        assert status == 201 and ("goal_index" in state) is expert and ("goal_index" in state["info"]) is expert
        assert ("expert_action" in state) is expert
