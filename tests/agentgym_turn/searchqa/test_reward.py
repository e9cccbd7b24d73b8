"""Answer normalisation, EM and F1 match Search-R1's / SQuAD's definitions."""

import re
import string
from collections import Counter

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agentgym_turn.searchqa.reward import choice_index, exact_match, normalize_answer, token_f1
from agentgym_turn.testing import strategies as st_turn


def reference_normalize(s):
    """The definition in Search-R1's qa_em.py (SQuAD v1.1), written out step by step."""
    s = s.lower()
    s = "".join(ch for ch in s if ch not in set(string.punctuation))
    s = re.sub(r"\b(a|an|the)\b", " ", s)
    return " ".join(s.split())


def reference_em(prediction, golds):
    golds = [golds] if isinstance(golds, str) else golds
    return float(any(reference_normalize(g) == reference_normalize(prediction) for g in golds))


NORMALIZATION_CASES = [
    ("The Beatles", "beatles"),
    ("The-Beatles", "thebeatles"),  # punctuation goes before articles: no "the" left
    ("U.S.A.", "usa"),
    ("  Paris,   France!  ", "paris france"),
    ("An apple a day", "apple day"),
    ("Theatre", "theatre"),  # only whole words are articles
    ("a", ""),
    ("A.", ""),
    ("the the the", ""),
    ("Café–Bar", "café–bar"),  # the en dash is not ASCII punctuation
    ("«Paris»", "«paris»"),
    ("ÉCOLE", "école"),
    ("rock'n'roll", "rocknroll"),
    ("1,000", "1000"),
    ("3.14", "314"),
    ("a\tb\nc", "b c"),
    ("an_example", "anexample"),  # "_" is in string.punctuation
    ("\uff21", "\uff41"),  # a full-width A is no article
    ("the\u00a0beatles", "beatles"),  # a no-break space is whitespace and a word boundary
    ("Mr. Smith", "mr smith"),
    ("", ""),
]


@pytest.mark.parametrize("text, expected", NORMALIZATION_CASES)
def test_normalize_answer__matches_search_r1_on_tricky_cases(text, expected):
    assert normalize_answer(text) == expected
    assert reference_normalize(text) == expected  # the table itself follows the definition


@given(st.one_of(st_turn.any_text(80), st_turn.tag_soup(), st.text(alphabet=" .,'-aAnNtThHeE\t\u00a0", max_size=40)))
def test_normalize_answer__equals_the_definition_for_any_string(text):
    assert normalize_answer(text) == reference_normalize(text)


@pytest.mark.parametrize(
    "prediction, golds, em",
    [
        ("The Beatles!", ["beatles"], 1.0),
        ("Beatles", ["The Rolling Stones", "the beatles"], 1.0),
        ("beatles", "The Beatles", 1.0),  # a single gold string
        ("", ["a"], 1.0),  # both normalise to "": Search-R1 counts a match
        ("the", ["An"], 1.0),
        ("1873", ["1873 "], 1.0),
        ("Paris France", ["Paris"], 0.0),
        ("Paris", [], 0.0),
        ("thebeatles", ["The-Beatles"], 1.0),
    ],
)
def test_exact_match__search_r1_em_check(prediction, golds, em):
    assert exact_match(prediction, golds) == em == reference_em(prediction, golds)


@given(st_turn.any_text(30), st.lists(st_turn.any_text(20), max_size=3))
def test_exact_match__equals_the_definition_for_any_strings(prediction, golds):
    assert exact_match(prediction, golds) == reference_em(prediction, golds)


def squad_f1(prediction, gold):
    p, g = reference_normalize(prediction).split(), reference_normalize(gold).split()
    if not p or not g:
        return float(p == g)
    same = sum((Counter(p) & Counter(g)).values())
    if same == 0:
        return 0.0
    precision, recall = same / len(p), same / len(g)
    return 2 * precision * recall / (precision + recall)


@pytest.mark.parametrize(
    "prediction, golds, f1",
    [
        ("Aldo Tavesk", ["Aldo Merrin Tavesk"], 0.8),
        ("the cat the cat", ["cat"], 2 / 3),  # repeated tokens count once each (clipped)
        ("cat", ["dog", "the cat"], 1.0),  # best gold
        ("", [""], 1.0),
        ("x", [""], 0.0),
        ("", ["x"], 0.0),
        ("New York City", ["new york"], 0.8),
        ("a b c", ["d"], 0.0),
    ],
)
def test_token_f1__squad_definition(prediction, golds, f1):
    assert token_f1(prediction, golds) == pytest.approx(f1)


@given(st_turn.any_text(30), st.lists(st_turn.any_text(20), min_size=1, max_size=3))
def test_token_f1__is_the_best_squad_f1_over_golds(prediction, golds):
    expected = max(squad_f1(prediction, g) for g in golds)
    assert token_f1(prediction, golds) == pytest.approx(expected)
    assert 0.0 <= token_f1(prediction, golds) <= 1.0


OPTIONS = ["Kalvoren", "Dusmir", "1873", "Aldo Tavesk"]


@pytest.mark.parametrize(
    "answer, index",
    [
        ("B", 1),
        ("b", 1),
        ("(C)", 2),
        ("C.", 2),
        ("D) Aldo Tavesk", 3),
        ("Option B", 1),
        ("answer: a", 0),
        ("A", 0),
        ("a", 0),
        ("kalvoren", 0),
        ("The Dusmir", 1),
        ("E", None),
        ("a dog", None),
        ("Aldo", None),
        ("", None),
        ("Blue", None),
        ("1873", 2),
    ],
)
def test_choice_index__letters_and_option_texts(answer, index):
    assert choice_index(answer, OPTIONS) == index


@given(st_turn.any_text(60))
def test_choice_index__never_raises_and_stays_in_range(answer):
    k = choice_index(answer, OPTIONS)
    assert k is None or 0 <= k < len(OPTIONS)
