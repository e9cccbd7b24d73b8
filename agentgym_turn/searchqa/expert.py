"""Search QA's expert: an oracle searcher that follows a question's search plan, then answers."""

from __future__ import annotations

from typing import Collection, Sequence

from .generator.questions import Question
from .reward import LETTERS


def oracle_response(
    question: Question,
    *,
    passages: Sequence[str] | None,
    seen: Collection[str],
    queries: Sequence[str],
    can_search: bool,
    multiple_choice: bool,
    max_query_chars: int,
    think: bool = True,
) -> str:
    """The oracle's response: it searches until it has read every supporting passage, then answers.

    For each hop of the question's search plan whose passage (``passages[hop.passage]``) is not
    in ``seen`` (contents shown so far), it issues the hop's queries in turn (the entity's name
    first, then fallbacks) that are not in ``queries`` (asked so far); once every supporting
    passage has appeared it answers with the gold answer (the correct letter for multiple choice).
    If the budget runs out (``can_search`` false) before the evidence is found it answers
    "unknown" (guesses "A" for multiple choice), so its success rate measures retrievability.
    For loaded datasets (no known supporting passages, or no corpus: ``passages=None``) it
    searches the question once and answers. With ``think=False`` the response is the action
    alone, without its ``<think>...</think>`` line.
    """

    def say(thought: str, action: str) -> str:
        return f"<think>{thought}</think>\n{action}" if think else action

    final = question.answer_letter if multiple_choice else question.golden_answers[0]
    if not question.hops or passages is None:
        if can_search and not queries:
            return say("I should look this up.", f"<search> {question.question[:max_query_chars]} </search>")
        return say("I can answer now.", f"<answer> {final} </answer>")
    for hop in question.hops:
        if passages[hop.passage] in seen:
            continue
        if not can_search:
            break
        fresh = [x for x in hop.queries + (question.question[:max_query_chars],) if x not in queries]
        if not fresh:
            break
        return say(f"I need to {hop.purpose}.", f"<search> {fresh[0]} </search>")
    else:
        return say("The passages I found give the answer.", f"<answer> {final} </answer>")
    if multiple_choice:  # without evidence an expert still picks an option: the first
        return say("I could not find the evidence; I will guess.", f"<answer> {LETTERS[0]} </answer>")
    return say("I could not find the evidence.", "<answer> unknown </answer>")
