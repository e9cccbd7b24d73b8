"""One package face for every env package: names exported lazily from their modules.

``import agentgym_turn.sokoban`` must stay light (the registry imports env packages only when an
env is made), so a package lists ``name -> module`` and resolves a name on first access::

    __getattr__, __dir__ = lazy_exports(__name__, {"TurnSokobanEnv": ".env", "Level": ".loader"})
"""

from __future__ import annotations

import importlib
from typing import Any, Callable, Mapping


def lazy_exports(package: str, exports: Mapping[str, str]) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """A module ``__getattr__`` and ``__dir__`` for ``package`` that import ``exports[name]``
    (a module relative to the package, e.g. ``".env"``) when ``name`` is first read."""
    table = dict(exports)

    def __getattr__(name: str) -> Any:
        module = table.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}; it exports {sorted(table)}")
        return getattr(importlib.import_module(module, package), name)

    def __dir__() -> list[str]:
        return sorted(table)

    return __getattr__, __dir__
