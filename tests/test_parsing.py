import time

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agentgym_turn.core import (
    BracketAction,
    InvalidAction,
    TagMatch,
    find_tagged,
    parse_bracket_action,
    split_moves,
    strip_think,
)
from agentgym_turn.testing import strategies as st_turn


# ---------------------------------------------------------------- tags
@pytest.mark.parametrize(
    "text, tag, content",
    [
        ("<answer>Up</answer>", "answer", "Up"),
        ("  <answer>  Up || Left \n</answer> trailing", "answer", "Up || Left"),
        ("<ANSWER>x</Answer>", "answer", "x"),
        ("< answer >x</ answer >", "answer", "x"),
        ("<think>maybe <answer>No</answer></think><answer>Yes</answer>", "answer", "Yes"),
        ("<answer>first</answer><answer>second</answer>", "answer", "first"),
        ("</answer><answer>after a stray close</answer>", "answer", "after a stray close"),
        ("<search>q1</search><answer>a</answer>", "search", "q1"),
        ("<answer>é中🙂</answer>", "answer", "é中🙂"),
        ("<think>unclosed <answer>Up</answer>", "answer", "Up"),
    ],
)
def test_find_tagged__returns_first_complete_pair(text, tag, content):
    m = find_tagged(text, ("search", "answer"))
    assert isinstance(m, TagMatch)
    assert (m.tag, m.content) == (tag, content)


def test_find_tagged__counts_every_complete_pair():
    m = find_tagged("<answer>a</answer> <search>b</search> <answer>c</answer>", ("answer", "search"))
    assert isinstance(m, TagMatch) and m.count == 3


@pytest.mark.parametrize(
    "text, words",
    [
        ("", "No action"),
        ("Up", "No action"),
        ("<answer>Up", "never closed"),
        ("<answer></answer>", "empty"),
        ("<answer>  \n </answer>", "empty"),
        ("<answer>a<answer>b</answer></answer>", "Nested"),
        ("<search>q</answer>", "closed by"),
        ("<think><answer>hidden</answer></think>", "No action"),
    ],
)
def test_find_tagged__explains_what_is_wrong(text, words):
    m = find_tagged(text, ("search", "answer"))
    assert isinstance(m, InvalidAction)
    assert words in m.message


def test_strip_think__removes_blocks_and_stray_tags():
    assert strip_think("a<think>x</think>b") == "ab"
    assert strip_think("a</think>b") == "ab"
    assert strip_think("a<think>x<think>y</think>b") == "ab"
    assert strip_think("<THINK>x</think >b") == "b"


# ---------------------------------------------------------------- brackets
@pytest.mark.parametrize(
    "text, verb, argument",
    [
        ("search[red shoes]", "search", "red shoes"),
        ("click[Buy Now]", "click", "Buy Now"),
        ("CLICK [ < Prev ]", "click", "< Prev"),
        ("I will click[b01hqtwl6s] now", "click", "b01hqtwl6s"),
        ("click[pack [2 count]]", "click", "pack [2 count]"),
        ("click[a [b]", "click", "a [b"),
        ("<answer>click[x]</answer> click[y]", "click", "x"),
        ("<think>click[no]</think>search[yes]", "search", "yes"),
        ("search[é中🙂]", "search", "é中🙂"),
    ],
)
def test_parse_bracket_action__reads_verb_and_argument(text, verb, argument):
    assert parse_bracket_action(text) == BracketAction(verb, argument)


@pytest.mark.parametrize(
    "text, words",
    [("", "No action"), ("doubleclick[x]", "No action"), ("click[", "never closed"), ("click[ ]", "empty"), ("buy[x]", "No action")],
)
def test_parse_bracket_action__explains_what_is_wrong(text, words):
    r = parse_bracket_action(text)
    assert isinstance(r, InvalidAction) and words in r.message


def test_split_moves():
    assert split_moves("Up || left||RIGHT ||  ") == ["Up", "left", "RIGHT"]
    assert split_moves("") == []


# ---------------------------------------------------------------- any string
@given(st_turn.responses())
def test_every_parser__any_string_gives_action_or_invalid(text):
    for result in (
        find_tagged(text, ("answer",)),
        find_tagged(text, ("search", "answer")),
        parse_bracket_action(text),
    ):
        assert isinstance(result, (TagMatch, BracketAction, InvalidAction))
        if isinstance(result, InvalidAction):
            assert result.message
    assert isinstance(strip_think(text), str)


@given(st.text())
def test_found_content_is_inside_the_text(text):
    m = find_tagged(text, ("answer",))
    if isinstance(m, TagMatch):
        assert m.content and m.content in text


@pytest.mark.parametrize(
    "text",
    [
        "<answer>" * 130_000,
        "<" + " " * 1_000_000,
        "click[" + "[" * 500_000 + "]" * 400_000,
        "click[" * 150_000,
        "x" * 1_000_000 + "<answer>a</answer>",
        "<think>" * 140_000 + "</think>" * 10,
    ],
)
def test_parsers__one_megabyte_inputs_parse_in_linear_time(text):
    t0 = time.perf_counter()
    find_tagged(text, ("search", "answer"))
    parse_bracket_action(text)
    assert time.perf_counter() - t0 < 2.0
