"""The WebShop site over plain HTTP: the same pages and scores as the in-process env, isolated,
bounded and expiring sessions, and clean 4xx pages (never a 500, a hang or injected markup)."""

import http.client
import json
import re
import socket
import subprocess
import sys
import threading
from urllib.parse import quote, urlencode

import gymnasium as gym
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentgym_turn.serving import ServerLimits
from agentgym_turn.webshop.env import INTRO, TurnWebShopEnv
from agentgym_turn.webshop.server import (
    MAX_BODY_BYTES,
    MAX_NAME_CHARS,
    MAX_QUERY_CHARS,
    MAX_QUERY_STRING,
    SessionLimitError,
    WebShopServer,
    WebShopSite,
    main,
    rewrite_page,
)
from agentgym_turn.webshop.text import html_to_text
from support.raw_http import raw_exchange
from support.http_request import request

GOALS = (3, 7, 11, 40, 1500)
LIMITS = ServerLimits(header_timeout=1.0, body_timeout=1.0, max_body_bytes=MAX_BODY_BYTES, keep_alive=1.0)


@pytest.fixture(scope="module")
def server():
    with WebShopServer(goal_split="all", max_sessions=64, limits=LIMITS) as srv:
        yield srv


def new_session(server, **payload):
    status, _, body = request(server, "POST", "/sessions", json.dumps(payload), {"Content-Type": "application/json"})
    assert status == 201, body
    return json.loads(body)["session"]


def start(server, goal=None):
    """Press Start on the start page: the form POST a browser sends (goal preselected or not)."""
    form = "" if goal is None else urlencode({"goal": goal})
    return request(server, "POST", "/start", form, {"Content-Type": "application/x-www-form-urlencoded"})


def state(server, sid):
    status, _, body = request(server, "GET", f"/s/{sid}/state")
    assert status == 200, body
    return json.loads(body)


def page(server, sid):
    status, headers, body = request(server, "GET", f"/s/{sid}")
    assert status == 200 and headers["content-type"].startswith("text/html")
    return body


def perform(server, sid, action):
    """Do an expert action the way a person's browser does: the search form, or the clickable's URL."""
    if action.startswith("search["):
        form = urlencode({"search_query": action[len("search[") : -1]})
        status, headers, _ = request(
            server, "POST", f"/s/{sid}/search", form, {"Content-Type": "application/x-www-form-urlencoded"}
        )
    else:
        name = action[len("click[") : -1]
        status, headers, _ = request(server, "POST", f"/s/{sid}/click?name={quote(name, safe='')}")
    assert status == 303 and headers["location"] == f"/s/{sid}"


def test_site__expert_episodes_over_http_score_as_in_process_with_the_same_pages(server):
    finished = 0
    for goal in GOALS:
        sid = new_session(server, goal_index=goal)
        ref = TurnWebShopEnv(goal_split="all", list_actions=False)
        observation, info = ref.reset(options={"goal_index": goal})
        assert html_to_text(page(server, sid), "text") == observation[len(INTRO) :]
        for _ in range(15):
            action = ref.expert_action()
            perform(server, sid, action)
            observation, reward, terminated, _, info = ref.step(action)
            served = state(server, sid)
            assert html_to_text(page(server, sid), "text") == observation
            assert served["available_actions"] == info["available_actions"]
            assert (served["score"], served["success"], served["page"]) == (
                info["score"],
                info["success"],
                info["page"],
            )
            if terminated:
                break
        assert served["done"] and served["reward"] == reward == info["score"]
        finished += info["success"]
    assert finished == len(GOALS)  # the oracle buys the goal's product with its options on every goal here


def test_site__every_clickable_points_at_the_site_and_names_an_available_action(server):
    sid = new_session(server, goal_index=7)
    ref = TurnWebShopEnv(goal_split="all", list_actions=False)
    ref.reset(options={"goal_index": 7})
    pages_seen = set()
    for action in ("search[shoes]", "click[next >]", None, "click[description]", "click[< prev]", None, None):
        if action is None:
            action = (
                ref.expert_action()
                if ref.state.page != "results"
                else f"click[{state(server, sid)['available_actions'][-1]}]"
            )
        perform(server, sid, action)
        ref.step(action)
        html = page(server, sid)
        served = state(server, sid)
        pages_seen.add(served["page"])
        names = [
            n.replace("&quot;", '"')
            .replace("&amp;", "&")
            .replace("&lt;", "<")
            .replace("&gt;", ">")
            .replace("&#x27;", "'")
            for n in re.findall(r'data-action="([^"]*)"', html)
        ]
        assert list(dict.fromkeys(names)) and set(names) == set(served["available_actions"])
        for route in ("/search_results/", "/item_page/", "/item_sub_page/", "/done/", "/session"):
            assert route not in html  # WebShop's routes (with state in the URL) are all rewritten
    assert {"results", "item", "Description"} <= pages_seen


