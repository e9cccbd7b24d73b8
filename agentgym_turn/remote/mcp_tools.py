"""The MCP endpoint of a served env (``/mcp`` of ``agentgym-turn serve env``): the env's turns as MCP tools.

Built on the official ``mcp`` SDK (the ``mcp`` extra): its low-level ``Server`` answers ``tools/list`` and
``tools/call``, and its ``StreamableHTTPSessionManager`` speaks MCP's streamable HTTP transport, stateful. Each
MCP session owns one env session of the server's :class:`~agentgym_turn.remote.sessions.EnvSessions` (so
``max_sessions`` counts MCP and ``/ws`` sessions together), made at the session's first tool call and closed when
the client ends the session (``DELETE``), after ``idle_timeout`` seconds without a request (the SDK ends the MCP
session then too), or when the server stops. There is no standalone event stream (``GET`` answers 405, as MCP allows):
the tools send nothing of their own, and a stream held open would keep sessions from idling out and stall shutdown.
The tools are stateful, so a request outside a session (MCP's sessionless 2026 protocol) gets a tool error.

Tools: ``reset`` (``seed``, ``options``), one tool per action kind of the served env (:data:`ENV_TOOLS`, keyed by
the env's class: Sokoban's ``move``, WebShop's ``search`` and ``click``, search QA's ``search`` and ``answer``, the
dialog's ``say`` and ``shop``), and ``respond``, which takes the whole response text of one turn (the only action
tool of any other env). An action tool writes the env's own response text (``move(["Up", "Left"])`` is
``<answer>Up || Left</answer>``) and plays one turn exactly as ``/ws`` does; the result's content is the observation
text, its structured content ``reward``, ``terminated``, ``truncated`` and ``info`` (the env's oracle keys left out
unless the server runs with ``--expert``). Bad arguments, an unknown tool, a full server or an env error are MCP tool
errors (``isError``); the session stays usable.

A POST that is not JSON-RPC 2.0 still gets a JSON-RPC error with status 200, and without the SDK every call
answers one naming the extra, so that OpenEnv's runtime validator passes either way.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from ..serving import ServerLimits, loads_strict, read_body
from .protocol import ACTION_FIELD, ProtocolError, dumps, parse_client_message
from .sessions import CAPACITY_RETRY_AFTER_S, EnvFactoryError, EnvSessions, Session, SessionCapacityError

#: The request header that names the MCP session (MCP's streamable HTTP transport).
SESSION_HEADER = "mcp-session-id"
#: Sokoban's moves, as its responses spell them.
DIRECTIONS = ("Up", "Down", "Left", "Right")


@dataclass(frozen=True)
class Param:
    """One argument of an action tool: a string (``kind="text"``) or a list of Sokoban directions
    (``kind="directions"``)."""

    name: str
    description: str
    kind: str = "text"


@dataclass(frozen=True)
class ToolSpec:
    """An action tool: its arguments and how they become the env's response text."""

    name: str
    description: str
    params: tuple[Param, ...]
    format: Callable[..., str] = field(compare=False)


def _moves(directions: list[str]) -> str:
    return "<answer>" + " || ".join(directions) + "</answer>"


RESPOND = ToolSpec(
    "respond",
    "Play one turn with the whole response text (the env parses it, exactly as a chat reply; "
    "it may contain <think>...</think>).",
    (Param("response", "the whole response of this turn"),),
    lambda response: response,
)
MOVE = ToolSpec(
    "move",
    "Move the player: the directions are played in order, as one turn (<answer>Up || Left</answer>); "
    "the env's per-turn and per-episode move limits apply.",
    (Param("directions", "moves in order, each Up, Down, Left or Right", "directions"),),
    _moves,
)
WEBSHOP_SEARCH = ToolSpec(
    "search",
    "Search the shop (search[query]); only where the page has a search bar.",
    (Param("query", "the search query"),),
    lambda query: f"search[{query}]",
)
WEBSHOP_CLICK = ToolSpec(
    "click",
    "Click one of the available actions the last observation lists (click[target]): a "
    "product id, an option, 'buy now', 'back to search', '< prev', 'next >', ...",
    (Param("target", "one of the available actions, as listed"),),
    lambda target: f"click[{target}]",
)
QA_SEARCH = ToolSpec(
    "search",
    "Search the corpus (<search>query</search>); the top passages come back.",
    (Param("query", "the search query"),),
    lambda query: f"<search>{query}</search>",
)
QA_ANSWER = ToolSpec(
    "answer",
    "Give the final answer (<answer>answer</answer>); this ends the episode.",
    (Param("answer", "the answer alone, no explanation (the option's letter for a multiple-choice question)"),),
    lambda answer: f"<answer>{answer}</answer>",
)
DIALOG_SAY = ToolSpec(
    "say",
    "Say something to the customer (<say>text</say>).",
    (Param("text", "the message to the customer"),),
    lambda text: f"<say>{text}</say>",
)
DIALOG_SHOP = ToolSpec(
    "shop",
    "Act in the shop: search[query] or click[x] with x one of the available actions.",
    (Param("action", "the shop action, e.g. search[red shoes] or click[buy now]"),),
    lambda action: action,
)

