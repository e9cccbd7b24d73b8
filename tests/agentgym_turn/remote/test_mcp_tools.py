"""The MCP endpoint of served envs (``/mcp``), played with the official SDK's own client (``ClientSession`` over
``streamable_http_client``) against an in-process twin env stepped in lockstep.

Servers run in this process (``EnvServer`` in a thread, free ports) and are stopped at the end of the module; waits
are bounded by counts, never asserted in seconds.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import re
import sys
import time
import urllib.error
import urllib.request
from typing import Any, AsyncIterator

import gymnasium as gym
import pytest

import agentgym_turn

pytest.importorskip("mcp")

import anyio  # noqa: E402  (after the skip: the SDK brings it)
from mcp import ClientSession  # noqa: E402
from mcp.client.streamable_http import streamable_http_client  # noqa: E402
from mcp.shared.exceptions import MCPError  # noqa: E402
from websockets.sync.client import connect  # noqa: E402

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from agentgym_turn.serving import ServerLimits  # noqa: E402
from agentgym_turn.remote.mcp_tools import McpEndpoint  # noqa: E402
from support.served import servers, shared_server  # noqa: E402,F401  (servers: a fixture)
from agentgym_turn.remote.protocol import SHOWN_REWARD_KEY, json_safe  # noqa: E402
from agentgym_turn.remote.server import EnvServer, EnvSessions  # noqa: E402
from agentgym_turn.remote.sessions import ServedEnvSpec  # noqa: E402

IDS = agentgym_turn.env_ids()

#: The action tools each id must list beside reset and respond.
ACTION_TOOLS = {
    "Sokoban": {"move"},
    "Dialog": {"say", "shop"},
    "WebShop": {"search", "click"},
    "SearchQA": {"search", "answer"},
}


def _family(env_id: str) -> str:
    return next(name for name in ACTION_TOOLS if name in env_id)  # Dialog before WebShop: its id holds both


@contextlib.asynccontextmanager
async def _client(server: EnvServer) -> AsyncIterator[ClientSession]:
    """An initialized MCP session with ``server`` (ended, with a DELETE, on exit)."""
    async with streamable_http_client(server.base_url + "/mcp") as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            yield session


def _wait_until(condition: Any, what: str) -> None:
    for _ in range(1000):
        if condition():
            return
        time.sleep(0.01)
    raise AssertionError(f"never happened: {what}")


def _tool_call(env_id: str, expert: str) -> tuple[str, dict[str, Any], str]:
    """The env-specific tool call that plays ``expert``'s action, and the response text the tool must send."""
    family = _family(env_id)
    if family == "Sokoban":
        moves = [m.strip() for m in re.search(r"<answer>(.*?)</answer>", expert, re.S)[1].split("||")]
        return "move", {"directions": moves}, "<answer>" + " || ".join(moves) + "</answer>"
    if family == "Dialog":
        said = re.fullmatch(r"<say>(.*)</say>", expert.strip(), re.S)
        return ("say", {"text": said[1]}, f"<say>{said[1]}</say>") if said else ("shop", {"action": expert}, expert)
    if family == "WebShop":
        kind, arg = re.fullmatch(r"(search|click)\[(.*)\]", expert.strip(), re.S).groups()
        return kind, {"query" if kind == "search" else "target": arg}, f"{kind}[{arg}]"
    kind, arg = re.search(r"<(search|answer)>(.*?)</\1>", expert, re.S).groups()
    arg = arg.strip()
    return kind, {"query" if kind == "search" else "answer": arg}, f"<{kind}>{arg}</{kind}>"


