"""Train, validation and test levels disjoint by content: a level's split is a function of the level.

A generated 6x6 one-box level space is small: seeds drawn apart still give the same level (600
held-out seeds gave 575 distinct levels, and about half of them also came up among training
seeds). Splitting by seed is therefore not held-out. Here a level's split follows from its
content alone (walls, targets, boxes, player: the Boxoban text), through a CRC-32 of that text,
so the same level falls in the same split whichever seed, generator or file produced it.
Levels that are rotations or mirror images of each other are different levels here.
"""

from __future__ import annotations

from ..core.splits import CONTENT_SPLIT_SHARES, CONTENT_SPLITS, check_content_split, key_split
from .loader import Level

#: The splits, in the order of their buckets (:mod:`agentgym_turn.core.splits`).
SPLITS = CONTENT_SPLITS
#: Share of levels in each split.
SPLIT_SHARES = CONTENT_SPLIT_SHARES


def level_split(level: Level) -> str:
    """``"train"``, ``"validation"`` or ``"test"``: the split ``level`` belongs to, by its content (its Boxoban text)."""
    return key_split(level.to_text())  # exact: spaces are floor cells


def check_split(split: str | None) -> str | None:
    """``split`` if it names a split (or is None, meaning every level); else a ValueError naming them."""
    return check_content_split(split)
