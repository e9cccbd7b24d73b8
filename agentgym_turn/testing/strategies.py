"""Hypothesis strategies for adversarial responses (needs ``hypothesis``, the ``dev`` extra).

Use them to test your own env's "any string is a legal action" claim::

    from hypothesis import given
    from agentgym_turn.testing import strategies as st_turn

    @given(st_turn.responses())
    def test_any_response_is_safe(response):
        env.reset(seed=0)
        env.step(response)   # must not raise

Near-misses of a valid response (``near_valid``), strings at the action-length limit and
beyond it (``long_response``) and seeds (``seeds``) feed :mod:`agentgym_turn.testing.stateful`,
a hypothesis state machine that plays whole episodes against the turn contract.
"""

from __future__ import annotations

from typing import Sequence

from hypothesis import strategies as st

from .fuzz import FRAGMENTS, argument_span

#: Single code points that break naive text handling: NUL and other controls, lone surrogates,
#: combining marks, zero-width and bidi characters, BOM, line/paragraph separators, noncharacters.
NASTY_CHARACTERS: tuple[str, ...] = (
    "\x00",
    "\x01",
    "\x07",
    "\x08",
    "\x0b",
    "\x0c",
    "\r",
    "\x1b",
    "\x7f",
    "\x85",
    "\x9f",
    "\ud800",
    "\udbff",
    "\udc00",
    "\udfff",
    "\u0301",
    "\u0308",
    "\u20dd",
    "\u0e47",
    "\u00a0",
    "\u00ad",
    "\u200b",
    "\u200c",
    "\u200d",
    "\u2028",
    "\u2029",
    "\u202e",
    "\u2066",
    "\ufeff",
    "\ufffd",
    "\ufffe",
    "\uffff",
    "\U0001f600",
    "\U000e0001",
    "\U0010ffff",
)


def any_text(max_size: int = 200) -> st.SearchStrategy[str]:
    """Any Python string, lone surrogates and control characters included."""
    return st.text(alphabet=st.characters(codec=None, categories=None), max_size=max_size)


def unicode_text(max_size: int = 200) -> st.SearchStrategy[str]:
    """Any Python string, with :data:`NASTY_CHARACTERS` drawn far more often than by chance."""
    alphabet = st.one_of(st.characters(codec=None, categories=None), st.sampled_from(NASTY_CHARACTERS))
    return st.text(alphabet=alphabet, max_size=max_size)


def fragments(extra: Sequence[str] = ()) -> st.SearchStrategy[str]:
    """One parser-tripping fragment (tags, brackets, separators, odd unicode)."""
    return st.sampled_from(tuple(FRAGMENTS) + tuple(extra))


def tag_soup(extra: Sequence[str] = (), max_pieces: int = 12) -> st.SearchStrategy[str]:
    """Fragments and arbitrary text glued together: unbalanced, nested, repeated tags."""
    piece = st.one_of(fragments(extra), any_text(12))
    return st.lists(piece, max_size=max_pieces).map("".join)


def tagged(
    tags: Sequence[str] = ("answer", "search", "think"), inner: st.SearchStrategy[str] | None = None
) -> st.SearchStrategy[str]:
    """``<tag>inner</tag>`` with random tag case and spacing, possibly unclosed or doubled."""
    inner = inner if inner is not None else st.one_of(any_text(40), tag_soup(max_pieces=4))

    @st.composite
    def build(draw):
        tag = draw(st.sampled_from(tuple(tags)))
        name = "".join(c.upper() if draw(st.booleans()) else c for c in tag)
        pad = draw(st.sampled_from(("", " ", "  ")))
        body = draw(inner)
        close = draw(st.sampled_from((f"</{name}>", f"</{pad}{name}{pad}>", "", f"</{tags[0]}>")))
        text = f"<{pad}{name}{pad}>{body}{close}"
        return text * draw(st.integers(1, 3))

    return build()


def bracketed(
    verbs: Sequence[str] = ("search", "click"), inner: st.SearchStrategy[str] | None = None
) -> st.SearchStrategy[str]:
    """``verb[inner]`` with random verb case, spaces and bracket balance."""
    inner = inner if inner is not None else st.one_of(any_text(40), tag_soup(max_pieces=4))
    return st.builds(
        lambda v, upper, sp, body, close: f"{v.upper() if upper else v}{sp}[{body}{close}",
        st.sampled_from(tuple(verbs)),
        st.booleans(),
        st.sampled_from(("", " ", "\t")),
        inner,
        st.sampled_from(("]", "", "]]", "[]")),
    )


