"""The sessions of a served env: the env spec served, the session cap, one env per session and its calls.

Shared by the WebSocket and HTTP endpoints (:mod:`~agentgym_turn.remote.server`) and the MCP tools
(:mod:`~agentgym_turn.remote.mcp_tools`).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import hashlib
import inspect
import json
import uuid
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from ..core.args import is_int
from .protocol import (
    ACTION_FIELD,
    SHOWN_REWARD_KEY,
    ErrorCode,
    ProtocolError,
    error_frame,
    json_safe,
    observation_payload,
    reset_seed,
)

#: Sessions served at once unless ``--max-sessions`` says otherwise.
DEFAULT_MAX_SESSIONS = 64
#: Seconds a session may stay silent before it is closed, unless ``--idle-timeout`` says otherwise.
DEFAULT_IDLE_TIMEOUT = 300.0
#: Threads that run env calls unless ``--workers`` says otherwise.
DEFAULT_WORKERS = 16
#: WebSocket close codes: going away (idle), try again later (capacity), internal error (factory).
CLOSE_IDLE, CLOSE_CAPACITY, CLOSE_FACTORY = 1001, 1013, 1011
#: Longest action (characters) a quick env's step runs on the event loop: a turn's CPU grows with its text, and the
#: worst responses of this length cost the suite's envs about a millisecond (``benchmarks/parsers.py`` times 65,536).
INLINE_MAX_CHARS = 4096
#: Seconds a refused client is told to wait (``Retry-After``, ``retry_after_s``): sessions last whole episodes,
#: so a place rarely frees sooner; the client adds its own backoff and jitter.
CAPACITY_RETRY_AFTER_S = 1


@dataclass(frozen=True)
class ServedEnvSpec:
    """What a client needs to know about the served env (published by ``/schema``)."""

    env_id: str
    env_kwargs: dict[str, Any]
    max_action_length: int
    max_observation_length: int
    max_episode_steps: int | None
    render_modes: list[str] = field(default_factory=list)
    render_fps: int | float | None = None
    description: str = ""

    @functools.cached_property
    def config_digest(self) -> str:
        """A digest of the id, the ``--kwarg`` values and the turn limit, published by ``/schema`` so that a client
        resuming an episode after a restart can tell another configuration from the one it played. scrypt, not a
        plain hash: a secret among the kwargs (a world seed) costs about 50 ms a guess to search for."""
        canonical = json.dumps(
            [self.env_id, json_safe(self.env_kwargs), self.max_episode_steps], sort_keys=True, default=str
        )
        return hashlib.scrypt(
            canonical.encode("utf-8", "surrogatepass"),
            salt=b"agentgym-turn/served-config/v1",
            n=1 << 14,
            r=8,
            p=1,
            dklen=16,
        ).hex()

    def default_max_message_bytes(self) -> int:
        """Room for the longest legal action as ASCII-escaped JSON (12 bytes per character at
        worst: an astral character is a ``\\uXXXX\\uXXXX`` pair), plus 64 KiB, and at least 1 MiB."""
        return max(1 << 20, 12 * self.max_action_length + (64 << 10))


def _make_kwargs(spec_kwargs: dict[str, Any], render_modes: Sequence[str]) -> dict[str, Any]:
    """The served env's kwargs; ``render_mode="ansi"`` unless given, so ``state`` can carry the render."""
    kwargs = dict(spec_kwargs)
    if "render_mode" not in kwargs and "ansi" in render_modes:
        kwargs["render_mode"] = "ansi"
    return kwargs


