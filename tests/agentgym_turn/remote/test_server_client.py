"""Served envs (OpenEnv's wire protocol) and the Gymnasium client env ``agentgym_turn/Remote-v0``.

The servers run in this process (``EnvServer`` in a thread) on free ports; no test measures time:
waits are bounded by counts or by the client's own timeouts.
"""

from __future__ import annotations

import json
import re
import socket
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from typing import Any

import gymnasium as gym
import pytest
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect

import agentgym_turn
from agentgym_turn.remote import REMOTE_ENV_ID
from agentgym_turn.remote.client import ServerAtCapacityError
from agentgym_turn.remote.protocol import ACTION_FIELD
from agentgym_turn.remote.server import EnvServer
from support.served import servers, shared_server, wait_for  # noqa: F401  (servers: a fixture)
from support.toy_envs import GuessNumberEnv

IDS = agentgym_turn.env_ids()

#: Invalid turns mixed into every transcript: empty, prose, a broken tag, characters outside the
#: observation charset (NUL, a lone surrogate), and one character over the action limit.
INVALID = ["", "I would rather not.", "<answer>unclosed", "é\x00\ud800🙂 <search>", None]


def _over_limit(env: Any) -> str:
    return "x" * (env.action_space.max_length + 1)


def _transcript(env: Any, seed: int, after_reset: Any = None) -> list[Any]:
    """Reset, render, and alternate invalid and expert turns until the episode ends, plus one
    step after it ended; every return value in order. ``after_reset()`` runs after the reset."""
    out: list[Any] = [("reset", env.reset(seed=seed)), ("render", env.render())]
    if after_reset is not None:
        after_reset()
    for turn in range(40):
        expert = env.unwrapped.expert_action()
        invalid = INVALID[(turn // 2) % len(INVALID)]
        action = expert if turn % 2 else (_over_limit(env) if invalid is None else invalid)
        result = env.step(action)
        out += [("expert", expert), ("step", action[:100], result), ("render", env.render())]
        if result[2] or result[3]:
            out.append(("after-end", env.step(expert)))
            break
    return out


def _server(servers: dict[str, EnvServer], env_id: str, **kwargs: Any) -> EnvServer:
    """A shared server of ``env_id``; with the oracles served (``expert=True``) unless told otherwise, so that the
    remote env compares with the local one key for key."""
    kwargs.setdefault("expert", True)
    return shared_server(servers, env_id, **kwargs)


def _remote(server: EnvServer, **kwargs: Any) -> Any:
    return gym.make(REMOTE_ENV_ID, base_url=server.base_url, env_id=server.spec.env_id, **kwargs)


# ---------------------------------------------------------------------- transcripts
@pytest.mark.parametrize("env_id", IDS)
def test_served_transcript_equals_the_in_process_transcript_byte_for_byte(servers, env_id):
    server = _server(servers, env_id)
    remote = _remote(server, render_mode="ansi")
    local = gym.make(env_id, render_mode="ansi")
    assert remote.observation_space == local.observation_space
    assert remote.action_space == local.action_space
    assert remote.unwrapped.max_episode_steps == local.spec.max_episode_steps
    for seed in (0, 7):
        expected = _transcript(local, seed)
        got = _transcript(remote, seed)
        assert repr(got) == repr(expected)  # same values and same types (float rewards, bool flags)
        assert any(step[0] == "step" and step[2][4]["action_is_valid"] is False for step in got)
    # reset() without a seed continues the episode RNG on both sides
    assert remote.reset()[0] == local.reset()[0]
    # only invalid turns: the served id's TimeLimit truncates at the same turn
    limit = local.spec.max_episode_steps
    got = [remote.step("not an action") for _ in range(limit)]
    assert repr(got) == repr([local.step("not an action") for _ in range(limit)])
    assert [r[3] for r in got] == [False] * (limit - 1) + [True]
    remote.close()


#: Garbage a policy (or a bug around it) may send: past the message bound in bytes, past the action space in
#: characters, and values JSON cannot carry. Each is an invalid turn served as in process, never a fault.
GARBAGE = [
    ("4 MiB", "x" * (4 << 20)),
    ("astral past the limit", "\U0001f600" * 70_000),
    ("NaN", float("nan")),
    ("infinity in a list", [float("inf")]),
    ("an int", 5),
    ("None", None),
]


@pytest.mark.parametrize("name, action", GARBAGE, ids=[g[0] for g in GARBAGE])
def test_garbage_actions_are_the_invalid_turns_they_are_in_process_at_once(servers, name, action):
    server = _server(servers, "TurnSokoban-v0")
    remote, local = _remote(server, resume_wait_s=30), gym.make("TurnSokoban-v0")
    remote.reset(seed=0), local.reset(seed=0)
    got, want = remote.step(action), local.step(action)
    assert repr(got) == repr(want) and got[4]["exit_status"] == "invalid_action"
    assert remote.unwrapped.resumed == 0  # judged by the first session, not after a dropped socket and a replay
    assert repr(remote.step("<answer>Up</answer>")) == repr(local.step("<answer>Up</answer>"))
    remote.close()


def test_the_turn_contract_checker_passes_on_the_client_env_and_says_why_it_skips_pickling(servers):
    from agentgym_turn.testing import check_turn_env

    server = _server(servers, "TurnSokoban-v0")
    report = check_turn_env(lambda: _remote(server), episodes=2, fuzz_actions=16, raise_on_problem=False)
    # the one documented difference (a live session cannot be pickled) is a warning with its reason, not a problem
    assert report.ok, report.summary()
    assert "pickling not checked: it holds a live session on its server" in report.warnings


def test_info_is_json_data_so_the_client_gets_it_unchanged():
    from agentgym_turn.remote.protocol import json_safe

    info = {"turn": 1, "ids": ["a", "b"], "nested": {"x": 0.5, "y": None, "ok": True}}
    assert json_safe(info) == info and json.loads(json.dumps(json_safe(info))) == info
    np = pytest.importorskip("numpy")
    assert json_safe({"t": (1, 2), 3: np.float32(0.5), "a": np.arange(2)}) == {"t": [1, 2], "3": 0.5, "a": [0, 1]}


def test_reset_options_errors_are_raised_by_the_client_as_the_local_env_raises_them(servers):
    server = _server(servers, "TurnSokoban-v0")
    remote, local = _remote(server), gym.make("TurnSokoban-v0")
    with pytest.raises(ValueError) as remote_err:
        remote.reset(seed=0, options={"levle": 3})
    with pytest.raises(ValueError) as local_err:
        local.reset(seed=0, options={"levle": 3})
    assert str(remote_err.value) == str(local_err.value)
    remote.close()


def test_reset_options_of_the_client_go_with_every_reset_under_the_calls_own(servers):
    """One served env, two clients made with their splits: each plays what a local env of its split plays."""
    server = _server(servers, "TurnSokoban-v0")
    held_out = gym.make(REMOTE_ENV_ID, base_url=server.base_url, reset_options={"split": "test"})
    for seed in range(3):
        local = gym.make("TurnSokoban-v0", split="test")
        assert held_out.reset(seed=seed) == local.reset(seed=seed)
        action = local.unwrapped.expert_action()
        assert held_out.step(action)[:4] == local.step(action)[:4]
        train = gym.make("TurnSokoban-v0", split="train")
        assert held_out.reset(seed=seed, options={"split": "train"}) == train.reset(seed=seed)
    held_out.close()
    with pytest.raises(ValueError, match="not group options|not \\['group_id'"):
        gym.make(REMOTE_ENV_ID, base_url=server.base_url, reset_options={"group_id": "g"})


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_vector_env_of_served_envs_steps_as_a_vector_env_of_local_ones(servers, mode):
    server = _server(servers, "TurnSokoban-v0")
    vector_kwargs = {"shared_memory": False} if mode == "async" else {}
    remote = gym.make_vec(
        REMOTE_ENV_ID,
        3,
        vectorization_mode=mode,
        vector_kwargs=vector_kwargs,
        base_url=server.base_url,
        env_id="TurnSokoban-v0",
    )
    local = agentgym_turn.make_vec("TurnSokoban-v0", 3, mode)
    assert repr(remote.reset(seed=[1, 2, 3])) == repr(local.reset(seed=[1, 2, 3]))
    actions = ["<answer>Up</answer>", "", "<answer>Left || Down</answer>"]
    for _ in range(7):  # past the 5-turn limit: autoreset happens on both sides
        assert repr(remote.step(actions)) == repr(local.step(actions))
    remote.close()
    local.close()


# ---------------------------------------------------------------------- sessions
def test_sixty_four_concurrent_sessions_do_not_leak_into_one_another(servers):
    n = 64
    server = _server(servers, "TurnSokoban-v0", max_sessions=n)  # its own server: exactly 64 slots
    expected = {seed: _transcript(gym.make("TurnSokoban-v0", render_mode="ansi"), seed) for seed in range(n)}
    remotes = [_remote(server, render_mode="ansi") for _ in range(n)]
    opened_before = server.sessions.opened
    open_at_once: list[int] = []
    # nobody steps before all 64 sessions are open and reset; then they interleave freely
    barrier = threading.Barrier(n, action=lambda: open_at_once.append(server.sessions.active), timeout=300)
    got = _transcripts_at_once(remotes, range(n), barrier)
    assert open_at_once == [n] and server.sessions.opened - opened_before == n
    assert len({got[seed][0][1][0] for seed in range(n)}) > n // 2  # the seeds gave different levels
    for seed in range(n):
        assert repr(got[seed]) == repr(expected[seed]), f"session of seed {seed} differs"
    for remote in remotes:
        remote.close()
    wait_for(lambda: server.sessions.active == 0)


@pytest.mark.parametrize("env_id", IDS)
def test_concurrent_sessions_of_every_id_keep_their_own_episodes(servers, env_id):
    # Sessions share the server's per-process data (catalogs, indexes, level caches) across threads.
    server = _server(servers, env_id)
    seeds = list(range(100, 108))
    local = gym.make(env_id, render_mode="ansi")
    expected = {seed: _transcript(local, seed) for seed in seeds}
    remotes = {seed: _remote(server, render_mode="ansi") for seed in seeds}
    barrier = threading.Barrier(len(seeds), timeout=300)
    got = _transcripts_at_once(remotes, seeds, barrier)
    for seed in seeds:
        assert repr(got[seed]) == repr(expected[seed]), f"{env_id} session of seed {seed} differs"
        remotes[seed].close()


def _transcripts_at_once(remotes: Any, seeds: Any, barrier: threading.Barrier) -> dict[int, list[Any]]:
    """:func:`_transcript` of ``remotes[seed]`` for every seed, each in its own thread, all waiting at ``barrier``
    after their reset; fails with the first errors."""
    got: dict[int, Any] = {}
    errors: list[BaseException] = []

    def play(seed: int) -> None:
        try:
            got[seed] = _transcript(remotes[seed], seed, after_reset=barrier.wait)
        except BaseException as err:  # reported below
            errors.append(err)
            barrier.abort()

    threads = [threading.Thread(target=play, args=(seed,)) for seed in seeds]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=600)
    assert not errors, errors[:3]
    return got


def test_a_server_at_capacity_refuses_with_openenv_capacity_error_and_recovers(servers):
    server = _server(servers, "TurnSokoban-v0", max_sessions=2)
    first, second = _remote(server), _remote(server)
    first.reset(seed=0)
    second.reset(seed=1)
    third = _remote(server, capacity_wait_s=0)  # refused at once, no retries (test_server_capacity.py covers them)
    with pytest.raises(ServerAtCapacityError) as err:
        third.reset(seed=2)
    assert "2/2" in str(err.value) and "--max-sessions" in str(err.value)
    with connect(server.ws_url, proxy=None) as ws:  # the raw frame is OpenEnv's
        frame = json.loads(ws.recv(timeout=10))
    assert frame["type"] == "error" and frame["data"]["code"] == "CAPACITY_REACHED"
    assert (frame["data"]["active_sessions"], frame["data"]["max_sessions"]) == (2, 2)
    first.close()
    wait_for(lambda: server.sessions.active < 2)
    assert third.reset(seed=2)[1]["turn"] == 0
    second.step(second.unwrapped.expert_action())
    second.close()
    third.close()


def test_an_idle_session_is_closed_and_reset_opens_a_new_one(servers):
    server = _server(servers, "TurnSokoban-v0", idle_timeout=0.2)
    remote = _remote(server)
    remote.reset(seed=0)
    wait_for(lambda: server.sessions.active == 0)
    # a session idled out (a long generation) is resumed: a new session replays the episode, then the step is played
    local = gym.make("TurnSokoban-v0")
    local.reset(seed=0)
    assert remote.step("<answer>Up</answer>") == local.step("<answer>Up</answer>") and remote.unwrapped.resumed == 1
    wait_for(lambda: server.sessions.active == 0)
    stay = _remote(
        server, resume_wait_s=0
    )  # without resuming, the episode ends as a fault outside the policy's control
    stay.reset(seed=0)
    wait_for(lambda: server.sessions.active <= 1 and stay.unwrapped._ws is not None)
    wait_for(lambda: server.sessions.active == 0)
    observation, reward, terminated, truncated, info = stay.step("<answer>Up</answer>")
    assert "idle for more than 0.2 s" in observation and (info["exit_status"], info["reward_valid"], truncated) == (
        "infra_error",
        False,
        True,
    )
    assert "episode is over" in stay.step("<answer>Up</answer>")[0]  # until reset, as a finished local episode
    stay.close()
    assert remote.reset(seed=0) == gym.make("TurnSokoban-v0").reset(seed=0)
    remote.close()


def test_a_session_outlives_the_servers_request_head_deadline():
    # The stack closes HTTP connections idle past header_timeout; an upgraded /ws connection is exempt.
    from agentgym_turn.serving import AppServer, ServerLimits
    from agentgym_turn.remote.server import EnvSessions, build_app, describe_env

    sessions = EnvSessions(describe_env("TurnSokoban-v0"), max_sessions=2, workers=2)
    limits = ServerLimits(header_timeout=0.2)
    with AppServer(build_app(sessions, limits=limits), limits=limits) as server:
        remote = gym.make(REMOTE_ENV_ID, base_url=server.base_url)
        remote.reset(seed=0)
        threading.Event().wait(1.0)  # five deadlines pass while the session is silent
        assert remote.step("<answer>Up</answer>")[4]["turn"] == 1
        remote.close()
    sessions.shutdown()


@pytest.mark.parametrize("compression", [False, True])
def test_per_message_deflate_is_declined_unless_the_server_is_started_with_it(compression):
    with EnvServer("TurnSokoban-v0", max_sessions=1, compression=compression) as server:
        with connect(server.ws_url, compression="deflate") as ws:  # the offer most WebSocket clients make
            accepted = ws.response.headers.get("Sec-WebSocket-Extensions", "")
            ws.send(json.dumps({"type": "reset", "data": {"seed": 0}}))
            assert json.loads(ws.recv(timeout=30))["type"] == "observation"
    assert ("permessage-deflate" in accepted) is compression


class _BlockingGuessEnv(GuessNumberEnv):
    """GuessNumber whose ``<wait>`` turn blocks until the test releases it."""

    release = threading.Event()
    entered = threading.Event()

    def parse_action(self, response: str):
        if response == "<wait>":
            type(self).entered.set()
            type(self).release.wait(timeout=60)
        return super().parse_action(response)


@pytest.fixture(scope="module")
def blocking_id():
    env_id = "RemoteTestBlockingGuess-v0"
    gym.register(env_id, entry_point=_BlockingGuessEnv, max_episode_steps=10)
    yield env_id
    del gym.registry[env_id]


def test_a_slow_env_blocks_neither_the_server_nor_other_sessions(servers, blocking_id):
    server = _server(servers, blocking_id)
    slow, fast = _remote(server), _remote(server)
    slow.reset(seed=0)
    _BlockingGuessEnv.release.clear()
    result: list[Any] = []
    waiter = threading.Thread(target=lambda: result.append(slow.step("<wait>")))
    waiter.start()
    assert _BlockingGuessEnv.entered.wait(timeout=60)
    # while the slow step holds a worker thread, another session plays a whole episode
    fast.reset(seed=1)
    for _ in range(10):
        _, _, terminated, truncated, _ = fast.step(fast.unwrapped.expert_action())
        if terminated or truncated:
            break
    assert terminated and not result
    _BlockingGuessEnv.release.set()
    waiter.join(timeout=60)
    assert result and result[0][4]["action_is_valid"] is False
    slow.close()
    fast.close()


def test_a_turn_longer_than_the_idle_timeout_is_answered_not_cut_as_idle(servers, blocking_id):
    server = _server(servers, blocking_id, idle_timeout=0.2)  # the idle clock runs only while a session waits
    remote = _remote(server)
    remote.reset(seed=0)
    _BlockingGuessEnv.release.clear()
    releaser = threading.Timer(0.7, _BlockingGuessEnv.release.set)
    releaser.start()
    observation, _, _, truncated, info = remote.step("<wait>")
    releaser.join()
    assert info["exit_status"] == "invalid_action" and not truncated and remote.unwrapped.resumed == 0, observation
    remote.close()


def test_a_server_that_does_not_answer_is_a_timeout_not_a_hang(servers, blocking_id):
    server = _server(servers, blocking_id)
    remote = gym.make(REMOTE_ENV_ID, base_url=server.base_url, message_timeout=0.3, resume_wait_s=0)
    remote.reset(seed=0)
    _BlockingGuessEnv.release.clear()
    observation, _, _, truncated, info = remote.step("<wait>")
    assert re.search(f"{re.escape(server.base_url)}.*did not answer a 'step'.*message_timeout", observation, re.S)
    assert (info["exit_status"], info["reward_valid"], truncated) == ("infra_error", False, True)
    _BlockingGuessEnv.release.set()
    assert "episode is over" in remote.step("<answer>1</answer>")[0]
    assert remote.reset(seed=0)[1]["turn"] == 0  # a new session
    remote.close()


# ---------------------------------------------------------------------- a stopped server
def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_no_server_at_the_url_is_a_clear_connection_error():
    url = f"http://127.0.0.1:{_free_port()}"
    with pytest.raises(ConnectionError) as err:
        gym.make(REMOTE_ENV_ID, base_url=url, env_id="TurnSokoban-v0", connect_timeout=2)
    assert url in str(err.value) and "agentgym-turn serve env TurnSokoban-v0 --port" in str(err.value)


def test_a_silent_listener_is_a_connection_error_within_the_timeout():
    with socket.socket() as listener:  # accepts TCP (backlog) but never answers HTTP
        listener.bind(("127.0.0.1", 0))
        listener.listen(4)
        url = f"http://127.0.0.1:{listener.getsockname()[1]}"
        with pytest.raises(ConnectionError, match="timed out"):
            gym.make(REMOTE_ENV_ID, base_url=url, connect_timeout=0.3)


def test_a_server_stopped_mid_episode_ends_the_episode_with_a_clear_infra_error():
    server = EnvServer("TurnSokoban-v0").start()
    remote = _remote(server, resume_wait_s=0.5)  # a resume is tried, briefly; the server stays down
    remote.reset(seed=0)
    url = server.base_url
    server.stop()
    message, reward, _, truncated, info = remote.step("<answer>Up</answer>")
    assert url in message and "episode is lost" in message and "agentgym-turn serve env TurnSokoban-v0" in message
    assert (info["exit_status"], info["reward_valid"], reward, truncated) == ("infra_error", False, 0.0, True)
    with pytest.raises(ConnectionError, match="cannot open a session"):
        remote.reset(seed=0)


def test_client_arguments_are_checked(servers):
    server = _server(servers, "TurnSokoban-v0")
    with pytest.raises(ValueError, match="serves 'TurnSokoban-v0', not env_id='TurnWebShop-v0'"):
        gym.make(REMOTE_ENV_ID, base_url=server.base_url, env_id="TurnWebShop-v0")
    with pytest.raises(ValueError, match="base_url must start with"):
        gym.make(REMOTE_ENV_ID, base_url="127.0.0.1:8000")
    with pytest.raises(ValueError, match="render_mode='human'"), pytest.warns(UserWarning, match="render_mode='human'"):
        gym.make(REMOTE_ENV_ID, base_url=server.base_url, render_mode="human")
    ws_style = gym.make(REMOTE_ENV_ID, base_url=server.ws_url)  # ws://host:port/ws works too
    assert ws_style.reset(seed=1) == gym.make("TurnSokoban-v0").reset(seed=1)
    ws_style.close()


# ---------------------------------------------------------------------- bad messages
def _exchange(ws: Any, payload: str | bytes) -> dict[str, Any]:
    ws.send(payload)
    return json.loads(ws.recv(timeout=30))


def test_bad_messages_get_openenv_error_frames_and_the_session_survives(servers):
    server = _server(servers, "TurnSokoban-v0")
    limit = server.max_message_bytes
    cases = [
        ("{not json", "INVALID_JSON"),
        (b"\xff\xfe binary, not UTF-8", "INVALID_JSON"),
        ("[" * 100_000 + "]" * 100_000, "INVALID_JSON"),
        ('{"type": "dance"}', "UNKNOWN_TYPE"),
        ("{}", "UNKNOWN_TYPE"),
        ("[1, 2]", "VALIDATION_ERROR"),
        ('{"type": "step"}', "VALIDATION_ERROR"),
        ('{"type": "step", "data": {}}', "VALIDATION_ERROR"),
        ('{"type": "step", "data": {"message": "x", "extra": 1}}', "VALIDATION_ERROR"),
        ('{"type": "step", "data": "Up"}', "VALIDATION_ERROR"),
        ('{"type": "reset", "data": {"seed": -1}}', "VALIDATION_ERROR"),
        ('{"type": "reset", "data": {"seed": "0"}}', "VALIDATION_ERROR"),
        ('{"type": "reset", "data": {"options": [1]}}', "VALIDATION_ERROR"),
        ('{"type": "state", "junk": true}', "VALIDATION_ERROR"),
        (json.dumps({"type": "step", "data": {ACTION_FIELD: "x" * (limit + 10)}}), "VALIDATION_ERROR"),
        ('{"type": "step", "data": {"message": "<answer>Up</answer>"}}', "EXECUTION_ERROR"),  # before any reset
        ('{"type": "expert"}', "EXECUTION_ERROR"),
    ]
    with connect(server.ws_url, proxy=None, max_size=None) as ws:
        for payload, code in cases:
            frame = _exchange(ws, payload)
            assert frame["type"] == "error" and frame["data"]["code"] == code, (payload[:60], frame)
            assert isinstance(frame["data"]["message"], str) and frame["data"]["message"]
        frame = _exchange(ws, '{"type": "step", "data": {"message": "x", "extra": 1}}')
        assert (
            frame["data"]["errors"][0]["loc"] == ["data", "extra"]
            and frame["data"]["errors"][0]["type"] == "extra_forbidden"
        )
        # the session still works, and unknown reset keys are dropped as OpenEnv drops them
        frame = _exchange(ws, '{"type": "reset", "data": {"seed": 4, "episode_id": "e-1", "difficulty": "hard"}}')
        assert (
            frame["type"] == "observation"
            and frame["data"]["observation"]["text"] == gym.make("TurnSokoban-v0").reset(seed=4)[0]
        )
        assert frame["data"]["reward"] is None and frame["data"]["done"] is False
        # a non-string message is a legal action (the turn contract): an invalid turn, not an error
        frame = _exchange(ws, '{"type": "step", "data": {"message": 42}}')
        assert frame["type"] == "observation" and frame["data"]["observation"]["info"]["action_is_valid"] is False
        frame = _exchange(ws, '{"type": "state"}')
        assert frame["type"] == "state" and frame["data"]["episode_id"] == "e-1" and frame["data"]["step_count"] == 1
        ws.send('{"type": "close"}')
        with pytest.raises(ConnectionClosed):
            ws.recv(timeout=30)


def test_a_frame_far_over_the_limit_closes_only_its_own_connection(servers):
    server = _server(servers, "TurnSokoban-v0")
    with connect(server.ws_url, proxy=None, max_size=None) as ws:
        with pytest.raises(ConnectionClosed) as err:
            ws.send("x" * (4 * server.max_message_bytes + 1))
            ws.recv(timeout=30)
        # The server refuses the frame unread (close code 1009) and closes, the client maybe still sending it; with
        # most of the frame unread on the server's side, the kernel may reset the connection before the close frame
        # reaches the client.
        assert err.value.rcvd is None or err.value.rcvd.code == 1009
    remote = _remote(server)
    assert remote.reset(seed=0)[1]["turn"] == 0
    remote.close()


# ---------------------------------------------------------------------- HTTP endpoints
def _http(server: EnvServer, method: str, path: str, body: bytes | None = None) -> tuple[int, Any]:
    import urllib.error
    import urllib.request

    request = urllib.request.Request(
        server.base_url + path, data=body, method=method, headers={"Content-Type": "application/json"}
    )
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(request, timeout=30) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


def test_http_endpoints_follow_openenv(servers):
    server = _server(servers, "TurnSokoban-v0")
    local = gym.make("TurnSokoban-v0")
    assert _http(server, "GET", "/health") == (
        200,
        {"status": "healthy", "sessions": server.sessions.active, "max_sessions": server.sessions.max_sessions},
    )
    status, metadata = _http(server, "GET", "/metadata")
    assert status == 200 and metadata["name"] == "TurnSokoban-v0" and isinstance(metadata["description"], str)
    status, schema = _http(server, "GET", "/schema")
    assert status == 200 and set(schema) == {"action", "observation", "state"}
    assert schema["action"]["properties"][ACTION_FIELD]["maxLength"] == local.action_space.max_length
    assert schema["observation"]["properties"]["text"]["maxLength"] == local.observation_space.max_length
    # /reset: a fresh env per request, as OpenEnv's HTTP reset
    status, reset = _http(server, "POST", "/reset", b'{"seed": 5}')
    text, info = local.reset(seed=5)
    assert (
        status == 200
        and reset["observation"]["text"] == text
        and reset["observation"]["info"] == info
        and reset["done"] is False
    )
    assert _http(server, "POST", "/reset", b"")[0] == 200
    assert _http(server, "POST", "/reset", b'{"seed": -3}')[0] == 422
    assert _http(server, "POST", "/reset", b'{"options": {"nope": 1}}')[0] == 422
    assert _http(server, "POST", "/reset", b"{oops")[0] == 400
    # /step: stateless, so a fresh env cannot step; it says where sessions live
    status, answer = _http(server, "POST", "/step", b'{"action": {"message": "<answer>Up</answer>"}}')
    assert status == 409 and "/ws" in answer["detail"]
    assert _http(server, "POST", "/step", b'{"action": {"text": "Up"}}')[0] == 422
    assert _http(server, "POST", "/step", b"{}")[0] == 422
    assert _http(server, "GET", "/state") == (
        200,
        {"episode_id": None, "step_count": 0, "env_id": "TurnSokoban-v0", "render": None},
    )
    assert _http(server, "GET", "/nowhere")[0] == 404
    # what OpenEnv's runtime validator reads: OpenAPI paths of simulation mode, a JSON-RPC /mcp
    status, openapi = _http(server, "GET", "/openapi.json")
    assert (
        status == 200
        and openapi["info"]["version"].startswith("1.")
        and {"/reset", "/step", "/state"} <= set(openapi["paths"])
    )
    assert _http(server, "POST", "/mcp", b"{}")[1]["error"]["code"] == -32600
    assert _http(server, "POST", "/mcp", b"{nope")[1]["error"]["code"] == -32700
    # outside an MCP session (no Accept header for the streamable transport) the SDK refuses it; the tools: test_mcp_tools.py
    status, answer = _http(server, "POST", "/mcp", b'{"jsonrpc": "2.0", "method": "tools/list", "id": 3}')
    assert status == 406 and answer["jsonrpc"] == "2.0" and "accept" in answer["error"]["message"].lower()


# ---------------------------------------------------------------------- the CLI
def test_cli_refuses_an_unknown_id_in_one_line(capsys):
    from agentgym_turn.cli import main

    assert main(["serve", "env", "TurnSokobn-v0", "--port", "0"]) == 2
    err = capsys.readouterr().err
    assert "Did you mean 'TurnSokoban-v0'?" in err and "Traceback" not in err


@pytest.mark.parametrize(
    "flag,value", [("--max-sessions", "0"), ("--workers", "0"), ("--idle-timeout", "-1"), ("--max-message-bytes", "10")]
)
def test_cli_refuses_a_bad_bound_naming_the_flag(capsys, flag, value):
    from agentgym_turn.cli import main

    with pytest.raises(SystemExit) as exit_:
        main(["serve", "env", "TurnSokoban-v0", "--port", "0", flag, value])
    assert exit_.value.code == 2 and f"{flag} must be at least" in capsys.readouterr().err


def test_cli_serves_an_env_that_the_client_plays(tmp_path):
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "agentgym_turn",
            "serve",
            "env",
            "TurnSokoban-v0",
            "--port",
            "0",
            "--max-sessions",
            "4",
            "--kwarg",
            "format_penalty=-0.5",
        ],
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        url = None
        for line in proc.stderr:  # "Serving TurnSokoban-v0 at http://127.0.0.1:PORT (...)"
            if line.startswith("Serving"):
                url = line.split(" at ", 1)[1].split()[0]
                break
        assert url, "the server printed no 'Serving ... at URL' line"
        remote = gym.make(REMOTE_ENV_ID, base_url=url, env_id="TurnSokoban-v0")
        remote.reset(seed=0)
        assert remote.step("nonsense")[1] == -0.5  # the --kwarg reached the served env
        remote.close()
    finally:
        proc.terminate()
        proc.wait(timeout=60)


