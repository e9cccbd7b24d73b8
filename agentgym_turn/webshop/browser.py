"""``TurnWebShopBrowser-v0``: the WebShop task played by Selenium in headless Chromium against the site.

The env drives a real browser (Selenium 4, Debian's ``chromium`` and ``chromedriver``) on the
WebShop site (:mod:`agentgym_turn.webshop.server`), started in-process on a free port unless
``url`` names a running one. Each episode starts as a person's does: on the site's start page, whose Start
button opens the session. Each valid action becomes a DOM interaction: a search is typed into
the search box and submitted (from another page, or for text a text box cannot hold, such as a
newline, it is posted to the session's search route), a click presses the button, follows the
product link or picks the option radio whose ``data-action`` names it. Observations are read from
the live DOM (``driver.page_source``) through the text env's own HTML-to-text code, so for the same
actions they equal ``TurnWebShop-v0``'s; reward and ``info`` come from the session's ``/state``.

A failure of the browser or the site inside a turn (a WebDriver error, a chromedriver or Chromium process that
died, the site gone) is an :class:`~agentgym_turn.core.contract.InfraError`: the episode ends with
``exit_status="infra_error"`` and ``reward_valid=False``, and the next ``reset`` starts a new browser.
Snapshots hold the episode's start and actions (a live browser cannot be pickled): ``restore`` replays
them in this env's browser and ``fork(n)`` in ``n`` new envs made with this one's arguments.

    python -m agentgym_turn.webshop.browser --screenshot docs/img/webshop_item.png

takes the item page screenshot of the docs through this env's code path (:func:`screenshot_item_page`).
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import signal
import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any, Sequence
from urllib.parse import urlencode, urlsplit

from ..core import InvalidAction, TurnEnv, TurnOutcome, parse_bracket_action, snippet
from ..core.args import is_int, token_arg
from ..core.contract import InfraError, fork_by_replay
from ..core.snapshots import seal, unseal
from ..extras import CHROMIUM_INSTALL_HINT, find_chromium, require
from .env import INTRO, TurnWebShopEnv, exact_click_name
from .source import TASK_KEYWORDS, ShopTasks, shop_tasks, split_task_keywords
from .text import OBSERVATION_MODES, actions_line, format_strings, visible_strings

# all clickables in DOM order: [tag, name, checked]
_CLICKABLES_JS = (
    "return Array.from(document.querySelectorAll('[data-action]'))"
    ".map(function (e) { return [e.tagName, e.getAttribute('data-action'), !!e.checked]; });"
)
_FIND_JS = (
    "var name = arguments[0]; return Array.from(document.querySelectorAll('[data-action]'))"
    ".find(function (e) { return e.getAttribute('data-action') === name; }) || null;"
)
# posts an already URL-encoded form body (exact bytes, no browser newline rewriting), then follows the redirect
_POST_JS = (
    "var done = arguments[arguments.length - 1];"
    "fetch(arguments[0], {method: 'POST', body: arguments[1], headers: {'Content-Type': 'application/x-www-form-urlencoded'}})"
    ".then(function (r) { done(r.status); }, function (e) { done(-1); });"
)
#: The in-process env's reward components (this env's reward is that env's, split the same way).
REWARD_COMPONENTS: tuple[str, ...] = tuple(
    TurnWebShopEnv.metadata.get("reward_components", ("attributes", "options", "price", "format"))
)


def _browser_faults() -> tuple[type[BaseException], ...]:
    """What a browser or driver that failed raises through Selenium: WebDriver errors, and the HTTP client's errors
    when chromedriver itself is gone (urllib3's, which are not ``OSError``)."""
    from selenium.common.exceptions import WebDriverException

    faults: list[type[BaseException]] = [WebDriverException, OSError, http.client.HTTPException]
    try:
        from urllib3.exceptions import HTTPError as Urllib3Error

        faults.append(Urllib3Error)
    except ImportError:  # pragma: no cover - selenium depends on urllib3
        pass
    return tuple(faults)


class _KeepRedirect(urllib.request.HTTPRedirectHandler):
    """Leaves a redirect unfollowed (``urlopen`` raises it as an ``HTTPError`` with its 3xx code)."""

    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


def _children(pid: int) -> list[int]:
    """Every descendant process of ``pid`` (Linux ``/proc``; empty elsewhere)."""
    parents: dict[int, list[int]] = {}
    try:
        entries = os.listdir("/proc")
    except OSError:
        return []
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                stat = f.read().decode("ascii", "replace")
            ppid = int(stat[stat.rindex(")") + 2 :].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        parents.setdefault(ppid, []).append(int(entry))
    out, todo = [], [pid]
    while todo:
        for child in parents.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


def _is_chromium(pid: int) -> bool:
    """Whether process ``pid`` is alive and a Chromium or chromedriver process."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            cmd = f.read()
    except OSError:
        return False
    return b"chrom" in cmd


def check_browser_settings(*, observation_mode: Any, token: Any) -> None:
    """Raise a ValueError naming the first of ``TurnWebShopBrowserEnv``'s settings that is out of its range."""
    if observation_mode not in OBSERVATION_MODES:
        raise ValueError(f"observation_mode must be one of {OBSERVATION_MODES}, got {observation_mode!r}.")
    token_arg(token, "the site's --token")


def _in_process_site(site_kwargs: dict[str, Any]) -> Any:
    """A started :class:`~.server.WebShopServer` with the expert on, for an env given no ``url``."""
    from .server import WebShopServer

    return WebShopServer(expert=True, max_sessions=64, idle_timeout=3600.0, **site_kwargs).start()


class TurnWebShopBrowserEnv(TurnEnv):
    """WebShop in a real headless Chromium, driven by Selenium, on the WebShop site.

    ## Description

    ``TurnWebShop-v0``'s task (same actions, observations, reward and ``info`` keys) played in a
    browser: the env starts the site (:mod:`agentgym_turn.webshop.server`) on a free port of
    127.0.0.1 unless ``url`` is given, opens one session per episode and performs each action as
    a DOM interaction. Use it to test browser agents, or to check that an agent's behaviour does
    not depend on the text rendering. Each step loads a page (0.2 to 1.6 s on the shared 2-core test
    machine, where ``TurnWebShop-v0`` takes milliseconds).

    ## Action Space

    As ``TurnWebShop-v0``: ``search[query]`` on any page or ``click[x]`` for ``x`` among
    ``info["available_actions"]``, which are read from the page (each clickable's ``data-action``).

    ## Observation Space

    As ``TurnWebShop-v0`` in ``observation_mode`` ``"text"`` or ``"text_rich"``, from
    ``driver.page_source``; ``"html"`` gives the page source itself (Chromium's serialisation, which
    differs in markup, not text, from the site's HTML).

    ## Starting State

    The search page of a new session. ``reset(seed=s)`` opens the goal ``TurnWebShop-v0`` draws with
    seed ``s``; later resets without a seed draw a seed from ``self.np_random``;
    ``options={"goal_index": i}`` picks goal ``i``.

    ## Rewards

    As ``TurnWebShop-v0``: WebShop's reward on ``Buy Now``, 0 before, ``format_penalty`` on an invalid turn;
    ``info["reward_components"]`` splits it as that env does (``metadata["reward_components"]``).

    ## Episode End

    On ``Buy Now``; truncated at 15 turns (registration).

    ## Information

    ``TurnWebShop-v0``'s keys: `turn`, `action_is_valid`, `action_is_effective`, `success`, `score`,
    `available_actions`, `page`, `goal_index`, `has_search_bar`, `purchased_asin`, `reward_breakdown`, and the
    contract's `exit_status`, `reward_valid`, `reward_components`, `state_key`. The site's session env counts
    every turn (an invalid one is reported to it as an empty click, an invalid turn there too), so `state_key` is
    that env's: equal to ``TurnWebShop-v0``'s after the same actions. A browser or site failure in a turn is
    ``exit_status="infra_error"`` (the episode ends; ``reset`` starts a new browser).

    ## Arguments

    ```python
    import gymnasium as gym
    import agentgym_turn
    env = gym.make("TurnWebShopBrowser-v0", num_products=1000)
    ```

    * ``url``: base URL of a running site (``agentgym-turn serve webshop --expert``); default: start one in-process.
    * ``token``: that site's token (its ``--token``): the browser opens the start page with ``?token=`` (the site
      then keeps it in a cookie) and the env's own requests send ``Authorization: Bearer``.
    * ``source`` (a ``ShopTasks``) or its keywords (``num_products``, ``goal_split``, ``data_path``,
      ``human_goals``, ``catalog_seed``, ``content_split``...), ``observation_mode``, ``list_actions``,
      ``show_attributes``, ``reward_mode``: as ``TurnWebShop-v0`` (the tasks only apply to the in-process site).
    * ``chromium_path``, ``chromedriver_path``: the browser and driver (default Debian's, else ``PATH``).
    * ``headless`` (default ``True``), ``window_size`` (pixels), ``page_timeout`` (seconds per page load).
    * ``format_penalty``, ``render_mode``, ``max_action_length``, ``max_observation_length``: see ``TurnEnv``.

    ## Version History

    * v0: initial version.
    """

    metadata = {"render_modes": ["ansi"], "render_fps": 4, "reward_components": REWARD_COMPONENTS}
    reset_options = frozenset({"goal_index"})
    external_kwargs = frozenset({"url", "data_path", "chromium_path", "chromedriver_path"})
    source_keywords = tuple(TASK_KEYWORDS)
    #: ``check_turn_env`` skips its pickling check with this reason (a snapshot replays the episode instead).
    unpicklable_because = "it drives a live browser; snapshot() and fork() replay the episode instead"
    EXTRA_INFO_KEYS = TurnWebShopEnv.EXTRA_INFO_KEYS

    def __init__(
        self,
        source: ShopTasks | None = None,
        *,
        url: str | None = None,
        observation_mode: str = "text",
        list_actions: bool = True,
        show_attributes: bool = False,
        reward_mode: str = "original",
        chromium_path: str | None = None,
        chromedriver_path: str | None = None,
        headless: bool = True,
        window_size: tuple[int, int] = (1280, 1000),
        page_timeout: float = 30.0,
        token: str | None = None,
        **kwargs: Any,
    ):
        # Selenium is imported at the first reset; check it now so gym.make fails with the fix, not reset()
        require("browser", "TurnWebShopBrowser-v0")
        #: The shop and its goals (:class:`ShopTasks`), played by the in-process site.
        self.source = tasks = shop_tasks(source, split_task_keywords(kwargs), type(self).__name__)
        super().__init__(**kwargs)
        # what fork(n) makes its envs with
        self._init_args: dict[str, Any] = dict(
            source=tasks,
            url=url,
            observation_mode=observation_mode,
            list_actions=list_actions,
            show_attributes=show_attributes,
            reward_mode=reward_mode,
            chromium_path=chromium_path,
            chromedriver_path=chromedriver_path,
            headless=headless,
            window_size=window_size,
            page_timeout=page_timeout,
            token=token,
            **kwargs,
        )
        check_browser_settings(observation_mode=observation_mode, token=token)
        self.observation_mode, self.list_actions, self._token = observation_mode, bool(list_actions), token
        self.chromium_path, self.chromedriver_path = find_chromium(chromium_path, chromedriver_path)
        self.headless, self.page_timeout = bool(headless), float(page_timeout)
        self.window_size = (int(window_size[0]), int(window_size[1]))
        self._site_kwargs = dict(source=tasks, show_attributes=show_attributes, reward_mode=reward_mode)
        # no url: a site of our own, in-process (sessions are closed by the env, the idle timeout is a backstop)
        self._server: Any = None if url is not None else _in_process_site(self._site_kwargs)
        self.url = (url if url is not None else self._server.base_url).rstrip("/")
        self._clear_episode()

    def _clear_episode(self) -> None:
        """The browser and the episode's state before the first reset."""
        self._driver: Any = None
        self._driver_pids: list[int] = []
        self._sid: str | None = None
        self._state: dict[str, Any] = {}
        self._names: dict[str, tuple[str, bool]] = {}  # available action -> (tag, checked)
        self._page_text = ""
        self._visited: list[str] = []
        self._reset_seed: int | None = None
        # what a snapshot replays: how the episode's session was opened, and the actions of its turns
        self._start_query: dict[str, Any] | None = None
        self._actions: list[Any] = []
        self._replay_query: dict[str, Any] | None = None
        self._faulted = False  # a fault ended the episode

    # ------------------------------------------------------------ the browser
    def _start_driver(self) -> None:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service

        options = webdriver.ChromeOptions()
        options.binary_location = self.chromium_path
        if self.headless:
            options.add_argument("--headless=new")
        for arg in (
            "--no-sandbox",
            "--disable-dev-shm-usage",
            "--disable-gpu",
            "--no-first-run",
            "--disable-extensions",
            "--disable-background-networking",
            "--disable-sync",
            "--no-default-browser-check",
            "--disable-component-update",
            f"--window-size={self.window_size[0]},{self.window_size[1]}",
        ):
            options.add_argument(arg)
        # an explicit driver path: Selenium skips Selenium Manager, so nothing is ever downloaded
        service = Service(executable_path=self.chromedriver_path)
        try:
            self._driver = webdriver.Chrome(service=service, options=options)
        except Exception as err:
            raise RuntimeError(
                f"TurnWebShopBrowser-v0 could not start Chromium ({self.chromium_path}) with {self.chromedriver_path}: "
                f"{type(err).__name__}: {str(err).strip().splitlines()[0] if str(err).strip() else ''}. {CHROMIUM_INSTALL_HINT}"
            ) from err
        self._driver.set_page_load_timeout(self.page_timeout)
        self._driver.set_script_timeout(self.page_timeout)
        pid = getattr(getattr(service, "process", None), "pid", None)
        self._driver_pids = [pid, *_children(pid)] if pid else []

    def _driver_alive(self) -> bool:
        if self._driver is None:
            return False
        try:
            return self._driver.execute_script("return 1;") == 1
        except Exception:
            return False

    def _stop_driver(self) -> None:
        """Quit the browser and driver; kill any process of theirs that outlives ``quit``."""
        driver, self._driver = self._driver, None
        pid = self._driver_pids[0] if self._driver_pids else None
        pids = list(self._driver_pids) + (_children(pid) if pid else [])
        self._driver_pids = []
        if driver is not None:
            try:
                driver.quit()
            except Exception:
                pass  # a crashed browser: the processes below are killed by id
        for p in dict.fromkeys(pids):
            if not _is_chromium(p):
                continue  # gone (and its id maybe reused): only our browser's processes are killed
            try:
                os.kill(p, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                continue
            try:
                os.waitpid(p, os.WNOHANG)  # reap our own child (chromedriver); others are reaped by init
            except ChildProcessError:
                pass

    @property
    def driver(self) -> Any:
        """The Selenium WebDriver (started at the first ``reset``)."""
        return self._driver

    # ------------------------------------------------------------ the site
    def _http(self, method: str, path: str, payload: dict | None = None) -> dict[str, Any]:
        data = json.dumps(payload).encode() if payload is not None else None
        req = urllib.request.Request(
            self.url + path, data=data, method=method, headers={"Content-Type": "application/json", **self._auth()}
        )
        try:
            with urllib.request.urlopen(req, timeout=self.page_timeout) as resp:
                body = resp.read()
        except urllib.error.HTTPError as err:
            raise InfraError(
                f"the WebShop site at {self.url} answered {method} {path} with HTTP {err.code}: {err.read()[:300]!r}"
            ) from None
        except (OSError, http.client.HTTPException) as err:  # refused, reset, timed out
            raise InfraError(
                f"cannot reach the WebShop site at {self.url} ({method} {path}): {getattr(err, 'reason', err)}"
            ) from None
        try:
            return json.loads(body) if body else {}
        except ValueError:
            raise InfraError(
                f"the WebShop site at {self.url} answered {method} {path} with something that is not JSON"
            ) from None

    def _auth(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self._token}"} if self._token is not None else {}

    def _end_session(self) -> None:
        if self._sid is not None:
            try:
                req = urllib.request.Request(f"{self.url}/s/{self._sid}", method="DELETE", headers=self._auth())
                urllib.request.urlopen(req, timeout=5).read()
            except (OSError, urllib.error.HTTPError):
                pass
            self._sid = None

    def _mark_page(self) -> None:
        """Flag the current document, so that :meth:`_wait_for_new_page` can tell its successor."""
        self._driver.execute_script("window.__agentgymOld = true;")

    def _wait_for_new_page(self) -> None:
        from selenium.common.exceptions import WebDriverException
        from selenium.webdriver.support.ui import WebDriverWait

        # a new document lacks the flag; scripts may fail while the navigation is under way
        WebDriverWait(
            self._driver, self.page_timeout, poll_frequency=0.02, ignored_exceptions=(WebDriverException,)
        ).until(
            lambda d: d.execute_script(
                "return window.__agentgymOld === undefined && document.readyState === 'complete';"
            )
        )

    def _read_page(self) -> None:
        """Read the DOM: the clickables, the page text, and the session's state."""
        self._state = self._http("GET", f"/s/{self._sid}/state")
        source = self._driver.page_source
        buttons: dict[str, tuple[str, bool]] = {}
        links: dict[str, tuple[str, bool]] = {}
        radios: dict[str, tuple[str, bool]] = {}
        for tag, name, checked in self._driver.execute_script(_CLICKABLES_JS):
            group = buttons if tag == "BUTTON" else links if tag == "A" else radios
            group.setdefault(name, (tag, bool(checked)))
        names: dict[str, tuple[str, bool]] = {}
        for group in (buttons, links, radios):  # WebShop's order: buttons, product links, options
            for name, value in group.items():
                names.setdefault(name, value)
        self._names = names
        page = self._state["info"]["page"]
        if self.observation_mode == "html":
            text = source
        else:
            chosen = [n for n, (tag, checked) in radios.items() if checked]
            text = format_strings(
                visible_strings(source), self.observation_mode, chosen_options=chosen, visited_asins=self._visited
            )
        if self.list_actions and page != "done":
            text += actions_line(page, list(names))
        self._page_text = text

    # ------------------------------------------------------------ TurnEnv API
    def _reset(self, options: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        if not self._driver_alive():
            self._stop_driver()  # a crashed browser is replaced here
            self._start_driver()
        self._end_session()
        query: dict[str, Any] = {}
        if self._replay_query is not None:  # restore(): the snapshot's episode
            query = dict(self._replay_query)
        elif "goal_index" in options:
            if not is_int(options["goal_index"], 0, numpy=True):  # 1.5, "1" and True are no goal's index
                raise ValueError(f"goal_index must be an integer >= 0, got {options['goal_index']!r}.")
            query["goal"] = int(options["goal_index"])
        elif self._reset_seed is not None:
            query["seed"] = int(self._reset_seed)  # the goal TurnWebShop-v0 draws with this seed
        else:
            query["seed"] = int(self.np_random.integers(2**31))
        self._reset_seed, self._replay_query = None, None
        self._start_query, self._actions, self._faulted = dict(query), [], False
        if self._token is not None:
            query["token"] = self._token  # the site sets its cookie on the start page
        self._sid = self._start_session(query)
        self._visited = []
        self._read_page()
        return INTRO + self._page_text, {}

    def _start_session(self, query: dict[str, Any]) -> str:
        """Open the start page (goal or seed preselected), press Start as a person would; the new session's id."""
        from selenium.webdriver.common.by import By

        driver = self._driver
        driver.get(f"{self.url}/?{urlencode(query)}")
        buttons = driver.find_elements(By.ID, "start")
        if buttons:
            self._mark_page()
            buttons[0].click()
            self._wait_for_new_page()
        path = urlsplit(driver.current_url).path
        if not buttons or not path.startswith("/s/"):
            text = " ".join(driver.find_element(By.TAG_NAME, "body").text.split())[:300]
            if "Bad goal" in text or "Bad seed" in text:  # the caller's argument: as TurnWebShop-v0 says it
                raise ValueError(f"the WebShop site at {self.url} refused the reset: {text}")
            raise RuntimeError(f"the WebShop site at {self.url} did not open a session from its start page: {text!r}")
        return path[len("/s/") :]

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        self._reset_seed = seed
        return super().reset(seed=seed, options=options)

    def step(self, action: Any) -> tuple[str, float, bool, bool, dict[str, Any]]:
        active = self.has_started and not self.episode_over
        result = super().step(action)
        if active and result[4]["exit_status"] != "infra_error":
            self._actions.append(action)  # a snapshot replays it
        return result

    # ------------------------------------------------------------ state key, snapshot, restore, fork
    def _state_fields(self) -> Any:
        """What decides the future: the site session env's own ``state_key`` (its goal, page, query, results page,
        product, chosen options and visited links, as ``TurnWebShop-v0`` defines them); from a site that sends
        none, the goal, the page, its text and the visited links."""
        if not self.has_started:
            return None
        info = self._state.get("info", {})
        if isinstance(info.get("state_key"), str):
            return {"site": info["state_key"]}
        return [int(info.get("goal_index", -1)), info.get("page", "search"), self._page_text, list(self._visited)]

    def state_key(self) -> str | None:
        """The site session env's ``state_key`` (equal to ``TurnWebShop-v0``'s after the same actions: the site counts
        every turn); after a fault, or from a site that sends none, a digest of :meth:`_state_fields`."""
        fields = self._state_fields()
        if isinstance(fields, dict) and not self._faulted:
            return fields["site"]
        return super().state_key() if fields is not None else None

    def snapshot(self) -> bytes:
        """The episode as bytes: how its session was opened, the actions of its turns, the turn count and the RNG
        (a live browser cannot be pickled). :meth:`restore` replays them."""
        state = {
            "started": self.has_started,
            "start": self._start_query,
            "actions": list(self._actions),
            "turn": self.turn,
            "over": self.episode_over,
            "faulted": self._faulted,
            "rng": self.np_random.bit_generator.state,
        }
        return seal((type(self).__qualname__, state))

    def restore(self, snapshot: bytes) -> None:
        """Return to the state :meth:`snapshot` saved by replaying its episode in this env's browser: a new session
        opened as the snapshot's was, then its actions. A fault during the replay is an :class:`InfraError`."""
        kind, state = unseal(snapshot)
        if kind != type(self).__qualname__:
            raise ValueError(f"this snapshot is of a {kind}, not of a {type(self).__qualname__}.")
        if state["started"]:
            self._replay_query = dict(state["start"])
            self.reset()
            for action in state["actions"]:
                *_, info = self.step(action)
                if info["exit_status"] == "infra_error":
                    raise InfraError(
                        f"the browser or the site at {self.url} failed while a snapshot was replayed; call restore() again."
                    )
            self.turn, self._episode_over, self._faulted = (
                int(state["turn"]),
                bool(state["over"]),
                bool(state["faulted"]),
            )
        else:
            self._end_session()
            self._started, self._episode_over, self.turn = False, True, 0
            self._state, self._names, self._page_text, self._visited, self._actions = {}, {}, "", [], []
        self.np_random.bit_generator.state = state["rng"]

    def fork(self, n: int) -> list["TurnWebShopBrowserEnv"]:
        """``n`` new browser envs, made with this env's arguments (each with its own browser, and its own site
        unless ``url`` was given), restored to this env's state. Close them when done."""
        return fork_by_replay(self, n)

    def _extra_info(self) -> dict[str, Any]:
        info = self._state.get("info", {})
        return {
            "page": info.get("page", "search"),
            "goal_index": int(info.get("goal_index", -1)),
            "has_search_bar": bool(info.get("has_search_bar", False)),
            "purchased_asin": info.get("purchased_asin", ""),
            "reward_breakdown": dict(info.get("reward_breakdown") or {}),
        }

    def _success(self) -> bool:
        return bool(self._state.get("info", {}).get("success", False))

    def _score(self) -> float:
        return float(self._state.get("info", {}).get("score", 0.0))

    def _available_actions(self) -> list[str]:
        return list(self._names) if self.has_started else []

    def _state_text(self) -> str:
        return self._page_text

    def _hint(self) -> str:
        if self._state.get("info", {}).get("page") == "search":
            return " Allowed now: search[your query]."
        names = list(self._names)
        shown = ", ".join(f"click[{snippet(n, 40)}]" for n in names[:12])
        more = f" and {len(names) - 12} more" if len(names) > 12 else ""
        return f" Allowed now: {shown}{more}."

    def parse_action(self, response: str) -> Any:
        """As ``TurnWebShop-v0``: an exact ``click[name]`` first, then ``search[...]``/``click[...]``."""
        names = self._names
        exact = exact_click_name(response, names)
        if exact is not None:
            return ("click", exact)
        action = parse_bracket_action(response, ("search", "click"))
        if isinstance(action, InvalidAction):
            return InvalidAction(action.message + self._hint())
        if action.verb == "search":
            return ("search", action.argument)
        name = action.argument.lower()
        if name in names:
            return ("click", name)
        low = response.lower()
        start, end = low.find("click["), low.rfind("]")
        if start >= 0 and end > start + 6:
            greedy = response[start + 6 : end].strip().lower()
            if greedy in names:
                return ("click", greedy)
        if self._state.get("info", {}).get("page") == "search":
            return InvalidAction(
                "There is nothing to click on the search page; write search[your query]." + self._hint()
            )
        return InvalidAction(f"click[{snippet(action.argument)}] is not on this page." + self._hint())

    def _invalid_outcome(self, problem: InvalidAction) -> TurnOutcome:
        """The in-process env's invalid turn; the site's session env takes one too (an empty click, which no page
        offers), so that it counts the same turns as this env and its ``state_key`` stays this env's."""
        try:
            self._report_invalid_turn()
        except InfraError:
            self._faulted = True
            raise
        return super()._invalid_outcome(problem)

    def _report_invalid_turn(self) -> None:
        path = f"/s/{self._sid}/click?{urlencode({'name': ''})}"
        opener = urllib.request.build_opener(_KeepRedirect)  # the answer is a redirect to the page, which is not needed
        try:
            with opener.open(
                urllib.request.Request(self.url + path, headers=self._auth()), timeout=self.page_timeout
            ) as resp:
                resp.read()
        except urllib.error.HTTPError as err:
            if not 300 <= err.code < 400:
                raise InfraError(f"the WebShop site at {self.url} answered GET {path} with HTTP {err.code}") from None
        except (OSError, http.client.HTTPException) as err:
            raise InfraError(
                f"cannot reach the WebShop site at {self.url} (GET {path}): {getattr(err, 'reason', err)}"
            ) from None
        self._state = self._http("GET", f"/s/{self._sid}/state")

    def _act(self, action: tuple[str, str]) -> TurnOutcome:
        try:
            return self._act_in_browser(action)
        except InfraError:
            self._faulted = True
            raise
        except _browser_faults() as err:
            self._faulted = True
            text = getattr(err, "msg", None) or str(err) or type(err).__name__
            first = text.strip().splitlines()[0] if text.strip() else type(err).__name__
            raise InfraError(
                f"Chromium or chromedriver stopped answering; reset() starts a new browser ({type(err).__name__}: {first[:160]})"
            ) from err

    def _act_in_browser(self, action: tuple[str, str]) -> TurnOutcome:
        from selenium.webdriver.common.by import By

        verb, arg = action
        driver = self._driver
        turn_before = int(self._state["info"]["turn"])
        page = self._state["info"]["page"]
        self._mark_page()
        if verb == "search":
            typable = page == "search" and all(c.isprintable() and ord(c) < 0x10000 for c in arg)
            if typable:  # type it, as a person would
                box = driver.find_element(By.ID, "search_input")
                box.clear()
                box.send_keys(arg)
                driver.execute_script(_FIND_JS, "search").click()
                self._wait_for_new_page()
            else:  # the exact string, posted by the page itself (a text box drops newlines; chromedriver types only the BMP)
                body = urlencode({"search_query": arg.encode("utf-8", errors="surrogatepass")})
                driver.execute_async_script(_POST_JS, f"/s/{self._sid}/search", body)
                driver.get(f"{self.url}/s/{self._sid}")
        elif verb == "click" and page == "search" and arg == "search":
            # listed and ignored, as in WebShop (the Search button needs a query); the site still counts the turn
            driver.get(f"{self.url}/s/{self._sid}/click?{urlencode({'name': 'search'})}")
        else:
            element = driver.execute_script(_FIND_JS, arg)
            tag, checked = self._names[arg]
            if tag == "A" and element is not None:
                self._visited = (
                    [*self._visited, element.text.upper()]
                    if element.text.upper() not in self._visited
                    else self._visited
                )
            if tag == "INPUT" and checked:  # a checked radio sends no change event: follow its link instead
                driver.get(self.url + element.get_attribute("data-url"))
            else:
                element.click()
                self._wait_for_new_page()
            if arg == "back to search":
                self._visited = []  # the text env starts over on Back to Search
        self._read_page()
        info = self._state["info"]
        reached = int(info["turn"]) == turn_before + 1
        terminated = info["page"] == "done"
        reward = float(info["score"]) if terminated and reached else 0.0
        components = info.get("reward_components") if terminated and reached else None
        if not isinstance(components, dict) or set(components) - set(REWARD_COMPONENTS):
            components = None  # a site that sends none: the reward stays whole under TurnEnv's default name
        return TurnOutcome(
            self._page_text, reward, terminated, bool(info["action_is_effective"]) and reached, components=components
        )

    def expert_action(self) -> str:
        """The oracle shopper's next action, from the site's ``/state`` (an in-process site, or one run with ``--expert``)."""
        if self._sid is None:
            return "click[buy now]"
        action = self._state.get("expert_action")
        if action is None:
            raise RuntimeError(
                f"the site at {self.url} does not expose the oracle: start it with `agentgym-turn serve webshop --expert`, or give no url."
            )
        return str(action)

    def close(self) -> None:
        """End the session, quit Chromium and chromedriver (no process left behind) and stop an in-process site."""
        self._end_session()
        self._stop_driver()
        if self._server is not None:
            self._server.stop()
            self._server = None
        super().close()

    def __del__(self) -> None:
        try:
            self._stop_driver()
        except Exception:
            pass


def screenshot_item_page(
    path: str | os.PathLike, *, goal_index: int = 3, num_products: int = 1000, env: TurnWebShopBrowserEnv | None = None
) -> Path:
    """Play the oracle to the goal's product page, pick the first option, and save a PNG of the page.

    The same code path as the browser test (``TurnWebShopBrowserEnv`` with ``expert_action``); with
    ``env`` that env is used (and left open), else one is made for ``num_products`` and closed.
    """
    own = env is None
    if env is None:
        env = TurnWebShopBrowserEnv(num_products=num_products, goal_split="all", window_size=(1100, 900))
    try:
        _, info = env.reset(options={"goal_index": goal_index})
        for _ in range(10):
            if info["page"] == "item":
                break
            _, _, _, _, info = env.step(env.expert_action())
        action = env.expert_action()
        if action != "click[buy now]":
            env.step(action)  # one option picked, so the page shows a chosen radio
        out = Path(path)
        out.parent.mkdir(parents=True, exist_ok=True)
        if not env.driver.save_screenshot(str(out)):
            raise RuntimeError(f"Chromium could not write {out}.")
        return out
    finally:
        if own:
            env.close()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m agentgym_turn.webshop.browser",
        description="Screenshots of the WebShop site through TurnWebShopBrowser-v0.",
    )
    parser.add_argument("--screenshot", metavar="PNG", required=True, help="where to write the item page screenshot")
    parser.add_argument("--goal-index", type=int, default=3, help="goal whose product page is shown (default 3)")
    parser.add_argument("--num-products", type=int, default=1000, help="generated catalog size (default 1000)")
    args = parser.parse_args(list(argv) if argv is not None else None)
    out = screenshot_item_page(args.screenshot, goal_index=args.goal_index, num_products=args.num_products)
    print(f"wrote {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