def test_site__rewrite_keeps_the_visible_text_of_every_page_kind():
    env = TurnWebShopEnv(observation_mode="html", list_actions=False, goal_split="all", render_mode="ansi")
    text_env = TurnWebShopEnv(goal_split="all", list_actions=False)
    env.reset(options={"goal_index": 11})
    text_env.reset(options={"goal_index": 11})
    script = [
        None,
        None,
        "click[description]",
        "click[< prev]",
        "click[features]",
        "click[< prev]",
        "click[reviews]",
        "click[< prev]",
    ]
    kinds = set()
    for action in script + [None] * 6:
        action = action or text_env.expert_action()
        env.step(action)
        observation, _, terminated, _, info = text_env.step(action)
        assert info["action_is_valid"]
        kinds.add(info["page"])
        assert html_to_text(rewrite_page(env.render(), "abcdefgh12"), "text") == observation
        if terminated:
            break
    assert kinds == {"results", "item", "Description", "Features", "Reviews", "done"}


def test_site__sessions_are_isolated_and_each_page_shows_its_own_goal(server):
    a, b = new_session(server, goal_index=3), new_session(server, goal_index=11)
    perform(server, a, "search[pajama]")
    assert state(server, a)["page"] == "results" and state(server, b)["page"] == "search"
    for sid in (a, b):
        assert state(server, sid)["instruction"] in html_to_text(page(server, sid), "text")
    assert state(server, a)["instruction"] != state(server, b)["instruction"]


def test_site__the_start_form_opens_a_session_and_the_stylesheet_is_local(server):
    status, _, body = request(server, "GET", "/?goal=5")
    assert status == 200 and 'action="/start"' in body and 'name="goal"' in body and 'value="5"' in body  # preselected
    status, headers, _ = start(server, goal=5)
    assert status == 303 and re.fullmatch(r"/s/[A-Za-z0-9_-]+", headers["location"])
    assert state(server, headers["location"][3:])["instruction"] == server.site.template.shop.goal(5).instruction_text
    html = page(server, headers["location"][3:])
    assert "http://" not in html and "https://" not in html  # no external assets
    status, headers, css = request(server, "GET", "/static/style.css")
    assert status == 200 and headers["content-type"].startswith("text/css") and ".btn" in css
    assert request(server, "GET", "/?goal=99999999")[0] == 400
    assert start(server, goal=99999999)[0] == 400
    for digits in (
        "%C2%B2",
        "%D9%A3",
        "%EF%BC%91",
    ):  # superscript two, Arabic-Indic three, full-width one: digits, not ASCII
        assert request(server, "GET", f"/?goal={digits}")[0] == 400
        status, *_ = request(
            server, "POST", "/start", f"goal={digits}", {"Content-Type": "application/x-www-form-urlencoded"}
        )
        assert status == 400


def test_site__unknown_sessions_and_malformed_paths_get_4xx_pages(server):
    for method, path in [
        ("GET", "/s/unknown-session-id"),
        ("GET", "/s/bad!id"),
        ("GET", "/s/%00%ff"),
        ("POST", "/s/unknown-session-id/search"),
        ("GET", "/s/unknown-session-id/click?name=buy+now"),
        ("GET", "/item_page/x/y/z/1/%7B%7D"),
        ("GET", "/s/"),
        ("GET", "/../../etc/passwd"),
    ]:
        status, headers, body = request(server, method, path)
        assert status == 404, (method, path, status)
        assert headers["content-type"].startswith("text/html") and "Start a new session" in body
    assert request(server, "GET", "/s/unknown-session-id/state")[0] == 404
    assert request(server, "DELETE", "/s/unknown-session-id")[0] == 404
    sid = new_session(server, goal_index=3)
    assert request(server, "GET", f"/s/{sid}/click")[0] == 400  # no name
    assert request(server, "GET", f"/s/{sid}/click?name=a&name=b")[0] == 400
    assert request(server, "PUT", f"/s/{sid}")[0] == 405
    for payload in (
        "[1, 2]",
        '{"goal_index": "3"}',
        '{"goal_index": -1}',
        '{"goal_index": 10000000}',
        '{"seed": true}',
        '{"other": 1}',
        "{bad json",
    ):
        assert request(server, "POST", "/sessions", payload, {"Content-Type": "application/json"})[0] in (400, 422), (
            payload
        )
    assert (
        request(server, "POST", "/sessions", "[" * 100_000, {"Content-Type": "application/json"})[0] == 400
    )  # nested too deeply
    assert request(server, "DELETE", f"/s/{sid}")[0] == 204 and request(server, "GET", f"/s/{sid}")[0] == 404


