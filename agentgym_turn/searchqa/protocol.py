"""Search-R1's turn protocol as pure functions: where a response is cut, which action it takes, what is scored.

Search-R1 (``search_r1/llm_agent/generation.py`` and ``verl/utils/reward_score/qa_em.py``)
runs a question as follows; each step has one function here, written as plain string scanning
(``str.find``), so every function is linear in the length of its input:

* :func:`cut_response` (``LLMGenerationManager._postprocess_responses``): a generated response
  is cut just after its first ``</search>``; when it has none, just after its first
  ``</answer>``; else it is kept whole. The cut text is what stays in the context.
* :func:`first_action` (``postprocess_predictions``): the action is the leftmost
  ``<search>...</search>`` or ``<answer>...</answer>`` pair (lower-case tags, exactly as
  written; content up to the first matching closing tag, stripped), wherever it stands: inside
  ``<think>`` too. An empty pair is an action with empty content. No pair: an invalid turn.
* :data:`INVALID_MESSAGE`, :func:`information_block` (``execute_predictions``,
  ``_passages2string``): what comes back after an invalid turn and after a search. After an
  answer nothing comes back (``""``) and the episode ends.
* :func:`extract_answer` and :func:`score_sequence` (``extract_solution``,
  ``compute_score_em``): the reward reads the *whole sequence*, prompt included, and takes the
  last ``<answer>...</answer>`` in it, but only when there are at least two (the prompt's own
  example answer is the first); the score is the exact match of that answer, else 0.
"""

from __future__ import annotations

from typing import Iterable, Sequence

from .reward import exact_match

#: The observation after a response with no ``<search>``/``<answer>`` pair (Search-R1's text, verbatim:
#: the model sees it, so it must be byte-identical).
INVALID_MESSAGE = (
    "\nMy previous action is invalid. "
    "If I want to search, I should put the query between <search> and </search>. "
    "If I want to give the final answer, I should put the answer between <answer> and </answer>. "
    "Let me try again.\n"
)

_ACTION_TAGS = ("search", "answer")


def cut_response(response: str) -> str:
    """The part of ``response`` kept by Search-R1's rollout: up to the first ``</search>``, else the first ``</answer>``."""
    for close in ("</search>", "</answer>"):
        at = response.find(close)
        if at >= 0:
            return response[: at + len(close)]
    return response


def first_action(text: str) -> tuple[str, str] | None:
    """``(tag, content)`` of the leftmost complete ``<search>``/``<answer>`` pair of ``text``, or ``None``.

    Same result as Search-R1's ``re.search(r'<(search|answer)>(.*?)</\\1>', text, re.DOTALL)``:
    for each tag the earliest opening tag that some later closing tag follows (if the first
    opening tag has no closing tag after it, no later one has); the leftmost of the two wins.
    ``content`` is stripped of surrounding whitespace.
    """
    best: tuple[int, str, str] | None = None
    for tag in _ACTION_TAGS:
        opening, closing = f"<{tag}>", f"</{tag}>"
        start = text.find(opening)
        if start < 0 or (best is not None and start > best[0]):
            continue
        end = text.find(closing, start + len(opening))
        if end >= 0:
            best = (start, tag, text[start + len(opening) : end])
    if best is None:
        return None
    return best[1], best[2].strip()


def _answer_spans(sequence: str) -> Iterable[str]:
    # re.finditer(r'<answer>(.*?)</answer>', s, re.DOTALL): leftmost, non-overlapping, lazy
    pos = 0
    while True:
        start = sequence.find("<answer>", pos)
        if start < 0:
            return
        end = sequence.find("</answer>", start + len("<answer>"))
        if end < 0:
            return
        yield sequence[start + len("<answer>") : end]
        pos = end + len("</answer>")


def extract_answer(sequence: str, *, min_pairs: int = 2) -> str | None:
    """Search-R1's ``extract_solution``: the last ``<answer>`` pair's content (stripped) when the sequence holds ``min_pairs`` (2) or more, else ``None``."""
    count = 0
    last = ""
    for content in _answer_spans(sequence):
        count += 1
        last = content
    return last.strip() if count >= min_pairs else None


def score_sequence(sequence: str, golden_answers: Sequence[str]) -> float:
    """Search-R1's ``compute_score_em`` with its defaults: 1.0 if :func:`extract_answer` matches a gold answer, else 0.0."""
    answer = extract_answer(sequence)
    return 0.0 if answer is None else exact_match(answer, golden_answers)


def format_passages(contents: Iterable[str]) -> str:
    """Search-R1's ``_passages2string``: ``Doc i(Title: <first line>) <rest>\\n`` for each passage's ``contents``."""
    out = []
    for i, text in enumerate(contents, 1):
        title, _, rest = text.partition("\n")
        out.append(f"Doc {i}(Title: {title}) {rest}\n")
    return "".join(out)


def information_block(contents: Iterable[str]) -> str:
    """The observation after a search: ``"\\n\\n<information>" + passages.strip() + "</information>\\n\\n"``."""
    return f"\n\n<information>{format_passages(contents).strip()}</information>\n\n"