#: The action tools of each env class (``module:Class``; a subclass gets its base's); any other env gets ``respond`` alone.
ENV_TOOLS: dict[str, tuple[ToolSpec, ...]] = {
    "agentgym_turn.sokoban.env:TurnSokobanEnv": (MOVE,),
    "agentgym_turn.webshop.env:TurnWebShopEnv": (WEBSHOP_SEARCH, WEBSHOP_CLICK),
    "agentgym_turn.webshop.browser:TurnWebShopBrowserEnv": (WEBSHOP_SEARCH, WEBSHOP_CLICK),
    "agentgym_turn.searchqa.env:TurnSearchQAEnv": (QA_SEARCH, QA_ANSWER),
    "agentgym_turn.multiagent.assistant_env:TurnWebShopDialogEnv": (DIALOG_SAY, DIALOG_SHOP),
}


def env_tools(env_id: str) -> tuple[ToolSpec, ...]:
    """The action tools of ``env_id``: its class's in :data:`ENV_TOOLS` (looked up along the class's bases), then ``respond``."""
    import gymnasium as gym
    from gymnasium.envs.registration import load_env_creator

    entry = gym.spec(env_id).entry_point
    try:
        creator = load_env_creator(entry) if isinstance(entry, str) else entry
    except (ImportError, AttributeError):
        creator = None
    for cls in creator.__mro__ if isinstance(creator, type) else ():
        tools = ENV_TOOLS.get(f"{cls.__module__}:{cls.__qualname__}")
        if tools is not None:
            return (*tools, RESPOND)
    return (RESPOND,)


def _overhead(tool: ToolSpec) -> int:
    """Characters the tool's format adds around its one argument."""
    param = tool.params[0]
    return len(tool.format(**{param.name: [] if param.kind == "directions" else ""}))


def _room(tool: ToolSpec, max_length: int) -> int:
    """Characters left for the tool's argument in an action of at most ``max_length``."""
    return max(0, max_length - _overhead(tool))


def _max_moves(room: int) -> int:
    """Moves that fit in ``room`` characters: each costs at least len("Up"), plus " || " between two."""
    return max(1, (room + 4) // 6)


def _param_schema(tool: ToolSpec, param: Param, max_length: int) -> dict[str, Any]:
    room = _room(tool, max_length)
    if param.kind == "directions":
        return {
            "type": "array",
            "items": {"type": "string", "enum": list(DIRECTIONS)},
            "minItems": 1,
            "maxItems": _max_moves(room),
            "description": param.description,
        }
    return {"type": "string", "maxLength": room, "description": param.description}


#: The structured content of every successful tool result.
OUTPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "reward": {"type": ["number", "null"], "description": "this turn's reward (null after reset)"},
        "terminated": {"type": "boolean"},
        "truncated": {"type": "boolean"},
        "info": {"type": "object", "description": "the env's info dict, JSON-safe"},
    },
    "required": ["reward", "terminated", "truncated", "info"],
}
RESET_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "seed": {
            "type": ["integer", "null"],
            "minimum": 0,
            "description": "the episode's seed (null: the env's own stream)",
        },
        "options": {"type": ["object", "null"], "description": "the env's reset options (e.g. a task index)"},
    },
    "additionalProperties": False,
}


def tool_specs(env_id: str, max_length: int) -> list[dict[str, Any]]:
    """``tools/list``'s entries (name, description, inputSchema, outputSchema) for ``env_id`` with actions of at most
    ``max_length`` characters."""
    out = [
        {
            "name": "reset",
            "description": "Start a new episode (the first tool to call); returns the task's first message.",
            "inputSchema": RESET_SCHEMA,
            "outputSchema": OUTPUT_SCHEMA,
        }
    ]
    for tool in env_tools(env_id):
        properties = {p.name: _param_schema(tool, p, max_length) for p in tool.params}
        out.append(
            {
                "name": tool.name,
                "description": tool.description,
                "outputSchema": OUTPUT_SCHEMA,
                "inputSchema": {
                    "type": "object",
                    "properties": properties,
                    "required": [p.name for p in tool.params],
                    "additionalProperties": False,
                },
            }
        )
    return out


