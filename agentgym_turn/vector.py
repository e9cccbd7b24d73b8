"""Text-safe vector envs.

Gymnasium's ``AsyncVectorEnv`` with its default shared memory writes ``Text`` observations into
a fixed integer buffer and returns stale strings; with ``shared_memory=False`` observations
travel through pipes and are always the ones just produced. :func:`make_vec` always uses the
safe setting.
"""

from __future__ import annotations

from typing import Any, Literal

import gymnasium as gym

__all__ = ["make_vec"]


def make_vec(
    env_id: str,
    num_envs: int,
    mode: Literal["sync", "async"] = "sync",
    *,
    vector_kwargs: dict[str, Any] | None = None,
    **env_kwargs: Any,
) -> gym.vector.VectorEnv:
    """Build ``num_envs`` copies of ``env_id`` as a Gymnasium vector env that works with text.

    Args:
        env_id: A registered id, e.g. ``"TurnSokoban-v0"``.
        num_envs: Number of sub-environments.
        mode: ``"sync"`` (one process) or ``"async"`` (one process per copy).
        vector_kwargs: Extra arguments for ``SyncVectorEnv``/``AsyncVectorEnv``;
            ``shared_memory`` is forced to ``False`` in async mode.
        **env_kwargs: Passed to every sub-env (as in ``gymnasium.make``), e.g.
            ``max_episode_steps=8``.

    Observations come back as a tuple of ``num_envs`` strings; actions go in as a sequence of
    strings. Sub-envs reset automatically (Gymnasium's next-step autoreset).
    """
    if mode not in ("sync", "async"):
        raise ValueError(f"mode must be 'sync' or 'async', got {mode!r}.")
    if num_envs < 1:
        raise ValueError(f"num_envs must be at least 1, got {num_envs}.")
    vkw = dict(vector_kwargs or {})
    if mode == "async":
        if vkw.get("shared_memory"):
            raise ValueError("shared_memory=True returns stale strings for text observations; leave it False.")
        vkw["shared_memory"] = False
    return gym.make_vec(env_id, num_envs=num_envs, vectorization_mode=mode, vector_kwargs=vkw, **env_kwargs)
