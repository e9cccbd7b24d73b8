"""The WebShop site: a real HTTP shop for people and agents (``agentgym-turn serve webshop``).

Each session holds a :class:`~agentgym_turn.webshop.env.TurnWebShopEnv` that shares the
process-wide catalog and search index, so a page over HTTP is the very HTML the text env's page
layer makes (:mod:`agentgym_turn.webshop.pages`) and its text is the in-process observation. Every
clickable on a page submits that click (or the search) as the session env's action; the site
then redirects to the session's page (POST-redirect-GET, so reloading a page never acts twice).
State lives on the server; URLs carry a session id and a clicked name, never a Python literal.

Routes::

    GET  /                          the start page: a form whose Start button opens a session (?goal=N preselects
                                    goal N, ?seed=S the goal TurnWebShop-v0 draws with seed S); it opens nothing itself
    POST /start                     the start form (application/x-www-form-urlencoded: goal?, seed?) -> 303 to the new session's page
    POST /sessions                  JSON only {"goal_index": N?, "seed": S?} -> 201 {"session", "url", "state"} (else 415)
    GET  /s/<session>               the session's current page (HTML)
    POST /s/<session>/search        form field search_query: search[query]
    GET|POST /s/<session>/click?name=<clickable>   click[name] (buttons post, links and option radios get)
    GET  /s/<session>/state         JSON: score, success, page, available actions, goal, the last step's info
    DELETE /s/<session>             end the session
    GET  /health                    JSON: {"status": "ok", "sessions": open sessions, "max_sessions", "goals"}
    GET  /static/style.css          the only stylesheet (no external assets)

Bounds: sessions beyond ``max_sessions`` get a 503 page; a session idle for ``idle_timeout``
seconds is dropped (its URL then gets the 404 page); a search is at most :data:`MAX_QUERY_CHARS`
characters (the env's own action limit less ``search[]``), a form body at most :data:`MAX_BODY_BYTES`, a query
string at most :data:`MAX_QUERY_STRING`; silent or slow clients are cut off by the server stack
(:mod:`agentgym_turn.serving`). Catalog and agent text is HTML-escaped by the page layer, and
every name the site writes into a URL or attribute is escaped here.

Sessions are opened only by a POST that another site's page cannot send: ``/sessions`` takes JSON alone (a
cross-site form or ``fetch`` without a CORS preflight cannot send ``application/json``), and ``/start`` refuses
a request whose ``Origin`` names another site (:class:`~agentgym_turn.serving.HostOriginGuard`) or whose
``Sec-Fetch-Site`` says it came from another origin. So links, ``<img>`` tags and prefetchers, which GET, open
nothing. With a token (``--token``), a browser presents it once as ``/?token=...`` (an HttpOnly, SameSite=Strict
cookie then carries it; :class:`~agentgym_turn.serving.TokenGuard`); programs send ``Authorization: Bearer``.
"""

from __future__ import annotations

import argparse
import html
import re
import secrets
import sys
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence
from urllib.parse import parse_qs, quote

import numpy as np

from ..core.args import is_int, is_number
from ..serving import (
    AppServer,
    HTTPError,
    RateLimit,
    ServerLimits,
    access_options,
    add_access_arguments,
    add_allow_host_argument,
    parse_json,
    read_body,
)
from ..core.turn_env import DEFAULT_MAX_ACTION_LENGTH
from .env import TurnWebShopEnv, product_link_name

#: Longest search query (characters): the env's own action limit less ``search[]``, so the site accepts exactly the
#: searches the env plays in-process.
MAX_QUERY_CHARS = DEFAULT_MAX_ACTION_LENGTH - len("search[]")
#: Largest form or JSON body (bytes): a longest query, percent-encoded.
MAX_BODY_BYTES = 1024 * 1024
#: Longest query string of a URL (characters).
MAX_QUERY_STRING = 8 * 1024
#: Longest clicked name (characters); catalog names are far shorter.
MAX_NAME_CHARS = 2048
_SESSION_RE = re.compile(r"[A-Za-z0-9_-]{8,64}")
_STATIC = Path(__file__).resolve().parent / "static"
# lone surrogates (an agent may search for one) cannot be encoded; a page shows U+FFFD, as an observation does
_SURROGATE = re.compile("[\ud800-\udfff]")