def _check_arguments(tool: ToolSpec, arguments: dict[str, Any], max_length: int) -> str:
    """The response text of ``tool`` called with ``arguments``; ``ValueError`` naming what is wrong."""
    names = {p.name for p in tool.params}
    extra = sorted(k for k in arguments if k not in names)
    if extra:
        raise ValueError(f"{tool.name} takes {sorted(names)}; unknown argument(s) {extra}")
    room = _room(tool, max_length)
    values = {}
    for param in tool.params:
        if param.name not in arguments:
            raise ValueError(f"{tool.name} needs the argument {param.name!r} ({param.description})")
        value = arguments[param.name]
        if param.kind == "directions":
            if (
                not isinstance(value, list)
                or not value
                or not all(isinstance(v, str) and v in DIRECTIONS for v in value)
            ):
                raise ValueError(f"{param.name} must be a non-empty list of {', '.join(DIRECTIONS)}")
            if len(value) > _max_moves(room):
                raise ValueError(f"{param.name} holds {len(value):,} moves; at most {_max_moves(room):,}")
        elif not isinstance(value, str):
            raise ValueError(f"{param.name} must be a string, got {type(value).__name__}")
        elif len(value) > room:
            raise ValueError(
                f"{param.name} is {len(value):,} characters; at most {room:,} (the env's actions are at most "
                f"{max_length:,})"
            )
        values[param.name] = value
    return tool.format(**values)


@dataclass
class _Bound:
    """The env session an MCP session owns."""

    session: Session
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    last_used: float = field(default_factory=time.monotonic)
    closed: bool = False


def _jsonrpc_error(code: int, message: str, request_id: Any = None) -> bytes:
    return dumps({"jsonrpc": "2.0", "error": {"code": code, "message": message}, "id": request_id}).encode()


async def _send_json(send: Any, body: bytes, status: int = 200) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())],
        }
    )
    await send({"type": "http.response.body", "body": body})


def _request_id(payload: Any) -> Any:
    """The ``id`` of a JSON-RPC message, when it is a string or an integer."""
    request_id = payload.get("id") if isinstance(payload, dict) else None
    return request_id if isinstance(request_id, (str, int)) and not isinstance(request_id, bool) else None


_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def _without_lone_surrogates(body: bytes) -> bytes:
    """``body`` with each lone surrogate of its strings (JSON can write one; it is no character, and the MCP SDK
    refuses the whole message for it) made U+FFFD, as a tool client's text would carry it; other bodies unchanged."""
    if b"\\ud" not in body.lower():
        return body
    try:
        payload = json.loads(body)
    except (ValueError, RecursionError):
        return body  # answered as a parse error by _rpc_problem

    def clean(value: Any) -> Any:
        if isinstance(value, str):
            return _LONE_SURROGATE.sub("\ufffd", value)
        if isinstance(value, list):
            return [clean(v) for v in value]
        if isinstance(value, dict):
            return {clean(k): clean(v) for k, v in value.items()}
        return value

    cleaned = clean(payload)
    return body if cleaned == payload else json.dumps(cleaned).encode()


def _rpc_problem(body: bytes) -> bytes | None:
    """A JSON-RPC error for a POST body that is not a JSON-RPC 2.0 message (or a batch), else ``None``."""
    try:
        payload = loads_strict(body)
    except (ValueError, RecursionError):
        return _jsonrpc_error(-32700, "Parse error")
    if isinstance(payload, list):
        return None
    request_id = _request_id(payload)
    if (
        not isinstance(payload, dict)
        or payload.get("jsonrpc") != "2.0"
        or not (isinstance(payload.get("method"), str) or "result" in payload or "error" in payload)
    ):
        return _jsonrpc_error(
            -32600, "Invalid request: a JSON-RPC 2.0 object with 'jsonrpc': '2.0' and a 'method'", request_id
        )
    return None


