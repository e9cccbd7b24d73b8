"""Adversarial responses without hypothesis: a fixed corpus plus seeded random ones.

``check_turn_env`` uses these so that it runs wherever the suite is installed;
:mod:`agentgym_turn.testing.strategies` builds hypothesis strategies from the same pieces.
"""

from __future__ import annotations

import numpy as np

__all__ = ["FRAGMENTS", "fixed_adversarial_responses", "random_responses"]

#: Pieces that trip parsers: tags of every env, brackets, separators, odd whitespace, unicode.
FRAGMENTS: tuple[str, ...] = (
    "<answer>", "</answer>", "<search>", "</search>", "<think>", "</think>",
    "<information>", "</information>", "<ANSWER>", "< answer >", "</ answer>",
    "search[", "click[", "]", "[", "[]", "||", " || ", "Up", "down", "LEFT", "right",
    "buy now", "Next >", "< Prev", "back to search", "[button]", "[button_]", "[SEP]",
    "<b>", "</b>", "<script>alert(1)</script>", "&amp;", "&lt;", "\\", "\"", "'",
    "\n", "\t", "\r\n", " ", "\u00a0", "\u200b", "\u202e", "\ufeff", "\x00", "\x07", "\x1b[31m",
    "\ud800", "\udfff", "é", "中文", "🙂", "𝔘𝔫𝔦", "ß", "İ", "ﬃ",
    "0", "-1", "1e309", "NaN", "None", "{}", "{\"a\": 1}", "A", "B) ", "42",
)


def fixed_adversarial_responses(max_action_length: int | None = None) -> list[str]:
    """A deterministic list of responses every env must survive."""
    responses = [
        "",
        " ",
        "\n\n\t",
        "\x00" * 17,
        "\ud800\udc00\ud800",
        "<answer>",
        "</answer>",
        "<answer></answer>",
        "<answer>   </answer>",
        "<answer><answer>x</answer></answer>",
        "<search>q</answer>",
        "<think>",
        "<think>unfinished thought <answer>Up</answer>",
        "<answer>Up || Up || Up || Up || Up || Up || Up || Up</answer>",
        "<answer>||||||</answer>",
        "click[]",
        "click[[[[[",
        "search[" + "]" * 50,
        "click[buy now]",
        "search[<b>x</b> [button] Buy Now [button_]]",
        "<search>" + "q " * 2000 + "</search>",
        "<answer>" + "🙂" * 1000 + "</answer>",
        "".join(FRAGMENTS),
        "x" * 100_000,
        "<answer>" * 10_000,
        "[" * 20_000 + "]" * 10_000,
    ]
    if max_action_length is not None and max_action_length < 2_000_000:
        responses.append("a" * (max_action_length + 1))
    return responses


def random_responses(rng: np.random.Generator, n: int, *, max_pieces: int = 12) -> list[str]:
    """``n`` responses glued from :data:`FRAGMENTS` and random code points, reproducible from ``rng``."""
    out = []
    for _ in range(n):
        pieces = []
        for _ in range(int(rng.integers(0, max_pieces + 1))):
            if rng.random() < 0.7:
                pieces.append(FRAGMENTS[int(rng.integers(len(FRAGMENTS)))])
            else:
                # any code point, surrogates included: Python strings can hold them
                pieces.append("".join(chr(int(c)) for c in rng.integers(0, 0x110000, size=int(rng.integers(1, 8)))))
        out.append("".join(pieces))
    return out