# ---------------------------------------------------------------------------- page rewriting
_SEARCH_FORM = re.compile(r'<form role="form" id="form-buscar" method="post" action="[^"]*">')
_SEARCH_BUTTON = re.compile(r'<button class="btn btn-success" type="submit">')
_BUTTON_FORM = re.compile(r'<form method="post" action="[^"]*">(\s*)<button ([^>]*)>([^<]*)</button>')
_PRODUCT_LINK = re.compile(r'<a class="product-link" href="[^"]*">([^<]*)</a>')
# The attributes before value="..." are matched deterministically (no lazy scan), so the rewrite is linear.
_RADIO = re.compile(r'<input type="radio" ((?:[^<>v]++|v(?!alue="))*+)value="([^"<]*+)" data-url="[^"<]*+"')
_RADIO_SCRIPT = (
    "<script>document.querySelectorAll('input[data-url]').forEach(function (r) {"
    " r.addEventListener('change', function () { window.location.href = r.dataset.url; }); });</script>\n"
)


def _click_url(session_id: str, name: str) -> str:
    return html.escape(f"/s/{session_id}/click?name={quote(name, safe='')}", quote=True)


def rewrite_page(page: str, session_id: str) -> str:
    """The page layer's HTML with every clickable pointed at this site's routes for ``session_id``.

    Only attributes change (``action``, ``href``, ``data-url``, and a ``data-action`` naming the
    env action each clickable performs), plus one inline script for the option radios, so the
    page's visible text stays the text env's. Names come from the page's own escaped strings.
    """
    page = _SEARCH_FORM.sub(f'<form role="form" id="form-buscar" method="post" action="/s/{session_id}/search">', page)
    page = _SEARCH_BUTTON.sub('<button class="btn btn-success" type="submit" data-action="search">', page, count=1)

    def button(m: re.Match) -> str:
        name = html.unescape(m.group(3)).lower()
        return (
            f'<form method="post" action="{_click_url(session_id, name)}">{m.group(1)}'
            f'<button {m.group(2)} data-action="{html.escape(name, quote=True)}">{m.group(3)}</button>'
        )

    def link(m: re.Match) -> str:
        name = product_link_name(html.unescape(m.group(1)))
        return (
            f'<a class="product-link" data-action="{html.escape(name, quote=True)}" '
            f'href="{_click_url(session_id, name)}">{m.group(1)}</a>'
        )

    def radio(m: re.Match) -> str:
        value = html.unescape(m.group(2))
        return (
            f'<input type="radio" {m.group(1)}value="{m.group(2)}" data-action="{m.group(2)}" '
            f'data-url="{_click_url(session_id, value)}"'
        )

    page = _BUTTON_FORM.sub(button, page)
    page = _PRODUCT_LINK.sub(link, page)
    page, radios = _RADIO.subn(radio, page)
    if radios:
        page = page.replace("</body>", _RADIO_SCRIPT + "</body>", 1)
    return page


def _message_page(title: str, message: str, *, link: str = "/", link_text: str = "Start a new session") -> str:
    return (
        '<!DOCTYPE html>\n<html>\n<head>\n<meta charset="utf-8">\n<title>WebShop</title>\n'
        '<link rel="stylesheet" href="/static/style.css">\n</head>\n<body>\n<div class="container py-5">\n'
        f'<div id="logo" class="text-center">\n<h2>WebShop</h2>\n</div>\n<div class="text-center">\n<h3>{html.escape(title)}</h3>\n'
        f'<p>{html.escape(message)}</p>\n<p><a href="{html.escape(link, quote=True)}">{html.escape(link_text)}</a></p>\n'
        "</div>\n</div>\n</body>\n</html>\n"
    )


_TOKEN_OUT_OF_URL = (
    "<script>(function () { var q = new URLSearchParams(window.location.search); if (!q.has('token')) return;"
    " q.delete('token'); var rest = q.toString();"
    " window.history.replaceState(null, '', window.location.pathname + (rest ? '?' + rest : '')); })();</script>\n"
)


#: Seeds the site takes are below this (TurnWebShop-v0 takes any; 78 digits bound what a query string carries).
MAX_SEED = 2**256


