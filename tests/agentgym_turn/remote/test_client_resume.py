"""Episodes of a served env survive a dropped connection and a server restart: the client reconnects with backoff,
replays the episode in a new session and plays on; every transcript equals an uninterrupted in-process run's."""

from __future__ import annotations

import socket
import threading

import gymnasium as gym

import agentgym_turn  # noqa: F401  (registers the ids)
from agentgym_turn.remote import REMOTE_ENV_ID
from agentgym_turn.remote.server import EnvServer

EPISODES = 1000


def _drop_socket(remote) -> None:
    """Cut the client's connection under it, as a network drop does (the client notices at its next send)."""
    ws = remote.unwrapped._ws
    if ws is not None:
        ws.socket.shutdown(socket.SHUT_RDWR)


def test_a_thousand_episodes_survive_dropped_sockets_and_a_server_restart_with_identical_transcripts():
    server = EnvServer("TurnSokoban-v0").start()
    port = server.base_url.rsplit(":", 1)[1]
    remote = gym.make(REMOTE_ENV_ID, base_url=server.base_url, env_id="TurnSokoban-v0", resume_wait_s=30)
    local = gym.make("TurnSokoban-v0")
    restarted: list[EnvServer] = []
    drops = 0
    try:
        for episode in range(EPISODES):
            got, want = [remote.reset(seed=episode)[0]], [local.reset(seed=episode)[0]]
            for turn in range(local.spec.max_episode_steps):
                action = local.unwrapped.expert_action() if (episode + turn) % 4 else "<answer>Left || Down</answer>"
                if (episode * 7 + turn) % 23 == 5:  # now and then the connection drops mid-episode
                    _drop_socket(remote)
                    drops += 1
                if episode == EPISODES // 2 and turn == 0:  # once, the server goes away and comes back on its port
                    server.stop()
                    threading.Timer(
                        0.5, lambda: restarted.append(EnvServer("TurnSokoban-v0", port=int(port)).start())
                    ).start()
                r, w = remote.step(action), local.step(action)
                got.append(r[:4])
                want.append(w[:4])
                assert r[4]["exit_status"] == w[4]["exit_status"] and r[4]["state_key"] == w[4]["state_key"], (
                    episode,
                    turn,
                )
                if w[2] or w[3]:
                    break
            assert got == want, f"episode {episode}: the served transcript differs from the in-process one"
        assert (
            len(restarted) == 1 and drops >= 50 and remote.unwrapped.resumed == drops + 1
        )  # every drop, and the restart, resumed
    finally:
        remote.close()
        server.stop()
        for s in restarted:
            s.stop()
