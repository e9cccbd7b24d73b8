"""Score any model on fixed, content-disjoint test tasks under a named protocol (``agentgym-turn eval``).

* :mod:`.protocols`: ``default`` for every id, and presets copied from peers (``ragen-sokoban``,
  ``verl-agent-webshop``, ``search-r1``);
* :mod:`.players`: who answers (:class:`EndpointPlayer` for an OpenAI-compatible server; a local Hugging Face
  model through :class:`reference_trainer.players.LocalPlayer`);
* :mod:`.harness`: :func:`evaluate` writes replayable records, the floors and the card;
* :mod:`.card`: the card's numbers, computed from the record files alone.

Nothing here imports torch.
"""

from .card import build_card, card_markdown, mean_interval, summarize, task_set_sha256, wilson_interval
from .harness import EvalSettingsError, evaluate
from .players import EndpointPlayer, Player, Reply
from .protocols import DEFAULT, PRESETS, SAMPLINGS, Protocol, protocol_for, protocol_names, test_split_kwargs

__all__ = [
    "evaluate",
    "EvalSettingsError",
    "EndpointPlayer",
    "Player",
    "Reply",
    "Protocol",
    "PRESETS",
    "DEFAULT",
    "SAMPLINGS",
    "protocol_for",
    "protocol_names",
    "test_split_kwargs",
    "build_card",
    "card_markdown",
    "summarize",
    "task_set_sha256",
    "wilson_interval",
    "mean_interval",
]
