"""A Gymnasium env that plays a served env (``gymnasium.make("agentgym_turn/Remote-v0", ...)``).

Code written for a local env runs unchanged: ``reset``, ``step`` and ``render`` return what the
served env returns (the same strings, rewards, ``terminated``/``truncated`` and ``info`` dicts),
the spaces are ``TurnText`` with the served env's lengths, and ``unwrapped.expert_action()`` asks
the server's env. One instance is one OpenEnv ``/ws`` session (one env on the server), opened at
the first ``reset``; a ``reset`` after the session was lost (server restart, idle timeout) opens a
new one. Every wait is bounded, never a hang: at ``reset`` a stopped or silent server is a
``ConnectionError`` or ``TimeoutError`` that names the URL and says what to do; during ``step`` a server
that is gone (connection refused or reset, the WebSocket closed, no answer within ``message_timeout``, an
answer outside the protocol) ends the episode as a fault outside the policy's control, as a local env
whose service failed does: the turn says the served env is gone, its reward is 0.0, ``truncated`` is
True and ``info`` keeps the last keys the server sent with ``exit_status="infra_error"`` and
``reward_valid=False`` (:mod:`~agentgym_turn.core.contract`).

A server at its session cap refuses a new session at once; ``reset`` then waits and retries, with exponential
backoff, jitter from the env's own random stream and at least the server's ``Retry-After``, for up to
``capacity_wait_s`` seconds in all (30 by default), and then raises :class:`ServerAtCapacityError` (a
``ConnectionError``) naming the cap.

Groups: ``reset(options={"group_id": "g", "task_id": 0})`` plays task 0 of group ``g``, the same task on every
server process or machine (the server derives the seed from the two with
:func:`~agentgym_turn.remote.protocol.group_seed`, unless ``seed=`` is given too, which then wins). A later
``reset()`` with neither seed nor group options (what a vector env's autoreset sends) plays the group's next task,
so members that reset together stay aligned; ``options={"group_id": None}`` leaves the group. Each process records
the digest of the first observation of each (served id, group, task) one of its clients reset into, and a member
whose first observation differs raises :class:`RemoteEnvError` with code ``GROUP_MISMATCH``.

``snapshot()`` / ``restore()`` / ``fork(n)`` work by replay: a snapshot is the seed and options of the last
seeded ``reset`` and every reset and action since, and restoring it plays them again in a new session on
the server (served envs are deterministic given the seed and the actions).

Differences from a local env, by design: the turn limit lives on the server (``TimeLimit`` of the
served id; :attr:`RemoteTurnEnv.max_episode_steps` reports it); the env holds a live session, so
it cannot be pickled or copied mid-episode (pickle a factory instead); actions travel as JSON, so a
``str`` (or ``bytes``, decoded as the local env decodes them) arrives unchanged and another value
arrives as its JSON form; ``info`` values that are not JSON data (tuples, NumPy values) arrive as
JSON (lists, numbers). The envs of this suite put only JSON data in ``info``.
"""

from __future__ import annotations

import collections
import hashlib
import inspect
import json
import math
import random
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

import gymnasium as gym

from ..core.args import is_number, token_arg
from ..core.contract import fork_by_replay, state_digest
from ..core.snapshots import seal, unseal
from ..core.spaces import TurnText
from .protocol import (
    ACTION_FIELD,
    MAX_GROUP_ID_LENGTH,
    SHOWN_REWARD_KEY,
    ErrorCode,
    dumps,
    parse_observation_payload,
    served_spec_from_schemas,
)

#: The registered id of the client env.
REMOTE_ENV_ID = "agentgym_turn/Remote-v0"
#: Largest frame the client accepts from the server (observations are bounded by the served space).
_CLIENT_MAX_FRAME = 256 << 20

#: What the server's WebSocket close codes mean.
_CLOSE_CODES = {
    1000: "closed normally",
    1001: "the server ended it",
    1009: "a message was too big",
    1011: "the server failed",
    1012: "the server is shutting down or restarting",
    1013: "the server is at capacity",
}

#: Error frame codes (and ``PROTOCOL``: an answer outside the protocol) that mean the served env is gone or broken:
#: during ``step`` they end the episode with ``exit_status="infra_error"`` instead of raising.
_INFRA_CODES = frozenset({"PROTOCOL", "CAPACITY_REACHED", "FACTORY_ERROR", "SESSION_ERROR"})
#: How much of a fault's cause the infra-error observation quotes.
_CAUSE_CHARS = 300

#: Exceptions of the served env that the client raises as the same type (others: RemoteEnvError).
_SAME_TYPE = {
    "ValueError": ValueError,
    "TypeError": TypeError,
    "RuntimeError": RuntimeError,
    "KeyError": KeyError,
    "IndexError": IndexError,
}

#: Capacity backoff: the first wait and the longest one (seconds), and the most jitter (a fraction added on top).
_BACKOFF_FIRST_S, _BACKOFF_MAX_S, _BACKOFF_JITTER = 0.25, 8.0, 0.5
#: The longest server ``Retry-After`` the client honours (seconds); a larger hint is read as this.
_MAX_RETRY_AFTER_S = 60.0
#: Reset options the client sends as the protocol's group fields instead of as the env's options.
_GROUP_OPTIONS = ("group_id", "task_id")
#: (served id, group, task) first observations remembered per process; the oldest are forgotten first.
_GROUP_RECORD_SIZE = 1 << 16


