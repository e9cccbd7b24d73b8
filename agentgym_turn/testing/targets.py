"""What kind of env a text names, for ``validate`` and its checks: one reading of ``ID|module:factory|URL``."""

from __future__ import annotations


def spec_kind(spec: str) -> str:
    """``"url"`` (a served env), ``"factory"`` (``module:attr``, a factory or an env class) or ``"id"`` (a registered
    env id, ``namespace/Name-v0`` included)."""
    if spec.startswith(("http://", "https://")):
        return "url"
    head = spec.split(":")[0]
    if ":" in spec and "/" not in head and head.replace(".", "").replace("_", "").isalnum():
        return "factory"
    return "id"
