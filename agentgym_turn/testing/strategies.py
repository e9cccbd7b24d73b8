"""Hypothesis strategies for adversarial responses (needs ``hypothesis``, the ``dev`` extra).

Use them to test your own env's "any string is a legal action" claim::

    from hypothesis import given
    from agentgym_turn.testing import strategies as st_turn

    @given(st_turn.responses())
    def test_any_response_is_safe(response):
        env.reset(seed=0)
        env.step(response)   # must not raise
"""

from __future__ import annotations

from typing import Sequence

from hypothesis import strategies as st

from .fuzz import FRAGMENTS

__all__ = ["any_text", "fragments", "tag_soup", "tagged", "bracketed", "huge_text", "responses"]


def any_text(max_size: int = 200) -> st.SearchStrategy[str]:
    """Any Python string, lone surrogates and control characters included."""
    return st.text(alphabet=st.characters(codec=None, categories=None), max_size=max_size)


def fragments(extra: Sequence[str] = ()) -> st.SearchStrategy[str]:
    """One parser-tripping fragment (tags, brackets, separators, odd unicode)."""
    return st.sampled_from(tuple(FRAGMENTS) + tuple(extra))


def tag_soup(extra: Sequence[str] = (), max_pieces: int = 12) -> st.SearchStrategy[str]:
    """Fragments and arbitrary text glued together: unbalanced, nested, repeated tags."""
    piece = st.one_of(fragments(extra), any_text(12))
    return st.lists(piece, max_size=max_pieces).map("".join)


def tagged(tags: Sequence[str] = ("answer", "search", "think"), inner: st.SearchStrategy[str] | None = None) -> st.SearchStrategy[str]:
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


def bracketed(verbs: Sequence[str] = ("search", "click"), inner: st.SearchStrategy[str] | None = None) -> st.SearchStrategy[str]:
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


def responses(tags: Sequence[str] = ("answer", "search", "think"), verbs: Sequence[str] = ("search", "click"), extra: Sequence[str] = ()) -> st.SearchStrategy[str]:
    """The union: arbitrary text, tag soup, tagged and bracketed responses, and rarely huge ones."""
    return st.one_of(
        any_text(),
        tag_soup(extra),
        tagged(tags),
        bracketed(verbs),
        st.builds(lambda t, b: f"<answer>{b}</answer>" if t else b, st.booleans(), bracketed(verbs)),
        huge_text(10_000, 200_000),
    )
