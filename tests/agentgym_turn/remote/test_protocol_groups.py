"""Groups on the served-env protocol: every member of a group plays the same task, on any server, episode after episode.

Two servers of the same id run as two processes (``agentgym-turn serve env``), standing in for two machines.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import urllib.request
from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import pytest
from gymnasium.vector import SyncVectorEnv
from hypothesis import given
from hypothesis import strategies as st

import agentgym_turn  # noqa: F401  (registers the ids)
from agentgym_turn.remote import REMOTE_ENV_ID, RemoteEnvError
from agentgym_turn.remote.protocol import ProtocolError, group_seed, parse_client_message

ENV_ID = "TurnSokoban-v0"  # generated levels: every seed a new task


@dataclass
class _Served:
    """A server process's URL (what the tests use of a server)."""

    base_url: str


def _serve_in_a_process() -> tuple[subprocess.Popen, _Served]:
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "agentgym_turn",
            "serve",
            "env",
            ENV_ID,
            "--port",
            "0",
            "--max-sessions",
            "8",
            "--expert",
        ],
        stderr=subprocess.PIPE,
        text=True,
    )
    for line in proc.stderr:  # "Serving TurnSokoban-v0 at http://127.0.0.1:PORT (...)"
        if line.startswith("Serving"):
            threading.Thread(
                target=proc.stderr.read, daemon=True
            ).start()  # keep draining: a full pipe would block the server
            return proc, _Served(line.split(" at ", 1)[1].split()[0])
    proc.kill()
    raise RuntimeError(f"the {ENV_ID} server printed no 'Serving ... at URL' line")


@pytest.fixture(scope="module")
def two_servers():
    started = [_serve_in_a_process() for _ in range(2)]
    yield [served for _, served in started]
    for proc, _ in started:
        proc.terminate()
        proc.wait(timeout=60)


def _remote(server: Any, **kwargs: Any) -> Any:
    return gym.make(REMOTE_ENV_ID, base_url=server.base_url, env_id=ENV_ID, **kwargs)


def _members(servers: list[Any], n: int) -> list[Any]:
    """``n`` clients, spread over the servers in turn."""
    return [_remote(servers[i % len(servers)]) for i in range(n)]


def _close(envs: list[Any]) -> None:
    for env in envs:
        env.close()


def test_group_seed_is_a_stable_63_bit_hash_of_group_and_task():
    assert group_seed("grpo/step-0/prompt-0", 0) == 4246796369293026695  # the same in every process and release
    seeds = {group_seed(g, t) for g in ("a", "b", "ab") for t in range(3)}
    assert len(seeds) == 9 and all(0 <= s < 2**63 for s in seeds)
    assert group_seed("a") == group_seed("a", 0)
    with pytest.raises(ValueError):
        group_seed("a", -1)


@given(group_id=st.text(min_size=1, max_size=40), task_id=st.integers(0, 2**40))
def test_group_seed_takes_any_group_name(group_id, task_id):
    assert 0 <= group_seed(group_id, task_id) < 2**63


def test_eight_members_over_two_servers_get_one_first_observation(two_servers):
    members = _members(two_servers, 8)
    try:
        firsts = [env.reset(options={"group_id": "eight-members", "task_id": 4})[0] for env in members]
    finally:
        _close(members)
    assert len(set(firsts)) == 1
    assert firsts[0] == gym.make(ENV_ID).reset(seed=group_seed("eight-members", 4))[0]  # what a local env plays


def test_different_groups_get_different_tasks(two_servers):
    env = _remote(two_servers[0])
    try:
        firsts = [env.reset(options={"group_id": f"distinct-{g}"})[0] for g in range(6)]
    finally:
        env.close()
    assert len(set(firsts)) == 6


