"""``agentgym_turn/Remote-v0`` when the served env is gone: a stopped server or one that does not answer ends the
episode with an ``infra_error`` turn (reward 0.0, truncated, ``reward_valid`` False) instead of raising, and
never hangs; the contract's info keys cross the wire unchanged; snapshot, restore and fork work by replay.

Servers run in this process (``EnvServer`` in a thread) on free ports; each test stops what it starts, and
every wait is bounded by the client's timeouts or a count, never measured.
"""

from __future__ import annotations

import threading
from typing import Any

import gymnasium as gym
import pytest

import agentgym_turn
from agentgym_turn.core.turn_env import CONTRACT_INFO_KEYS
from agentgym_turn.remote import REMOTE_ENV_ID
from agentgym_turn.remote.client import ServerUnreachableError
from agentgym_turn.remote.server import EnvServer
from support.toy_envs import GuessNumberEnv

MOVES = [
    "<answer>Left</answer>",
    "<answer>Up</answer>",
    "<answer>Right</answer>",
    "<answer>Down</answer>",
    "no action here",
]


@pytest.fixture(scope="module")
def sokoban():
    with EnvServer("TurnSokoban-v0", port=0, expert=True) as server:
        yield server


def remote(server: EnvServer, **kwargs: Any) -> Any:
    kwargs.setdefault("message_timeout", 30)
    kwargs.setdefault("connect_timeout", 10)
    kwargs.setdefault(
        "resume_wait_s", 0.5
    )  # these faults outlast a resume: it is tried, briefly, then the turn is a fault
    return gym.make(REMOTE_ENV_ID, base_url=server.base_url, env_id=server.spec.env_id, **kwargs)


def assert_infra_error_turn(result: tuple, last_info: dict[str, Any], base_url: str) -> None:
    observation, reward, terminated, truncated, info = result
    assert (reward, terminated, truncated) == (0.0, False, True)
    assert info["exit_status"] == "infra_error" and info["reward_valid"] is False
    assert set(info) == set(last_info) and info["turn"] == last_info["turn"] + 1
    assert set(info["reward_components"]) == set(last_info["reward_components"]) and set(
        info["reward_components"].values()
    ) == {0.0}
    assert base_url in observation and "gone" in observation and "reset()" in observation


def test_the_contract_info_keys_of_a_served_sokoban_equal_the_in_process_ones(sokoban):
    served, local = remote(sokoban), gym.make("TurnSokoban-v0")
    try:
        _, got = served.reset(seed=0)
        _, want = local.reset(seed=0)
        assert got == want and {"exit_status", "reward_valid", "reward_components", "state_key"} <= set(got)
        for action in [MOVES[0], MOVES[4], local.unwrapped.expert_action(), MOVES[1], MOVES[2], MOVES[3]]:
            got_step, want_step = served.step(action), local.step(action)
            assert got_step == want_step
            for key in CONTRACT_INFO_KEYS:
                assert got_step[4][key] == want_step[4][key], key
            if want_step[2] or want_step[3]:
                break
    finally:
        served.close()


def test_a_server_stopped_mid_episode_gives_an_infra_error_turn_not_an_exception():
    server = EnvServer("TurnSokoban-v0", port=0).start()
    url = server.base_url
    env = remote(server)
    try:
        env.reset(seed=0)
        *_, last_info = env.step(MOVES[0])
        *_, last_info = env.step(MOVES[1])
        server.stop()
        assert_infra_error_turn(env.step(MOVES[2]), last_info, url)
        # the episode is over: a further step answers as a local env after its episode ended
        _, reward, terminated, truncated, info = env.step(MOVES[2])
        assert (reward, terminated, truncated, info["exit_status"]) == (0.0, True, False, "invalid_action")
        with pytest.raises(ConnectionError, match="cannot open a session"):
            env.reset(seed=0)  # reset is no turn: a server that is still gone is an error that names the URL
    finally:
        env.close()
        server.stop()


