import pickle

from hypothesis import given
from hypothesis import strategies as st

from agentgym_turn.core import TurnText, is_turn_text, sanitize_text


def test_turn_text__accepts_printable_unicode_newline_tab():
    space = TurnText(100)
    assert "" in space
    assert "é√中🙂 [button] <b>\n\tok" in space
    assert "\x00" not in space and "\ud800" not in space and "\r" not in space
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