def huge_text(min_size: int = 100_000, max_size: int = 1_100_000) -> st.SearchStrategy[str]:
    """A long string (about 1 MB) built from a repeated unit, cheap to generate."""
    unit = st.one_of(fragments(), any_text(8).filter(bool))
    return st.builds(
        lambda u, n: (u * (n // max(len(u), 1) + 1))[:n],
        unit,
        st.integers(min_size, max_size),
    )


def responses(
    tags: Sequence[str] = ("answer", "search", "think"),
    verbs: Sequence[str] = ("search", "click"),
    extra: Sequence[str] = (),
) -> st.SearchStrategy[str]:
    """The union: arbitrary text, tag soup, tagged and bracketed responses, and rarely huge ones."""
    return st.one_of(
        any_text(),
        tag_soup(extra),
        tagged(tags),
        bracketed(verbs),
        st.builds(lambda t, b: f"<answer>{b}</answer>" if t else b, st.booleans(), bracketed(verbs)),
        huge_text(10_000, 200_000),
    )


def near_valid(template: str) -> st.SearchStrategy[str]:
    """Near-misses of a valid response ``template`` (e.g. the env's ``expert_action()``).

    Valid syntax with a bad argument (the argument replaced, padded, repeated, case-swapped or
    spiked with a nasty character), and broken syntax around a good argument (truncated,
    doubled, wrapped in ``<think>``, a character inserted anywhere). Shrinks towards
    ``template`` itself.
    """
    start, end = argument_span(template)
    head, argument, tail = template[:start], template[start:end], template[end:]
    replacement = st.one_of(
        st.just(argument),
        st.just(""),
        st.sampled_from((" ", "\n", "\t", "0", "-1", "None", "?", "Up", "click", "B", "[]", "<answer>", "||")),
        unicode_text(30),
        fragments(),
        st.builds(
            lambda c, k: argument[:k] + c + argument[k:],
            st.sampled_from(NASTY_CHARACTERS),
            st.integers(0, len(argument)),
        ),
        st.builds(lambda n: " || ".join([argument] * n), st.integers(2, 40)),
        st.just(argument.swapcase()),
        st.just(argument[::-1]),
        st.builds(lambda pad: pad + argument + pad, st.sampled_from(("  ", "\u00a0", "\u200b", "\n\n", "\x00"))),
    )

    @st.composite
    def build(draw: st.DrawFn) -> str:
        text = head + draw(replacement) + tail
        how = draw(
            st.sampled_from(("argument", "argument", "argument", "truncate", "double", "think", "insert", "case"))
        )
        if how == "truncate":
            return text[: draw(st.integers(0, max(len(text) - 1, 0)))]
        if how == "double":
            return text + draw(st.sampled_from(("", " ", "\n"))) + text
        if how == "think":
            return draw(st.sampled_from(("<think>", "<think>x</think>", "</think>", "<think>\ud800"))) + text
        if how == "insert":
            k = draw(st.integers(0, len(text)))
            return text[:k] + draw(st.one_of(st.sampled_from(NASTY_CHARACTERS), fragments())) + text[k:]
        if how == "case":
            return text.upper() if draw(st.booleans()) else text.lower()
        return text

    return build()


#: Fillers for :func:`long_response`: plain text and the runs that make naive parsers backtrack.
LONG_FILLERS: tuple[str, ...] = (
    " ",
    "x",
    "<",
    "[",
    "search[",
    "click[",
    "<answer>",
    "<think>",
    "option ",
    "||",
    "\ud800",
    "\u0301",
    "🙂",
)


def long_response(lengths: Sequence[int]) -> st.SearchStrategy[str]:
    """A response of exactly one of ``lengths`` characters, made of a repeated filler that
    stresses parsers (runs of spaces, ``<``, ``[``, ``search[``, tags, surrogates, combining
    marks), optionally inside ``<answer>...</answer>`` and similar wrappers.

    Use ``(max_length - 1, max_length, max_length + 1)`` for the action-length limit and
    ``(1_048_576,)`` for 1 MB.
    """
    wrappers = (
        ("", ""),
        ("<answer>", "</answer>"),
        ("<answer>option", "!</answer>"),
        ("<search>", "</search>"),
        ("click[", "]"),
    )

    @st.composite
    def build(draw: st.DrawFn) -> str:
        size = draw(st.sampled_from(tuple(lengths)))
        filler = draw(st.sampled_from(LONG_FILLERS))
        head, tail = draw(st.sampled_from(wrappers))
        if len(head) + len(tail) > size:
            head, tail = "", ""
        body = size - len(head) - len(tail)
        return head + (filler * (body // len(filler) + 1))[:body] + tail

    return build()


def seeds() -> st.SearchStrategy[int]:
    """Seeds for ``reset``: small ones (shrink targets) and the whole unsigned 32-bit range."""
    return st.one_of(st.integers(0, 1000), st.integers(0, 2**32 - 1))
