"""Text spaces for turn environments: any Unicode text except lone surrogates and control characters.

Gymnasium's :class:`~gymnasium.spaces.Text` stores its charset as a frozenset and, by default,
accepts only ASCII letters and digits with ``min_length=1``. An LLM's response, a web page or a
Wikipedia passage contains any character, so :class:`TurnText` keeps Gymnasium's class (vector
utilities, ``isinstance`` checks and pickling keep working) and replaces membership with a rule:
every Unicode scalar value except

* lone surrogates (U+D800-U+DFFF), which no UTF-8 encoder, tokenizer or HTTP body can carry, and
* control characters (category Cc: U+0000-U+001F, U+007F-U+009F) other than ``"\n"``, ``"\t"``
  and ``"\r"``, which terminals and tokenizers treat as commands rather than text.

Everything else passes through unchanged: no-break spaces, zero-width joiners, soft hyphens,
byte-order marks, line/paragraph separators, CRLF line endings, combining marks, emoji, private-use
characters. ``sample()`` draws from a small, fixed sampling alphabet that mixes ASCII, accented
Latin, CJK, symbols, emoji and whitespace.
"""

from __future__ import annotations

import re
from typing import Any

from gymnasium.spaces import Text

#: Control characters that are text (line breaks and tab); every other Cc character is not.
EXTRA_CHARS = "\n\t\r"

#: Alphabet used by ``TurnText.sample()``: ASCII printable, a few multi-byte characters, newline, tab.
SAMPLE_CHARSET = "".join(chr(c) for c in range(0x20, 0x7F)) + "éüñçßøÅ√→←↑↓•…–—“”‘’€£¥中文日本語한국어ДЖяπΩ∑🙂🚀\n\t"

#: Replacement for characters outside the space (U+FFFD REPLACEMENT CHARACTER).
REPLACEMENT = "\ufffd"

# Characters outside the space: C0/C1 controls except \t \n \r, and the surrogate block.
_OUTSIDE = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\ud800-\udfff]")


def is_turn_text(text: str) -> bool:
    """True when ``text`` holds no lone surrogate and no control character other than ``\\n \\t \\r``."""
    return _OUTSIDE.search(text) is None


def sanitize_text(text: str) -> str:
    """Return ``text`` with every character outside :class:`TurnText` replaced by U+FFFD.

    Linear in ``len(text)``; text already in the space is returned as is (same object).
    """
    if _OUTSIDE.search(text) is None:
        return text
    return _OUTSIDE.sub(REPLACEMENT, text)


class TurnText(Text):
    """A string of Unicode text (no lone surrogates, no controls but newline, tab, CR) of bounded length.

    Args:
        max_length: The longest string in the space, in characters (Python ``len``).
        min_length: The shortest string in the space. Defaults to 0: an empty response is a
            string like any other.
        seed: Seed for ``sample()``.
    """

    def __init__(self, max_length: int, *, min_length: int = 0, seed: Any = None):
        super().__init__(max_length, min_length=min_length, charset=SAMPLE_CHARSET, seed=seed)

    def contains(self, x: Any) -> bool:
        """True for a ``str`` whose length lies in ``[min_length, max_length]`` with no lone surrogate or control character (``\\n \\t \\r`` allowed)."""
        return isinstance(x, str) and self.min_length <= len(x) <= self.max_length and is_turn_text(x)

    def __repr__(self) -> str:
        return f"TurnText(min_length={self.min_length}, max_length={self.max_length}, charset=unicode-except-surrogates-and-controls)"

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, TurnText) and self.min_length == other.min_length and self.max_length == other.max_length
        )

    def __hash__(self) -> int:
        return hash(("TurnText", self.min_length, self.max_length))
