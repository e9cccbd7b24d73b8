"""Train, validation and test levels disjoint by content: a level's split is a function of the level.

A generated 6x6 one-box level space is small: seeds drawn apart still give the same level (600
held-out seeds gave 575 distinct levels, and about half of them also came up among training
seeds). Splitting by seed is therefore not held-out. Here a level's split follows from its
content alone (walls, targets, boxes, player: the Boxoban text), through a CRC-32 of that text,
so the same level falls in the same split whichever seed, generator or file produced it.
Levels that are rotations or mirror images of each other are different levels here.
"""

from __future__ import annotations

import zlib

from .loader import Level

__all__ = ["SPLITS", "SPLIT_SHARES", "level_split", "check_split"]

#: The splits, in the order of their buckets.
SPLITS = ("test", "validation", "train")
#: Share of levels in each split (10 buckets of the CRC-32: 0 test, 1 validation, 2-9 train).
SPLIT_SHARES = {"test": 0.1, "validation": 0.1, "train": 0.8}


def level_split(level: Level) -> str:
    """``"train"``, ``"validation"`` or ``"test"``: the split ``level`` belongs to, by its content."""
    bucket = zlib.crc32(level.to_text().encode("utf-8")) % 10
    return "test" if bucket == 0 else "validation" if bucket == 1 else "train"


def check_split(split: str | None) -> str | None:
    """``split`` if it names a split (or is None, meaning every level); else a ValueError naming them."""
    if split is not None and split not in SPLITS:
        raise ValueError(f"split={split!r} is not a split; choose one of {', '.join(map(repr, SPLITS))} (or None for every level).")
    return split
