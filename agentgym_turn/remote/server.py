"""Serve any registered text-turn env over OpenEnv's wire protocol (``agentgym-turn serve env ID``).

Endpoints (OpenEnv's, with its semantics; message shapes in :mod:`agentgym_turn.remote.protocol`):

* ``WS /ws``: a stateful session. Each connection gets its own env, made by ``gymnasium.make``
  (so the registered ``TimeLimit`` applies), and sends ``reset`` / ``step`` / ``state`` / ``close``
  (and ``expert``, this project's extension, served only with ``--expert``). Errors come back as OpenEnv error frames
  (``INVALID_JSON``, ``UNKNOWN_TYPE``, ``VALIDATION_ERROR``, ``EXECUTION_ERROR``,
  ``CAPACITY_REACHED``, ``FACTORY_ERROR``, ``SESSION_ERROR``) and the session stays open, except
  for ``CAPACITY_REACHED``/``FACTORY_ERROR`` (sent, then the connection closes) and an idle
  session (``SESSION_ERROR``, then closed).
* ``POST /reset``, ``POST /step``, ``GET /state``: OpenEnv's stateless HTTP endpoints. As in
  OpenEnv, every request gets a fresh env that is closed after it: ``/reset`` answers the first
  observation of ``seed``; ``/step`` cannot step a fresh env (a Gymnasium env must be reset first)
  and answers 409 pointing to ``/ws``; ``/state`` is the state of a fresh env.
* ``GET /health`` (``{"status": "healthy", "sessions": N, "max_sessions": M}``: OpenEnv's answer plus the counts), ``GET /metadata`` (name, description, version),
  ``GET /schema`` (JSON Schemas of action, observation and state; the spaces' ``maxLength``),
  ``GET /openapi.json`` (the HTTP endpoints), so that OpenEnv's runtime validator (``openenv validate --url``)
  passes, and ``/mcp``: MCP's streamable HTTP transport (the ``mcp`` extra), the env's turns as MCP tools, one
  env session per MCP session (:mod:`agentgym_turn.remote.mcp_tools`).

Groups: a ``reset`` may name a ``group_id`` (and a ``task_id``); without a ``seed`` it resets with
:func:`~agentgym_turn.remote.protocol.group_seed` of the two, so a group's members play one task on any server
process or machine.

Bounds: at most ``max_sessions`` sessions, stateless ``POST /reset`` requests in flight included. Past the cap the
server refuses at once, never queues: a ``/ws`` session gets a ``CAPACITY_REACHED`` error frame (the cap, the
active count and ``retry_after_s``) and a close with code 1013 ("try again later") and a reason; ``POST /reset``
and ``POST /step`` get HTTP 503 with a ``Retry-After`` header (seconds) and a JSON body saying the cap and what to
do. A session with no message for ``idle_timeout`` seconds is closed and its env released; a message
over ``max_message_bytes`` gets a ``VALIDATION_ERROR`` (one over four times that closes the
connection, code 1009); env calls run in a pool of ``workers`` threads, so a slow env never blocks
the event loop or other sessions, but for the calls an env declares quick (``quick_calls``: this suite's envs'
turns), which run on the event loop (:class:`~agentgym_turn.remote.sessions.EnvSessions`). Built on the project's one
server stack (:mod:`agentgym_turn.serving`); binds ``127.0.0.1`` unless told otherwise. With ``--token`` (or
``AGENTGYM_TOKEN``) every request and ``/ws`` handshake but ``GET /health`` must carry ``Authorization: Bearer
<token>`` (a handshake without it is refused with 401, before a session is made); each client beyond this machine
is rate-limited (``--rate-limit``; 429 with ``Retry-After``).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import sys
from typing import Any, Sequence

from ..core.args import is_int
from ..serving import (
    AppServer,
    HTTPError,
    RateLimit,
    ServerLimits,
    access_options,
    add_access_arguments,
    add_allow_host_argument,
    json_error_handlers,
    parse_json,
    read_body,
)
from .protocol import (
    ErrorCode,
    ProtocolError,
    build_schemas,
    dumps,
    error_frame,
    json_safe,
    observation_payload,
    parse_client_message,
    reset_seed,
)
from .sessions import (
    CAPACITY_RETRY_AFTER_S,
    CLOSE_CAPACITY,
    CLOSE_FACTORY,
    CLOSE_IDLE,
    DEFAULT_IDLE_TIMEOUT,
    DEFAULT_MAX_SESSIONS,
    DEFAULT_WORKERS,
    EnvFactoryError,
    EnvSessions,
    SessionCapacityError,
    describe_env,
)


def _json(obj: Any, status: int = 200, headers: dict[str, str] | None = None) -> Any:
    from starlette.responses import Response

    return Response(dumps(obj), status_code=status, media_type="application/json", headers=headers)


def _capacity_refusal(err: SessionCapacityError) -> Any:
    """HTTP 503 with ``Retry-After`` (seconds) and a body saying the cap and what to do."""
    return _json(err.http_body(), 503, headers={"Retry-After": str(CAPACITY_RETRY_AFTER_S)})


def _openapi_document(env_id: str, version: str) -> dict[str, Any]:
    """A short OpenAPI 3.1 description of the HTTP endpoints (OpenEnv's validator reads the paths;
    ``info.version`` 1.x is OpenEnv's HTTP API version)."""

    def op(method: str, summary: str) -> dict[str, Any]:
        return {method: {"summary": summary, "responses": {"200": {"description": "OK"}}}}

    return {
        "openapi": "3.1.0",
        "info": {
            "title": f"agentgym-turn {env_id} (OpenEnv HTTP API)",
            "version": "1.0.0",
            "x-agentgym-turn-version": version,
        },
        "paths": {
            "/reset": op("post", "First observation of a fresh env (stateless; sessions are on the /ws WebSocket)"),
            "/step": op("post", "Stateless step: answers 409, a fresh env must be reset first; step over /ws"),
            "/state": op("get", "State of a fresh env"),
            "/health": op("get", "Health check"),
            "/metadata": op("get", "Name, description, version"),
            "/schema": op("get", "JSON Schemas of action, observation and state"),
            "/mcp": op("post", "MCP, streamable HTTP (JSON-RPC 2.0): the env's tools, one env per MCP session"),
        },
    }


class _IdleTimer:
    """Ends a ``/ws`` session that has waited ``timeout`` seconds for a message, by cancelling its task while it waits.

    One timer a session, re-armed only when it fires: a message costs two attribute writes (``asyncio.wait_for``
    around each receive made a task a message)."""

    def __init__(self, timeout: float):
        self.timeout = timeout
        self.loop = asyncio.get_running_loop()
        self.task = asyncio.current_task()
        self.since: float | None = None  # when the session began to wait for a message; None while it works
        self.fired = False
        self.handle = self.loop.call_later(timeout, self._check)

    def waiting(self) -> None:
        self.since = self.loop.time()

    def busy(self) -> None:
        self.since = None

    def _check(self) -> None:
        start = self.loop.time() if self.since is None else self.since
        left = start + self.timeout - self.loop.time()
        if self.since is not None and left <= 1e-3:  # a timer may fire a clock tick early
            self.fired = True
            assert self.task is not None
            self.task.cancel()
        else:
            self.handle = self.loop.call_later(left, self._check)

    def consume_cancel(self) -> bool:
        """After a ``CancelledError``: whether this timer sent it (then it is consumed, and the session closes)."""
        if not self.fired:
            return False
        uncancel = getattr(self.task, "uncancel", None)  # Python 3.11+ counts a task's pending cancellations
        if uncancel is not None:
            uncancel()
        return True

    def stop(self) -> None:
        self.handle.cancel()


def _validation_detail(err: ProtocolError) -> Any:
    return err.extra.get("errors") or err.message


def build_app(
    sessions: EnvSessions,
    *,
    idle_timeout: float | None = DEFAULT_IDLE_TIMEOUT,
    max_message_bytes: int | None = None,
    limits: ServerLimits | None = None,
):
    """The Starlette app of one served env (routes in the module docstring)."""
    from starlette.applications import Starlette
    from starlette.routing import Route, WebSocketRoute
    from starlette.websockets import WebSocketDisconnect

    from .. import __version__

    spec = sessions.spec
    max_bytes = max_message_bytes or spec.default_max_message_bytes()
    limits = limits or ServerLimits(max_body_bytes=max_bytes)
    schemas = build_schemas(
        env_id=spec.env_id,
        max_action_length=spec.max_action_length,
        max_observation_length=spec.max_observation_length,
        max_episode_steps=spec.max_episode_steps,
        render_modes=spec.render_modes,
        render_fps=spec.render_fps,
        config_digest=spec.config_digest,
    )
    metadata = {
        "name": spec.env_id,
        "description": spec.description,
        "readme_content": None,
        "version": __version__,
        "author": "agentgym-turn",
        "documentation_url": None,
    }

    async def health(request: Any) -> Any:
        return _json({"status": "healthy", "sessions": sessions.active, "max_sessions": sessions.max_sessions})

    async def get_metadata(request: Any) -> Any:
        return _json(metadata)

    async def get_schema(request: Any) -> Any:
        return _json(schemas)

    async def get_state(request: Any) -> Any:
        return _json(await sessions.state(None))

    async def http_reset(request: Any) -> Any:
        body = await read_body(request, limits)
        payload = parse_json(body) if body.strip() else {}
        if not isinstance(payload, dict):
            raise HTTPError(422, "the body must be a JSON object (seed, episode_id, options)")
        try:
            _, data = parse_client_message(dumps({"type": "reset", "data": payload}), max_bytes=max_bytes)
        except ProtocolError as err:
            return _json({"detail": _validation_detail(err)}, 422)

        def fresh_reset() -> tuple[str, dict]:
            env = sessions.make_env()
            try:
                sessions.check_reset_options(env, data.get("options"))
                text, info = env.reset(seed=reset_seed(data), options=data.get("options"))
                return text, sessions.client_info(env, info)
            finally:
                env.close()

        # a stateless reset makes an env like a session does: it takes a session's place while it runs
        try:
            sessions.check_capacity()
        except SessionCapacityError as err:
            return _capacity_refusal(err)
        sessions.stateless += 1
        try:
            text, info = await sessions.call(fresh_reset)
        except PermissionError as err:
            raise HTTPError(403, str(err)) from None
        except (ValueError, TypeError) as err:
            raise HTTPError(422, str(err)) from None
        finally:
            sessions.stateless -= 1
        return _json(observation_payload(text, None, False, False, info))

    async def http_step(request: Any) -> Any:
        payload = parse_json(await read_body(request, limits))
        if not isinstance(payload, dict) or not isinstance(payload.get("action"), dict):
            return _json(
                {
                    "detail": [
                        {
                            "type": "missing",
                            "loc": ["body", "action"],
                            "msg": "Field required",
                            "input": json_safe(payload),
                        }
                    ]
                },
                422,
            )
        try:
            parse_client_message(dumps({"type": "step", "data": payload["action"]}), max_bytes=max_bytes)
        except ProtocolError as err:
            return _json({"detail": _validation_detail(err)}, 422)
        try:  # OpenEnv's stateless step makes a fresh env: at the cap it is refused as a reset is
            sessions.check_capacity()
        except SessionCapacityError as err:
            return _capacity_refusal(err)
        raise HTTPError(
            409,
            "HTTP /step is stateless, as in OpenEnv: each request gets a fresh env, and a Gymnasium env must be "
            "reset before it can step. Play episodes over the WebSocket session endpoint /ws (OpenEnv's EnvClient, "
            "or gymnasium.make('agentgym_turn/Remote-v0', base_url=...)).",
        )

    openapi = _openapi_document(spec.env_id, __version__)

    async def get_openapi(request: Any) -> Any:
        return _json(openapi)

    # MCP (the official SDK, streamable HTTP): the env's turns as tools, one env session per MCP session
    from .mcp_tools import McpEndpoint

    mcp = McpEndpoint(sessions, idle_timeout=idle_timeout, max_message_bytes=max_bytes, limits=limits)

    async def not_found(request: Any) -> Any:
        return _json(
            {
                "detail": "not found; the endpoints are /ws, /reset, /step, /state, /health, /metadata, /schema, /mcp, /openapi.json"
            },
            404,
        )

    async def websocket_session(websocket: Any) -> None:
        await websocket.accept()
        try:
            session = await sessions.open()
        except SessionCapacityError as err:
            # OpenEnv's answer (its clients read the frame), then "try again later"; the session is never made
            await websocket.send_text(dumps(err.frame()))
            await websocket.close(
                code=CLOSE_CAPACITY,
                reason=f"at capacity ({err.maximum} sessions); retry after {CAPACITY_RETRY_AFTER_S} s",
            )
            return
        except EnvFactoryError as err:
            await websocket.send_text(dumps(error_frame(ErrorCode.FACTORY_ERROR, str(err), factory_name=spec.env_id)))
            await websocket.close(code=CLOSE_FACTORY, reason="the env could not be made")
            return
        idle = _IdleTimer(idle_timeout) if idle_timeout is not None else None
        try:
            while True:
                try:
                    if idle is not None:
                        idle.waiting()
                    message = await websocket.receive()
                except asyncio.CancelledError:
                    if idle is None or not idle.consume_cancel():
                        raise
                    note = f"the session was idle for more than {idle_timeout:g} s and is closed with its env; reconnect and reset"
                    await websocket.send_text(dumps(error_frame(ErrorCode.SESSION_ERROR, note)))
                    await websocket.close(code=CLOSE_IDLE, reason=f"idle for more than {idle_timeout:g} s")
                    return
                if idle is not None:
                    idle.busy()
                if message["type"] == "websocket.disconnect":
                    return
                raw = message.get("text")
                if raw is None:
                    raw = message.get("bytes") or b""
                try:
                    kind, data = parse_client_message(raw, max_bytes=max_bytes)
                    if kind == "close":
                        await websocket.close()
                        return
                    response = await sessions.handle(session, kind, data)
                except ProtocolError as err:
                    response = err.frame()
                await websocket.send_text(dumps(response))
        except (WebSocketDisconnect, RuntimeError):  # the client left (RuntimeError: sent after it closed)
            pass
        finally:
            if idle is not None:
                idle.stop()
            await sessions.close(session)

    routes = [
        WebSocketRoute("/ws", websocket_session),
        Route("/health", health, methods=["GET"]),
        Route("/metadata", get_metadata, methods=["GET"]),
        Route("/schema", get_schema, methods=["GET"]),
        Route("/state", get_state, methods=["GET"]),
        Route("/reset", http_reset, methods=["POST"]),
        Route("/step", http_step, methods=["POST"]),
        Route("/mcp", mcp, methods=["GET", "POST", "DELETE"]),
        Route("/openapi.json", get_openapi, methods=["GET"]),
        Route("/{path:path}", not_found, methods=["GET", "POST", "PUT", "DELETE", "PATCH"]),
    ]
    return Starlette(routes=routes, exception_handlers=json_error_handlers())


class EnvServer(AppServer):
    """Serve one registered env id over OpenEnv's protocol; a context manager that runs it in a thread.

    Args:
        env_id: A registered Gymnasium id with text spaces (e.g. ``"TurnSokoban-v0"``).
        env_kwargs: ``gymnasium.make`` keyword arguments of every session's env.
        host: Interface to bind (default ``127.0.0.1``: this machine only).
        port: TCP port; 0 picks a free one (read it back from :attr:`port`).
        max_sessions: Most ``/ws`` sessions at once; one more gets ``CAPACITY_REACHED``.
        idle_timeout: Seconds without a message after which a session is closed (``None``: never).
        max_message_bytes: Largest message (default: room for the longest legal action, >= 1 MiB).
        workers: Threads running env calls (but those the env declares quick, which run on the event loop).
        expert: Serve the oracles (the ``expert`` message, search QA's gold answers in ``info``); off by default.
        client_content: Accept reset options that carry content to process (a Sokoban level text); off by default.
        verbose: Log every request.
        allowed_hosts: Domain names accepted in ``Host``/``Origin`` beside this machine's (``--allow-host``).
        token: A secret every request and ``/ws`` handshake but ``GET /health`` must carry as ``Authorization:
            Bearer <token>`` (``Remote-v0``: ``token=...``); ``None``: none.
        rate_limit: Requests (and ``/ws`` handshakes) per client IP beyond this machine
            (:class:`~agentgym_turn.serving.RateLimit`); ``None``: no limit.
        compression: Accept a client's offer of per-message deflate on ``/ws``. Off by default: compressing every
            observation took an eighth of the server's core serving WebShop pages at capacity, to save bandwidth a
            loopback or cluster link does not need; turn it on for clients on slow links.

    Example::

        with EnvServer("TurnSokoban-v0") as server:
            env = gymnasium.make("agentgym_turn/Remote-v0", base_url=server.base_url)
    """

    def __init__(
        self,
        env_id: str,
        *,
        env_kwargs: dict[str, Any] | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
        max_sessions: int = DEFAULT_MAX_SESSIONS,
        idle_timeout: float | None = DEFAULT_IDLE_TIMEOUT,
        max_message_bytes: int | None = None,
        workers: int = DEFAULT_WORKERS,
        expert: bool = False,
        client_content: bool = False,
        verbose: bool = False,
        allowed_hosts: Sequence[str] = (),
        token: str | None = None,
        rate_limit: RateLimit | None = RateLimit(),
        compression: bool = False,
    ):
        if idle_timeout is not None and not idle_timeout > 0:
            raise ValueError(f"idle_timeout must be a positive number of seconds or None, got {idle_timeout!r}.")
        if max_message_bytes is not None and not is_int(max_message_bytes, 1024):
            raise ValueError(f"max_message_bytes must be an integer of at least 1024, got {max_message_bytes!r}.")
        self.spec = describe_env(env_id, env_kwargs)
        self.sessions = EnvSessions(
            self.spec, max_sessions=max_sessions, workers=workers, expert=expert, client_content=client_content
        )
        self.max_message_bytes = max_message_bytes or self.spec.default_max_message_bytes()
        limits = ServerLimits(max_body_bytes=self.max_message_bytes)
        app = build_app(
            self.sessions, idle_timeout=idle_timeout, max_message_bytes=self.max_message_bytes, limits=limits
        )
        try:
            super().__init__(
                app,
                host=host,
                port=port,
                limits=limits,
                verbose=verbose,
                allowed_hosts=allowed_hosts,
                token=token,
                rate_limit=rate_limit,
            )
        except (OSError, ValueError):
            self.sessions.shutdown()
            raise
        # A frame over the app's limit still arrives whole (and gets an error frame); beyond 4x it,
        # uvicorn's WebSocket protocol refuses it unread (close code 1009).
        self._server.config.ws_max_size = 4 * self.max_message_bytes
        self._server.config.ws_per_message_deflate = bool(compression)

    @property
    def ws_url(self) -> str:
        """The session endpoint, ``ws://host:port/ws``."""
        return "ws" + self.base_url[len("http") :] + "/ws"

    def stop(self) -> None:
        """Stop serving: open sessions are closed (code 1012) and their envs released."""
        try:
            super().stop()
        finally:
            self.sessions.shutdown()

    def __enter__(self) -> "EnvServer":
        self.start()
        return self


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="agentgym-turn serve env",
        description="Serve a registered env over OpenEnv's wire protocol (WebSocket sessions at /ws; /reset, /step, /state, /health, /metadata, /schema).",
    )
    p.add_argument("env_id", help="a registered id, e.g. TurnSokoban-v0")
    p.add_argument("--host", default="127.0.0.1", help="interface to bind (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=8000, help="port (default 8000, OpenEnv's; 0 picks a free one)")
    p.add_argument(
        "--max-sessions",
        type=int,
        default=DEFAULT_MAX_SESSIONS,
        help=f"most sessions at once (default {DEFAULT_MAX_SESSIONS})",
    )
    p.add_argument(
        "--idle-timeout",
        type=float,
        default=DEFAULT_IDLE_TIMEOUT,
        help=f"seconds a silent session lives (default {DEFAULT_IDLE_TIMEOUT:g}; 0: forever)",
    )
    p.add_argument(
        "--max-message-bytes",
        type=int,
        default=None,
        help="largest message (default: room for the env's longest action, at least 1 MiB)",
    )
    p.add_argument(
        "--workers",
        type=int,
        default=DEFAULT_WORKERS,
        help=f"threads running env calls but the env's quick ones (default {DEFAULT_WORKERS})",
    )
    p.add_argument(
        "--kwarg",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="env argument, repeatable (e.g. --kwarg num_products=1000)",
    )
    p.add_argument(
        "--expert",
        action="store_true",
        help="serve the oracles: the expert's action and search QA's gold answers (off: a client could copy them)",
    )
    p.add_argument(
        "--client-content",
        action="store_true",
        help="accept reset options that carry content the server must process (a Sokoban level text, which it "
        "solves: seconds of CPU a request); off: only indexes into the env's own tasks",
    )
    p.add_argument(
        "--ws-compression",
        action="store_true",
        help="accept per-message deflate on /ws (off: it costs server CPU on every observation, for bandwidth a "
        "local or cluster link does not need)",
    )
    add_allow_host_argument(p)
    add_access_arguments(p)
    p.add_argument("--verbose", action="store_true", help="log every request")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``agentgym-turn serve env``."""
    from ..core.args import CliError, parse_kwargs
    from ..registration import resolve_env_id

    parser = build_parser()
    args = parser.parse_args(list(argv) if argv is not None else None)
    for flag, value, low in (
        ("--max-sessions", args.max_sessions, 1),
        ("--workers", args.workers, 1),
        ("--idle-timeout", args.idle_timeout, 0),
    ):
        if value < low:
            parser.error(f"{flag} must be at least {low}, got {value:g}")  # before a possibly long env build
    if args.max_message_bytes is not None and args.max_message_bytes < 1024:
        parser.error(f"--max-message-bytes must be at least 1024, got {args.max_message_bytes}")
    try:
        access = access_options(args)
    except ValueError as err:
        parser.error(str(err))  # before a possibly long env build
    try:
        env_id = resolve_env_id(args.env_id)
        kwargs = parse_kwargs(args.kwarg)
        print(f"Making {env_id} ...", file=sys.stderr, flush=True)
        server = EnvServer(
            env_id,
            env_kwargs=kwargs,
            host=args.host,
            port=args.port,
            max_sessions=args.max_sessions,
            idle_timeout=args.idle_timeout or None,
            max_message_bytes=args.max_message_bytes,
            workers=args.workers,
            expert=args.expert,
            client_content=args.client_content,
            verbose=args.verbose,
            allowed_hosts=args.allow_host,
            compression=args.ws_compression,
            **access,
        )
    except (CliError, OSError, ValueError, TypeError) as err:
        print(f"agentgym-turn serve env: {err}", file=sys.stderr)
        return 2
    # The env's world (levels, a catalog, an index) lives as long as the server: a full collection need not walk it
    # (one took 30-70 ms of the event loop, every session waiting).
    gc.freeze()
    return server.run_until_interrupted(
        f"Serving {env_id} at {server.base_url} (sessions: {server.ws_url}, at most {args.max_sessions}; Ctrl-C stops)"
    )


if __name__ == "__main__":
    sys.exit(main())
