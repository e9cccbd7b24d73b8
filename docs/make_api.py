"""Write the list of public names into ``docs/api.md`` from the faces' ``__all__``: ``python docs/make_api.py``.

A face is a module users import from; its ``__all__`` is its public surface. The list below is the one place that says
which modules are faces; ``tests/docs/test_api.py`` checks that the page shows exactly what the faces export.
"""

from __future__ import annotations

import importlib
import re
import sys
from pathlib import Path

PAGE = Path(__file__).resolve().parent / "api.md"
#: The faces, in the order a reader meets them, each with what it is for.
FACES = {
    "agentgym_turn": "Import it to register every env id; vector envs of text envs",
    "agentgym_turn.core": "The turn contract: the base env, text spaces, action parsing, the contract's errors",
    "agentgym_turn.sokoban": "TurnSokoban: levels and where they come from, the generator, the solver",
    "agentgym_turn.webshop": "TurnWebShop: catalog, goals, search, pages, reward, the site",
    "agentgym_turn.searchqa": "TurnSearchQA: world, corpus, retrieval, answers",
    "agentgym_turn.multiagent": "The shopping dialog, a PettingZoo env",
    "agentgym_turn.testing": "`check_turn_env` and hypothesis strategies, for any text env",
    "agentgym_turn.chat": "ChatView: an env as chat messages and exact token ids",
    "agentgym_turn.tokens": "Token assembly every trainer can share, and the chat-template audit",
    "agentgym_turn.vector": "Text-safe Gymnasium vector envs and GRPO groups",
    "agentgym_turn.pools": "The env-pool protocol (reset, step, call, close) and its pools; `make` builds one by mode",
    "agentgym_turn.async_pool": "Envs stepped concurrently by threads or processes, with a step timeout",
    "agentgym_turn.ray_pool": "Envs held by Ray actors (the `ray` extra)",
    "agentgym_turn.remote": "Envs served over OpenEnv's protocol, and their client",
    "agentgym_turn.recording": "Episode records: write, replay, rescore",
    "agentgym_turn.view": "A static HTML page of records",
    "agentgym_turn.evaluation": "Scoring any model under a named protocol",
    "agentgym_turn.integrations.trl": "TRL's environments and rollout function, token-exact",
    "agentgym_turn.integrations.verl_agent": "verl-agent's environment manager",
    "agentgym_turn.extras": "The optional extras and the one-line error for a missing one",
    "reference_trainer.config": "The trainer's configuration and the five algorithm presets",
    "reference_trainer.trainer": "The loop",
    "reference_trainer.recipes": "The measured recipes, one per env and model",
    "reference_trainer.policy": "Loading a model with its value head or critic",
    "reference_trainer.models": "Models by name, offline",
    "reference_trainer.tiny": "The tiny model and its tokenizer, built offline from an env's text",
    "reference_trainer.advantages": "Advantage estimators and their statistics, pure functions",
    "reference_trainer.losses": "The loss terms, pure functions",
    "reference_trainer.stats": "The intervals of reported gains",
}
START, END = "<!-- names: written by docs/make_api.py -->", "<!-- end of names -->"


def render() -> str:
    """The generated part of the page: one section per face with its ``__all__``, sorted."""
    parts = [START]
    for name, what in FACES.items():
        names = sorted(getattr(importlib.import_module(name), "__all__", []))
        listed = ", ".join(f"`{n}`" for n in names)
        parts.append(f"### `{name}`\n\n{what}.\n\n{listed}\n")
    return "\n\n".join([START, *[p.rstrip("\n") for p in parts[1:]], END])


def write() -> Path:
    text = PAGE.read_text(encoding="utf-8")
    new = re.sub(re.escape(START) + ".*?" + re.escape(END), lambda _: render(), text, flags=re.S)
    PAGE.write_text(new, encoding="utf-8")
    return PAGE


if __name__ == "__main__":
    sys.exit(print(write()))