#: Info keys that give a task's answer away, per id: never sent by a server started without --expert.
ORACLE_KEYS = {
    "TurnSokoban-v0": set(),
    "TurnSearchQA-v0": {"golden_answers", "question_id"},
    "TurnWebShop-v0": {"goal_index"},
    "TurnWebShopDialog-v0": {"goal_index"},
}


@pytest.mark.parametrize("env_id", sorted(ORACLE_KEYS))
def test_a_default_server_serves_no_oracle_and_says_how_to_turn_it_on(env_id):
    """Without --expert the expert message is refused, and no info key that identifies the task's answer (search
    QA's gold answers and question id, which names a generated world's seed; WebShop's goal index) reaches the
    client, over WebSocket and over the stateless HTTP reset."""
    hidden = ORACLE_KEYS[env_id]
    with EnvServer(env_id, port=0) as server:
        remote = _remote(server)
        _, info = remote.reset(seed=0)
        assert not hidden & set(info)
        _, _, _, _, info = remote.step("<search> who </search>")
        assert not hidden & set(info)
        with pytest.raises(RuntimeError, match="--expert"):
            remote.unwrapped.expert_action()
        remote.close()
        body = json.loads(
            urllib.request.urlopen(
                urllib.request.Request(
                    server.base_url + "/reset", data=b'{"seed": 0}', headers={"Content-Type": "application/json"}
                )
            ).read()
        )
        assert not any(f'"{key}"' in json.dumps(body) for key in hidden)
    local = gym.make(env_id)
    assert hidden == set(local.unwrapped.oracle_info_keys) and hidden <= set(
        local.reset(seed=0)[1]
    )  # in process, all there


