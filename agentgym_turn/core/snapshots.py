"""Snapshot bytes that only their maker can load: pickled state sealed with a keyed signature.

``TurnEnv.snapshot()`` pickles the episode's state, and unpickling bytes can run any code, so ``restore()``
loads only bytes sealed by this process (or by any process given the same ``AGENTGYM_SNAPSHOT_KEY``, for
snapshots that travel between your own workers). Anything else, a file or a message from elsewhere, is refused
before a byte of it is unpickled. No server of this suite accepts snapshots from clients.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import pickle
import secrets
from functools import lru_cache
from typing import Any

#: The environment variable that gives processes a shared key (any text; read once, at the first snapshot).
KEY_VARIABLE = "AGENTGYM_SNAPSHOT_KEY"
_MAGIC = b"agentgym-turn/snapshot/v1\n"
_TAG_BYTES = 32


class SnapshotError(ValueError):
    """Bytes that are not a snapshot sealed with this process's key: refused unread."""


@lru_cache(maxsize=1)
def _key() -> bytes:
    shared = os.environ.get(KEY_VARIABLE, "")
    return shared.encode("utf-8") if shared else secrets.token_bytes(32)


def seal(state: Any) -> bytes:
    """``state`` pickled, behind a header and an HMAC-SHA256 of the pickle under this process's key."""
    payload = pickle.dumps(state, protocol=pickle.HIGHEST_PROTOCOL)
    return _MAGIC + hmac.new(_key(), payload, hashlib.sha256).digest() + payload


def unseal(blob: Any) -> Any:
    """The state :func:`seal` sealed; :class:`SnapshotError` for anything else, checked before unpickling."""
    if not isinstance(blob, (bytes, bytearray)) or not bytes(blob[: len(_MAGIC)]) == _MAGIC:
        raise SnapshotError("not a snapshot of this suite (snapshot() makes them); refused without reading it.")
    blob = bytes(blob)
    tag, payload = blob[len(_MAGIC) : len(_MAGIC) + _TAG_BYTES], blob[len(_MAGIC) + _TAG_BYTES :]
    if not hmac.compare_digest(tag, hmac.new(_key(), payload, hashlib.sha256).digest()):
        raise SnapshotError(
            "this snapshot was not made by this process, or was changed: refused without unpickling it (unpickling "
            f"untrusted bytes can run code). Snapshots travel between your own processes when each has the same {KEY_VARIABLE}."
        )
    return pickle.loads(payload)