def test_site__oversized_bodies_queries_and_query_strings_get_4xx(server):
    sid = new_session(server, goal_index=3)
    form = {"Content-Type": "application/x-www-form-urlencoded"}
    too_long = urlencode({"search_query": "a" * (MAX_QUERY_CHARS + 1)})
    assert request(server, "POST", f"/s/{sid}/search", too_long, form)[0] == 413
    # the longest search the site takes is one the env plays in-process as a valid turn, and one more character is not
    env = gym.make("TurnWebShop-v0")
    env.reset(seed=0)
    assert env.step("search[" + "a" * MAX_QUERY_CHARS + "]")[4]["action_is_valid"]
    env.reset(seed=0)
    assert not env.step("search[" + "a" * (MAX_QUERY_CHARS + 1) + "]")[4]["action_is_valid"]
    assert request(server, "POST", f"/s/{sid}/search", "search_query=" + "a" * (MAX_BODY_BYTES + 1), form)[0] == 413
    assert request(server, "POST", f"/s/{sid}/search", b"search_query=%ff%fe", form)[0] in (303, 400)
    assert request(server, "GET", f"/s/{sid}/click?name={'a' * (MAX_NAME_CHARS + 1)}")[0] == 414
    assert request(server, "GET", f"/s/{sid}?pad={'a' * MAX_QUERY_STRING}")[0] == 414
    reply = raw_exchange(server, f"GET /s/{sid}?pad={'a' * 200_000} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode())
    assert reply == b"" or re.match(rb"HTTP/1.1 4\d\d ", reply)  # refused by the HTTP parser itself, never a 500
    reply = raw_exchange(
        server, f"POST /s/{sid}/search HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: {10**12}\r\n\r\n".encode()
    )
    assert reply.startswith(b"HTTP/1.1 413")  # a declared size beyond the bound
    assert state(server, sid)["page"] == "search" and state(server, sid)["turn"] == 0  # none of it acted


def test_site__slow_and_silent_clients_are_cut_off(server):
    for partial in (b"", b"GET /s/abc HTTP/1.1\r\nHost: 127.0.0.1\r\n"):
        with socket.create_connection((server.host, server.port), timeout=LIMITS.header_timeout * 10) as sock:
            sock.sendall(partial)
            assert sock.recv(1024) == b""  # closed by the server's deadline, not by our socket timeout
    sid = new_session(server, goal_index=3)
    with socket.create_connection(
        (server.host, server.port), timeout=LIMITS.body_timeout * 10
    ) as sock:  # a body that never arrives
        sock.sendall(
            f"POST /s/{sid}/search HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 100\r\n\r\nsearch_q".encode()
        )
        assert sock.recv(64).startswith(b"HTTP/1.1 408")
    assert page(server, sid)  # the server still answers


def test_site__markup_in_a_search_or_click_is_escaped(server):
    sid = new_session(server, goal_index=3)
    attack = '"><script>alert(1)</script><img src=x onerror=alert(2)>'
    perform(server, sid, f"search[{attack}]")
    html = page(server, sid)
    assert state(server, sid)["page"] == "results"
    assert attack not in html and "<img" not in html
    assert html.count("<script") == 0  # a results page has no radios, so not even the site's own script
    request(server, "GET", f"/s/{sid}/click?name={quote(attack)}")  # not on the page: an invalid turn
    info = state(server, sid)["info"]
    assert info["action_is_valid"] is False and "<img" not in page(server, sid)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.text(max_size=80), st.sampled_from(["search", "click"]))
