"""Answer normalisation, exact match and token F1, as Search-R1 and SQuAD define them.

:func:`normalize_answer` is Search-R1's (``verl/utils/reward_score/qa_em.py``, itself the SQuAD
v1.1 evaluation's): lower-case, delete every ASCII punctuation character
(``string.punctuation``), replace the whole words ``a``, ``an`` and ``the`` by a space, and
collapse runs of whitespace into single spaces. The order matters and is kept:

* punctuation goes *before* articles, so ``"The-Beatles"`` becomes ``"thebeatles"`` (no article
  left to remove) and ``"U.S.A."`` becomes ``"usa"``;
* only ASCII punctuation is removed: ``"Café–Bar"`` keeps its en dash and ``"«x»"`` its guillemets;
* an answer made only of articles and punctuation normalises to ``""``, which equals another
  empty normalisation (Search-R1 counts that as a match; so do we).

:func:`exact_match` is 1.0 when the normalised prediction equals any normalised gold answer
(Search-R1's ``em_check``). :func:`token_f1` is SQuAD's token F1 over normalised tokens (bag of
tokens, counts clipped), maximised over the gold answers; when the prediction or the gold has no
token at all, F1 is 1.0 if both are empty and 0.0 otherwise (SQuAD v2's convention).
"""

from __future__ import annotations

import re
import string
from collections import Counter
from typing import Iterable, Sequence

_PUNCTUATION = str.maketrans("", "", string.punctuation)
_ARTICLES = re.compile(r"\b(a|an|the)\b")

#: Option letters of multiple-choice questions.
LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"


def normalize_answer(text: str) -> str:
    """Search-R1's answer normalisation (see the module docstring)."""
    text = text.lower().translate(_PUNCTUATION)
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


def _golds(golden_answers: str | Iterable[str]) -> list[str]:
    return [golden_answers] if isinstance(golden_answers, str) else [str(g) for g in golden_answers]


def exact_match(prediction: str, golden_answers: str | Iterable[str]) -> float:
    """1.0 if ``prediction`` equals any gold answer after normalisation, else 0.0."""
    pred = normalize_answer(prediction)
    return 1.0 if any(normalize_answer(g) == pred for g in _golds(golden_answers)) else 0.0


def _f1(pred_tokens: list[str], gold_tokens: list[str]) -> float:
    if not pred_tokens or not gold_tokens:
        return float(pred_tokens == gold_tokens)
    same = sum((Counter(pred_tokens) & Counter(gold_tokens)).values())
    if same == 0:
        return 0.0
    precision = same / len(pred_tokens)
    recall = same / len(gold_tokens)
    return 2 * precision * recall / (precision + recall)


def token_f1(prediction: str, golden_answers: str | Iterable[str]) -> float:
    """SQuAD token F1 of ``prediction`` against the best-matching gold answer, in [0, 1]."""
    pred = normalize_answer(prediction).split()
    golds = _golds(golden_answers)
    if not golds:
        return 0.0
    return max(_f1(pred, normalize_answer(g).split()) for g in golds)


_KEYWORDS = ("option", "answer", "choice")
_AFTER_LETTER = frozenset(".:),;-")  # what may follow an option letter (besides whitespace and the end)


def _is_word(ch: str) -> bool:
    return ch.isalnum() or ch == "_"


def _letter_at(text: str, j: int) -> tuple[str, int] | None:
    """``(letter, end)`` if an ASCII letter at ``j`` stands alone (end, space or ``.:),;-`` after it)."""
    n = len(text)
    if j >= n or not ("A" <= text[j] <= "Z" or "a" <= text[j] <= "z"):
        return None
    k = j + 1
    if k < n and not (text[k].isspace() or text[k] in _AFTER_LETTER):
        return None
    if k < n and text[k] == ")" and (k + 1 == n or text[k + 1].isspace() or text[k + 1] in _AFTER_LETTER):
        k += 1  # "(B)": the closing parenthesis belongs to the letter
    return text[j], k


def _letter_form(text: str) -> tuple[str, int] | None:
    """A leading option letter: ``B``, ``(B)``, ``B.``, ``B) text``, ``Option B``, ``answer: b``.

    Plain scanning, one pass over the leading characters: linear in ``len(text)`` whatever it holds.
    """
    n, i = len(text), 0
    while i < n and not _is_word(text[i]):
        i += 1
    for keyword in _KEYWORDS:
        if text[i : i + len(keyword)].lower() == keyword:
            j = i + len(keyword)
            while j < n and text[j].isspace():
                j += 1
            if j < n and text[j] in ":-":
                j += 1
                while j < n and text[j].isspace():
                    j += 1
            if j < n and text[j] == "(":
                j += 1
            found = _letter_at(text, j)
            if found is not None:
                return found
            break
    return _letter_at(text, i)  # "(B)": the parenthesis went with the leading non-word characters


def choice_index(answer: str, options: Sequence[str]) -> int | None:
    """Which option a multiple-choice answer names, or ``None``.

    Accepted, in this order: a letter alone or leading (``"B"``, ``"b"``, ``"(B)"``, ``"B."``,
    ``"B) text"``, ``"Option B"``), when the letter is one of the options; else an answer that
    equals one option's text after :func:`normalize_answer`. A lone ``"a"`` counts as option A.
    """
    text = answer.strip()
    found = _letter_form(text)
    if found is not None:
        letter, end = found
        k = LETTERS.find(letter.upper())
        rest = text[end:].strip()
        # "a dog" is an article followed by words, not option A: lower-case letters must stand alone
        if 0 <= k < len(options) and (letter.isupper() or not rest or rest[0] in ".:),;-"):
            return k
    norm = normalize_answer(text)
    if norm:
        for k, option in enumerate(options):
            if normalize_answer(option) == norm:
                return k
    return None
