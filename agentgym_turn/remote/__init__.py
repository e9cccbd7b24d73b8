"""Served envs: any registered text-turn env over OpenEnv's wire protocol, and a Gymnasium client.

    agentgym-turn serve env TurnSokoban-v0 --port 8000          # the server
    gymnasium.make("agentgym_turn/Remote-v0", base_url="http://127.0.0.1:8000", env_id="TurnSokoban-v0")

Importing this package loads neither the server stack nor ``websockets``; see
:mod:`~agentgym_turn.remote.server`, :mod:`~agentgym_turn.remote.client` and
:mod:`~agentgym_turn.remote.protocol`.
"""

from .client import REMOTE_ENV_ID, RemoteEnvError, RemoteTurnEnv, ServerAtCapacityError

__all__ = ["REMOTE_ENV_ID", "RemoteEnvError", "RemoteTurnEnv", "ServerAtCapacityError", "EnvServer"]


def __getattr__(name: str):
    if name == "EnvServer":  # the server stack (Starlette, uvicorn) loads only when asked for
        from .server import EnvServer

        return EnvServer
    raise AttributeError(name)