class McpEndpoint:
    """The ASGI app of ``/mcp``: MCP's streamable HTTP transport over the served env's sessions.

    Args:
        sessions: The server's env sessions (the cap, the thread pool, the oracle rule).
        idle_timeout: Seconds without a request after which an MCP session and its env are closed (``None``: never).
        max_message_bytes: Largest request body.
        limits: The server's bounds (body size and arrival time).
    """

    def __init__(
        self, sessions: EnvSessions, *, idle_timeout: float | None, max_message_bytes: int, limits: ServerLimits
    ):
        self.sessions = sessions
        self.idle_timeout = idle_timeout
        self.max_message_bytes = max_message_bytes
        self.limits = limits
        self.max_length = sessions.spec.max_action_length
        self._bound: dict[str, _Bound] = {}
        self._open_lock: asyncio.Lock | None = None
        self._manager: Any = None
        self._missing: str | None = None
        self._ready: asyncio.Event | None = None
        self._task: asyncio.Task | None = None
        try:
            self._manager = self._build_manager()
        except ImportError as err:
            self._missing = str(err)
        except Exception as err:  # an SDK of another API (1.x): /mcp says so, the rest of the server runs
            self._missing = (
                f"the installed mcp SDK does not fit (the 'mcp' extra needs mcp>=2.3): {type(err).__name__}: {err}"
            )

    # ------------------------------------------------------------------ the SDK
    def _build_manager(self) -> Any:
        """The SDK's low-level server (our tool handlers) in a stateful streamable HTTP session manager."""
        from ..extras import require

        require("mcp", "the MCP endpoint /mcp")
        import mcp.types as types
        from mcp.server.lowlevel import Server
        from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

        from .. import __version__

        spec = self.sessions.spec
        tools = [types.Tool.model_validate(entry) for entry in tool_specs(spec.env_id, self.max_length)]
        self._actions = {tool.name: tool for tool in env_tools(spec.env_id)}
        self._types = types

        async def list_tools(ctx: Any, params: Any) -> Any:
            return types.ListToolsResult(tools=tools)

        async def call_tool(ctx: Any, params: Any) -> Any:
            headers = getattr(getattr(ctx, "request", None), "headers", None)
            session_id = headers.get(SESSION_HEADER) if headers is not None else None
            return await self.call_tool(session_id, params.name, params.arguments or {})

        server = Server(
            f"agentgym-turn {spec.env_id}",
            version=__version__,
            description=spec.description,
            instructions=f"{spec.env_id}: call reset, then one action tool a turn until terminated or truncated.",
            on_list_tools=list_tools,
            on_call_tool=call_tool,
        )
        # security_settings=None: the app's HostOriginGuard (agentgym_turn.serving) already checks Host and Origin.
        return StreamableHTTPSessionManager(
            app=server,
            json_response=True,
            stateless=False,
            security_settings=None,
            session_idle_timeout=self.idle_timeout,
            max_sessions=self.sessions.max_sessions,
            max_request_body_size=self.max_message_bytes,
        )

    async def _started(self) -> None:
        """Run the session manager (its task group) in a task of this event loop, from the first request on; the
        app runs without a lifespan, so the first request starts it."""
        if self._ready is None:
            self._ready = asyncio.Event()
            self._open_lock = asyncio.Lock()
            self._task = asyncio.get_running_loop().create_task(self._run(), name="agentgym-mcp")
        await self._ready.wait()

    async def _run(self) -> None:
        assert self._ready is not None
        try:
            async with self._manager.run():
                self._ready.set()
                while True:
                    await asyncio.sleep(self.idle_timeout / 4 if self.idle_timeout else 3600.0)
                    await self._close_idle()
        finally:
            self._ready.set()  # a request waiting for a manager that failed to start must not hang
            for session_id in list(self._bound):  # the server stops: no call is left to wait for
                await self._release(session_id, wait=False)

    # ------------------------------------------------------------------ env sessions
    async def _bind(self, session_id: str) -> _Bound:
        """The env session of MCP session ``session_id``, made at its first tool call."""
        bound = self._bound.get(session_id)
        if bound is None:
            assert self._open_lock is not None
            async with self._open_lock:
                bound = self._bound.get(session_id)
                if bound is None:
                    bound = self._bound[session_id] = _Bound(await self.sessions.open())
        return bound

    async def _release(self, session_id: str, *, wait: bool = True) -> None:
        """Close the env of MCP session ``session_id`` (if any) and free its place; with ``wait``, after the tool
        call in flight (if any), so that an env is never closed under a step."""
        bound = self._bound.pop(session_id, None)
        if bound is None:
            return
        async with bound.lock if wait else contextlib.nullcontext():
            if not bound.closed:
                bound.closed = True
                await self.sessions.close(bound.session)

    async def _close_idle(self) -> None:
        if self.idle_timeout is None:
            return
        now = time.monotonic()
        for session_id, bound in list(self._bound.items()):
            if not bound.lock.locked() and now - bound.last_used > self.idle_timeout:
                await self._release(session_id)

    @property
    def bound_sessions(self) -> int:
        """MCP sessions holding an env now."""
        return len(self._bound)

    # ------------------------------------------------------------------ tools/call
    def _error(self, message: str) -> Any:
        return self._types.CallToolResult(content=[self._types.TextContent(type="text", text=message)], is_error=True)

    async def call_tool(self, session_id: str | None, name: str, arguments: dict[str, Any]) -> Any:
        """Play one ``tools/call`` of MCP session ``session_id``; every failure is a tool error (``isError``)."""
        tools = ["reset", *self._actions]
        if name != "reset" and name not in self._actions:
            return self._error(f"unknown tool {name!r}; the tools are {', '.join(tools)}")
        if not isinstance(arguments, dict):
            return self._error("arguments must be an object")
        try:
            if name == "reset":
                extra = sorted(k for k in arguments if k not in ("seed", "options"))
                if extra:
                    raise ValueError(f"reset takes 'seed' and 'options'; unknown argument(s) {extra}")
                message = {
                    "type": "reset",
                    "data": {k: arguments[k] for k in ("seed", "options") if arguments.get(k) is not None},
                }
            else:
                message = {
                    "type": "step",
                    "data": {ACTION_FIELD: _check_arguments(self._actions[name], arguments, self.max_length)},
                }
            kind, data = parse_client_message(dumps(message), max_bytes=self.max_message_bytes)
        except ValueError as err:
            return self._error(str(err))
        except ProtocolError as err:
            details = "; ".join(e.get("msg", "") for e in err.extra.get("errors", ())) or err.message
            return self._error(f"invalid arguments: {details}")
        if not session_id:
            return self._error(
                "the env's tools are stateful: open an MCP session (initialize, protocol 2025-11-25 or "
                "earlier) and call them in it"
            )
        try:
            bound = await self._bind(session_id)
        except (SessionCapacityError, EnvFactoryError) as err:
            return self._error(str(err))
        async with bound.lock:
            if bound.closed:  # released while this call waited for the one before it
                return self._error(
                    "this MCP session's env was closed (the session ended or was idle); open a new session"
                )
            bound.last_used = time.monotonic()
            frame = await self.sessions.handle(bound.session, kind, data)
            bound.last_used = time.monotonic()
        if frame.get("type") != "observation":
            return self._error(str(frame.get("data", {}).get("message", "the env failed")))
        payload = frame["data"]
        observation = payload["observation"]
        structured = {
            "reward": payload["reward"],
            "terminated": observation["terminated"],
            "truncated": observation["truncated"],
            "info": observation["info"],
        }
        return self._types.CallToolResult(
            content=[self._types.TextContent(type="text", text=observation["text"])],
            structured_content=structured,
            is_error=False,
        )

    # ------------------------------------------------------------------ ASGI
    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        from starlette.requests import Request

        method = scope.get("method", "")
        body = b""
        if method in ("GET", "HEAD"):
            # No standalone SSE stream (MCP allows 405): the tools send no server-initiated message, and a stream
            # held open would keep the SDK's idle timeout from ever ending a session and stall the server's shutdown.
            await send(
                {
                    "type": "http.response.start",
                    "status": 405,
                    "headers": [(b"allow", b"POST, DELETE"), (b"content-length", b"0")],
                }
            )
            await send({"type": "http.response.body", "body": b""})
            return
        if method == "POST":
            body = _without_lone_surrogates(await read_body(Request(scope, receive), self.limits))
            problem = _rpc_problem(body)
            if problem is None and self._manager is None:
                problem = _jsonrpc_error(
                    -32603, f"MCP is not available: {self._missing}", _request_id(json.loads(body))
                )
            if problem is not None:
                await _send_json(send, problem)
                return
        elif self._manager is None:
            await _send_json(send, _jsonrpc_error(-32603, f"MCP is not available: {self._missing}"), 501)
            return
        await self._started()
        replayed = False

        async def replay() -> Any:
            nonlocal replayed
            if method == "POST" and not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        status = 0

        async def watch(message: Any) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                headers = list(message.get("headers") or ())
                if status == 503 and not any(
                    k.lower() == b"retry-after" for k, _ in headers
                ):  # the SDK's refusal at its cap
                    message = {**message, "headers": headers + [(b"retry-after", str(CAPACITY_RETRY_AFTER_S).encode())]}
            await send(message)

        await self._manager.handle_request(scope, replay, watch)
        if method == "DELETE" and status < 400:
            headers = dict(scope.get("headers") or ())
            session_id = headers.get(SESSION_HEADER.encode(), b"").decode("latin-1")
            await self._release(session_id)
