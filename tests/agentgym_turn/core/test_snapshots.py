"""Snapshots load only where they were made (agentgym_turn/core/snapshots.py): crafted bytes are refused
before a byte is unpickled, and processes that share AGENTGYM_SNAPSHOT_KEY can pass them on."""

from __future__ import annotations

import os
import pickle
import subprocess
import sys

import gymnasium as gym
import pytest

import agentgym_turn
from agentgym_turn.core.snapshots import KEY_VARIABLE, SnapshotError

IDS = agentgym_turn.env_ids()


class _Boom:
    """Unpickling this runs code: it would create the file named ``path``."""

    def __init__(self, path: str):
        self.path = path

    def __reduce__(self):
        return (open, (self.path, "w"))


@pytest.mark.parametrize("env_id", IDS)
def test_a_crafted_snapshot_is_refused_without_being_unpickled(env_id, tmp_path):
    env = gym.make(env_id)
    env.reset(seed=0)
    marker = tmp_path / "ran"
    genuine = env.unwrapped.snapshot()
    crafted = [
        pickle.dumps(_Boom(str(marker))),
        genuine[:-1] + bytes([genuine[-1] ^ 1]),
        genuine[:40] + pickle.dumps(_Boom(str(marker))),
        b"",
        "text",
        None,
    ]
    for blob in crafted:
        with pytest.raises(SnapshotError):
            env.unwrapped.restore(blob)
    assert not marker.exists()
    env.unwrapped.restore(genuine)  # its own snapshot still loads


def _snapshot_in_a_child(key: str | None) -> bytes:
    code = (
        "import sys, gymnasium as gym, agentgym_turn; e = gym.make('TurnSokoban-v0'); e.reset(seed=3); "
        "e.step('<answer>Up</answer>'); sys.stdout.buffer.write(e.unwrapped.snapshot())"
    )
    env = {k: v for k, v in os.environ.items() if k != KEY_VARIABLE}
    if key is not None:
        env[KEY_VARIABLE] = key
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, check=True, timeout=120).stdout


def test_another_process_snapshot_loads_only_under_a_shared_key(monkeypatch):
    from agentgym_turn.core import snapshots

    env = gym.make("TurnSokoban-v0")
    env.reset(seed=0)
    with pytest.raises(SnapshotError, match=KEY_VARIABLE):
        env.unwrapped.restore(_snapshot_in_a_child(None))
    monkeypatch.setenv(KEY_VARIABLE, "a key the trainer's workers share")
    snapshots._key.cache_clear()
    try:
        env.unwrapped.restore(_snapshot_in_a_child("a key the trainer's workers share"))
        local = gym.make("TurnSokoban-v0")
        local.reset(seed=3)
        local.step("<answer>Up</answer>")
        assert (
            env.unwrapped._state_text() == local.unwrapped._state_text()
            and env.unwrapped.turn == local.unwrapped.turn == 1
        )
    finally:
        snapshots._key.cache_clear()