def _start_page(num_goals: int, goal: int | None = None, seed: int | None = None, *, strip_token: bool = False) -> str:
    """The start page: a form that POSTs to ``/start`` (goal ``goal`` preselected; ``seed`` carried along).
    ``strip_token``: take a ``?token=`` out of the address bar (the cookie holds it now)."""
    # referrer "same-origin", not "no-referrer": under no-referrer a browser sends the form with ``Origin: null``,
    # which HostOriginGuard refuses
    value = "" if goal is None else f' value="{goal}"'
    hidden = "" if seed is None else f'<input type="hidden" name="seed" value="{seed}">\n'
    return (
        '<!DOCTYPE html>\n<html>\n<head>\n<meta charset="utf-8">\n<meta name="referrer" content="same-origin">\n'
        '<title>WebShop</title>\n<link rel="stylesheet" href="/static/style.css">\n</head>\n<body>\n<div class="container py-5">\n'
        '<div id="logo" class="text-center">\n<h2>WebShop</h2>\n</div>\n<div class="text-center">\n<h3>Start shopping</h3>\n'
        "<p>Each session is one shopping task: an instruction to follow, a search bar, and a Buy Now button that ends it.</p>\n"
        '<form id="start-form" method="post" action="/start">\n'
        f'<p><label for="goal">Goal (0 to {num_goals - 1}; empty: a random goal)</label>\n'
        f'<input class="form-control" type="number" id="goal" name="goal" min="0" max="{num_goals - 1}"{value}></p>\n'
        f"{hidden}"
        '<p><button class="btn btn-success" type="submit" id="start">Start</button></p>\n'
        "</form>\n</div>\n</div>\n"
        f"{_TOKEN_OUT_OF_URL if strip_token else ''}</body>\n</html>\n"
    )


def _whole_number(text: str | None, below: int) -> int | None:
    """``text`` as an ASCII whole number under ``below`` (``None`` for no text), else ``ValueError``."""
    if text is None or text.strip() == "":
        return None
    text = text.strip()
    if not (text.isascii() and text.isdigit()) or len(text) > len(str(below)) or int(text) >= below:
        raise ValueError(text)
    return int(text)


# ---------------------------------------------------------------------------- sessions
@dataclass
class _Session:
    env: TurnWebShopEnv
    last_used: float
    info: dict[str, Any] = field(default_factory=dict)
    reward: float = 0.0
    done: bool = False


class SessionLimitError(Exception):
    """Raised by :meth:`WebShopSite.new_session` when ``max_sessions`` sessions are open."""