def test_a_server_started_with_expert_serves_the_oracles():
    with EnvServer("TurnSearchQA-v0", port=0, expert=True) as server:
        remote, local = _remote(server), gym.make("TurnSearchQA-v0")
        assert remote.reset(seed=3) == local.reset(seed=3)
        assert remote.unwrapped.expert_action() == local.unwrapped.expert_action()
        remote.close()


@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity"])
def test_json_constants_are_refused_and_no_answer_is_invalid_json(servers, constant):
    """Python's json reads NaN and Infinity; JSON has none. A body or frame holding one is malformed, and the
    answer is strict JSON (parsed here with the constants refused)."""
    from agentgym_turn.serving import loads_strict

    server = _server(servers, "TurnSokoban-v0")
    body = f'{{"seed": {constant}}}'.encode()
    status, answer = _http(server, "POST", "/reset", body)
    assert status == 400 and "JSON" in json.dumps(answer)
    with connect(server.ws_url, proxy=None, max_size=None) as ws:
        ws.send(f'{{"type": "reset", "data": {{"seed": {constant}}}}}')
        raw = ws.recv(timeout=30)
    frame = loads_strict(raw)
    assert frame["type"] == "error" and frame["data"]["code"] == "INVALID_JSON", frame


@pytest.mark.parametrize(
    "data",
    [
        '{"seed": 1e400}',
        '{"seed": 0, "task_id": -1e400}',
        '{"seed": 0, "metadata": {"x": 1e400}}',
        '{"seed": 0, "extra": 1e400}',
    ],
)
def test_numbers_past_a_float_are_refused_never_echoed_as_infinity(servers, data):
    """``1e400`` is valid JSON that Python reads as infinity; echoing it back would send ``Infinity``."""
    from agentgym_turn.serving import loads_strict

    server = _server(servers, "TurnSokoban-v0")
    with connect(server.ws_url, proxy=None, max_size=None) as ws:
        ws.send(f'{{"type": "reset", "data": {data}}}')
        raw = ws.recv(timeout=30)
    assert "Infinity" not in raw and loads_strict(raw)["data"]["code"] == "INVALID_JSON", raw
    status, answer = _http(server, "POST", "/reset", data.encode())
    assert status == 400 and "Infinity" not in json.dumps(answer)


