"""Text spaces for turn environments: printable Unicode plus newline and tab.

Gymnasium's :class:`~gymnasium.spaces.Text` stores its charset as a frozenset and, by default,
accepts only ASCII letters and digits with ``min_length=1``. An LLM's response or a web page
contains any printable character, so :class:`TurnText` keeps Gymnasium's class (vector
utilities, ``isinstance`` checks and pickling keep working) and replaces membership with
``str.isprintable`` plus ``"\\n"`` and ``"\\t"``. ``sample()`` draws from a small, fixed sampling
alphabet that mixes ASCII, accented Latin, CJK, symbols, emoji and whitespace.
"""

from __future__ import annotations

from typing import Any

from gymnasium.spaces import Text

__all__ = ["TurnText", "SAMPLE_CHARSET", "is_turn_text", "sanitize_text"]

#: Characters that are allowed although ``str.isprintable()`` is False for them.
EXTRA_CHARS = "\n\t"

#: Alphabet used by ``TurnText.sample()``: ASCII printable, a few multi-byte characters, newline, tab.
SAMPLE_CHARSET = (
    "".join(chr(c) for c in range(0x20, 0x7F))
    + "éüñçßøÅ√→←↑↓•…–—“”‘’€£¥中文日本語한국어ДЖяπΩ∑🙂🚀\n\t"
)

#: Replacement for characters outside the space (U+FFFD REPLACEMENT CHARACTER, printable).
REPLACEMENT = "\ufffd"


def is_turn_text(text: str) -> bool:
    """True when every character of ``text`` is printable Unicode, ``"\\n"`` or ``"\\t"``."""
    if text.isprintable():
        return True
    return text.replace("\n", "").replace("\t", "").isprintable()


def sanitize_text(text: str) -> str:
    """Return ``text`` with every character outside :class:`TurnText` replaced by U+FFFD.

    ``"\\r\\n"`` and ``"\\r"`` become ``"\\n"`` first, so Windows line endings survive.
    """
    if is_turn_text(text):
        return text
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    return "".join(c if (c.isprintable() or c in EXTRA_CHARS) else REPLACEMENT for c in text)


class TurnText(Text):
    """A string of printable Unicode characters (plus newline and tab) of bounded length.

    Args:
        max_length: The longest string in the space, in characters (Python ``len``).
        min_length: The shortest string in the space. Defaults to 0: an empty response is a
            string like any other.
        seed: Seed for ``sample()``.
    """

    def __init__(self, max_length: int, *, min_length: int = 0, seed: Any = None):
        super().__init__(max_length, min_length=min_length, charset=SAMPLE_CHARSET, seed=seed)

    def contains(self, x: Any) -> bool:
        """True for a ``str`` whose length lies in ``[min_length, max_length]`` and whose characters are printable, newline or tab."""
        return (
            isinstance(x, str)
            and self.min_length <= len(x) <= self.max_length
            and is_turn_text(x)
        )

    def __repr__(self) -> str:
        return f"TurnText(min_length={self.min_length}, max_length={self.max_length}, charset=printable+\\n\\t)"

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, TurnText)
            and self.min_length == other.min_length
            and self.max_length == other.max_length
        )

    def __hash__(self) -> int:
        return hash(("TurnText", self.min_length, self.max_length))