class RemoteEnvError(RuntimeError):
    """The server answered with an OpenEnv error frame (``code`` holds its code, ``details`` the frame's other
    fields), or the client found a served answer inconsistent (``PROTOCOL``, ``GROUP_MISMATCH``)."""

    def __init__(self, message: str, code: str, details: dict[str, Any] | None = None):
        super().__init__(message)
        self.code = code
        self.details = dict(details or {})


class ServerAtCapacityError(ConnectionError):
    """``reset`` could not open a session: the server stayed at its session cap for ``capacity_wait_s``.

    ``max_sessions`` and ``active_sessions`` are the server's numbers (``None`` when it did not say them)."""

    def __init__(self, message: str, max_sessions: int | None = None, active_sessions: int | None = None):
        super().__init__(message)
        self.max_sessions, self.active_sessions = max_sessions, active_sessions


class ServerUnreachableError(ConnectionError):
    """The server could not be reached, or dropped the connection without a close frame or while going away
    (stopped, restarting, a network fault): what ``reset`` waits out for ``resume_wait_s`` before raising."""


#: Close codes of a server going away (1001) or restarting (1012), worth reconnecting after.
_GOING_AWAY = (1001, 1012)


def capacity_backoff(attempt: int, retry_after: float | None, rng: random.Random) -> float:
    """Seconds to wait before retry ``attempt`` (0 first) of a session the server refused at its cap.

    Exponential from 0.25 s, doubling up to 8 s; never less than the server's ``retry_after`` (seconds, itself
    bounded by 60); then times 1 to 1.5, drawn from ``rng``, so that clients refused together retry apart.
    """
    wait = min(_BACKOFF_MAX_S, _BACKOFF_FIRST_S * 2.0 ** min(max(int(attempt), 0), 16))
    if is_number(retry_after) and retry_after > 0:
        wait = max(wait, min(float(retry_after), _MAX_RETRY_AFTER_S))
    return wait * (1.0 + _BACKOFF_JITTER * rng.random())


def _retry_after(value: Any) -> float | None:
    """A ``Retry-After`` header's seconds (the HTTP-date form is not used by these servers: ``None``)."""
    try:
        seconds = float(str(value).strip())
    except (TypeError, ValueError):
        return None
    return seconds if seconds >= 0 else None


class _GroupRecord:
    """The digest of the first observation of each (served id, group, task) that a client in this process reset
    into: a later member whose first observation differs is told at once. Bounded; thread-safe."""

    def __init__(self, size: int):
        self._size = size
        self._digests: collections.OrderedDict[tuple[str, str, int], str] = collections.OrderedDict()
        self._lock = threading.Lock()

    def check(self, key: tuple[str, str, int], digest: str) -> str | None:
        """Record ``digest`` for ``key`` if it is the first; return the recorded one where it differs, else ``None``."""
        with self._lock:
            known = self._digests.get(key)
            if known is None:
                self._digests[key] = digest
                if len(self._digests) > self._size:
                    self._digests.popitem(last=False)
                return None
            self._digests.move_to_end(key)
            return None if known == digest else known

    def clear(self) -> None:
        with self._lock:
            self._digests.clear()


#: This process's record of group first observations (see :class:`_GroupRecord`).
GROUP_RECORD = _GroupRecord(_GROUP_RECORD_SIZE)


def _is_local(host: str | None) -> bool:
    return host in ("localhost", "127.0.0.1", "::1") or (host or "").startswith("127.")


def _urls(base_url: str) -> tuple[str, str]:
    """``(http_base, ws_url)`` of a base URL given as http(s):// or ws(s)://."""
    base = base_url.strip().rstrip("/")
    scheme = base.split("://", 1)[0].lower() if "://" in base else ""
    if scheme not in ("http", "https", "ws", "wss"):
        raise ValueError(f"base_url must start with http://, https://, ws:// or wss://, got {base_url!r}.")
    if base.endswith("/ws"):
        base = base[: -len("/ws")]
    rest = base.split("://", 1)[1]
    secure = scheme in ("https", "wss")
    return f"{'https' if secure else 'http'}://{rest}", f"{'wss' if secure else 'ws'}://{rest}/ws"


def _check_client_settings(
    *, connect_timeout: Any, message_timeout: Any, capacity_wait_s: Any, resume_wait_s: Any, token: Any
) -> None:
    """Raise a ValueError naming the first of ``RemoteTurnEnv``'s settings that is out of its range."""
    for name, value in (("connect_timeout", connect_timeout), ("message_timeout", message_timeout)):
        if not is_number(value) or not value > 0:
            raise ValueError(f"{name} must be a positive number of seconds, got {value!r}.")
    for name, value in (("capacity_wait_s", capacity_wait_s), ("resume_wait_s", resume_wait_s)):
        if not is_number(value) or not 0 <= value < float("inf"):
            raise ValueError(f"{name} must be a finite number of seconds >= 0, got {value!r}.")
    token_arg(token, "the server's --token")