def _assert_same(result: Any, local: tuple, oracle_keys: tuple[str, ...]) -> None:
    """An MCP tool result equals a local reset (``(text, info)``) or step (``(text, reward, terminated, truncated, info)``),
    the oracle keys left out."""
    assert not result.is_error, result.content[0].text
    text, info = local[0], local[-1]
    reward, terminated, truncated = local[1:4] if len(local) == 5 else (None, False, False)
    assert result.content[0].text == text
    got = result.structured_content
    assert (got["terminated"], got["truncated"]) == (terminated, truncated)
    assert got["reward"] == (None if reward is None else pytest.approx(reward, abs=1e-9))
    assert not set(oracle_keys) & set(got["info"])
    remote_info = {k: v for k, v in got["info"].items() if k != SHOWN_REWARD_KEY}
    assert remote_info == json_safe({k: v for k, v in info.items() if k not in oracle_keys})


async def _episode(session: ClientSession, env_id: str, seed: int, *, tools: bool) -> float:
    """Play one expert episode of ``seed`` through MCP (``respond``, or the env's own tools) beside a local twin;
    every turn must match. The total reward."""
    twin = gym.make(env_id)
    oracle_keys = tuple(getattr(twin.unwrapped, "oracle_info_keys", ()))
    _assert_same(await session.call_tool("reset", {"seed": seed}), twin.reset(seed=seed), oracle_keys)
    total = 0.0
    for _ in range(50):
        expert = twin.unwrapped.expert_action()
        name, arguments, text = _tool_call(env_id, expert) if tools else ("respond", {"response": expert}, expert)
        local = twin.step(text)
        _assert_same(await session.call_tool(name, arguments), local, oracle_keys)
        total += local[1]
        if local[2] or local[3]:
            break
    assert local[4]["success"], f"{env_id} seed {seed}: the expert episode failed"
    twin.close()
    return total


@pytest.mark.parametrize("env_id", IDS)
def test_every_id__lists_its_tools_and_plays_expert_episodes_equal_to_in_process(servers, env_id):
    server = shared_server(servers, env_id)
    max_length = server.spec.max_action_length

    async def main() -> None:
        async with _client(server) as session:
            tools = {tool.name: tool for tool in (await session.list_tools()).tools}
            assert set(tools) == {"reset", "respond", *ACTION_TOOLS[_family(env_id)]}
            assert set(tools["reset"].input_schema["properties"]) == {"seed", "options"}
            for name, tool in tools.items():
                assert tool.output_schema["required"] == ["reward", "terminated", "truncated", "info"]
                for prop in tool.input_schema["properties"].values():  # every text is bounded by the action space
                    if prop.get("type") == "string":
                        assert 0 < prop["maxLength"] <= max_length
                    if prop.get("type") == "array":
                        assert (
                            prop["items"]["enum"] == ["Up", "Down", "Left", "Right"] and prop["maxItems"] <= max_length
                        )
            await _episode(session, env_id, seed=0, tools=False)
            await _episode(session, env_id, seed=1, tools=True)  # the same session: one env, a second episode

    anyio.run(main)
    _wait_until(lambda: server.sessions.active == 0, "the MCP session's env was closed when the client ended it")


def test_tool_errors__are_tool_errors_and_the_session_and_server_go_on(servers):
    server = shared_server(servers, "TurnSokoban-v0")

    async def main() -> None:
        async with _client(server) as session:

            async def refused(name: str, arguments: dict[str, Any], says: str) -> None:
                result = await session.call_tool(name, arguments)
                assert result.is_error and says in result.content[0].text, (name, arguments, result)

            await refused("dance", {}, "unknown tool 'dance'")
            await refused("move", {"directions": ["Up"]}, "reset")  # a step before any reset
            await refused("move", {"directions": ["Up", "Sideways"]}, "list of Up, Down, Left, Right")
            await refused("move", {"directions": "Up"}, "list of Up")
            await refused("move", {}, "needs the argument 'directions'")
            await refused("move", {"directions": ["Up"], "speed": 2}, "unknown argument(s) ['speed']")
            await refused("respond", {"response": 7}, "must be a string")
            await refused("reset", {"seed": -1}, "seed must be a non-negative integer")
            await refused("reset", {"seed": "zero"}, "seed must be a non-negative integer")
            await refused("reset", {"options": 3}, "options must be an object")
            await refused("reset", {"level": 1}, "unknown argument(s) ['level']")
            await refused("respond", {"response": "x" * 70_000}, "at most 65,536")
            await refused("move", {"directions": ["Up"] * 70_000}, "70,000 moves")
            # still fine: an episode plays
            twin = gym.make("TurnSokoban-v0")
            _assert_same(await session.call_tool("reset", {"seed": 4}), twin.reset(seed=4), ())
            _assert_same(await session.call_tool("respond", {"response": "no idea"}), twin.step("no idea"), ())

    anyio.run(main)
    with urllib.request.urlopen(server.base_url + "/health", timeout=10) as answer:
        assert json.loads(answer.read())["status"] == "healthy"