def test_a_text_frame_of_invalid_utf8_closes_with_1007_and_logs_one_line_without_a_traceback(servers):
    import base64
    import logging
    import os
    import time

    server = _server(servers, "TurnSokoban-v0")  # first: making a server configures uvicorn's loggers afresh
    records: list[logging.LogRecord] = []
    handler = logging.Handler()
    handler.emit = records.append  # type: ignore[method-assign]
    log = logging.getLogger("uvicorn.error")
    log.addHandler(handler)
    host, port = server.base_url[len("http://") :].rsplit(":", 1)
    try:
        with socket.create_connection((host, int(port)), timeout=10) as s:
            key = base64.b64encode(os.urandom(16)).decode()
            s.sendall(
                f"GET /ws HTTP/1.1\r\nHost: {host}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n".encode()
            )
            assert s.recv(4096).startswith(b"HTTP/1.1 101")
            payload, mask = b"\xff\xfe\xfd", os.urandom(4)
            s.sendall(bytes([0x81, 0x80 | len(payload)]) + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(payload)))
            close = s.recv(4096)
        assert close[:1] == b"\x88" and int.from_bytes(close[2:4], "big") == 1007, close
        for _ in range(50):  # the log line is written by the server's thread
            if any("UTF-8" in r.getMessage() for r in records):
                break
            time.sleep(0.05)
    finally:
        log.removeHandler(handler)
    utf8 = [r for r in records if "UTF-8" in r.getMessage()]
    assert utf8 and all(r.levelno == logging.WARNING and r.exc_info is None for r in utf8), [
        (r.levelname, r.exc_info) for r in utf8
    ]


