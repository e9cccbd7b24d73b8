import importlib
import os
import pkgutil
import re

import gymnasium as gym
import pytest
from hypothesis import given
from hypothesis import strategies as st

import agentgym_turn
from agentgym_turn.core import parsing
from agentgym_turn.testing.fuzz import FRAGMENTS
from agentgym_turn.searchqa import protocol
from agentgym_turn.searchqa.reward import choice_index
from agentgym_turn.testing.linearity import (
    DEFAULT_SIZES,
    WORST_RESPONSES,
    Growth,
    TooMuchWork,
    emulated_match_end,
    growth,
    python_steps,
    regex_growth,
    regex_steps,
    worst_response,
)

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
    [
        ("", "No action"),
        ("doubleclick[x]", "No action"),
        ("click[", "never closed"),
        ("click[ ]", "empty"),
        ("buy[x]", "No action"),
    ],
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


#: The fuzzer's pieces that trip parsers (every env's tags, case, spacing, brackets) and a move.
_PIECES = [*FRAGMENTS, "Up"]


@given(
    st.lists(st.one_of(st.sampled_from(_PIECES), st.text(max_size=3)), max_size=8).map("".join),
    st.sampled_from([("answer",), ("search", "answer"), ("think",), ("Answer",)]),
    st.booleans(),
)
def test_find_tagged__its_shortcut_agrees_with_reading_every_tag(text, tags, strip_thinking):
    from agentgym_turn.core.parsing import _scan_tagged

    lower = tuple(t.lower() for t in tags)
    assert find_tagged(text, tags, strip_thinking=strip_thinking) == _scan_tagged(text, lower, strip_thinking)


@given(st.text())
def test_found_content_is_inside_the_text(text):
    m = find_tagged(text, ("answer",))
    if isinstance(m, TagMatch):
        assert m.content and m.content in text


# ---------------------------------------------------------------- linear work, counted (no clock)
# Every parser must be linear in the response length. Regex patterns run on a counting
# backtracking matcher (agentgym_turn.testing.linearity); Python loops are counted as line events.
# Work at sizes n, 2n, 4n: the ratio of successive increments is about 2 when linear, 4 when quadratic.

_OLD_MCQ_LETTER = re.compile(r"^\W*(?:(?:option|answer|choice)\s*[:\-]?\s*)?\(?([A-Za-z])\)?(?=$|[\s.:),;\-])", re.I)


def _regex_growth(pattern, mode, head, unit, tail):
    counts = tuple(regex_steps(pattern, head + unit * n + tail, mode=mode) for n in DEFAULT_SIZES)
    return Growth(f"{head!r} + {unit!r} * n + {tail!r}", counts, growth(counts))


@pytest.mark.parametrize(
    "pattern, mode, family",
    [
        (_OLD_MCQ_LETTER, "match", ("option", " ", "")),  # the search-QA MCQ pattern an attack pass found (76 s at 65k)
        (re.compile(r"<answer>(.*?)</answer>", re.S), "finditer", ("", "<answer>", "")),  # a lazy tag pattern rescans
        (re.compile(r"\s*x"), "finditer", ("", " ", "!")),  # every start re-reads the run of spaces
        (re.compile(r",?\s*and price lower than [\d.,]+ dollars\s*$"), "finditer", ("x", " ", "!")),
    ],
)
def test_work_counter__catches_quadratic_patterns(pattern, mode, family):
    g = _regex_growth(pattern, mode, *family)
    assert g.superlinear() and 3.5 < g.ratio < 4.5, g


def test_work_counter__stops_an_exponential_pattern_at_its_cap():
    with pytest.raises(TooMuchWork):
        regex_steps(r"(a+)+$", "a" * 40 + "!", mode="match", max_steps=100_000)
    assert regex_growth(r"(a+)+$", mode="match", max_steps=100_000, stop_on_superlinear=True)[0].ratio == float("inf")


@pytest.mark.parametrize(
    "pattern",
    [
        r"<\s*+(/?)\s*+(answer|search)\s*+>",
        r"(?<![\w])(search|click)[ \t]*+\[",
        r"\b(a|an|the)\b",
        r"(?<!\s)\s*+x",
        r"\w+",
    ],
)
def test_work_counter__passes_linear_patterns(pattern):
    worst = regex_growth(re.compile(pattern, re.I))[0]
    assert not worst.superlinear() and worst.ratio <= 2.2, worst


_FIDELITY_PATTERNS = [
    _OLD_MCQ_LETTER,
    re.compile(r"<\s*+(/?)\s*+(answer|search)\s*+>", re.I),
    re.compile(r"(?<![\w])(search|click)[ \t]*+\[", re.I),
    re.compile(r"\b(a|an|the)\b"),
    re.compile(r"\[(\s*(?:clicked\s+)?button_?\s*|\s*sep\s*)\]", re.I),
    re.compile(r"[^\W_]+(?:[.'’][^\W_]+)*\.?"),
    re.compile(r"a*?b|(?>x+)y|c{2,3}d"),
]