def test_oracle_keys__reach_mcp_clients_only_with_expert(servers):
    async def reset_info(server: EnvServer) -> dict[str, Any]:
        async with _client(server) as session:
            return (await session.call_tool("reset", {"seed": 2})).structured_content["info"]

    for expert in (False, True):
        info = anyio.run(reset_info, shared_server(servers, "TurnSearchQA-v0", expert=expert))
        assert ("golden_answers" in info) is expert


def test_session_cap__is_shared_with_websocket_sessions(servers):
    server = shared_server(servers, "TurnSokoban-v0", max_sessions=1)

    async def main(ws: Any) -> None:
        async with _client(server) as session:
            result = await session.call_tool("reset", {"seed": 0})
            assert result.is_error and "at capacity" in result.content[0].text
            ws.close()
            _wait_until(lambda: server.sessions.active == 0, "the /ws session's place was freed")
            assert not (await session.call_tool("reset", {"seed": 0})).is_error
            assert server.sessions.active == 1

    with connect(server.ws_url) as ws:  # holds the one place
        _wait_until(lambda: server.sessions.active == 1, "the /ws session holds the place")
        anyio.run(main, ws)
    _wait_until(lambda: server.sessions.active == 0, "the MCP session's place was freed")


def test_idle_session__is_ended_with_its_env_and_a_new_session_plays(servers):
    server = shared_server(servers, "TurnSokoban-v0", idle_timeout=0.2)

    async def main() -> None:
        async with _client(server) as session:
            assert not (await session.call_tool("reset", {"seed": 0})).is_error
            for _ in range(1000):
                if server.sessions.active == 0:
                    break
                await anyio.sleep(0.01)
            assert server.sessions.active == 0
            with pytest.raises(MCPError, match="Session not found"):  # as /ws: the idle session is gone
                await session.call_tool("move", {"directions": ["Up"]})
        async with _client(server) as session:
            twin = gym.make("TurnSokoban-v0")
            _assert_same(await session.call_tool("reset", {"seed": 0}), twin.reset(seed=0), ())

    anyio.run(main)


def _post(server: EnvServer, body: bytes) -> tuple[int, Any]:
    request = urllib.request.Request(
        server.base_url + "/mcp", data=body, method="POST", headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=10) as answer:
        return answer.status, json.loads(answer.read())


def test_a_post_that_is_not_json_rpc__gets_a_json_rpc_error_with_status_200(servers):
    # what OpenEnv's runtime validator sends (POST /mcp {}) and reads (a JSON-RPC 2.0 payload)
    server = shared_server(servers, "TurnSokoban-v0")
    status, answer = _post(server, b"{}")
    assert status == 200 and answer["jsonrpc"] == "2.0" and answer["error"]["code"] == -32600
    assert _post(server, b"{nope")[1]["error"]["code"] == -32700


def test_without_the_sdk__mcp_answers_a_json_rpc_error_naming_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "mcp", None)
    with EnvServer("TurnSokoban-v0") as server:
        status, answer = _post(server, b'{"jsonrpc": "2.0", "method": "tools/list", "id": 3}')
    assert status == 200 and answer["jsonrpc"] == "2.0" and answer["id"] == 3
    assert "agentgym-turn[mcp]" in answer["error"]["message"]


#: One id per tool set.
_TOOL_SET_IDS = ("TurnSokoban-v0", "TurnWebShop-v0", "TurnWebShopDialog-v0", "TurnSearchQA-v0")


