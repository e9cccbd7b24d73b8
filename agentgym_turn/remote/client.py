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

import inspect
import json
import pickle
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

import gymnasium as gym

from ..core.args import is_number
from ..core.contract import fork_by_replay, state_digest
from ..core.spaces import TurnText
from .protocol import ACTION_FIELD, SHOWN_REWARD_KEY, dumps, parse_observation_payload, served_spec_from_schemas

__all__ = ["RemoteTurnEnv", "REMOTE_ENV_ID", "RemoteEnvError"]

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
_SAME_TYPE = {"ValueError": ValueError, "TypeError": TypeError, "RuntimeError": RuntimeError, "KeyError": KeyError, "IndexError": IndexError}


class RemoteEnvError(RuntimeError):
    """The server answered with an OpenEnv error frame (``code`` holds its code)."""

    def __init__(self, message: str, code: str):
        super().__init__(message)
        self.code = code


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

    Example::

        env = gymnasium.make("agentgym_turn/Remote-v0", base_url="http://127.0.0.1:8000", env_id="TurnSokoban-v0")
        observation, info = env.reset(seed=0)
    """

    metadata: dict[str, Any] = {"render_modes": ["ansi"], "render_fps": 4}

    def __init__(
        self,
        base_url: str,
        env_id: str | None = None,
        render_mode: str | None = None,
        *,
        connect_timeout: float = 10.0,
        message_timeout: float = 120.0,
        token: str | None = None,
    ):
        for name, value in (("connect_timeout", connect_timeout), ("message_timeout", message_timeout)):
            if not is_number(value) or not value > 0:
                raise ValueError(f"{name} must be a positive number of seconds, got {value!r}.")
        if token is not None and (not isinstance(token, str) or not token or not token.isascii() or not token.isprintable()):
            raise ValueError("token must be a non-empty string of printable ASCII characters (the server's --token).")
        self.base_url, self.ws_url = _urls(base_url)
        # what fork(n) makes its envs with
        self._init_args: dict[str, Any] = dict(base_url=base_url, env_id=env_id, render_mode=render_mode, connect_timeout=connect_timeout,
                                               message_timeout=message_timeout, token=token)
        self._last_info: dict[str, Any] | None = None  # the server's last info (the keys of an infra-error turn)
        self._fault_over = False  # the last step was an infra-error turn: the episode is over
        self._log: list[tuple[Any, ...]] | None = None  # ("reset", seed, options) and ("step", action) since the last seeded reset
        self._headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
        self.connect_timeout = float(connect_timeout)
        self.message_timeout = float(message_timeout)
        self._ws: Any = None
        self._close_note = ""
        self.served_env_id = env_id or "ENV_ID"  # what the hints name until the server says
        spec = served_spec_from_schemas(self._get_json("/schema"))
        if env_id is not None and env_id != spec["env_id"]:
            raise ValueError(
                f"the server at {self.base_url} serves {spec['env_id']!r}, not env_id={env_id!r}; "
                f"start `agentgym-turn serve env {env_id}` or pass env_id={spec['env_id']!r}."
            )
        self.served_env_id: str = spec["env_id"]
        #: The served id's turn limit (its ``TimeLimit`` runs on the server).
        self.max_episode_steps: int | None = spec["max_episode_steps"]
        self.metadata = {"render_modes": [m for m in spec["render_modes"] if m == "ansi"], "render_fps": spec["render_fps"]}
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(f"render_mode={render_mode!r} is not supported by the served {self.served_env_id}; choose one of {self.metadata['render_modes']} or None.")
        self.render_mode = render_mode
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
            with opener.open(urllib.request.Request(url, headers=self._headers), timeout=self.connect_timeout) as response:
                return json.loads(response.read())
        except urllib.error.HTTPError as err:
            if err.code == 401:
                given = "was refused" if self._headers else "is needed: pass token=..."
                raise ConnectionError(f"the env server at {self.base_url} needs its token (HTTP 401); the token {given}.") from None
            raise ConnectionError(f"the env server at {self.base_url} answered {path} with HTTP {err.code}; is it an agentgym-turn env server?") from None
        except (urllib.error.URLError, OSError) as err:
            reason = getattr(err, "reason", err)
            raise ConnectionError(f"cannot reach the env server at {self.base_url} ({reason}); {self._hint()}.") from None
        except ValueError:
            raise ConnectionError(f"the env server at {self.base_url} answered {path} with something that is not JSON; is it an agentgym-turn env server?") from None

    def _connect(self) -> None:
        from websockets.sync.client import connect

        kwargs: dict[str, Any] = {"open_timeout": self.connect_timeout, "close_timeout": 2.0, "max_size": _CLIENT_MAX_FRAME}
        if self._headers:
            kwargs["additional_headers"] = dict(self._headers)
        accepted = inspect.signature(connect).parameters
        if "proxy" in accepted and _is_local(urllib.parse.urlsplit(self.ws_url).hostname):
            kwargs["proxy"] = None  # websockets >= 15 reads proxy settings from the environment
        if "legacy" in accepted:
            kwargs["legacy"] = True  # websockets >= 17: a connection held across calls, not a with-block
        try:
            self._ws = connect(self.ws_url, **kwargs)
        except (OSError, TimeoutError) as err:
            raise ConnectionError(f"cannot open a session at {self.ws_url} ({err}); {self._hint()}.") from None
        except Exception as err:  # handshake refused (websockets.InvalidHandshake and kin)
            raise ConnectionError(f"the env server at {self.base_url} refused a session ({err}); {self._hint()}.") from None
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

    def _closed_error(self, err: Exception) -> ConnectionError:
        rcvd = getattr(err, "rcvd", None)
        if rcvd is None:
            why = "without a close frame: the server stopped or the network dropped"
        else:
            why = f"code {rcvd.code}, {_CLOSE_CODES.get(rcvd.code, 'closed')}{': ' + rcvd.reason if rcvd.reason else ''}"
        note = f"the env server at {self.base_url} closed the session ({why})"
        self._drop(note)
        return ConnectionError(f"{note}; the episode is lost. Check that the server runs ({self._hint()}), then call reset().")

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
                    raise RemoteEnvError(f"the env server at {self.base_url} sent a frame that is not JSON: {str(raw)[:200]}", "PROTOCOL") from None
        if not isinstance(frame, dict):
            raise RemoteEnvError(f"the env server at {self.base_url} sent a non-object frame: {str(frame)[:200]}", "PROTOCOL")
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
        raise RemoteEnvError(f"the env server at {self.base_url} answered {code}: {text}", code)

    # ------------------------------------------------------------------ Gymnasium API
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        super().reset(seed=seed)
        data: dict[str, Any] = {"seed": seed}
        if options is not None:
            data["options"] = options
        stale = self._ws is not None
        try:
            frame = self._request({"type": "reset", "data": data}, new_session_ok=True)
        except ConnectionError:
            if not stale or self._ws is not None:
                raise
            # the open session was lost unnoticed (a server restart): one new session, and a reset there
            frame = self._request({"type": "reset", "data": data}, new_session_ok=True)
        text, _, _, _, info = self._observation(frame)
        self._shown = None
        self._last_info, self._fault_over = dict(info), False
        if seed is not None:
            self._log = []
        if self._log is not None:
            self._log.append(("reset", seed, None if options is None else dict(options)))
        return text, info

    def step(self, action: Any) -> tuple[str, float, bool, bool, dict[str, Any]]:
        if isinstance(action, (bytes, bytearray)):
            action = bytes(action).decode("utf-8", errors="replace")  # as TurnEnv decodes bytes
        if self._fault_over:
            return self._over_turn()
        if self._ws is None:
            if not (self._close_note and self._last_info is not None):  # never reset, or closed: a caller bug, as locally
                raise ConnectionError(f"no session is open; call reset() to start a new session at {self.ws_url}.")
            return self._fault_turn(f"{self._close_note}; the episode is lost")  # found lost by render() or state()
        try:
            frame = self._request({"type": "step", "data": {ACTION_FIELD: action}})
            text, reward, terminated, truncated, info = self._observation(frame)
        except (ConnectionError, TimeoutError) as err:
            return self._fault_turn(str(err))
        except RemoteEnvError as err:
            if err.code not in _INFRA_CODES:
                raise
            self._drop(str(err))  # requests and answers may be out of step now: the session is not reused
            return self._fault_turn(str(err))
        self._shown = info.pop(SHOWN_REWARD_KEY, None)  # kept for shown_reward: the info stays the served env's own
        self._last_info = dict(info)
        if self._log is not None:
            self._log.append(("step", action))
        return text, (0.0 if reward is None else reward), terminated, truncated, info

    def _fault_turn(self, cause: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        """The turn a fault outside the policy's control ends the episode with: what the served env's last info
        held, with this turn's number, ``exit_status="infra_error"``, ``reward_valid=False`` and zero components.
        The action was never judged by the server (``action_is_valid`` False)."""
        info = dict(self._last_info or {})
        turn = int(info.get("turn", 0)) + 1 if is_number(info.get("turn", 0)) else 1
        info.update(turn=turn, action_is_valid=False, action_is_effective=False, exit_status="infra_error", reward_valid=False)
        info["reward_components"] = {str(name): 0.0 for name in (info.get("reward_components") or {})}
        if "state_key" in info:  # every episode a fault ended has the same (empty) future
            info["state_key"] = state_digest([type(self).__name__, self.served_env_id, turn, "infra_error"])
        self._last_info, self._fault_over, self._shown = dict(info), True, 0.0
        text = (f"The served env at {self.base_url} is gone ({cause[:_CAUSE_CHARS]}). This episode is over; "
                "call reset() to start a new one.")
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
            raise ConnectionError(f"the session at {self.ws_url} was lost mid-episode; its state cannot be replayed. Call reset().")
        return pickle.dumps((type(self).__qualname__, {"env_id": self.served_env_id, "log": list(self._log)}),
                            protocol=pickle.HIGHEST_PROTOCOL)

    def restore(self, snapshot: bytes) -> None:
        """Return to the state :meth:`snapshot` saved (from this env or one of the same served id): a new session
        on the server replays the snapshot's resets and actions. A server that fails meanwhile is a
        ``ConnectionError``."""
        kind, state = pickle.loads(snapshot)
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
                raise ConnectionError(f"the env server at {self.base_url} failed while a snapshot was replayed; call restore() again or reset().")
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
            raise RemoteEnvError(f"the env server at {self.base_url} answered {frame.get('type')!r} where an observation was due", "PROTOCOL")
        try:
            return parse_observation_payload(frame.get("data"))
        except ValueError as err:
            raise RemoteEnvError(f"the env server at {self.base_url} sent a malformed observation: {err}", "PROTOCOL") from None

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
