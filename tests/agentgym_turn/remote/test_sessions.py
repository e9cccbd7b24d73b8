"""agentgym_turn/remote/sessions.py: which env calls a served env runs on the server's event loop, which in its pool.

The server runs in this process (``EnvServer`` in a thread named ``agentgym-server``; pool threads are named
``agentgym-env_N``), so an env can record the thread each of its calls ran on.
"""

from __future__ import annotations

import threading
from typing import Any, ClassVar

import gymnasium as gym
import pytest

from agentgym_turn.remote import REMOTE_ENV_ID
from agentgym_turn.remote.sessions import INLINE_MAX_CHARS
from support.served import servers, shared_server  # noqa: F401  (servers: a fixture)
from support.toy_envs import GuessNumberEnv


class _RecordingGuessEnv(GuessNumberEnv):
    """GuessNumber that records the thread of each reset, step and render; declares nothing quick."""

    reset_options = frozenset({"level", "split"})
    content_reset_options = frozenset({"level"})
    calls: ClassVar[list[tuple[str, str]]] = []

    def _record(self, name: str) -> None:
        type(self).calls.append((name, threading.current_thread().name))

    def _reset(self, options: dict[str, Any]):
        self._record("reset")
        return super()._reset(options)

    def parse_action(self, response: str):
        self._record("step")
        return super().parse_action(response)

    def render(self):
        self._record("render")
        return super().render()


class _QuickGuessEnv(_RecordingGuessEnv):
    quick_calls = frozenset({"reset", "step", "render"})


@pytest.fixture(scope="module")
def env_ids():
    ids = {"quick": "SessionsTestQuickGuess-v0", "plain": "SessionsTestPlainGuess-v0"}
    gym.register(ids["quick"], entry_point=_QuickGuessEnv, max_episode_steps=10)
    gym.register(ids["plain"], entry_point=_RecordingGuessEnv, max_episode_steps=10)
    yield ids
    for env_id in ids.values():
        del gym.registry[env_id]


def _threads_of(servers, env_id: str, play) -> list[tuple[str, str]]:
    """The (call, thread kind) of each env call ``play(remote)`` makes on a served ``env_id``."""
    server = shared_server(servers, env_id, client_content=True)
    remote = gym.make(REMOTE_ENV_ID, base_url=server.base_url, render_mode="ansi")
    _RecordingGuessEnv.calls.clear()
    play(remote)
    remote.close()
    kinds = {"agentgym-server": "loop"}
    return [
        (name, kinds.get(thread, "pool" if thread.startswith("agentgym-env") else thread))
        for name, thread in _RecordingGuessEnv.calls
    ]


def test_a_quick_envs_turns_run_on_the_event_loop_but_long_actions_and_resets_with_options_in_the_pool(
    servers, env_ids
):
    def play(remote):
        remote.reset(seed=0)
        remote.step("<answer>1</answer>")
        remote.render()
        remote.step("<answer>1</answer>" + " " * INLINE_MAX_CHARS)  # past the limit: a turn's CPU grows with its text
        remote.reset(seed=0, options={"level": "a text the env would have to process"})
        remote.reset(seed=0, options={"split": "test"})  # not content, yet it may cost more than quick_calls covers

    assert _threads_of(servers, env_ids["quick"], play) == [
        ("reset", "loop"),
        ("step", "loop"),
        ("render", "loop"),
        ("step", "pool"),
        ("reset", "pool"),
        ("reset", "pool"),
    ]


def test_an_env_that_declares_no_quick_calls_runs_every_call_in_the_pool(servers, env_ids):
    def play(remote):
        remote.reset(seed=0)
        remote.step("<answer>1</answer>")
        remote.render()

    assert _threads_of(servers, env_ids["plain"], play) == [("reset", "pool"), ("step", "pool"), ("render", "pool")]