@functools.cache
def _endpoint(env_id: str) -> McpEndpoint:
    """The ``/mcp`` app of ``env_id`` without a server (no env is made: only the arguments are checked)."""
    return McpEndpoint(
        EnvSessions(ServedEnvSpec(env_id, {}, 65_536, 65_536, 5)),
        idle_timeout=None,
        max_message_bytes=1 << 20,
        limits=ServerLimits(),
    )


_NAMES = ["reset", "respond", "move", "search", "click", "answer", "say", "shop"]
_KEYS = ["seed", "options", "response", "directions", "query", "target", "answer", "text", "action"]
_JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False)
    | st.text(max_size=12)
    | st.sampled_from(["Up", "Left"]),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=10,
)


@settings(max_examples=150, deadline=None)
@given(
    env_id=st.sampled_from(_TOOL_SET_IDS),
    name=st.sampled_from(_NAMES) | st.text(max_size=8),
    arguments=st.dictionaries(st.sampled_from(_KEYS) | st.text(max_size=6), _JSON, max_size=3),
)
def test_any_tool_call_outside_a_session__is_a_tool_error_never_an_exception(env_id, name, arguments):
    result = asyncio.run(_endpoint(env_id).call_tool(None, name, arguments))
    assert result.is_error and result.content[0].text


_INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}},
}
_ACCEPT = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}


def _raw(
    server: EnvServer, message: Any, session: str | None = None, raw: bytes | None = None
) -> tuple[int, dict, Any]:
    """POST one JSON-RPC message (or ``raw`` bytes) to /mcp; ``(status, headers, answer or None)``."""
    headers = {**_ACCEPT, **({"mcp-session-id": session} if session else {})}
    request = urllib.request.Request(
        server.base_url + "/mcp",
        data=raw if raw is not None else json.dumps(message).encode(),
        method="POST",
        headers=headers,
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            body = answer.read()
            return answer.status, dict(answer.headers), json.loads(body) if body.strip() else None
    except urllib.error.HTTPError as err:
        return err.code, dict(err.headers), err.read()


def _open(server: EnvServer) -> str:
    status, headers, _ = _raw(server, _INIT)
    assert status == 200, status
    session = next(v for k, v in headers.items() if k.lower() == "mcp-session-id")
    _raw(server, {"jsonrpc": "2.0", "method": "notifications/initialized"}, session)
    return session


def test_an_initialize_over_the_session_cap_is_a_503_with_retry_after(servers):
    server = shared_server(servers, "TurnSokoban-v0", max_sessions=1)
    held = _open(server)
    try:
        status, headers, _ = _raw(server, _INIT)
        assert status == 503 and int({k.lower(): v for k, v in headers.items()}["retry-after"]) >= 1
    finally:
        urllib.request.urlopen(
            urllib.request.Request(server.base_url + "/mcp", method="DELETE", headers={"mcp-session-id": held}),
            timeout=10,
        ).close()


def test_a_lone_surrogate_in_a_tool_argument_plays_its_turn_as_on_the_websocket(servers):
    """JSON can write a lone surrogate (``\\ud800``), which is no character: /ws passes it to the env, and MCP, whose SDK
    refuses such a message whole, passes U+FFFD; either way the turn is played, never a parse error."""
    server = shared_server(servers, "TurnSokoban-v0")
    session = _open(server)
    call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "reset", "arguments": {"seed": 0}}}
    assert _raw(server, call, session)[0] == 200
    respond = json.dumps(
        {
            "jsonrpc": "2.0",
            "id": 3,
            "method": "tools/call",
            "params": {"name": "respond", "arguments": {"response": "PLACEHOLDER"}},
        }
    ).replace("PLACEHOLDER", "bad \\ud800 move")
    status, _, answer = _raw(server, None, session, raw=respond.encode())
    assert status == 200 and "error" not in answer, answer
    result = answer["result"]
    assert result["isError"] is False and result["structuredContent"]["info"]["action_is_valid"] is False