def test_members_resetting_in_their_own_loops_stay_aligned_over_three_episodes(two_servers):
    members = _members(two_servers, 4)
    try:
        episodes = [[env.reset(options={"group_id": "own-loop"})[0]] for env in members]
        for _ in range(2):
            for env, seen in zip(members, episodes):
                env.step("not a move")  # members play differently; the next task is the group's still
                seen.append(env.reset()[0])  # no seed, no group options: the group's next task
    finally:
        _close(members)
    assert all(seen == episodes[0] for seen in episodes)
    assert len(set(episodes[0])) == 3
    assert episodes[0][2] == gym.make(ENV_ID).reset(seed=group_seed("own-loop", 2))[0]


def test_a_vector_env_of_one_group_stays_aligned_through_autoreset(two_servers):
    envs = SyncVectorEnv([lambda server=server: _remote(server) for server in two_servers * 2])
    try:
        observations, _ = envs.reset(options={"group_id": "vector-group", "task_id": 0})
        starts = [tuple(observations)]
        for _ in range(60):
            observations, _, terminated, truncated, _ = envs.step(list(envs.call("expert_action")))
            if (terminated | truncated).all():  # the same task and the same actions: the members end together
                observations, *_ = envs.step(["autoreset"] * 4)  # next-step autoreset: the group's next task
                starts.append(tuple(observations))
                if len(starts) == 3:
                    break
    finally:
        envs.close()
    assert len(starts) == 3
    assert all(len(set(start)) == 1 for start in starts)
    assert len({start[0] for start in starts}) == 3


def test_a_seed_sent_with_a_group_wins_and_a_member_with_another_seed_is_a_mismatch(two_servers):
    first, second = _members(two_servers, 2)
    try:
        text = first.reset(seed=11, options={"group_id": "seeded", "task_id": 0})[0]
        assert text == gym.make(ENV_ID).reset(seed=11)[0]
        with pytest.raises(RemoteEnvError, match="first observation .* differs") as err:
            second.reset(seed=12, options={"group_id": "seeded", "task_id": 0})
        assert err.value.code == "GROUP_MISMATCH"
    finally:
        _close([first, second])


def test_leaving_a_group_returns_to_the_envs_own_stream(two_servers):
    env = _remote(two_servers[0])
    try:
        env.reset(options={"group_id": "leave"})
        assert env.reset(seed=3, options={"group_id": None})[0] == gym.make(ENV_ID).reset(seed=3)[0]
        assert env.unwrapped._group is None
    finally:
        env.close()


def test_a_group_episode_forks_by_replay(two_servers):
    env = _remote(two_servers[0])
    try:
        env.reset(options={"group_id": "forked", "task_id": 1})
        env.step("<answer>Up</answer>")
        (twin,) = env.unwrapped.fork(1)
        action = env.unwrapped.expert_action()
        assert twin.step(action) == env.step(action)
        twin.close()
    finally:
        env.close()


def test_http_reset_takes_a_group(two_servers):
    request = urllib.request.Request(
        two_servers[1].base_url + "/reset",
        data=b'{"group_id": "http", "task_id": 2}',
        headers={"Content-Type": "application/json"},
    )
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with opener.open(request, timeout=30) as response:
        answer = json.loads(response.read())
    assert answer["observation"]["text"] == gym.make(ENV_ID).reset(seed=group_seed("http", 2))[0]


@pytest.mark.parametrize(
    "data",
    [
        {"group_id": ""},
        {"group_id": "x" * 256},
        {"group_id": 3},
        {"group_id": "g", "task_id": -1},
        {"group_id": "g", "task_id": 1.5},
        {"task_id": 2},
    ],
)
def test_bad_group_fields_are_validation_errors(two_servers, data):
    with pytest.raises(ProtocolError) as err:
        parse_client_message(json.dumps({"type": "reset", "data": data}), max_bytes=1 << 20)
    assert err.value.code == "VALIDATION_ERROR"
    env = _remote(two_servers[0])
    try:
        with pytest.raises(ValueError, match="group_id|task_id"):
            env.reset(options=data)
    finally:
        env.close()