def test_a_server_restarted_on_the_same_port_serves_the_next_reset():
    server = EnvServer("TurnSokoban-v0", port=0).start()
    port, url = server.port, server.base_url
    env, unaware = remote(server), remote(server)
    again = None
    try:
        env.reset(seed=0)
        unaware.reset(seed=1)  # its session is lost without a step to notice it
        *_, last_info = env.step(MOVES[0])
        server.stop()
        assert_infra_error_turn(env.step(MOVES[1]), last_info, url)
        again = EnvServer("TurnSokoban-v0", port=port).start()
        for client in (env, unaware):
            _, info = client.reset(seed=0)
            assert info == gym.make("TurnSokoban-v0").reset(seed=0)[1]
            *_, info = client.step(MOVES[0])
            assert info["exit_status"] == "ok" and info["reward_valid"] is True
    finally:
        env.close()
        unaware.close()
        server.stop()
        if again is not None:
            again.stop()


def test_a_reset_during_a_server_restart_waits_for_the_server_and_plays_the_same_task():
    server = EnvServer("TurnSokoban-v0", port=0).start()
    port = server.port
    clients = [remote(server, resume_wait_s=30) for _ in range(4)]
    again: list[EnvServer] = []
    try:
        for seed, client in enumerate(clients):
            client.reset(seed=seed)
            client.step(MOVES[0])
        server.stop()  # between episodes: every client's next call is a reset
        restart = threading.Timer(0.5, lambda: again.append(EnvServer("TurnSokoban-v0", port=port).start()))
        restart.start()
        try:
            for seed, client in enumerate(clients):
                observation, info = client.reset(seed=seed + 10)
                assert (observation, info) == gym.make("TurnSokoban-v0").reset(seed=seed + 10)
                assert client.step(MOVES[1])[4]["reward_valid"] is True
        finally:
            restart.join()
    finally:
        for client in clients:
            client.close()
        server.stop()
        for copy in again:
            copy.stop()


@pytest.mark.parametrize("kwargs", [{"format_penalty": -0.5}, {"max_episode_steps": 9}])
def test_a_server_restarted_with_another_configuration_is_not_resumed(kwargs):
    server = EnvServer("TurnSokoban-v0", port=0).start()
    port, url = server.port, server.base_url
    env = remote(server, resume_wait_s=30)
    again = None
    try:
        env.reset(seed=0)
        *_, last_info = env.step(MOVES[0])
        server.stop()
        again = EnvServer("TurnSokoban-v0", port=port, env_kwargs=kwargs).start()
        result = env.step(MOVES[4])  # an invalid turn: -0.1 before, -0.5 under the new penalty
        assert_infra_error_turn(result, last_info, url)
        assert "another configuration" in result[0] and env.unwrapped.resumed == 0
    finally:
        env.close()
        server.stop()
        if again is not None:
            again.stop()


def test_a_server_restarted_with_the_same_configuration_is_resumed():
    server = EnvServer("TurnSokoban-v0", port=0).start()
    port = server.port
    env, local = remote(server, resume_wait_s=30), gym.make("TurnSokoban-v0")
    again = None
    try:
        env.reset(seed=0), local.reset(seed=0)
        assert env.step(MOVES[0]) == local.step(MOVES[0])
        server.stop()
        again = EnvServer("TurnSokoban-v0", port=port).start()
        assert env.step(MOVES[4]) == local.step(MOVES[4]) and env.unwrapped.resumed == 1
    finally:
        env.close()
        server.stop()
        if again is not None:
            again.stop()


def test_a_reset_gives_up_after_resume_wait_s_with_an_error_naming_the_server():
    server = EnvServer("TurnSokoban-v0", port=0).start()
    env, address = remote(server, resume_wait_s=0.3), server.base_url.split("//")[1]
    try:
        env.reset(seed=0)
        server.stop()
        with pytest.raises(ServerUnreachableError, match=address):
            env.reset(seed=1)
    finally:
        env.close()
        server.stop()