class RemoteTurnEnv(gym.Env[str, str]):
    """A served text-turn env, behind Gymnasium's API.

    Args:
        base_url: The server, e.g. ``"http://127.0.0.1:8000"`` (``agentgym-turn serve env ID``
            prints it); ``ws://`` and a trailing ``/ws`` are accepted too.
        env_id: The id you expect the server to serve; a different one is a ``ValueError``
            (``None``: whatever it serves).
        render_mode: ``None`` or ``"ansi"`` (the served env's render, fetched at ``render()``).
        connect_timeout: Seconds to reach the server (``/schema`` at construction, ``/ws`` at reset).
        message_timeout: Seconds to wait for each answer (a step of a slow env included).
        token: The server's token (``agentgym-turn serve env --token`` or ``AGENTGYM_TOKEN``), sent as
            ``Authorization: Bearer <token>`` on every request and the ``/ws`` handshake; ``None``: none.
        capacity_wait_s: Most seconds ``reset`` spends retrying a session the server refused at its session cap
            (backoff with jitter, at least the server's ``Retry-After``); then :class:`ServerAtCapacityError`.
            ``0``: raise at the first refusal.
        resume_wait_s: Most seconds a ``reset`` spends reconnecting to a server it cannot reach (stopped or restarting:
            then :class:`ServerUnreachableError`), and a ``step`` spends resuming its episode after the connection was lost (the
            server restarted, the socket dropped, the session idled out during a long generation): it reconnects
            with backoff and replays the episode's seeded reset and actions in a new session (envs are deterministic
            given both), checks the replay ends on the observation it last returned, and sends the step again. Only
            then, or for an episode begun with ``reset(seed=None)`` outside a group, does the turn end as an
            ``infra_error``. ``0``: no resume.
        reset_options: Options every ``reset`` sends to the served env, under the call's own (e.g. TurnSokoban's
            ``{"split": "test"}``: one served env plays a trainer's training and held-out tasks, each client made
            with its split); not group options.

    Reset options ``group_id`` (a string) and ``task_id`` (an integer >= 0, 0 unless given) make the episode task
    ``task_id`` of that group: every member plays the same task, whichever server serves it. A later ``reset()``
    with neither seed nor group options plays the group's next task (so a vector env's autoreset keeps members
    aligned); ``options={"group_id": None}`` leaves the group.

    Example::

        env = gymnasium.make("agentgym_turn/Remote-v0", base_url="http://127.0.0.1:8000", env_id="TurnSokoban-v0")
        observation, info = env.reset(seed=0)
        observation, info = env.reset(options={"group_id": "step-7/prompt-3", "task_id": 0})  # a GRPO group's task
    """

    metadata: dict[str, Any] = {"render_modes": ["ansi"], "render_fps": 4}
    #: A record of a served episode names the server: ``replay`` calls it only when told to (``--allow-external``).
    external_kwargs = frozenset({"base_url"})
    #: Why it cannot be pickled (``check_turn_env`` then skips that check with this reason): pickle a factory instead.
    unpicklable_because = "it holds a live session on its server"

    def __init__(
        self,
        base_url: str,
        env_id: str | None = None,
        render_mode: str | None = None,
        *,
        connect_timeout: float = 10.0,
        message_timeout: float = 120.0,
        token: str | None = None,
        capacity_wait_s: float = 30.0,
        resume_wait_s: float = 30.0,
        reset_options: dict[str, Any] | None = None,
    ):
        if reset_options is not None and (
            not isinstance(reset_options, dict) or any(name in reset_options for name in _GROUP_OPTIONS)
        ):
            raise ValueError(
                f"reset_options must be a dict of the served env's reset options (not {sorted(_GROUP_OPTIONS)}), "
                f"got {reset_options!r}."
            )
        #: Options every reset sends, under the call's own.
        self.reset_options: dict[str, Any] = dict(reset_options or {})
        _check_client_settings(
            connect_timeout=connect_timeout,
            message_timeout=message_timeout,
            capacity_wait_s=capacity_wait_s,
            resume_wait_s=resume_wait_s,
            token=token,
        )
        self.base_url, self.ws_url = _urls(base_url)
        # what fork(n) makes its envs with
        self._init_args: dict[str, Any] = dict(
            base_url=base_url,
            env_id=env_id,
            render_mode=render_mode,
            connect_timeout=connect_timeout,
            message_timeout=message_timeout,
            token=token,
            capacity_wait_s=capacity_wait_s,
            resume_wait_s=resume_wait_s,
            reset_options=reset_options,
        )
        self._headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
        self.connect_timeout, self.message_timeout = float(connect_timeout), float(message_timeout)
        self.capacity_wait_s, self.resume_wait_s = float(capacity_wait_s), float(resume_wait_s)
        self._clear_session()
        self.served_env_id = env_id or "ENV_ID"  # what the hints name until the server says
        self._adopt(served_spec_from_schemas(self._get_json("/schema")), env_id, render_mode)

    def _clear_session(self) -> None:
        """The connection's and the episode's state before the first reset."""
        self._last_info: dict[str, Any] | None = None  # the server's last info (the keys of an infra-error turn)
        self._fault_over = False  # the last step was an infra-error turn: the episode is over
        self._log: list[tuple[Any, ...]] | None = (
            None  # ("reset", seed, options) and ("step", action) since the last seeded reset
        )
        self._last_text: str | None = None  # the last observation, which a resumed episode must show again
        self._resuming = False  # replaying to resume: a lost connection then is not resumed again
        #: Episodes this client resumed after a lost connection (a dropped socket, a server restart, an idle timeout).
        self.resumed = 0
        # the backoff's jitter: this env's own stream, seeded from the OS so that clients refused together retry apart
        self._backoff_rng = random.Random()
        self._group: tuple[str, int] | None = None  # (group_id, task_id) of the last reset, while in a group
        self._ws: Any = None
        self._close_note = ""

    def _adopt(self, spec: dict[str, Any], env_id: str | None, render_mode: str | None) -> None:
        """Take the served env's id, limits, spaces and render modes from its schema; check ``env_id`` and ``render_mode``."""
        if env_id is not None and env_id != spec["env_id"]:
            raise ValueError(
                f"the server at {self.base_url} serves {spec['env_id']!r}, not env_id={env_id!r}; "
                f"start `agentgym-turn serve env {env_id}` or pass env_id={spec['env_id']!r}."
            )
        self.served_env_id: str = spec["env_id"]
        #: The served id's turn limit (its ``TimeLimit`` runs on the server).
        self.max_episode_steps: int | None = spec["max_episode_steps"]
        self.metadata = {
            "render_modes": [m for m in spec["render_modes"] if m == "ansi"],
            "render_fps": spec["render_fps"],
        }
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(
                f"render_mode={render_mode!r} is not supported by the served {self.served_env_id}; choose one of {self.metadata['render_modes']} or None."
            )
        self.render_mode = render_mode
        #: The server's digest of its id, kwargs and turn limit (``/schema``): equal digests, the same configuration.
        self.config_digest: str | None = spec["config_digest"]
        self._resume_note = ""  # why the last resume was refused (another configuration), for the fault turn
        self.action_space = TurnText(spec["max_action_length"])
        self.observation_space = TurnText(spec["max_observation_length"])

    # ------------------------------------------------------------------ transport
    def _hint(self) -> str:
        port = urllib.parse.urlsplit(self.base_url).port or 8000
        return f"start it with `agentgym-turn serve env {self.served_env_id} --port {port}` or pass the right base_url"

    def _get_json(self, path: str) -> Any:
        url = self.base_url + path
        handlers = [urllib.request.ProxyHandler({})] if _is_local(urllib.parse.urlsplit(url).hostname) else []
        opener = urllib.request.build_opener(*handlers)
        try:
            with opener.open(
                urllib.request.Request(url, headers=self._headers), timeout=self.connect_timeout
            ) as response:
                return json.loads(response.read())
        except urllib.error.HTTPError as err:
            if err.code == 401:
                given = "was refused" if self._headers else "is needed: pass token=..."
                raise ConnectionError(
                    f"the env server at {self.base_url} needs its token (HTTP 401); the token {given}."
                ) from None
            raise ConnectionError(
                f"the env server at {self.base_url} answered {path} with HTTP {err.code}; is it an agentgym-turn env server?"
            ) from None
        except (urllib.error.URLError, OSError) as err:
            reason = getattr(err, "reason", err)
            raise ConnectionError(
                f"cannot reach the env server at {self.base_url} ({reason}); {self._hint()}."
            ) from None
        except ValueError:
            raise ConnectionError(
                f"the env server at {self.base_url} answered {path} with something that is not JSON; is it an agentgym-turn env server?"
            ) from None

    def _connect(self) -> None:
        from websockets.sync.client import connect

        kwargs: dict[str, Any] = {
            "open_timeout": self.connect_timeout,
            "close_timeout": 2.0,
            "max_size": _CLIENT_MAX_FRAME,
        }
        if self._headers:
            kwargs["additional_headers"] = dict(self._headers)
        accepted = inspect.signature(connect).parameters
        if "proxy" in accepted and _is_local(urllib.parse.urlsplit(self.ws_url).hostname):
            kwargs["proxy"] = None  # websockets >= 15 reads proxy settings from the environment
        if "legacy" in accepted:
            kwargs["legacy"] = True  # websockets >= 17: a connection held across calls, not a with-block
        from websockets.exceptions import InvalidStatus

        try:
            self._ws = connect(self.ws_url, **kwargs)
        except InvalidStatus as err:
            response = err.response
            if response.status_code == 503:  # a server (or a proxy before it) with no place for one more session
                details = {"retry_after_s": _retry_after(response.headers.get("Retry-After"))}
                try:
                    body = json.loads(response.body or b"{}")
                    details.update({k: body[k] for k in ("active_sessions", "max_sessions") if k in body})
                except (ValueError, TypeError):
                    pass
                raise RemoteEnvError(
                    f"the env server at {self.base_url} refused a session with HTTP 503 (at capacity)",
                    ErrorCode.CAPACITY_REACHED,
                    details,
                ) from None
            raise ConnectionError(
                f"the env server at {self.base_url} refused a session ({err}); {self._hint()}."
            ) from None
        except (OSError, TimeoutError) as err:
            raise ServerUnreachableError(f"cannot open a session at {self.ws_url} ({err}); {self._hint()}.") from None
        except Exception as err:  # handshake refused (websockets.InvalidHandshake and kin)
            raise ConnectionError(
                f"the env server at {self.base_url} refused a session ({err}); {self._hint()}."
            ) from None
        self._close_note = ""

    def _drop(self, note: str) -> None:
        """Forget the connection (closing it); later calls say ``note``; reset reconnects."""
        ws, self._ws = self._ws, None
        self._close_note = note
        if ws is not None:
            try:
                ws.close()
            except Exception:
                pass

    def _closed_error(self, err: Exception) -> Exception:
        rcvd = getattr(err, "rcvd", None)
        if rcvd is None:
            why = "without a close frame: the server stopped or the network dropped"
        else:
            why = (
                f"code {rcvd.code}, {_CLOSE_CODES.get(rcvd.code, 'closed')}{': ' + rcvd.reason if rcvd.reason else ''}"
            )
        note = f"the env server at {self.base_url} closed the session ({why})"
        self._drop(note)
        if rcvd is not None and rcvd.code == 1013:  # "try again later": refused at the cap, its error frame lost
            return RemoteEnvError(note, ErrorCode.CAPACITY_REACHED)
        lost = ServerUnreachableError if rcvd is None or rcvd.code in _GOING_AWAY else ConnectionError
        return lost(f"{note}; the episode is lost. Check that the server runs ({self._hint()}), then call reset().")

    def _request(self, message: dict[str, Any], *, new_session_ok: bool = False) -> dict[str, Any]:
        """Send one message and return the server's answer frame (an error frame is raised)."""
        from websockets.exceptions import ConnectionClosed

        if self._ws is None:
            if not new_session_ok:
                note = self._close_note or "no session is open"
                raise ConnectionError(f"{note}; call reset() to start a new session at {self.ws_url}.")
            self._connect()
        ws = self._ws
        try:
            ws.send(dumps(message))
        except ConnectionClosed as err:
            frame = self._queued_frame(ws)  # a refused session sends its error frame before closing
            if frame is None:
                raise self._closed_error(err) from None
        else:
            try:
                raw = ws.recv(timeout=self.message_timeout)
            except TimeoutError:
                # The answer may still come later; a fresh session keeps requests and answers paired.
                self._drop(f"the previous request to {self.ws_url} timed out")
                raise TimeoutError(
                    f"the env server at {self.base_url} did not answer a {message['type']!r} within {self.message_timeout:g} s; "
                    "the session is dropped. Check the server's load, or raise message_timeout, then call reset()."
                ) from None
            except ConnectionClosed as err:
                frame = self._queued_frame(ws)
                if frame is None:
                    raise self._closed_error(err) from None
            else:
                try:
                    frame = json.loads(raw)
                except ValueError:
                    raise RemoteEnvError(
                        f"the env server at {self.base_url} sent a frame that is not JSON: {str(raw)[:200]}", "PROTOCOL"
                    ) from None
        if not isinstance(frame, dict):
            raise RemoteEnvError(
                f"the env server at {self.base_url} sent a non-object frame: {str(frame)[:200]}", "PROTOCOL"
            )
        if frame.get("type") == "error":
            self._raise_error(frame.get("data") or {})
        return frame

    def _queued_frame(self, ws: Any) -> dict[str, Any] | None:
        try:
            return json.loads(ws.recv(timeout=0.5))
        except Exception:
            return None

    def _raise_error(self, data: dict[str, Any]) -> None:
        code, text = str(data.get("code", "UNKNOWN")), str(data.get("message", "unknown error"))
        if code == "EXECUTION_ERROR" and data.get("exception") in _SAME_TYPE:
            raise _SAME_TYPE[data["exception"]](text)  # the local env raises this very error
        if code in ("CAPACITY_REACHED", "FACTORY_ERROR", "SESSION_ERROR"):
            note = f"the env server at {self.base_url} ended the session ({code}: {text})"
            self._drop(note)
            if code == "SESSION_ERROR":
                raise ConnectionError(f"{note}; the episode is lost. Call reset() to start a new session.")
        if code == "VALIDATION_ERROR" and data.get("errors"):
            text = f"{text}: {json.dumps(data['errors'])[:500]}"
        raise RemoteEnvError(
            f"the env server at {self.base_url} answered {code}: {text}",
            code,
            {k: v for k, v in data.items() if k not in ("code", "message")},
        )

    # ------------------------------------------------------------------ Gymnasium API
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        """Start an episode (opening a session first if none is open). ``options`` may hold ``group_id`` and
        ``task_id`` (see the class docstring); the other options, over ``reset_options``, go to the served env's
        ``reset``."""
        if self.reset_options:
            options = {**self.reset_options, **(options or {})}
        env_options, group = self._group_of(seed, options)
        super().reset(seed=seed)
        data: dict[str, Any] = {"seed": seed}
        if env_options is not None:
            data["options"] = env_options
        if group is not None:
            data["group_id"], data["task_id"] = group
        frame = self._reset_in_a_session({"type": "reset", "data": data})
        text, _, _, _, info = self._observation(frame)
        self._shown = None
        self._last_info, self._fault_over, self._last_text = dict(info), False, text
        self._group = group
        if seed is not None or group is not None:  # a group's task is replayable: its seed is the group's
            self._log = []
        if self._log is not None:
            logged = None if env_options is None else dict(env_options)
            if group is not None:
                logged = {**(logged or {}), "group_id": group[0], "task_id": group[1]}
            self._log.append(("reset", seed, logged))
        if group is not None:
            self._check_group(group, text)
        return text, info

    def _group_of(
        self, seed: int | None, options: dict[str, Any] | None
    ) -> tuple[dict[str, Any] | None, tuple[str, int] | None]:
        """``(the env's options, (group_id, task_id) or None)`` of one reset: the group options given, or the group's
        next task for a reset with neither seed nor group options, or no group. Bad group options: ``ValueError``."""
        if options is None or not any(name in options for name in _GROUP_OPTIONS):
            if seed is None and self._group is not None:
                return options, (self._group[0], self._group[1] + 1)
            return options, None
        rest = {k: v for k, v in options.items() if k not in _GROUP_OPTIONS}
        group_id = options["group_id"] if "group_id" in options else (self._group[0] if self._group else None)
        task_id = options.get("task_id")
        if group_id is None:
            if task_id is not None:
                raise ValueError(f"reset option task_id={task_id!r} numbers a group's tasks: pass group_id too.")
            return rest or None, None
        if not isinstance(group_id, str) or not 0 < len(group_id) <= MAX_GROUP_ID_LENGTH:
            raise ValueError(
                f"reset option group_id must be a non-empty string of at most {MAX_GROUP_ID_LENGTH} characters, got {group_id!r}."
            )
        if task_id is None:
            task_id = 0
        elif isinstance(task_id, bool) or not isinstance(task_id, int) or task_id < 0:
            raise ValueError(f"reset option task_id must be an integer >= 0, got {task_id!r}.")
        return rest or None, (group_id, int(task_id))

    def _check_group(self, group: tuple[str, int], text: str) -> None:
        digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
        known = GROUP_RECORD.check((self.served_env_id, group[0], group[1]), digest)
        if known is not None:
            raise RemoteEnvError(
                f"group {group[0]!r}, task {group[1]} of {self.served_env_id}: this member's first observation (sha256 "
                f"{digest[:12]}) differs from the one another member in this process got (sha256 {known[:12]}). Members of "
                "a group must play servers of the same id and --kwarg, and send the same seed or none.",
                "GROUP_MISMATCH",
            )

    def _reset_in_a_session(self, message: dict[str, Any]) -> dict[str, Any]:
        """Send a reset, opening a session if none is open. A session refused at the server's cap is retried with
        :func:`capacity_backoff` for up to ``capacity_wait_s`` seconds, then :class:`ServerAtCapacityError`; a server
        that cannot be reached (stopped, restarting) for up to ``resume_wait_s`` seconds, then that error."""
        deadlines: dict[str, float] = {}
        attempt = 0
        while True:
            try:
                return self._reset_request(message)
            except RemoteEnvError as err:
                if err.code != ErrorCode.CAPACITY_REACHED:
                    raise
                refusal, budget, retry_after = err, self.capacity_wait_s, err.details.get("retry_after_s")
            except ServerUnreachableError as err:
                refusal, budget, retry_after = (
                    err,
                    0.0 if self._resuming else self.resume_wait_s,
                    None,
                )  # a resume has its own deadline
            now = time.monotonic()
            kind = "capacity" if isinstance(refusal, RemoteEnvError) else "unreachable"
            deadline = deadlines.setdefault(kind, now + budget)
            if now >= deadline:
                if isinstance(refusal, RemoteEnvError):
                    raise self._capacity_error(refusal, attempt) from None
                raise refusal
            time.sleep(min(deadline - now, capacity_backoff(attempt, retry_after, self._backoff_rng)))
            attempt += 1

    def _reset_request(self, message: dict[str, Any]) -> dict[str, Any]:
        stale = self._ws is not None
        try:
            return self._request(message, new_session_ok=True)
        except ConnectionError:
            if not stale or self._ws is not None:
                raise
            # the open session was lost unnoticed (a server restart): one new session, and a reset there
            return self._request(message, new_session_ok=True)

    def _capacity_error(self, refusal: RemoteEnvError, retries: int) -> ServerAtCapacityError:
        maximum, active = refusal.details.get("max_sessions"), refusal.details.get("active_sessions")
        cap = f"its cap of {maximum} sessions ({active}/{maximum} active)" if is_number(maximum) else "its session cap"
        waited = (
            f"after {retries} retries over capacity_wait_s={self.capacity_wait_s:g} s"
            if self.capacity_wait_s > 0
            else "at once (capacity_wait_s=0)"
        )
        return ServerAtCapacityError(
            f"the env server at {self.base_url} is at {cap} and refused a new session, {waited}. Close envs you no "
            "longer use (env.close()), start the server with a larger --max-sessions or another server, or raise "
            f"capacity_wait_s.{'' if is_number(maximum) else ' The server said: ' + str(refusal)[:_CAUSE_CHARS]}",
            maximum if is_number(maximum) else None,
            active if is_number(active) else None,
        )

    def _wire_action(self, action: Any) -> Any:
        """``action`` as sent: what the served env judges exactly as the local env judges ``action`` itself.

        Bytes are decoded (as :class:`~agentgym_turn.core.turn_env.TurnEnv` decodes them). A response longer than the
        action space's ``max_length`` is cut to one character over it: its verdict (an invalid turn whose message
        names the limit) depends only on being longer, and the cut always fits the server's message bound. A non-string
        is an invalid turn whose message names its type, so a float JSON cannot carry (NaN, infinities) goes as
        ``0.0``; any other value JSON cannot carry goes as ``[its type's name]`` (invalid either way).
        """
        if isinstance(action, (bytes, bytearray)):
            return bytes(action).decode("utf-8", errors="replace")
        if isinstance(action, str):
            limit = self.action_space.max_length
            return action[: limit + 1] if len(action) > limit else action
        if isinstance(action, float) and not math.isfinite(action):
            return 0.0
        try:
            json.dumps(action, allow_nan=False)
        except (TypeError, ValueError, RecursionError):
            return [type(action).__name__]
        return action

    def step(self, action: Any) -> tuple[str, float, bool, bool, dict[str, Any]]:
        action = self._wire_action(action)
        if self._fault_over:
            return self._over_turn()
        if self._ws is None and not (
            self._close_note and self._last_info is not None
        ):  # never reset, or closed: a caller bug
            raise ConnectionError(f"no session is open; call reset() to start a new session at {self.ws_url}.")
        try:
            try:
                if self._ws is None:  # found lost by render() or state()
                    raise ConnectionError(f"{self._close_note}; the episode is lost")
                text, reward, terminated, truncated, info = self._observation(
                    self._request({"type": "step", "data": {ACTION_FIELD: action}})
                )
            except (ConnectionError, TimeoutError) as err:
                frame = self._resume(action, err)
                if frame is None:
                    return self._fault_turn(self._resume_note or str(err))
                text, reward, terminated, truncated, info = self._observation(frame)
        except RemoteEnvError as err:
            if err.code not in _INFRA_CODES:
                raise
            self._drop(str(err))  # requests and answers may be out of step now: the session is not reused
            return self._fault_turn(str(err))
        self._shown = info.pop(SHOWN_REWARD_KEY, None)  # kept for shown_reward: the info stays the served env's own
        self._last_info, self._last_text = dict(info), text
        if self._log is not None:
            self._log.append(("step", action))
        return text, (0.0 if reward is None else reward), terminated, truncated, info

    def _resume(self, action: str, cause: BaseException) -> dict[str, Any] | None:
        """After a lost connection: replay the episode in a new session (see ``resume_wait_s``) and send ``action``
        again; its answer frame, or ``None`` when the episode cannot be resumed in time."""
        if self._resuming or self._log is None or self.resume_wait_s <= 0 or self._last_text is None:
            return None
        log, expected = list(self._log), self._last_text
        deadline, attempt = time.monotonic() + self.resume_wait_s, 0
        self._resuming, self._resume_note = True, ""
        try:
            while True:
                try:
                    try:
                        digest = served_spec_from_schemas(self._get_json("/schema"))["config_digest"]
                    except ValueError:  # not an env server of this protocol any more
                        digest = "?"
                    if (
                        self.config_digest is not None and digest != self.config_digest
                    ):  # never continue under other rules
                        self._resume_note = (
                            f"the env server at {self.base_url} came back with another configuration (its id, "
                            "--kwarg values or turn limit changed), so the episode was not resumed"
                        )
                        self._drop(self._resume_note)
                        return None
                    self.restore(seal((type(self).__qualname__, {"env_id": self.served_env_id, "log": log})))
                    if self._last_text != expected:  # not the episode it was: never continue another one
                        self._drop("a resumed episode replayed to another observation")
                        return None
                    frame = self._request({"type": "step", "data": {ACTION_FIELD: action}})
                    self.resumed += 1
                    return frame
                except (ConnectionError, TimeoutError, RemoteEnvError) as err:
                    if isinstance(err, RemoteEnvError) and err.code not in _INFRA_CODES:
                        raise
                    now = time.monotonic()
                    if now >= deadline:
                        return None
                    time.sleep(min(deadline - now, capacity_backoff(attempt, None, self._backoff_rng)))
                    attempt += 1
        finally:
            self._resuming = False
            self._log = log

    def _fault_turn(self, cause: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        """The turn a fault outside the policy's control ends the episode with: what the served env's last info
        held, with this turn's number, ``exit_status="infra_error"``, ``reward_valid=False`` and zero components.
        The action was never judged by the server (``action_is_valid`` False)."""
        info = dict(self._last_info or {})
        turn = int(info.get("turn", 0)) + 1 if is_number(info.get("turn", 0)) else 1
        info.update(
            turn=turn, action_is_valid=False, action_is_effective=False, exit_status="infra_error", reward_valid=False
        )
        info["reward_components"] = {str(name): 0.0 for name in (info.get("reward_components") or {})}
        if "state_key" in info:  # every episode a fault ended has the same (empty) future
            info["state_key"] = state_digest([type(self).__name__, self.served_env_id, turn, "infra_error"])
        self._last_info, self._fault_over, self._shown = dict(info), True, 0.0
        text = (
            f"The served env at {self.base_url} is gone ({cause[:_CAUSE_CHARS]}). This episode is over; "
            "call reset() to start a new one."
        )
        return text, 0.0, False, True, info

    def _over_turn(self) -> tuple[str, float, bool, bool, dict[str, Any]]:
        """A step after an infra-error turn, answered as a local env answers a step after its episode ended."""
        info = dict(self._last_info or {})
        info.update(action_is_valid=False, action_is_effective=False, exit_status="invalid_action", reward_valid=True)
        info["reward_components"] = {name: 0.0 for name in info.get("reward_components") or {}}
        self._shown = 0.0
        return "The episode is over. Call reset() to start a new one.", 0.0, True, False, info

    # ------------------------------------------------------------------ snapshot, restore, fork (by replay)
    def snapshot(self) -> bytes:
        """The episode as bytes: the served id, the last seeded reset and every reset and action since.
        :meth:`restore` replays them in a new session. Raises ``ValueError`` when the session has had no
        ``reset(seed=...)`` (a server-drawn seed cannot be replayed) and ``ConnectionError`` after an
        infra-error turn (the served state is lost)."""
        if self._log is None:
            raise ValueError(
                f"{self!r} cannot be snapshotted: its episodes began with reset(seed=None), whose seed the server drew. "
                "Start the episode with reset(seed=...) to snapshot, restore or fork it."
            )
        if self._fault_over:
            raise ConnectionError(
                f"the session at {self.ws_url} was lost mid-episode; its state cannot be replayed. Call reset()."
            )
        return seal((type(self).__qualname__, {"env_id": self.served_env_id, "log": list(self._log)}))

    def restore(self, snapshot: bytes) -> None:
        """Return to the state :meth:`snapshot` saved (from this env or one of the same served id): a new session
        on the server replays the snapshot's resets and actions. A server that fails meanwhile is a
        ``ConnectionError``."""
        kind, state = unseal(snapshot)
        if kind != type(self).__qualname__ or state.get("env_id") != self.served_env_id:
            raise ValueError(f"this snapshot is of a {kind} serving {state.get('env_id')!r}, not of {self!r}.")
        self.close()  # the old session ends; reset opens a new one
        self._close_note = ""
        for entry in state["log"]:
            if entry[0] == "reset":
                self.reset(seed=entry[1], options=entry[2])
                continue
            *_, info = self.step(entry[1])
            if info.get("exit_status") == "infra_error":
                raise ConnectionError(
                    f"the env server at {self.base_url} failed while a snapshot was replayed; call restore() again or reset()."
                )
        self._log = list(state["log"])

    def fork(self, n: int) -> list["RemoteTurnEnv"]:
        """``n`` new clients of the same server (same arguments), each in its own session in this env's state."""
        return fork_by_replay(self, n)

    def shown_reward(self, reward: float, terminated: bool, truncated: bool, info: dict[str, Any]) -> float:
        """The reward a chat view may show the agent after the last step, as the served env computed it
        (``TurnEnv.shown_reward``: search QA shows only its format part mid-episode); ``reward`` from a server
        that sends none."""
        shown = getattr(self, "_shown", None)  # the last step's, as the server sent it
        return float(shown) if is_number(shown) else reward

    def render(self) -> str | None:
        if self.render_mode != "ansi":
            return None
        frame = self._request({"type": "state"})
        render = (frame.get("data") or {}).get("render")
        return render if isinstance(render, str) else ""

    def state(self) -> dict[str, Any]:
        """The session's OpenEnv state: ``episode_id``, ``step_count``, ``env_id``, ``render``."""
        return dict(self._request({"type": "state"}).get("data") or {})

    def expert_action(self) -> str:
        """The served env's ``expert_action()`` for the current state (:class:`RemoteEnvError` unless the server
        serves the oracles: ``agentgym-turn serve env ID --expert``)."""
        frame = self._request({"type": "expert"})
        return str((frame.get("data") or {}).get(ACTION_FIELD, ""))

    def close(self) -> None:
        """End the session (its env on the server is closed) and the connection."""
        ws, self._ws = self._ws, None
        if ws is not None:
            try:
                ws.send(dumps({"type": "close"}))
            except Exception:
                pass
            try:
                ws.close()
            except Exception:
                pass
        super().close()

    def _observation(self, frame: dict[str, Any]) -> tuple[str, float | None, bool, bool, dict[str, Any]]:
        if frame.get("type") != "observation":
            raise RemoteEnvError(
                f"the env server at {self.base_url} answered {frame.get('type')!r} where an observation was due",
                "PROTOCOL",
            )
        try:
            return parse_observation_payload(frame.get("data"))
        except ValueError as err:
            raise RemoteEnvError(
                f"the env server at {self.base_url} sent a malformed observation: {err}", "PROTOCOL"
            ) from None

    def __del__(self) -> None:
        # An env dropped without close() would keep its server session (and a slot) until the idle timeout.
        ws = getattr(self, "_ws", None)
        if ws is not None:
            try:
                ws.close()
            except Exception:
                pass

    def __getstate__(self) -> dict[str, Any]:
        raise TypeError(
            "a RemoteTurnEnv holds a live session on its server and cannot be pickled or copied; pickle a factory "
            "instead (lambda: gymnasium.make('agentgym_turn/Remote-v0', base_url=..., env_id=...)), as vector envs do."
        )

    def __repr__(self) -> str:
        return f"<RemoteTurnEnv {getattr(self, 'served_env_id', '?')} at {getattr(self, 'base_url', '?')}>"