class WebShopSite:
    """The shop's sessions: each a ``TurnWebShopEnv`` on the shared catalog, bounded and expiring.

    Args:
        max_sessions: Open sessions at most; a new one beyond gets :class:`SessionLimitError` (a 503 page).
        idle_timeout: Seconds after its last request when a session is dropped.
        expert: Put the oracle shopper's next action in ``/state`` (for the browser env's
            ``expert_action`` and load tests; off by default, since it gives the answer away).
        seed: Seed of the goals drawn for sessions created without a goal or seed.
        clock: Monotonic clock in seconds (a test can pass a fake one).
        **env_kwargs: ``TurnWebShopEnv`` arguments (``num_products``, ``data_path``, ``goal_split``,
            ``catalog_seed``, ``human_goals``, ``show_attributes``, ``reward_mode``...).
    """

    def __init__(
        self,
        *,
        max_sessions: int = 1000,
        idle_timeout: float = 1800.0,
        expert: bool = False,
        seed: int | None = None,
        clock: Callable[[], float] = time.monotonic,
        **env_kwargs: Any,
    ):
        if not is_int(max_sessions, 1):
            raise ValueError(f"max_sessions must be a positive int (e.g. 1000), got {max_sessions!r}.")
        if not is_number(idle_timeout) or not idle_timeout > 0:
            raise ValueError(f"idle_timeout must be a positive number of seconds (e.g. 1800), got {idle_timeout!r}.")
        for fixed in ("observation_mode", "list_actions", "render_mode"):
            if fixed in env_kwargs:
                raise ValueError(f"{fixed} is set by the site (pages are HTML); drop it from the site's arguments.")
        self.max_sessions = max_sessions
        self.idle_timeout = float(idle_timeout)
        self.expert = bool(expert)
        self.env_kwargs = dict(env_kwargs)
        self._clock = clock
        self._rng = np.random.default_rng(seed)
        self._sessions: OrderedDict[str, _Session] = OrderedDict()  # least recently used first
        self._lock = threading.Lock()  # the session table (held briefly)
        self._step_lock = threading.Lock()  # one step at a time: the shared search index is not known to be re-entrant
        self.template = self._make_env()  # loads (or shares) the catalog now and checks the arguments

    def _make_env(self) -> TurnWebShopEnv:
        return TurnWebShopEnv(observation_mode="html", list_actions=False, render_mode="ansi", **self.env_kwargs)

    @property
    def num_goals(self) -> int:
        return int(self.template.shop.num_goals)

    def __len__(self) -> int:
        with self._lock:
            self._sweep()
            return len(self._sessions)

    def _sweep(self) -> None:
        now = self._clock()
        while self._sessions:
            sid, session = next(iter(self._sessions.items()))
            if now - session.last_used < self.idle_timeout:
                break
            del self._sessions[sid]
            session.env.close()

    def new_session(self, *, goal_index: int | None = None, seed: int | None = None) -> str:
        """Open a session on goal ``goal_index``, or the goal ``reset(seed=seed)`` draws (as
        ``TurnWebShop-v0`` with that seed), or a goal drawn by the site; return its id."""
        if goal_index is not None and not 0 <= goal_index < self.num_goals:
            raise ValueError(f"goal_index must lie in [0, {self.num_goals}), got {goal_index}.")
        with self._lock:
            self._sweep()
            if len(self._sessions) >= self.max_sessions:
                raise SessionLimitError(
                    f"The shop is full: {self.max_sessions} sessions are open (max_sessions). "
                    f"An idle session closes after {self.idle_timeout:g} s; try again later."
                )
            if seed is None and goal_index is None:
                seed = int(self._rng.integers(2**31))
            env = self._make_env()  # under the lock, so concurrent callers never pass max_sessions (about 2 ms)
            _, info = env.reset(seed=seed, options={} if goal_index is None else {"goal_index": goal_index})
            sid = secrets.token_urlsafe(16)
            self._sessions[sid] = _Session(env=env, last_used=self._clock(), info=info)
        return sid

    def get(self, sid: str) -> _Session | None:
        """The open session ``sid`` (now marked used), or ``None`` when unknown or expired."""
        with self._lock:
            self._sweep()
            session = self._sessions.get(sid)
            if session is not None:
                session.last_used = self._clock()
                self._sessions.move_to_end(sid)
            return session

    def end(self, sid: str) -> bool:
        with self._lock:
            session = self._sessions.pop(sid, None)
        if session is not None:
            session.env.close()
        return session is not None

    def act(self, sid: str, response: str) -> _Session | None:
        """Step session ``sid`` with ``response`` (an env action string)."""
        session = self.get(sid)
        if session is None:
            return None
        with self._step_lock:
            _, reward, terminated, truncated, info = session.env.step(response)
        session.reward, session.info = float(reward), info
        session.done = session.done or bool(terminated)
        return session

    def page(self, sid: str, session: _Session) -> str:
        """The session's current page as this site serves it."""
        with self._step_lock:  # never read an env while a step changes it
            return rewrite_page(session.env.render() or "", sid)

    def state(self, sid: str, session: _Session) -> dict[str, Any]:
        """The JSON of ``/s/<sid>/state``."""
        with self._step_lock:  # never read an env while a step changes it
            return self._state(sid, session)

    def _state(self, sid: str, session: _Session) -> dict[str, Any]:
        env = session.env
        # the goal's index gives its attributes, options and price away: only a site that serves the oracle sends it
        info = session.info if self.expert else {k: v for k, v in session.info.items() if k not in env.oracle_info_keys}
        out = {
            "session": sid,
            "instruction": env.goal.instruction_text if env.goal else "",
            "done": session.done,
            "reward": session.reward,
            "info": info,
            **{
                k: info.get(k)
                for k in ("page", "goal_index", "turn", "score", "success", "available_actions")
                if k in info
            },
        }
        if self.expert:
            out["expert_action"] = env.expert_action()
        return out


