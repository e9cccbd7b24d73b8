import pickle

from hypothesis import given
from hypothesis import strategies as st

from agentgym_turn.core import TurnText, is_turn_text, sanitize_text


def test_turn_text__accepts_unicode_text_newline_tab_cr():
    space = TurnText(100)
    assert "" in space
    assert "é√中🙂 [button] <b>\n\tok\r\n" in space
    assert "\x00" not in space and "\ud800" not in space and "\x1b" not in space and "\x85" not in space
    assert "a" * 101 not in space
    assert 3 not in space


def test_turn_text__samples_are_members_and_seeded():
    a, b = TurnText(50, seed=1), TurnText(50, seed=1)
    samples = [a.sample() for _ in range(20)]
    assert samples == [b.sample() for _ in range(20)]
    assert all(s in a for s in samples)


def test_turn_text__pickles_and_compares():
    space = TurnText(10)
    assert pickle.loads(pickle.dumps(space)) == space
    assert space != TurnText(11)


@given(st.text(alphabet=st.characters(codec=None, categories=None)))
def test_sanitize_text__always_lands_in_the_space(text):
    clean = sanitize_text(text)
    assert is_turn_text(clean)
    if is_turn_text(text):
        assert clean == text


# Characters real corpora carry (wiki dumps, product pages) that must reach the agent unchanged.
ORDINARY_UNICODE = [
    "10\xa0km",
    "a\u200db\u200cc",
    "hy\xadphen",
    "\ufeffbom",
    "line\u2028sep",
    "para\u2029sep",
    "a\r\nb",
    "e\u0301",
    "\ue000",
]


def test_sanitize_text__ordinary_unicode_passes_through_unchanged():
    for text in ORDINARY_UNICODE:
        assert is_turn_text(text), repr(text)
        assert sanitize_text(text) == text


def test_sanitize_text__replaces_only_surrogates_and_controls():
    assert sanitize_text("x\udfffy\x00z\x1b[0m\x7f\x85") == "x\ufffdy\ufffdz\ufffd[0m\ufffd\ufffd"