def describe_env(env_id: str, env_kwargs: dict[str, Any] | None = None) -> ServedEnvSpec:
    """Make one env of ``env_id`` (warming shared data such as catalogs) and read its spaces.

    Raises ``ValueError`` when the env's action or observation space is not a Gymnasium ``Text``
    space (this protocol carries text turns).
    """
    import gymnasium as gym
    from gymnasium.spaces import Text

    env_kwargs = dict(env_kwargs or {})
    spec = gym.spec(env_id)
    env = gym.make(env_id, **env_kwargs)
    try:
        if not isinstance(env.action_space, Text) or not isinstance(env.observation_space, Text):
            raise ValueError(
                f"{env_id} has action space {env.action_space} and observation space {env.observation_space}; "
                "only envs with text spaces (gymnasium.spaces.Text, e.g. this suite's TurnText) can be served."
            )
        metadata = dict(getattr(env.unwrapped, "metadata", {}) or {})
        doc = inspect.getdoc(type(env.unwrapped)) or f"{env_id} environment"
        max_steps = env_kwargs.get("max_episode_steps", spec.max_episode_steps)
        return ServedEnvSpec(
            env_id=env_id,
            env_kwargs=env_kwargs,
            max_action_length=int(env.action_space.max_length),
            max_observation_length=int(env.observation_space.max_length),
            max_episode_steps=None if max_steps is None else int(max_steps),
            render_modes=[str(m) for m in metadata.get("render_modes", [])],
            render_fps=metadata.get("render_fps"),
            description=doc.strip().splitlines()[0],
        )
    finally:
        env.close()


def _without(info: dict[str, Any], hidden: tuple[str, ...]) -> dict[str, Any]:
    return {k: v for k, v in info.items() if k not in hidden} if hidden else info


class SessionCapacityError(Exception):
    """All ``max_sessions`` slots are taken."""

    def __init__(self, active: int, maximum: int):
        super().__init__(
            f"Server at capacity: {active}/{maximum} sessions active (its cap, --max-sessions {maximum}). Cannot "
            f"accept new connections; retry after {CAPACITY_RETRY_AFTER_S} s, close sessions you no longer use, "
            "or start the server with a larger --max-sessions."
        )
        self.active, self.maximum = active, maximum

    def frame(self) -> dict[str, Any]:
        """The OpenEnv error frame a refused ``/ws`` session gets before its close (code 1013)."""
        return error_frame(
            ErrorCode.CAPACITY_REACHED,
            str(self),
            active_sessions=self.active,
            max_sessions=self.maximum,
            retry_after_s=CAPACITY_RETRY_AFTER_S,
        )

    def http_body(self) -> dict[str, Any]:
        """The JSON body of a refused HTTP request (status 503, ``Retry-After`` header)."""
        return {
            "detail": str(self),
            "code": ErrorCode.CAPACITY_REACHED,
            "active_sessions": self.active,
            "max_sessions": self.maximum,
            "retry_after_s": CAPACITY_RETRY_AFTER_S,
        }


class EnvFactoryError(Exception):
    """``gymnasium.make`` failed for a new session."""


@dataclass
class Session:
    """One ``/ws`` connection's env and counters."""

    session_id: str
    env: Any = None
    episode_id: str | None = None
    step_count: int = 0
    was_reset: bool = False
    #: ``info`` keys the client does not see (the env's oracle keys, unless the server serves the expert).
    hidden: tuple[str, ...] = ()
    #: The env's ``shown_reward(reward, terminated, truncated, info)``, or ``None`` (the reward is shown as it is).
    shown_reward: Callable[..., float] | None = None
    #: The env's ``quick_calls``: the methods that run on the event loop (see :class:`EnvSessions`).
    quick: frozenset[str] = frozenset()