# ---------------------------------------------------------------------------- the app
def build_app(site: WebShopSite, *, limits: ServerLimits | None = None):
    """The Starlette app of ``site`` (routes in the module docstring)."""
    from starlette.applications import Starlette
    from starlette.concurrency import run_in_threadpool
    from starlette.exceptions import HTTPException
    from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
    from starlette.routing import Route

    limits = limits or ServerLimits(max_body_bytes=MAX_BODY_BYTES)
    css = (_STATIC / "style.css").read_bytes()

    def page_response(text: str, status: int = 200) -> Response:
        return HTMLResponse(_SURROGATE.sub("\ufffd", text), status_code=status)

    def error_page(status: int, title: str, message: str) -> Response:
        return page_response(_message_page(title, message), status)

    def unknown_session(sid: str) -> Response:
        return error_page(
            404, "Unknown session", "This session does not exist or has expired (idle sessions close). Start a new one."
        )

    def check_query_string(request: Any) -> None:
        if len(request.scope.get("query_string", b"")) > MAX_QUERY_STRING:
            raise HTTPError(414, f"the query string must be at most {MAX_QUERY_STRING:,} characters")

    def session_or_none(request: Any) -> tuple[str, _Session | None]:
        sid = request.path_params["sid"]
        if not _SESSION_RE.fullmatch(sid):
            return sid, None
        return sid, site.get(sid)

    def media_type(request: Any) -> str:
        return request.headers.get("content-type", "").split(";", 1)[0].strip().lower()

    def to_page(sid: str) -> Response:
        return RedirectResponse(f"/s/{sid}", status_code=303)

    async def form_fields(request: Any) -> dict[str, list[str]]:
        body = await read_body(request, limits)
        try:
            # surrogatepass: a search may carry any agent string (the env accepts lone surrogates)
            text = body.decode("utf-8", errors="surrogatepass")
            return parse_qs(text, keep_blank_values=True, max_num_fields=16, encoding="utf-8", errors="surrogatepass")
        except (UnicodeDecodeError, ValueError):
            raise HTTPError(400, "the form body is not valid URL-encoded UTF-8") from None

    def new_session_or_page(goal_index: int | None, seed: int | None) -> str | Response:
        try:
            return site.new_session(goal_index=goal_index, seed=seed)
        except SessionLimitError as err:
            return error_page(503, "The shop is full", str(err))

    def goal_and_seed(goal: str | None, seed: str | None) -> tuple[int | None, int | None] | Response:
        try:
            index = _whole_number(goal, site.num_goals)
        except ValueError:
            return error_page(400, "Bad goal", f"goal must be a whole number from 0 to {site.num_goals - 1}.")
        try:
            return index, _whole_number(seed, MAX_SEED)
        except ValueError:
            return error_page(400, "Bad seed", "seed must be a whole number from 0 to 2**256 - 1.")

    async def home(request: Any) -> Response:
        # A GET opens nothing (a link, an <img> or a prefetcher must not fill the shop): the form POSTs to /start.
        check_query_string(request)
        chosen = goal_and_seed(request.query_params.get("goal"), request.query_params.get("seed"))
        if isinstance(chosen, Response):
            return chosen
        return page_response(_start_page(site.num_goals, *chosen, strip_token="token" in request.query_params))

    async def start(request: Any) -> Response:
        check_query_string(request)
        # Another origin's page: the Origin header is refused by HostOriginGuard; Sec-Fetch-Site catches the rest
        # (another port of this host is the same site but not the same origin).
        if request.headers.get("sec-fetch-site", "same-origin") not in ("same-origin", "none"):
            return error_page(403, "Refused", "A session is started from this site's own start page.")
        if media_type(request) != "application/x-www-form-urlencoded":
            return error_page(415, "Unsupported form", "The start form is sent as application/x-www-form-urlencoded.")
        fields = await form_fields(request)
        chosen = goal_and_seed(fields.get("goal", [None])[0], fields.get("seed", [None])[0])
        if isinstance(chosen, Response):
            return chosen
        sid = new_session_or_page(*chosen)
        return sid if isinstance(sid, Response) else to_page(sid)

    async def create(request: Any) -> Response:
        if media_type(request) != "application/json":  # a cross-site page can send a form or text/plain, never JSON
            return JSONResponse(
                {"detail": "POST /sessions takes a JSON body: send Content-Type: application/json"}, status_code=415
            )
        body = await read_body(request, limits)
        payload = parse_json(body) if body.strip() else {}
        if not isinstance(payload, dict) or set(payload) - {"goal_index", "seed"}:
            return JSONResponse(
                {"detail": "the body must be a JSON object with optional 'goal_index' and 'seed'"}, status_code=422
            )
        values: dict[str, int | None] = {}
        for key in ("goal_index", "seed"):
            v = payload.get(key)
            if v is not None and not is_int(v, 0, MAX_SEED - 1):
                return JSONResponse({"detail": f"'{key}' must be a non-negative integer"}, status_code=422)
            values[key] = v
        if values["goal_index"] is not None and values["goal_index"] >= site.num_goals:
            return JSONResponse({"detail": f"'goal_index' must be below {site.num_goals}"}, status_code=422)
        try:
            sid = site.new_session(goal_index=values["goal_index"], seed=values["seed"])
        except SessionLimitError as err:
            return JSONResponse({"detail": str(err)}, status_code=503)
        session = site.get(sid)
        assert session is not None
        state_json = await run_in_threadpool(site.state, sid, session)
        return JSONResponse({"session": sid, "url": f"/s/{sid}", "state": state_json}, status_code=201)

    async def show(request: Any) -> Response:
        check_query_string(request)
        sid, session = session_or_none(request)
        if session is None:
            return unknown_session(sid)
        return page_response(await run_in_threadpool(site.page, sid, session))

    async def end(request: Any) -> Response:
        sid = request.path_params["sid"]
        if not _SESSION_RE.fullmatch(sid) or not site.end(sid):
            return JSONResponse({"detail": "unknown or expired session"}, status_code=404)
        return Response(status_code=204)

    async def search(request: Any) -> Response:
        check_query_string(request)
        sid, session = session_or_none(request)
        if session is None:
            return unknown_session(sid)
        fields = await form_fields(request)
        query = fields.get("search_query", [""])[0]
        if len(query) > MAX_QUERY_CHARS:
            return error_page(413, "Search too long", f"A search is at most {MAX_QUERY_CHARS:,} characters.")
        await run_in_threadpool(
            site.act, sid, f"search[{query}]"
        )  # an empty query is the env's invalid turn, as in-process
        return to_page(sid)

    async def click(request: Any) -> Response:
        check_query_string(request)
        sid, session = session_or_none(request)
        if session is None:
            return unknown_session(sid)
        if request.method == "POST":
            await read_body(request, limits)  # drain (bounded); the name travels in the URL
        names = request.query_params.getlist("name")
        if len(names) != 1:
            return error_page(400, "Bad click", "A click names exactly one clickable: /s/<session>/click?name=<name>.")
        if len(names[0]) > MAX_NAME_CHARS:
            return error_page(414, "Bad click", f"A clicked name is at most {MAX_NAME_CHARS:,} characters.")
        await run_in_threadpool(site.act, sid, f"click[{names[0]}]")
        return to_page(sid)

    async def state(request: Any) -> Response:
        sid, session = session_or_none(request)
        if session is None:
            return JSONResponse({"detail": "unknown or expired session; POST /sessions for a new one"}, status_code=404)
        return JSONResponse(await run_in_threadpool(site.state, sid, session))

    async def health(request: Any) -> Response:
        return JSONResponse(
            {"status": "ok", "sessions": len(site), "max_sessions": site.max_sessions, "goals": site.num_goals}
        )

    async def stylesheet(request: Any) -> Response:
        return Response(css, media_type="text/css", headers={"Cache-Control": "max-age=3600"})

    async def on_http_error(request: Any, exc: HTTPError) -> Response:
        return error_page(exc.status, "Bad request", exc.detail)

    async def on_starlette_error(request: Any, exc: HTTPException) -> Response:
        if exc.status_code == 404:
            return error_page(404, "Not found", "There is no such page. Start a new session.")
        return error_page(exc.status_code, "Bad request", str(exc.detail))

    async def on_crash(request: Any, exc: Exception) -> Response:
        return error_page(500, "Internal error", f"{type(exc).__name__}: {exc}")

    routes = [
        Route("/", home, methods=["GET"]),
        Route("/start", start, methods=["POST"]),
        Route("/sessions", create, methods=["POST"]),
        Route("/static/style.css", stylesheet, methods=["GET"]),
        Route("/health", health, methods=["GET"]),
        Route("/s/{sid}", show, methods=["GET"]),
        Route("/s/{sid}", end, methods=["DELETE"]),
        Route("/s/{sid}/search", search, methods=["POST"]),
        Route("/s/{sid}/click", click, methods=["GET", "POST"]),
        Route("/s/{sid}/state", state, methods=["GET"]),
    ]
    handlers = {HTTPError: on_http_error, HTTPException: on_starlette_error, Exception: on_crash}
    return Starlette(routes=routes, exception_handlers=handlers)


