"""Train, validation and test tasks disjoint by content: a task's split is a function of its text.

Seeds drawn apart can pose the same task (a small level space, a goal or question phrased the
same way in two generated worlds), so splitting by seed or by position is not held-out. Here a
task's split follows from its content key alone (:func:`content_key`: the text that defines the
task, case-folded with runs of whitespace made one space) through a CRC-32 of that key: 80% train,
10% validation, 10% test. The same task falls in the same split whichever seed, world, catalog or
file produced it, so training on ``"train"`` tasks of any world never shows a ``"test"`` task.
"""

from __future__ import annotations

import zlib

#: The splits, in the order of their buckets.
CONTENT_SPLITS = ("test", "validation", "train")
#: Share of tasks in each split (10 buckets of the CRC-32: 0 test, 1 validation, 2-9 train).
CONTENT_SPLIT_SHARES = {"test": 0.1, "validation": 0.1, "train": 0.8}


def content_key(text: str) -> str:
    """``text`` case-folded, with every run of whitespace one space and none at either end."""
    return " ".join(text.casefold().split())


def key_split(key: str) -> str:
    """``"train"``, ``"validation"`` or ``"test"``: the split of the task whose exact key is ``key``."""
    bucket = zlib.crc32(key.encode("utf-8")) % 10
    return "test" if bucket == 0 else "validation" if bucket == 1 else "train"


def content_split(text: str) -> str:
    """The split of the task whose content is ``text`` (free text, compared as :func:`content_key`)."""
    return key_split(content_key(text))


def check_content_split(split: str | None, option: str = "split") -> str | None:
    """``split`` if it names a split (or is None, meaning every task); else a ValueError naming them."""
    if split is not None and split not in CONTENT_SPLITS:
        raise ValueError(
            f"{option}={split!r} is not a split; choose one of {', '.join(map(repr, CONTENT_SPLITS))} "
            "(or None for every task)."
        )
    return split
