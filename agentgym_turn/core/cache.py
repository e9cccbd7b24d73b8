"""One per-process cache for what envs build slowly and share: levels, shops, worlds, indexes.

Every env family keeps its expensive, immutable objects in a :class:`ProcessCache`: it is locked
(safe for thread-pooled envs and servers), bounded (least recently used entries go first, counted
in entries), and builds each key once: a build runs outside the cache's lock under a lock of its
own key, so two different keys build in parallel while callers asking for a key being built wait
for that one build. A build that raises caches nothing (the next call tries again).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Callable, Generic, Hashable, TypeVar

from .args import is_int

V = TypeVar("V")


class ProcessCache(Generic[V]):
    """A thread-safe LRU map ``key -> value`` whose values are built on first use.

    Args:
        name: What the cache holds, for messages and ``repr`` (``"sokoban levels"``).
        max_entries: Entries kept at most; beyond it the least recently used entry is dropped
            (objects still used by an env live on; only the sharing ends).
    """

    def __init__(self, name: str, max_entries: int):
        if not is_int(max_entries, 1):
            raise ValueError(f"max_entries of the {name!r} cache must be an int >= 1, got {max_entries!r}.")
        self.name = name
        self.max_entries = max_entries
        self._entries: OrderedDict[Hashable, V] = OrderedDict()
        self._building: dict[Hashable, threading.Lock] = {}
        self._lock = threading.Lock()

    def get(self, key: Hashable, build: Callable[[], V]) -> V:
        """The value of ``key``, calling ``build()`` (once per process, for concurrent callers too) when absent."""
        with self._lock:
            if key in self._entries:
                self._entries.move_to_end(key)
                return self._entries[key]
            key_lock = self._building.setdefault(key, threading.Lock())
        with key_lock:
            with self._lock:  # another caller may have built it while this one waited
                if key in self._entries:
                    self._entries.move_to_end(key)
                    return self._entries[key]
            try:
                value = build()
                self.put(key, value)
            finally:
                with self._lock:
                    if self._building.get(key) is key_lock:
                        del self._building[key]
        return value

    def put(self, key: Hashable, value: V) -> None:
        """Store ``value`` under ``key`` (e.g. an object built elsewhere that envs should share)."""
        with self._lock:
            self._entries[key] = value
            self._entries.move_to_end(key)
            while len(self._entries) > self.max_entries:
                self._entries.popitem(last=False)

    def clear(self) -> None:
        """Drop every entry (values in use stay alive where they are used)."""
        with self._lock:
            self._entries.clear()

    def __contains__(self, key: Hashable) -> bool:
        with self._lock:
            return key in self._entries

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)

    def __repr__(self) -> str:
        return f"ProcessCache({self.name!r}, {len(self)}/{self.max_entries} entries)"