class EnvSessions:
    """The served env's sessions: bounded in number, each with its own env, env calls in a thread pool.

    The methods an env's ``unwrapped`` names in ``quick_calls`` (``reset``, ``step``, ``render``: each call a few
    milliseconds of CPU at most, with no I/O, as this suite's envs with their in-process worlds declare) run on the
    event loop, a step only with a string action of at most :data:`INLINE_MAX_CHARS` characters and a reset only
    without options (a level text to solve, a held-out split to draw): handing a sub-millisecond turn to a thread
    and back cost the server more than the turn, and queued it behind the interpreter lock's switch interval. Every
    other call (``gymnasium.make``, ``close``, the expert, a longer action, any call an env does not name) runs in
    the pool, so that a slow one blocks no other session.

    Args:
        spec: The served env (see :func:`describe_env`).
        max_sessions: Most sessions at once.
        workers: Threads running env calls (``gymnasium.make``, ``reset``, ``step``, ``render``, ``close``).
        expert: Serve the oracles: the ``expert`` message (the env's ``expert_action()``) and the info
            keys the env names in ``oracle_info_keys`` (search QA's gold answers). Off by default: a
            client that can read them solves every task by copying.
        client_content: Accept reset options that carry content the server must process, named by the env's
            ``content_reset_options`` (a Sokoban level text, which the server would solve). Off by default: one
            such request can hold a worker for seconds. An index into the env's own tasks is always accepted.
    """

    def __init__(
        self,
        spec: ServedEnvSpec,
        *,
        max_sessions: int = DEFAULT_MAX_SESSIONS,
        workers: int = DEFAULT_WORKERS,
        expert: bool = False,
        client_content: bool = False,
    ):
        if not is_int(max_sessions, 1):
            raise ValueError(f"max_sessions must be a positive integer, got {max_sessions!r}.")
        if not is_int(workers, 1):
            raise ValueError(f"workers must be a positive integer, got {workers!r}.")
        self.spec = spec
        self.max_sessions = max_sessions
        self.expert = bool(expert)
        self.client_content = bool(client_content)
        #: Stateless ``POST /reset`` requests in flight: they count against ``max_sessions`` too.
        self.stateless = 0
        self._kwargs = _make_kwargs(spec.env_kwargs, spec.render_modes)
        self._executor = concurrent.futures.ThreadPoolExecutor(max_workers=workers, thread_name_prefix="agentgym-env")
        self._sessions: dict[str, Session] = {}
        #: Sessions opened since the server started (a counter for tests and logs).
        self.opened = 0
        #: Session opens and HTTP requests refused at the cap since the server started (a counter for tests and logs).
        self.refused = 0

    @property
    def full(self) -> bool:
        """Whether every place is taken, by sessions and by stateless ``POST /reset`` requests in flight."""
        return len(self._sessions) + self.stateless >= self.max_sessions

    @property
    def active(self) -> int:
        """Sessions open now (including ones whose env is being made)."""
        return len(self._sessions)

    def check_capacity(self) -> None:
        """Raise :class:`SessionCapacityError` (and count the refusal) when every place is taken."""
        if self.full:
            self.refused += 1
            raise SessionCapacityError(len(self._sessions) + self.stateless, self.max_sessions)

    def make_env(self) -> Any:
        import gymnasium as gym

        return gym.make(self.spec.env_id, **self._kwargs)

    def check_reset_options(self, env: Any, options: Any) -> None:
        """Refuse (PermissionError) reset options that carry client content, unless the server accepts it."""
        names = getattr(env.unwrapped, "content_reset_options", frozenset())
        if self.client_content or not names or not isinstance(options, dict):
            return
        sent = sorted(k for k in names if k in options and not is_int(options[k]))
        if sent:
            raise PermissionError(
                f"reset option(s) {sent} carry content this server would have to process (a level to "
                "solve, for example): refused. Pass an index into the env's own tasks, or start the server "
                "with --client-content (EnvServer(..., client_content=True)) where clients are trusted."
            )

    def hidden_keys(self, env: Any) -> tuple[str, ...]:
        """The ``info`` keys a client of ``env`` does not see: its oracle keys, unless the server serves the expert."""
        return () if self.expert else tuple(getattr(env.unwrapped, "oracle_info_keys", ()))

    def client_info(self, env: Any, info: dict[str, Any]) -> dict[str, Any]:
        """``info`` as a client may see it: without the env's oracle keys unless the server serves the expert."""
        return _without(info, self.hidden_keys(env))

    async def call(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """Run ``fn(*args, **kwargs)`` in the env thread pool."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, lambda: fn(*args, **kwargs))

    async def _turn(self, inline: bool, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """``fn(*args, **kwargs)`` on the event loop if ``inline``, else in the pool."""
        return fn(*args, **kwargs) if inline else await self.call(fn, *args, **kwargs)

    async def open(self) -> Session:
        """Reserve a slot and make the session's env; :class:`SessionCapacityError` when full,
        :class:`EnvFactoryError` when ``gymnasium.make`` fails."""
        # Single-threaded event loop: the check and the reservation cannot interleave.
        self.check_capacity()
        session = Session(session_id=uuid.uuid4().hex)
        self._sessions[session.session_id] = session
        self.opened += 1
        try:
            session.env = await self.call(self.make_env)
        except Exception as err:
            self._sessions.pop(session.session_id, None)
            raise EnvFactoryError(f"gymnasium.make({self.spec.env_id!r}) failed: {type(err).__name__}: {err}") from err
        # read once a session, not once a turn (each read of `unwrapped` walks the wrappers)
        session.hidden = self.hidden_keys(session.env)
        shown = getattr(session.env.unwrapped, "shown_reward", None)
        session.shown_reward = shown if callable(shown) else None
        session.quick = frozenset(getattr(session.env.unwrapped, "quick_calls", ()))
        return session

    async def close(self, session: Session) -> None:
        """Release the slot and close the env (in the pool, where it ran)."""
        self._sessions.pop(session.session_id, None)
        if session.env is not None:
            env, session.env = session.env, None
            try:
                await self.call(env.close)
            except Exception:  # closing is best effort; the slot is free either way
                pass

    def shutdown(self) -> None:
        """Stop the thread pool (queued calls are cancelled)."""
        self._executor.shutdown(wait=False, cancel_futures=True)

    # ------------------------------------------------------------------ one message
    async def handle(self, session: Session, kind: str, data: dict[str, Any]) -> dict[str, Any]:
        """The response frame to one validated message (``reset``/``step``/``state``/``expert``)."""
        env = session.env
        try:
            if kind == "reset":
                options = data.get("options")
                self.check_reset_options(env, options)
                # options can ask for work ``quick_calls`` does not cover (a level text to solve, a held-out split
                # drawn ten levels at a time): such a reset runs in the pool
                inline = "reset" in session.quick and not options
                text, info = await self._turn(inline, env.reset, seed=reset_seed(data), options=options)
                session.was_reset, session.step_count = True, 0
                session.episode_id = data.get("episode_id") or uuid.uuid4().hex
                return {
                    "type": "observation",
                    "data": observation_payload(text, None, False, False, _without(info, session.hidden)),
                }
            if kind == "step":
                action = data[ACTION_FIELD]
                inline = "step" in session.quick and isinstance(action, str) and len(action) <= INLINE_MAX_CHARS
                text, reward, terminated, truncated, info = await self._turn(inline, env.step, action)
                session.step_count += 1
                shown = session.shown_reward  # what a chat view may show the agent (ChatView)
                info = {
                    **_without(info, session.hidden),
                    SHOWN_REWARD_KEY: float(shown(reward, terminated, truncated, info) if shown else reward),
                }
                return {"type": "observation", "data": observation_payload(text, reward, terminated, truncated, info)}
            if kind == "state":
                return {"type": "state", "data": await self.state(session)}
            if kind == "expert":
                if not self.expert:
                    raise PermissionError(
                        "This server does not serve the expert's action (an oracle that solves the task): "
                        "start it with --expert (EnvServer(..., expert=True)) where clients may see it."
                    )
                if not session.was_reset:
                    raise RuntimeError("Call reset before asking for the expert's action.")
                return {"type": "expert", "data": {ACTION_FIELD: await self.call(env.unwrapped.expert_action)}}
        except Exception as err:  # the env's error goes back to the client; the session stays open
            return error_frame(ErrorCode.EXECUTION_ERROR, str(err), exception=type(err).__name__)
        raise ProtocolError(ErrorCode.UNKNOWN_TYPE, f"Unknown message type: {kind}")

    async def state(self, session: Session | None) -> dict[str, Any]:
        """OpenEnv's state (``episode_id``, ``step_count``) plus the env id and the ansi render."""
        render = None
        if session is not None and session.was_reset and session.env.render_mode == "ansi":
            frame = await self._turn("render" in session.quick, session.env.render)
            render = frame if isinstance(frame, str) else None
        return {
            "episode_id": session.episode_id if session else None,
            "step_count": session.step_count if session else 0,
            "env_id": self.spec.env_id,
            "render": render,
        }
