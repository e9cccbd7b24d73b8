"""Evaluation protocols: which env, which fixed test tasks, which sampling, what the model sees.

A protocol pins everything a score depends on except the model: the env id and its ``gymnasium.make``
keywords (the content-disjoint test split), the reset seeds of the test tasks, the turn limit, the chat view
(history window, system prompt), and the two decodings a card reports, greedy and sampled (the source's
temperature and top-p). ``default`` exists for every registered id; the named presets copy a peer's
evaluation setting and say in ``differs`` what is not the same here. ``docs/eval.md`` cites each source.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field, replace
from typing import Any

#: The decodings a card can report: ``greedy`` (temperature 0) and ``sampled`` (the protocol's temperature and top-p).
SAMPLINGS = ("greedy", "sampled")
#: The name of the protocol every registered id has.
DEFAULT = "default"


@dataclass(frozen=True)
class Protocol:
    """Everything an evaluation fixes but the model.

    ``seeds`` are the reset seeds of the test tasks (``first_seed`` .. ``first_seed + episodes - 1``) on the env
    made with ``env_kwargs``; ``max_episode_steps`` overrides the registered turn limit when set. ``chat`` are
    :class:`~agentgym_turn.chat.ChatView` keywords. ``max_new_tokens`` bounds one response.
    """

    name: str
    env_id: str
    env_kwargs: dict[str, Any] = field(default_factory=dict)
    episodes: int = 200
    first_seed: int = 0
    max_episode_steps: int | None = None
    temperature: float = 1.0
    top_p: float = 1.0
    max_new_tokens: int = 256
    chat: dict[str, Any] = field(default_factory=dict)
    source: str = ""
    differs: str = ""

    @property
    def seeds(self) -> list[int]:
        return list(range(int(self.first_seed), int(self.first_seed) + int(self.episodes)))

    def sampling(self, mode: str) -> dict[str, float]:
        """``{"temperature", "top_p"}`` of a decoding of :data:`SAMPLINGS`."""
        if mode not in SAMPLINGS:
            raise ValueError(f"sampling must be one of {', '.join(SAMPLINGS)}, got {mode!r}.")
        return (
            {"temperature": 0.0, "top_p": 1.0}
            if mode == "greedy"
            else {"temperature": float(self.temperature), "top_p": float(self.top_p)}
        )

    def make_kwargs(self) -> dict[str, Any]:
        """``gymnasium.make(env_id, **make_kwargs())``: the env keywords and the turn limit."""
        kwargs = dict(self.env_kwargs)
        if self.max_episode_steps is not None:
            kwargs["max_episode_steps"] = int(self.max_episode_steps)
        return kwargs

    def to_dict(self) -> dict[str, Any]:
        return json.loads(json.dumps(asdict(self)))

    def digest(self) -> str:
        """SHA-256 of the settings that decide the play (canonical JSON; ``source`` and ``differs`` are prose, left
        out): two runs with equal digests played the same protocol."""
        settings = {k: v for k, v in self.to_dict().items() if k not in ("source", "differs")}
        return hashlib.sha256(json.dumps(settings, sort_keys=True).encode()).hexdigest()


def test_split_kwargs(env_id: str) -> dict[str, Any]:
    """The ``gymnasium.make`` keywords that select an id's content-disjoint test split (what no recipe trains on):
    Sokoban levels by their own hash (``split="test"``), WebShop goals and search-QA questions by their text
    (``content_split="test"``, over every goal or question; each WebShop seed its own goal). The shopping dialog has
    no content split: its test goals are WebShop's, 0-499."""
    if env_id.startswith("TurnSokoban"):
        return {"split": "test"}
    if env_id == "TurnWebShopDialog-v0":  # the dialog's goals split by WebShop's index only (test goals 0-499)
        return {"goal_split": "test"}
    if env_id.startswith("TurnWebShop"):
        return {"goal_split": "all", "content_split": "test", "goal_from_seed": True}
    if env_id.startswith("TurnSearchQA"):
        return {"content_split": "test"}
    return {}


def _default(env_id: str) -> Protocol:
    episodes = 256 if env_id.startswith("TurnSokoban") else 200
    return Protocol(
        name=DEFAULT,
        env_id=env_id,
        env_kwargs=test_split_kwargs(env_id),
        episodes=episodes,
        temperature=1.0,
        top_p=1.0,
        max_new_tokens=256,
        chat={"split_system_prompt": True},
        source="this project: the id as registered, its content-disjoint test split, the whole history in the chat",
        differs="",
    )


