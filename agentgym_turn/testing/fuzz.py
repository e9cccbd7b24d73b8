"""Adversarial responses without hypothesis: a fixed corpus plus seeded random ones.

``check_turn_env`` uses these so that it runs wherever the suite is installed;
:mod:`agentgym_turn.testing.strategies` builds hypothesis strategies from the same pieces.
"""

from __future__ import annotations

import numpy as np

#: Pieces that trip parsers: tags of every env, brackets, separators, odd whitespace, unicode.
FRAGMENTS: tuple[str, ...] = (
    "<answer>",
    "</answer>",
    "<search>",
    "</search>",
    "<think>",
    "</think>",
    "<information>",
    "</information>",
    "<ANSWER>",
    "< answer >",
    "</ answer>",
    "search[",
    "click[",
    "]",
    "[",
    "[]",
    "||",
    " || ",
    "Up",
    "down",
    "LEFT",
    "right",
    "buy now",
    "Next >",
    "< Prev",
    "back to search",
    "[button]",
    "[button_]",
    "[SEP]",
    "<b>",
    "</b>",
    "<script>alert(1)</script>",
    "&amp;",
    "&lt;",
    "\\",
    '"',
    "'",
    "\n",
    "\t",
    "\r\n",
    " ",
    "\u00a0",
    "\u200b",
    "\u202e",
    "\ufeff",
    "\x00",
    "\x07",
    "\x1b[31m",
    "\ud800",
    "\udfff",
    "é",
    "中文",
    "🙂",
    "𝔘𝔫𝔦",
    "ß",
    "İ",
    "ﬃ",
    "0",
    "-1",
    "1e309",
    "NaN",
    "None",
    "{}",
    '{"a": 1}',
    "A",
    "B) ",
    "42",
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


def argument_span(template: str) -> tuple[int, int]:
    """Where the argument of a response sits: inside the outermost ``[...]``, else between the
    first ``>`` and the last ``</``, else the whole text."""
    left, right = template.find("["), template.rfind("]")
    if 0 <= left < right:
        return left + 1, right
    left, right = template.find(">"), template.rfind("</")
    if 0 <= left < right:
        return left + 1, right
    return 0, len(template)


#: Characters spliced into near-misses: controls, NUL, surrogates, combining and zero-width marks.
_SPIKES = ("\x00", "\x1b", "\r", "\ud800", "\udfff", "\u0301", "\u200d", "\ufeff", "\u2028", "\U0001f600")


def near_miss(template: str, rng: np.random.Generator) -> str:
    """One mutation of a valid response ``template``: valid syntax with a bad argument, or a
    good argument in broken syntax. Reproducible from ``rng``."""
    start, end = argument_span(template)
    head, argument, tail = template[:start], template[start:end], template[end:]
    kind = int(rng.integers(9))
    if kind == 0:  # argument replaced by a fragment
        return head + FRAGMENTS[int(rng.integers(len(FRAGMENTS)))] + tail
    if kind == 1:  # empty or blank argument
        return head + ("", " ", "\n\t")[int(rng.integers(3))] + tail
    if kind == 2:  # argument spiked with an odd character
        k = int(rng.integers(len(argument) + 1))
        return head + argument[:k] + _SPIKES[int(rng.integers(len(_SPIKES)))] + argument[k:] + tail
    if kind == 3:  # argument repeated
        return head + " || ".join([argument] * int(rng.integers(2, 40))) + tail
    if kind == 4:  # argument case-swapped or reversed
        return head + (argument.swapcase() if rng.random() < 0.5 else argument[::-1]) + tail
    if kind == 5:  # truncated
        return template[: int(rng.integers(len(template) + 1))]
    if kind == 6:  # doubled
        return template + template
    if kind == 7:  # an unclosed or stray think tag before it
        return ("<think>", "</think>", "<think>\ud800")[int(rng.integers(3))] + template
    k = int(rng.integers(len(template) + 1))  # a fragment spliced anywhere
    return template[:k] + FRAGMENTS[int(rng.integers(len(FRAGMENTS)))] + template[k:]