@given(
    st.sampled_from(_FIDELITY_PATTERNS), st.text(alphabet="aAbBcdxy <>/[]().:-!_'’\t", max_size=30), st.integers(0, 30)
)
def test_work_counter__matches_like_re(pattern, text, pos):
    pos = min(pos, len(text))
    m = pattern.match(text, pos)
    assert emulated_match_end(pattern, text, pos) == (m.end() if m else None)


def _parser_patterns() -> dict[str, re.Pattern]:
    """Every compiled pattern at module level in agentgym_turn, the cached tag/verb patterns the
    envs use, and the patterns written inline."""
    found = {}
    for info in pkgutil.walk_packages(agentgym_turn.__path__, "agentgym_turn."):
        if info.name.endswith("__main__") or ".testing" in info.name:
            continue
        module = importlib.import_module(info.name)
        for name, value in vars(module).items():
            if isinstance(value, re.Pattern) and isinstance(value.pattern, str):
                found[f"{info.name}.{name}"] = value
    for tags in (("think",), ("answer",), ("search", "answer")):
        found[f"find_tagged{tags}"] = parsing._tag_pattern(tags)
    found["parse_bracket_action"] = parsing._verb_pattern(("search", "click"))
    found["searchqa.retrieval inline \\w+"] = re.compile(r"\w+")
    found["webshop.loader inline [^\\d.]"] = re.compile(r"[^\d.]")
    return found


_PATTERNS = _parser_patterns()
#: Known superlinear patterns, each reported to its owner; strict, so a fix makes the test say so.
_KNOWN_SUPERLINEAR: dict[str, str] = {}  # pattern name -> why (strict xfail: fixing it must remove the entry)


@pytest.mark.parametrize(
    "name",
    [
        pytest.param(n, marks=pytest.mark.xfail(reason=_KNOWN_SUPERLINEAR[n], strict=True))
        if n in _KNOWN_SUPERLINEAR
        else n
        for n in sorted(_PATTERNS)
    ],
)
def test_every_regex_in_the_package__does_linear_work(name):
    assert len(_PATTERNS) >= 15  # discovery works: a refactor that hides patterns must not pass silently
    worst = regex_growth(_PATTERNS[name], stop_on_superlinear=True)[0]
    assert not worst.superlinear(), f"{name} is superlinear on {worst.name}: steps {worst.counts} at n={DEFAULT_SIZES}"


_LINE_SIZES = (256, 512, 1024)


def _quadratic_bracket_parser(text):
    """Finds the longest balanced [...] by trying every start: a naive parser's shape."""
    best = 0
    for i, c in enumerate(text):
        if c != "[":
            continue
        depth = 0
        for j in range(i, len(text)):
            depth += {"[": 1, "]": -1}.get(text[j], 0)
            if depth == 0:
                best = max(best, j - i)
                break
    return best


def test_work_counter__catches_a_quadratic_python_parser():
    g = _line_growth(_quadratic_bracket_parser, "webshop_open_brackets", under=os.path.dirname(__file__))
    assert g.superlinear() and g.ratio > 3.5, g
    assert not _line_growth(lambda t: parsing._closing_bracket(t, 1), "webshop_open_brackets").superlinear()


def _line_growth(fn, name, under=None):
    counts = tuple(python_steps(fn, worst_response(name, n), under=under) for n in _LINE_SIZES)
    return Growth(name, counts, growth(counts))


@pytest.mark.parametrize(
    "parser",
    [
        lambda t: find_tagged(t, ("search", "answer")),
        lambda t: find_tagged(t, ("answer",)),
        lambda t: parse_bracket_action(t),
        strip_think,
        split_moves,
        lambda t: choice_index(t, ["red", "green", "blue", "the answer"]),
        lambda t: protocol.first_action(protocol.cut_response(t)),
        lambda t: protocol.extract_answer(t + t),
    ],
    ids=[
        "find_tagged-2",
        "find_tagged-1",
        "parse_bracket_action",
        "strip_think",
        "split_moves",
        "choice_index",
        "first_action",
        "extract_answer",
    ],
)
def test_python_parsers__do_linear_work_on_the_worst_responses(parser):
    bad = [g for g in (_line_growth(parser, name) for name in WORST_RESPONSES) if g.superlinear()]
    assert not bad, bad


@pytest.mark.parametrize("env_id", agentgym_turn.env_ids())
def test_env_steps__do_linear_python_work_on_the_worst_responses(env_id):
    env = gym.make(env_id)

    def step(text):
        env.reset(seed=0)  # outside the count: python_steps counts only the call it is given
        return python_steps(env.step, text)

    bad = []
    for name in WORST_RESPONSES:
        step(
            worst_response(name, _LINE_SIZES[0])
        )  # warm-up: first-use caches (a search's results) are not per-character work
        counts = tuple(step(worst_response(name, n)) for n in _LINE_SIZES)
        g = Growth(name, counts, growth(counts))
        if g.superlinear():
            bad.append(g)
    assert not bad, bad
