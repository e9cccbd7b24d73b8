"""What the served-env tests share: one server per (id, arguments) per module, and a bounded poll."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from agentgym_turn.remote.server import EnvServer


@pytest.fixture(scope="module")
def servers():
    """``{key: EnvServer}`` of the module's servers (see :func:`shared_server`), all stopped when the module ends."""
    made: dict[str, EnvServer] = {}
    yield made
    for server in made.values():
        server.stop()


def shared_server(servers: dict[str, EnvServer], env_id: str, **kwargs: Any) -> EnvServer:
    """The module's server of ``env_id`` started with ``kwargs`` (started at the first call)."""
    key = env_id + repr(sorted(kwargs.items()))
    if key not in servers:
        servers[key] = EnvServer(env_id, **kwargs).start()
    return servers[key]


def wait_for(condition, rounds: int = 400) -> None:
    """Poll ``condition`` (a bounded number of rounds of 25 ms; not a timing assertion)."""
    event = threading.Event()
    for _ in range(rounds):
        if condition():
            return
        event.wait(0.025)
    assert condition()