def test_site__any_text_in_a_search_or_click_gets_a_redirect_never_a_500(server, text, kind):
    sid = new_session(server, goal_index=3)
    if kind == "search":
        body = urlencode({"search_query": text.encode("utf-8", "surrogatepass")})
        status, *_ = request(
            server, "POST", f"/s/{sid}/search", body, {"Content-Type": "application/x-www-form-urlencoded"}
        )
    else:
        status, *_ = request(
            server, "GET", f"/s/{sid}/click?name={quote(text.encode('utf-8', 'surrogatepass'), safe='')}"
        )
    assert status == 303
    assert request(server, "GET", f"/s/{sid}")[0] == 200
    request(server, "DELETE", f"/s/{sid}")


def test_site__sessions_expire_after_idle_time_and_their_number_is_bounded():
    now = [0.0]
    site = WebShopSite(max_sessions=3, idle_timeout=10.0, clock=lambda: now[0], goal_split="all")
    first = site.new_session(goal_index=1)
    now[0] = 5.0
    others = [site.new_session(goal_index=2), site.new_session(seed=7)]
    with pytest.raises(SessionLimitError, match="max_sessions"):
        site.new_session()
    now[0] = 12.0  # the first is idle for 12 s, the others for 7 s
    assert site.get(first) is None and len(site) == 2
    with WebShopServer(site, limits=LIMITS) as srv:
        site.new_session()
        status, _, body = start(srv)
        assert status == 503 and "The shop is full" in body
        assert request(srv, "POST", "/sessions", "{}", {"Content-Type": "application/json"})[0] == 503
        status, _, body = request(srv, "GET", "/health")
        assert status == 200 and json.loads(body)["sessions"] == 3
        now[0] = 100.0
        assert request(srv, "GET", f"/s/{others[0]}")[0] == 404 and len(site) == 0
        assert json.loads(request(srv, "GET", "/health")[2])["sessions"] == 0
        assert start(srv)[0] == 303


def test_site__a_seeded_session_draws_the_goal_the_env_draws_with_that_seed():
    site = WebShopSite(goal_split="train")
    sid = site.new_session(seed=123)
    _, info = TurnWebShopEnv(goal_split="train").reset(seed=123)
    assert site.get(sid).info["goal_index"] == info["goal_index"]


def test_site__arguments_are_checked_by_name():
    with pytest.raises(ValueError, match="max_sessions"):
        WebShopSite(max_sessions=0)
    with pytest.raises(ValueError, match="idle_timeout"):
        WebShopSite(idle_timeout=-1)
    with pytest.raises(ValueError, match="observation_mode"):
        WebShopSite(observation_mode="text")
    assert main(["--port", "-5"]) == 2  # a bad port is an error message, not a traceback


def test_site__the_cli_serves_it_on_loopback():
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "agentgym_turn",
            "serve",
            "webshop",
            "--port",
            "0",
            "--num-products",
            "200",
            "--max-sessions",
            "5",
        ],
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        line = proc.stderr.readline()
        m = re.search(r"http://127\.0\.0\.1:(\d+)/", line)
        assert m, line
        conn = http.client.HTTPConnection("127.0.0.1", int(m.group(1)), timeout=30)
        conn.request("GET", "/health")
        health = json.loads(conn.getresponse().read())
        assert health["status"] == "ok" and health["sessions"] == 0 and health["max_sessions"] == 5
        conn.request("POST", "/start", "goal=1", {"Content-Type": "application/x-www-form-urlencoded"})
        assert conn.getresponse().status == 303
        conn.close()
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_site__concurrent_requests_on_one_session_never_fail(server):
    # a double-clicking person or a parallel agent: steps run one at a time, pages are never read mid-step
    sid = new_session(server, goal_index=3)
    perform(server, sid, "search[pajama]")
    names = state(server, sid)["available_actions"]
    statuses = []

    def hammer(k):
        for i in range(6):
            if (k + i) % 2:
                statuses.append(
                    request(server, "GET", f"/s/{sid}/click?name={quote(names[(k + i) % len(names)], safe='')}")[0]
                )
            else:
                statuses.append(request(server, "GET", f"/s/{sid}" if i % 4 else f"/s/{sid}/state")[0])

    workers = [threading.Thread(target=hammer, args=(k,)) for k in range(12)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(timeout=120)
    assert len(statuses) == 72 and set(statuses) <= {200, 303}
    assert state(server, sid)["turn"] == 1 + statuses.count(303)  # every click was one step