class WebShopServer(AppServer):
    """Serve a :class:`WebShopSite` over HTTP (``start``/``stop`` or a context manager).

    Args:
        site: The sessions (or ``None``: a site made from ``site_kwargs``).
        host: Interface to bind (default ``127.0.0.1``: this machine only).
        port: TCP port; 0 picks a free one (read it back from :attr:`port`).
        limits: Time and size bounds (:class:`~agentgym_turn.serving.ServerLimits`).
        verbose: Log every request.
        allowed_hosts: Domain names accepted in ``Host``/``Origin`` beside this machine's (``--allow-host``).
        token: A secret every request but ``GET /health`` must carry (``Authorization: Bearer``; a browser opens
            ``/?token=...`` once and a cookie carries it); ``None``: none (:class:`~agentgym_turn.serving.TokenGuard`).
        rate_limit: Requests per client IP beyond this machine (:class:`~agentgym_turn.serving.RateLimit`); ``None``: no limit.

    Example::

        with WebShopServer(num_products=1000) as server:
            print(server.base_url)  # open it in a browser
    """

    def __init__(
        self,
        site: WebShopSite | None = None,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        limits: ServerLimits | None = None,
        verbose: bool = False,
        allowed_hosts: Sequence[str] = (),
        token: str | None = None,
        rate_limit: RateLimit | None = RateLimit(),
        **site_kwargs: Any,
    ):
        self.site = site if site is not None else WebShopSite(**site_kwargs)
        limits = limits or ServerLimits(max_body_bytes=MAX_BODY_BYTES)
        super().__init__(
            build_app(self.site, limits=limits),
            host=host,
            port=port,
            limits=limits,
            verbose=verbose,
            allowed_hosts=allowed_hosts,
            token=token,
            cookie_login="/",
            rate_limit=rate_limit,
        )

    def __enter__(self) -> "WebShopServer":
        self.start()
        return self


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="agentgym-turn serve webshop",
        description="Serve the WebShop site (open it in a browser; its start page's Start button opens a session).",
    )
    p.add_argument("--port", type=int, default=3000, help="port (default 3000, as WebShop; 0 picks a free one)")
    p.add_argument("--host", default="127.0.0.1", help="interface to bind (default 127.0.0.1: this machine only)")
    p.add_argument(
        "--num-products",
        type=int,
        default=None,
        help="catalog size (generated: default 1,000; with --data-path: first N)",
    )
    p.add_argument(
        "--data-path", metavar="P", default=None, help="WebShop's data/ folder or an items_shuffle*.json to load"
    )
    p.add_argument("--catalog-seed", type=int, default=0, help="seed of the generated catalog (default 0)")
    p.add_argument(
        "--goal-split",
        default="all",
        choices=("train", "eval", "test", "all"),
        help="goals sessions draw from (default all)",
    )
    p.add_argument("--max-sessions", type=int, default=1000, help="open sessions at most (default 1000)")
    p.add_argument(
        "--idle-timeout", type=float, default=1800.0, help="seconds before an idle session closes (default 1800)"
    )
    p.add_argument(
        "--expert", action="store_true", help="put the oracle's next action in /s/<session>/state (gives answers away)"
    )
    p.add_argument("--seed", type=int, default=None, help="seed of the goals drawn for new sessions")
    add_allow_host_argument(p)
    add_access_arguments(p)
    p.add_argument("--verbose", action="store_true", help="log every request")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``agentgym-turn serve webshop``."""
    args = build_parser().parse_args(list(argv) if argv is not None else None)
    if not 0 <= args.port <= 65535:
        print(f"error: --port must be from 0 to 65535 (0 picks a free one), got {args.port}.", file=sys.stderr)
        return 2
    try:
        access = access_options(args)  # before the catalog is built
        site = WebShopSite(
            max_sessions=args.max_sessions,
            idle_timeout=args.idle_timeout,
            expert=args.expert,
            seed=args.seed,
            num_products=args.num_products,
            data_path=args.data_path,
            catalog_seed=args.catalog_seed,
            goal_split=args.goal_split,
        )
        server = WebShopServer(
            site, host=args.host, port=args.port, verbose=args.verbose, allowed_hosts=args.allow_host, **access
        )
    except (OSError, ValueError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    login = " (open it once with ?token=<the token>)" if access["token"] else ""
    return server.run_until_interrupted(
        f"WebShop at {server.base_url}/{login} ({site.num_goals:,} goals; Ctrl-C stops)"
    )


if __name__ == "__main__":
    sys.exit(main())
