"""Every env id this package registers, with its turn limit (``max_episode_steps``).

``import agentgym_turn`` calls :func:`register_envs`; registration imports nothing heavy
(entry points are strings, resolved when ``gymnasium.make`` is called). An env's section is
added here when the env exists: ids of envs that are not built are never registered.
The turn limit is Gymnasium's ``max_episode_steps`` (``TimeLimit`` sets ``truncated``);
change it with ``gymnasium.make(id, max_episode_steps=N)``. Ids that need an extra or a server
are in :data:`EXTRA_ENV_SPECS`: registered and listed by :func:`all_env_ids` (and ``agentgym-turn
list``), but not by :func:`env_ids`, the ids registry-wide tests make.
"""

from __future__ import annotations

import difflib
from typing import Any

from gymnasium.envs.registration import WrapperSpec, register, registry

from .core.args import CliError

#: ``gymnasium.register`` keyword arguments, one dict per id.
ENV_SPECS: list[dict[str, Any]] = [
    # --- TurnSokoban (agentgym_turn/sokoban) ---
    # RAGEN's SimpleSokoban (the papers' setting): 6x6, 1 box, 5 turns, <= 5 moves a turn, 10 an episode.
    {"id": "TurnSokoban-v0", "entry_point": "agentgym_turn.sokoban.env:TurnSokobanEnv", "max_episode_steps": 5},
    # 2 boxes: 99% of levels need <= 30 moves; 8 turns leave 2 spare turns over 30 moves at 5 a turn.
    {
        "id": "TurnSokoban-8x8-v0",
        "entry_point": "agentgym_turn.sokoban.env:TurnSokobanEnv",
        "max_episode_steps": 8,
        "kwargs": {
            "dim": (8, 8),
            "num_boxes": 2,
            "max_actions_per_turn": 5,
            "max_actions_per_episode": 30,
            "max_moves": 30,
        },
    },
    # Boxoban-sized: 4 boxes, 10 moves a turn, 100 an episode, 12 turns.
    {
        "id": "TurnSokoban-10x10-v0",
        "entry_point": "agentgym_turn.sokoban.env:TurnSokobanEnv",
        "max_episode_steps": 12,
        "kwargs": {
            "dim": (10, 10),
            "num_boxes": 4,
            "max_actions_per_turn": 10,
            "max_actions_per_episode": 100,
            "max_moves": 100,
            "solver_budget": 50_000,
        },
    },
    # --- TurnWebShop (agentgym_turn/webshop) ---
    # 15 turns: the papers' cap. A generated 1,000-product catalog unless num_products/data_path say otherwise.
    {"id": "TurnWebShop-v0", "entry_point": "agentgym_turn.webshop.env:TurnWebShopEnv", "max_episode_steps": 15},
    # The assistant of the shopping dialog against the scripted customer (agentgym_turn/multiagent): 15 shop turns + 5 questions.
    {
        "id": "TurnWebShopDialog-v0",
        "entry_point": "agentgym_turn.multiagent.assistant_env:TurnWebShopDialogEnv",
        "max_episode_steps": 20,
    },
    # --- TurnSearchQA (agentgym_turn/searchqa) ---
    # 5 turns: up to 4 searches (max_searches) and an answer, as Search-R1.
    {"id": "TurnSearchQA-v0", "entry_point": "agentgym_turn.searchqa.env:TurnSearchQAEnv", "max_episode_steps": 5},
    {
        "id": "TurnSearchQA-MCQ-v0",
        "entry_point": "agentgym_turn.searchqa.env:TurnSearchQAMCQEnv",
        "max_episode_steps": 5,
    },
]


#: Ids registered as well but left out of :func:`env_ids`, so that registry-wide tests (which make
#: every id in ``env_ids()``) neither start browsers nor need a server. :func:`all_env_ids` lists them.
EXTRA_ENV_SPECS: list[dict[str, Any]] = [
    # WebShop in headless Chromium through Selenium (agentgym_turn/webshop/browser.py): the extra "browser" + Chromium.
    {
        "id": "TurnWebShopBrowser-v0",
        "entry_point": "agentgym_turn.webshop.browser:TurnWebShopBrowserEnv",
        "max_episode_steps": 15,
    },
    # The client of a served env (agentgym_turn/remote), not an env of its own: the turn limit is the served id's.
    {"id": "agentgym_turn/Remote-v0", "entry_point": "agentgym_turn.remote.client:RemoteTurnEnv"},
]

#: What an id needs beyond the base install and ``gymnasium.make(id)``; an id not named needs nothing.
ENV_NEEDS: dict[str, str] = {
    "TurnWebShopBrowser-v0": "extra browser + Chromium",
    "agentgym_turn/Remote-v0": "a served env (base_url)",
}


#: Applied by ``gymnasium.make`` outside ``TimeLimit``: marks a turn the limit cut as ``exit_status="truncated"``.
STATUS_WRAPPER = WrapperSpec("TurnStatus", "agentgym_turn.core.contract:TurnStatus", {})


def register_envs() -> None:
    """Register every id in :data:`ENV_SPECS` and :data:`EXTRA_ENV_SPECS` that Gymnasium does not know yet
    (each with :data:`STATUS_WRAPPER`)."""
    for spec in (*ENV_SPECS, *EXTRA_ENV_SPECS):
        if spec["id"] not in registry:
            register(**spec, additional_wrappers=(STATUS_WRAPPER,))


def env_ids() -> list[str]:
    """The ids that every registry-wide test makes and plays (:data:`ENV_SPECS`), in registration order."""
    return [spec["id"] for spec in ENV_SPECS]


def all_env_ids() -> list[str]:
    """Every id this package registers: :func:`env_ids`, then :data:`EXTRA_ENV_SPECS`'s."""
    return env_ids() + [spec["id"] for spec in EXTRA_ENV_SPECS]


def env_needs(env_id: str) -> str:
    """What ``env_id`` needs beyond the base install (``"-"`` for nothing)."""
    return ENV_NEEDS.get(env_id, "-")


def resolve_env_id(env_id: str) -> str:
    """Return ``env_id`` if Gymnasium knows it; else raise :class:`CliError` naming it, the
    closest registered ids and this package's ids."""
    import gymnasium as gym

    register_envs()
    if env_id in gym.registry:
        return env_id
    ours = all_env_ids()
    close = difflib.get_close_matches(env_id, list(gym.registry), n=1, cutoff=0.6)
    hint = f" Did you mean {close[0]!r}?" if close else ""
    raise CliError(f"unknown env id {env_id!r}.{hint} This package registers: {', '.join(ours)}.")
