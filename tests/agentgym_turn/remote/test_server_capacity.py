"""A served env past its session cap refuses at once and says so; ``agentgym_turn/Remote-v0`` backs off and retries.

Servers run in this process (``EnvServer`` in a thread) on free ports. Refusals are asserted on what the server
answered and counted (``sessions.refused``); a wall-clock bound appears only as a hang guard.
"""

from __future__ import annotations

import gc
import http.client
import json
import random
import sys
import threading
import time
from typing import Any

import gymnasium as gym
import pytest
from hypothesis import given
from hypothesis import strategies as st
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect

import agentgym_turn  # noqa: F401  (registers the ids)
from agentgym_turn.remote import REMOTE_ENV_ID
from agentgym_turn.remote.client import ServerAtCapacityError, capacity_backoff
from agentgym_turn.remote.server import CAPACITY_RETRY_AFTER_S, EnvServer
from support.served import wait_for

#: Hang guard of a refusal that must come at once (not a timing assertion: a refusal takes milliseconds).
HANG_GUARD_S = 5.0


@pytest.fixture
def full_server():
    """A server of two sessions, both held by clients; yields ``(server, [held clients])``."""
    with EnvServer("TurnSokoban-v0", max_sessions=2) as server:
        held = [_remote(server), _remote(server)]
        for seed, env in enumerate(held):
            env.reset(seed=seed)
        yield server, held
        for env in held:
            env.close()


def _remote(server: EnvServer, **kwargs: Any) -> Any:
    return gym.make(REMOTE_ENV_ID, base_url=server.base_url, env_id=server.spec.env_id, **kwargs)


def test_a_third_client_is_refused_at_once_with_a_connection_error_naming_the_cap(full_server):
    server, _ = full_server
    third = _remote(server, capacity_wait_s=0)
    started = time.monotonic()
    with pytest.raises(ServerAtCapacityError) as err:
        third.reset(seed=2)
    assert time.monotonic() - started < HANG_GUARD_S
    assert isinstance(err.value, ConnectionError) and (err.value.max_sessions, err.value.active_sessions) == (2, 2)
    message = str(err.value)
    assert "cap of 2 sessions" in message and "--max-sessions" in message and "capacity_wait_s" in message
    assert server.sessions.refused == 1 and server.sessions.active == 2
    third.close()


def test_a_refused_reset_leaves_the_client_ready_once_a_slot_frees(full_server):
    server, held = full_server
    third = _remote(server, capacity_wait_s=0)
    with pytest.raises(ServerAtCapacityError):
        third.reset(seed=2)  # Gymnasium's passive checker marked its reset check done before this call
    held[0].close()
    observation, info = third.reset(seed=2)
    _, reward, _, _, info = third.step("<answer>Up</answer>")
    assert info["turn"] == 1 and info["exit_status"] in ("ok", "invalid_action")
    third.close()


def test_a_refused_client_retries_and_takes_the_place_a_closing_session_frees(full_server):
    server, held = full_server
    third = _remote(server, capacity_wait_s=20)
    closer = threading.Timer(0.3, held[0].close)  # another trainer worker ends its episode a little later
    closer.start()
    try:
        observation, info = third.reset(seed=2)
    finally:
        closer.join()
    assert info["turn"] == 0 and observation == gym.make("TurnSokoban-v0").reset(seed=2)[0]
    assert server.sessions.refused >= 1  # it was refused first, then let in
    assert server.sessions.active == 2
    third.close()


def test_a_client_gives_up_after_capacity_wait_s_with_the_cap_in_the_error(full_server):
    server, _ = full_server
    third = _remote(server, capacity_wait_s=0.5)
    started = time.monotonic()
    with pytest.raises(ServerAtCapacityError, match=r"cap of 2 sessions .* retries over capacity_wait_s=0\.5 s"):
        third.reset(seed=2)
    assert time.monotonic() - started < HANG_GUARD_S + 0.5
    assert server.sessions.refused >= 2  # the first refusal and at least one retry
    assert server.sessions.active == 2
    third.close()


def test_http_refusals_are_503_with_retry_after_and_a_body_saying_the_cap(full_server):
    server, _ = full_server
    connection = http.client.HTTPConnection(server.host, server.port, timeout=10)
    try:
        for path, body in (("/reset", b'{"seed": 3}'), ("/step", b'{"action": {"message": "<answer>Up</answer>"}}')):
            connection.request("POST", path, body=body, headers={"Content-Type": "application/json"})
            response = connection.getresponse()
            answer = json.loads(response.read())
            assert response.status == 503 and int(response.headers["Retry-After"]) == CAPACITY_RETRY_AFTER_S
            assert answer["code"] == "CAPACITY_REACHED" and (answer["max_sessions"], answer["active_sessions"]) == (
                2,
                2,
            )
            assert answer["retry_after_s"] == CAPACITY_RETRY_AFTER_S and "--max-sessions" in answer["detail"]
    finally:
        connection.close()
    assert server.sessions.refused == 2 and server.sessions.stateless == 0