BIG_LEVEL = "\n".join(
    [
        "############",
        "#@ $ $ $ $ #",
        "# $ $ $ $  #",
        "#  $ $ $   #",
        "# $ $ $    #",
        "#..........#",
        "#....      #",
        "#          #",
        "############",
    ]
)


def test_a_default_server_refuses_a_client_level_at_once_and_other_sessions_keep_stepping():
    """A level text in reset's options would be solved by the server (seconds of CPU for many boxes): refused
    unless the server is started with --client-content, over WebSocket and HTTP, while another session plays on."""
    with EnvServer("TurnSokoban-v0", port=0, workers=2) as server:
        other = _remote(server)
        other.reset(seed=0)
        with connect(server.ws_url, proxy=None, max_size=None) as ws:
            frame = _exchange(ws, json.dumps({"type": "reset", "data": {"seed": 0, "options": {"level": BIG_LEVEL}}}))
            assert frame["type"] == "error" and "--client-content" in frame["data"]["message"], frame
            assert other.step("<answer>Up</answer>")[4]["action_is_valid"]  # the other session plays on
        status, answer = _http(
            server, "POST", "/reset", json.dumps({"seed": 0, "options": {"level": BIG_LEVEL}}).encode()
        )
        assert status == 403 and "--client-content" in answer["detail"]
        other.close()


def test_a_server_started_with_client_content_plays_a_client_level():
    level = "#####\n#@$.#\n#####"
    with EnvServer("TurnSokoban-v0", port=0, client_content=True) as server:
        remote, local = _remote(server), gym.make("TurnSokoban-v0")
        assert remote.reset(seed=0, options={"level": level}) == local.reset(seed=0, options={"level": level})
        remote.close()


def test_stateless_resets_count_against_the_session_cap():
    with EnvServer("TurnSokoban-v0", port=0, max_sessions=1) as server:
        held = _remote(server)
        held.reset(seed=0)
        request = urllib.request.Request(
            server.base_url + "/reset", data=b'{"seed": 0}', headers={"Content-Type": "application/json"}
        )
        with pytest.raises(urllib.error.HTTPError) as full:
            urllib.request.urlopen(request, timeout=30)
        assert full.value.code == 503 and full.value.headers["Retry-After"] == "1"
        held.close()