class _StallingGuessEnv(GuessNumberEnv):
    """GuessNumber whose ``<wait>`` turn blocks until the test releases it (a served env that stops answering)."""

    release = threading.Event()

    def parse_action(self, response: str):
        if response == "<wait>":
            type(self).release.wait(timeout=60)
        return super().parse_action(response)


@pytest.fixture
def stalling_server():
    env_id = "FaultsStallingGuess-v0"
    gym.register(env_id, entry_point=_StallingGuessEnv, max_episode_steps=10)
    _StallingGuessEnv.release.clear()
    server = EnvServer(env_id, port=0).start()
    try:
        yield server
    finally:
        _StallingGuessEnv.release.set()
        server.stop()
        del gym.registry[env_id]


def test_a_server_that_does_not_answer_within_message_timeout_gives_an_infra_error_turn(stalling_server):
    env = remote(stalling_server, message_timeout=0.3)
    try:
        _, last_info = env.reset(seed=0)
        result = env.step("<wait>")
        assert_infra_error_turn(result, last_info, stalling_server.base_url)
        assert "did not answer" in result[0]
        _StallingGuessEnv.release.set()
        assert env.reset(seed=0)[1]["turn"] == 0  # a new session
    finally:
        env.close()


def test_restore_replays_the_episode_in_a_new_session_and_continues_as_the_original(sokoban):
    env = remote(sokoban)
    try:
        env.reset(seed=0)
        for action in MOVES[:2]:
            env.step(action)
        snap = env.unwrapped.snapshot()
        key = env.unwrapped._last_info["state_key"]
        first = [env.step(action) for action in MOVES[2:4]]
        env.unwrapped.restore(snap)
        assert env.unwrapped._last_info["state_key"] == key
        assert [env.step(action) for action in MOVES[2:4]] == first
        env.unwrapped.restore(snap)
        forks = agentgym_turn.fork_env(env, 2)
        try:
            for fork in forks:
                assert [fork.step(action) for action in MOVES[2:4]] == first
            assert [env.step(action) for action in MOVES[2:4]] == first  # the original is untouched by its forks
        finally:
            for fork in forks:
                fork.close()
    finally:
        env.close()


def test_a_snapshot_replays_the_unseeded_episodes_since_the_last_seeded_reset(sokoban):
    env = remote(sokoban)
    try:
        env.reset(seed=4)
        env.step(MOVES[0])
        env.reset()  # the served env draws this level from its own generator, seeded at seed=4
        env.step(MOVES[1])
        snap = env.unwrapped.snapshot()
        want = env.step(MOVES[3])
        (twin,) = env.unwrapped.fork(1)
        try:
            assert twin.step(MOVES[3]) == want
        finally:
            twin.close()
        env.unwrapped.restore(snap)
        assert env.step(MOVES[3]) == want
    finally:
        env.close()


def test_a_snapshot_needs_a_seeded_reset(sokoban):
    env = remote(sokoban)
    try:
        env.reset()
        with pytest.raises(ValueError, match=r"reset\(seed=\.\.\.\)"):
            env.unwrapped.snapshot()
    finally:
        env.close()


def test_an_answer_outside_the_protocol_gives_an_infra_error_turn_and_reset_opens_a_new_session(sokoban, monkeypatch):
    env = remote(sokoban)
    try:
        _, last_info = env.reset(seed=0)
        ws = env.unwrapped._ws
        monkeypatch.setattr(
            ws, "recv", lambda timeout=None: "<html>502 Bad Gateway</html>"
        )  # a proxy's page, not a frame
        result = env.step(MOVES[0])
        assert_infra_error_turn(result, last_info, sokoban.base_url)
        assert "not JSON" in result[0]
        assert env.reset(seed=0)[1] == last_info
    finally:
        env.close()