#: The named presets, each a peer's evaluation setting as its code sets it (docs/eval.md cites the files and commits).
PRESETS: dict[str, Protocol] = {
    "ragen-sokoban": Protocol(
        name="ragen-sokoban",
        env_id="TurnSokoban-v0",
        env_kwargs={"split": "test"},
        episodes=256,
        first_seed=123,
        temperature=0.5,
        top_p=1.0,
        max_new_tokens=400,
        chat={
            "split_system_prompt": True,
            "system_prompt": "You're a helpful assistant.",
            "reward_template": "Reward: {reward}\n",
        },
        source="RAGEN 5eb79b8: SimpleSokoban 6x6, 1 box, 5 turns, <= 5 actions a turn and 10 an episode, 256 validation "
        "levels (seeds 123-378), sampled at temperature 0.5, 400 new tokens a turn, format penalty -0.1",
        differs="the 256 levels are this project's test split drawn from seeds 123-378 (RAGEN generates its own from those "
        "seeds with gym-sokoban); the chat is this project's ChatView of the env's text, not RAGEN's context manager "
        "(which also prefills <think> after the generation prompt and writes the reward as 'Reward:\\n-0.1\\n')",
    ),
    "verl-agent-webshop": Protocol(
        name="verl-agent-webshop",
        env_id="TurnWebShop-v0",
        env_kwargs={"goal_split": "test", "goal_from_seed": True},
        episodes=200,
        max_episode_steps=15,
        temperature=0.4,
        top_p=1.0,
        max_new_tokens=512,
        chat={"split_system_prompt": True, "history_window": 3},
        source="verl-agent 1df19bd: WebShop, 15 steps, WebShop's test goals 0-499, sampled at temperature 0.4, 512 new "
        "tokens a turn, the last 2 steps in the prompt, success when WebShop's reward is 1",
        differs="the first 200 test goals in a fixed order (verl-agent draws 128 of goals 0-499 anew at each validation); the "
        "default generated catalog unless data_path names WebShop's files; history as chat turns, not its prompt text",
    ),
    "search-r1": Protocol(
        name="search-r1",
        env_id="TurnSearchQA-v0",
        env_kwargs={"content_split": "test", "protocol": "search_r1", "topk": 3, "max_searches": 4},
        episodes=200,
        temperature=1.0,
        top_p=0.95,
        max_new_tokens=500,
        chat={"split_system_prompt": False},
        source="Search-R1 a14dc3a: its prompt in one user message, top-3 passages, up to 4 searches then an answer, "
        "exact match after normalisation, 500 new tokens a turn, sampled at temperature 1.0 and top-p 0.95 (its "
        "multi-turn validation loop samples)",
        differs="questions from the generated world's content-disjoint test split unless dataset_path names FlashRAG files",
    ),
}


def protocol_names() -> list[str]:
    """The names ``--protocol`` takes: ``default`` first, then the peers' presets, sorted."""
    return [DEFAULT, *sorted(PRESETS)]


def protocol_for(
    name: str,
    env_id: str,
    *,
    episodes: int | None = None,
    env_kwargs: dict[str, Any] | None = None,
    max_new_tokens: int | None = None,
) -> Protocol:
    """The protocol ``name`` for ``env_id``: ``default`` for any id, a preset only for the id it was written for.
    ``episodes``, ``env_kwargs`` (merged over the protocol's) and ``max_new_tokens`` change a copy, whose digest
    differs; the card records the result."""
    if name == DEFAULT:
        proto = _default(env_id)
    elif name in PRESETS:
        proto = PRESETS[name]
        if proto.env_id != env_id:
            raise ValueError(
                f"protocol {name!r} is written for {proto.env_id}, not {env_id}; use --protocol default for {env_id}."
            )
    else:
        raise ValueError(f"unknown protocol {name!r}; choose one of {', '.join(protocol_names())}.")
    if episodes is not None:
        if episodes < 1:
            raise ValueError(f"episodes must be at least 1, got {episodes}.")
        proto = replace(proto, episodes=int(episodes))
    if env_kwargs:
        proto = replace(proto, env_kwargs={**proto.env_kwargs, **env_kwargs})
    if max_new_tokens is not None:
        if max_new_tokens < 1:
            raise ValueError(f"max_new_tokens must be at least 1, got {max_new_tokens}.")
        proto = replace(proto, max_new_tokens=int(max_new_tokens))
    return proto