def test_a_refused_websocket_gets_openenvs_capacity_frame_then_close_code_1013(full_server):
    server, _ = full_server
    with connect(server.ws_url, proxy=None, open_timeout=10) as ws:
        frame = json.loads(ws.recv(timeout=10))
        with pytest.raises(ConnectionClosed) as closed:
            ws.recv(timeout=10)
    assert frame["type"] == "error" and frame["data"]["code"] == "CAPACITY_REACHED"
    assert (frame["data"]["max_sessions"], frame["data"]["retry_after_s"]) == (2, CAPACITY_RETRY_AFTER_S)
    assert closed.value.rcvd.code == 1013 and "at capacity (2 sessions)" in closed.value.rcvd.reason


def _rss_bytes() -> int:
    """This process's resident set (the server runs in a thread of it)."""
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS in /proc/self/status")


def _refuse_over_http(connection: http.client.HTTPConnection, i: int) -> None:
    path, body = ("/reset", b'{"seed": 1}') if i % 2 else ("/step", b'{"action": {"message": "Up"}}')
    connection.request("POST", path, body=body, headers={"Content-Type": "application/json"})
    response = connection.getresponse()
    response.read()
    assert response.status == 503


def _refuse_over_websocket(server: EnvServer) -> None:
    with connect(server.ws_url, proxy=None, open_timeout=10, close_timeout=2) as ws:
        assert json.loads(ws.recv(timeout=10))["data"]["code"] == "CAPACITY_REACHED"
        with pytest.raises(ConnectionClosed):
            ws.recv(timeout=10)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads VmRSS from /proc (Linux)")
def test_two_thousand_refusals_leave_memory_flat_and_no_session_behind():
    with EnvServer("TurnSokoban-v0", max_sessions=1) as server:
        held = _remote(server)
        held.reset(seed=0)
        connection = http.client.HTTPConnection(server.host, server.port, timeout=10)
        try:
            for i in range(200):  # warm every path first: buffers, caches and pools reach their working size
                _refuse_over_http(connection, i)
                if i % 4 == 0:
                    _refuse_over_websocket(server)
            gc.collect()
            before, refused = _rss_bytes(), server.sessions.refused
            for i in range(1000):
                _refuse_over_http(connection, i)
                _refuse_over_websocket(server)
            gc.collect()
            growth = _rss_bytes() - before
        finally:
            connection.close()
        assert server.sessions.refused - refused == 2000
        assert growth < 20 << 20, f"RSS grew by {growth / 2**20:.1f} MiB over 2,000 refusals"
        assert server.sessions.active == 1 and server.sessions.stateless == 0
        assert held.step("<answer>Up</answer>")[4]["exit_status"] != "infra_error"  # the held session still plays
        held.close()
        wait_for(lambda: server.sessions.active == 0)


def _schema_app_refusing_every_session(refusals: list[int]):
    """An ASGI app that publishes a Sokoban ``/schema`` and refuses every ``/ws`` upgrade with 503 (as a proxy in front
    of a full server would), counting the refusals."""
    from agentgym_turn.remote.protocol import build_schemas, dumps

    local = gym.make("TurnSokoban-v0")
    schemas = dumps(
        build_schemas(
            env_id="TurnSokoban-v0",
            max_action_length=local.action_space.max_length,
            max_observation_length=local.observation_space.max_length,
            max_episode_steps=None,
            render_modes=["ansi"],
            render_fps=4,
        )
    ).encode()

    async def app(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            await send(
                {"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]}
            )
            await send({"type": "http.response.body", "body": schemas})
        elif scope["type"] == "websocket":
            await receive()  # websocket.connect
            refusals.append(1)
            body = b'{"max_sessions": 3, "active_sessions": 3}'
            await send(
                {
                    "type": "websocket.http.response.start",
                    "status": 503,
                    "headers": [
                        (b"retry-after", b"0"),
                        (b"content-type", b"application/json"),
                        (b"content-length", str(len(body)).encode()),
                    ],
                }
            )
            await send({"type": "websocket.http.response.body", "body": body})

    return app


def test_an_upgrade_refused_with_503_is_backed_off_as_a_capacity_refusal():
    from agentgym_turn.serving import AppServer

    refusals: list[int] = []
    with AppServer(_schema_app_refusing_every_session(refusals)) as server:
        env = gym.make(REMOTE_ENV_ID, base_url=server.base_url, capacity_wait_s=0.3)
        with pytest.raises(ServerAtCapacityError, match="cap of 3 sessions") as err:
            env.reset(seed=0)
        env.close()
    assert err.value.max_sessions == 3 and len(refusals) >= 2  # refused, retried, refused again


@given(attempt=st.integers(0, 200), retry_after=st.one_of(st.none(), st.floats(0, 1e6)), seed=st.integers(0, 2**32))
def test_capacity_backoff_grows_to_a_bound_honours_retry_after_and_jitters_upward(attempt, retry_after, seed):
    base = min(8.0, 0.25 * 2.0 ** min(attempt, 16))
    floor = max(base, min(retry_after, 60.0)) if retry_after else base
    wait = capacity_backoff(attempt, retry_after, random.Random(seed))
    assert floor <= wait <= 1.5 * floor + 1e-9
    assert wait == capacity_backoff(attempt, retry_after, random.Random(seed))  # jitter only from the given stream


def test_capacity_wait_s_is_checked():
    with EnvServer("TurnSokoban-v0", max_sessions=1) as server:
        for bad in (-1, float("inf"), float("nan"), "30"):
            with pytest.raises(ValueError, match="capacity_wait_s"):
                _remote(server, capacity_wait_s=bad)
