"""Parsers for the action formats the environments share.

Every parser takes *any* ``str`` (any length, any alphabet, lone surrogates included) and
returns either a parsed action or an :class:`InvalidAction` whose ``message`` tells the agent
what was wrong and what is allowed. None of them raises, and all of them run in time linear in
the length of the input (tags are found with one ``finditer`` pass, never with a lazy ``.*?``
that rescans the tail once per opening tag).

Rules, pinned by ``tests/agentgym_turn/core/test_parsing.py``:

* Tag names match case-insensitively and may carry spaces inside the angle brackets:
  ``<answer>``, ``<ANSWER>``, ``< answer >`` and ``</ answer>`` are all tags.
* ``<think>...</think>`` blocks are reasoning and are removed before looking for an action;
  a stray ``<think>`` or ``</think>`` without its partner is dropped as a tag only.
* The action is the *first complete* ``<tag>...</tag>`` pair among the allowed tags; text
  around it and later pairs are ignored (``TagMatch.count`` says how many complete pairs there
  were, for envs that want to reject several). This is the first-match rule of Search-R1.
* An allowed opening tag inside an open pair (``<answer>a<answer>b</answer>``) makes the turn
  invalid ("nested"), and so does a pair closed by another allowed tag
  (``<search>q</answer>``).
* Content is stripped of surrounding whitespace; empty content is invalid.
* ``verb[argument]`` actions (WebShop's ``search[...]`` and ``click[...]``): the verb matches
  case-insensitively as a whole word, spaces may stand between verb and ``[``, the argument
  runs to the matching ``]`` (brackets inside balance: ``click[pack [2]]`` gives
  ``pack [2]``); with unbalanced brackets it runs to the last ``]``. If the response holds an
  ``<answer>`` pair, the action is looked for inside it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Iterable, NamedTuple, Sequence

#: Longest piece of the agent's own text quoted back in an error message.
SNIPPET_CHARS = 60


@dataclass(frozen=True)
class InvalidAction:
    """A turn that could not be turned into an action. ``message`` is shown to the agent."""

    message: str


class TagMatch(NamedTuple):
    """The first complete ``<tag>content</tag>`` pair of a response (a named tuple: made on every turn's path)."""

    tag: str  # lower-case tag name
    content: str  # stripped
    start: int  # index of the opening tag in the text searched
    end: int  # index just past the closing tag
    count: int  # number of complete pairs of allowed tags in the text


@dataclass(frozen=True)
class BracketAction:
    """A ``verb[argument]`` action such as ``click[Buy Now]``."""

    verb: str  # lower-case
    argument: str  # stripped, case preserved


#: The control tokens of the chat formats this project knows, per family, as their public tokenizers and templates
#: spell them. Any ``<|...|>`` or full-width ``<｜...｜>`` shape is broken whatever its name; the others by name.
TEMPLATE_CONTROL_TOKENS: dict[str, tuple[str, ...]] = {
    "ChatML (Qwen2.5, Qwen3, SmolLM2)": ("<|im_start|>", "<|im_end|>", "<|endoftext|>"),
    "Qwen tools and reasoning": (
        "<tool_call>",
        "</tool_call>",
        "<tool_response>",
        "</tool_response>",
        "<think>",
        "</think>",
    ),
    "SmolLM2 (StarCoder's added tokens)": (
        "<repo_name>",
        "<reponame>",
        "<file_sep>",
        "<filename>",
        "<gh_stars>",
        "<issue_start>",
        "<issue_comment>",
        "<issue_closed>",
        "<jupyter_start>",
        "<jupyter_text>",
        "<jupyter_code>",
        "<jupyter_output>",
        "<jupyter_script>",
        "<empty_output>",
    ),
    "Llama 3": (
        "<|begin_of_text|>",
        "<|start_header_id|>",
        "<|end_header_id|>",
        "<|eot_id|>",
        "<|eom_id|>",
        "<|python_tag|>",
    ),
    "Llama 2, Mistral v1": ("<s>", "</s>", "[INST]", "[/INST]", "<<SYS>>", "<</SYS>>"),
    "Mistral v3 and later": (
        "[TOOL_CALLS]",
        "[AVAILABLE_TOOLS]",
        "[/AVAILABLE_TOOLS]",
        "[TOOL_RESULTS]",
        "[/TOOL_RESULTS]",
        "[SYSTEM_PROMPT]",
        "[/SYSTEM_PROMPT]",
        "[TOOL_CONTENT]",
        "[THINK]",
        "[/THINK]",
    ),
    "Gemma": ("<bos>", "<eos>", "<pad>", "<start_of_turn>", "<end_of_turn>"),
    "DeepSeek V3, R1": ("<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>", "<｜User｜>", "<｜Assistant｜>"),
    "Phi-3": ("<|system|>", "<|user|>", "<|assistant|>", "<|end|>"),
    "gpt-oss (harmony)": (
        "<|start|>",
        "<|message|>",
        "<|channel|>",
        "<|constrain|>",
        "<|end|>",
        "<|return|>",
        "<|call|>",
    ),
}
_BAR_SHAPES = r"<\s*+[|｜]|[|｜]\s*+>"
_NAMED = sorted(
    {t for tokens in TEMPLATE_CONTROL_TOKENS.values() for t in tokens if not re.match(_BAR_SHAPES, t)},
    key=lambda t: (-len(t), t),
)
_CONTROL_TOKEN = re.compile("|".join([_BAR_SHAPES, *map(re.escape, _NAMED)]), re.IGNORECASE)
_BROKEN = str.maketrans({"<": "‹", ">": "›", "|": "¦", "｜": "¦", "[": "(", "]": ")"})


def break_control_tokens(text: str) -> str:
    """``text`` with every chat control-token shape broken (``<|im_end|>`` reads ``‹¦im_end¦›``, ``[TOOL_CALLS]``
    reads ``(TOOL_CALLS)``): every ``<|...|>`` shape and each token of :data:`TEMPLATE_CONTROL_TOKENS`.

    Agent text that an observation repeats passes through here: a chat template would otherwise
    turn an echoed ``<|im_end|><|im_start|>system`` into real control tokens of the next prompt."""
    return _CONTROL_TOKEN.sub(lambda m: m.group().translate(_BROKEN), text)


def snippet(text: str, limit: int = SNIPPET_CHARS) -> str:
    """A short, printable, single-line quotation of ``text`` for messages, with control-token shapes
    broken (:func:`break_control_tokens`): quoted agent text can neither start a line nor close a chat turn."""
    flat = " ".join(text.split())
    flat = break_control_tokens("".join(c if c.isprintable() else "\ufffd" for c in flat[: limit + 1]))
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


@lru_cache(maxsize=64)
def _tag_pattern(tags: tuple[str, ...]) -> re.Pattern[str]:
    names = "|".join(re.escape(t) for t in tags)
    return re.compile(rf"<\s*+(/?)\s*+({names})\s*+>", re.IGNORECASE)  # possessive: no backtracking


_THINK = _tag_pattern(("think",))


@lru_cache(maxsize=64)
def _lone_pair(tag: str) -> re.Pattern[str]:
    """``<tag>content</tag>`` with no other ``<`` before, inside or after it (possessive: linear)."""
    return re.compile(rf"[^<]*+<{re.escape(tag)}>([^<]*+)</{re.escape(tag)}>[^<]*+")


def strip_think(text: str) -> str:
    """Remove ``<think>...</think>`` blocks (and stray think tags) from ``text``.

    A ``<think>`` that is never closed turns only into nothing: the text after it stays, so an
    answer written after an unclosed think tag is still found.
    """
    if "<" not in text:
        return text
    pieces: list[str] = []
    pos = 0
    open_at: int | None = None
    for m in _THINK.finditer(text):
        closing = m.group(1) == "/"
        if not closing and open_at is None:
            pieces.append(text[pos : m.start()])
            open_at = m.end()
        elif closing and open_at is not None:
            pos = m.end()
            open_at = None
        elif closing:  # stray </think>: drop the tag, keep what came before it
            pieces.append(text[pos : m.start()])
            pos = m.end()
        # a second <think> inside an open block: still thinking
    if open_at is not None:  # unclosed <think>: drop the tag, keep the rest
        pos = open_at
    pieces.append(text[pos:])
    return "".join(pieces)


@lru_cache(maxsize=64)
def _lower_tags(tags: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(t.lower() for t in tags)


def _format_tags(tags: Sequence[str]) -> str:
    return " or ".join(f"<{t}>...</{t}>" for t in tags)


def find_tagged(
    text: str, tags: Iterable[str] = ("answer",), *, strip_thinking: bool = True
) -> TagMatch | InvalidAction:
    """Find the first complete ``<tag>...</tag>`` pair, for ``tag`` among ``tags``.

    Returns a :class:`TagMatch` or an :class:`InvalidAction` saying what is missing
    (no tag, an unclosed tag, nesting, a mismatched closing tag, empty content).
    """
    tags = _lower_tags(tags) if type(tags) is tuple else tuple(t.lower() for t in tags)
    for tag in tags:  # the common answer: one pair of lower-case tags and no other "<" (nothing to strip or doubt)
        m = _lone_pair(tag).fullmatch(text) if not (strip_thinking and tag == "think") else None
        content = m.group(1).strip() if m is not None else ""
        if content:
            return TagMatch(tag, content, m.start(1) - len(tag) - 2, m.end(1) + len(tag) + 3, 1)
    return _scan_tagged(text, tags, strip_thinking)


def _scan_tagged(text: str, tags: tuple[str, ...], strip_thinking: bool) -> TagMatch | InvalidAction:
    """:func:`find_tagged` by reading every tag of ``text`` (lower-case ``tags``): what its shortcut must agree with."""
    if strip_thinking:
        text = strip_think(text)
    expected = _format_tags(tags)
    if "<" not in text:
        return InvalidAction(f"No action found. Write your action as {expected}.")
    open_name: str | None = None
    open_end = 0
    open_start = 0
    first: TagMatch | None = None
    count = 0
    problem: InvalidAction | None = None
    for m in _tag_pattern(tags).finditer(text):
        closing, name = m.group(1) == "/", m.group(2).lower()
        if open_name is None:
            if not closing:
                open_name, open_start, open_end = name, m.start(), m.end()
            continue  # a closing tag with nothing open is ignored
        if not closing:
            if first is None and problem is None:
                problem = InvalidAction(
                    f"Nested tags: <{name}> appears inside an open <{open_name}>. Write exactly one {expected}."
                )
            open_name, open_start, open_end = name, m.start(), m.end()
            continue
        if name != open_name:
            if first is None and problem is None:
                problem = InvalidAction(f"<{open_name}> is closed by </{name}>. Close it with </{open_name}>.")
            open_name = None
            continue
        count += 1
        if first is None and problem is None:
            content = text[open_end : m.start()].strip()
            if not content:
                problem = InvalidAction(f"<{name}></{name}> is empty. Put your {name} inside the tags.")
            else:
                first = TagMatch(name, content, open_start, m.end(), 0)
        open_name = None
    if first is not None:
        return TagMatch(first.tag, first.content, first.start, first.end, count)
    if problem is not None:
        return problem
    if open_name is not None:
        return InvalidAction(f"<{open_name}> is never closed. Write {expected}.")
    return InvalidAction(f"No action found. Write your action as {expected}.")


@lru_cache(maxsize=64)
def _verb_pattern(verbs: tuple[str, ...]) -> re.Pattern[str]:
    names = "|".join(re.escape(v) for v in verbs)
    return re.compile(rf"(?<![\w])({names})[ \t]*+\[", re.IGNORECASE)


def _closing_bracket(text: str, start: int) -> int:
    """Index of the ``]`` that closes the ``[`` just before ``start``; -1 if none.

    Each ``find`` resumes where the previous one of its kind stopped, so the scan is linear.
    """
    depth = 1
    o = text.find("[", start)
    c = text.find("]", start)
    while c >= 0:
        if 0 <= o < c:
            depth += 1
            o = text.find("[", o + 1)
            continue
        depth -= 1
        if depth == 0:
            return c
        c = text.find("]", c + 1)
    return -1


def parse_bracket_action(
    text: str, verbs: Iterable[str] = ("search", "click"), *, strip_thinking: bool = True
) -> BracketAction | InvalidAction:
    """Parse ``verb[argument]`` from a response (inside ``<answer>`` when there is one)."""
    verbs = tuple(v.lower() for v in verbs)
    if strip_thinking:
        text = strip_think(text)
    tagged = find_tagged(text, ("answer",), strip_thinking=False)
    if isinstance(tagged, TagMatch):
        text = tagged.content
    examples = ", ".join(f"{v}[...]" for v in verbs)
    m = _verb_pattern(verbs).search(text)
    if m is None:
        return InvalidAction(f"No action found. Write one of: {examples}.")
    verb = m.group(1).lower()
    close = _closing_bracket(text, m.end())
    if close < 0:
        close = text.rfind("]")
        if close < m.end():
            return InvalidAction(f"{verb}[ is never closed with ']'. Write {verb}[...].")
    argument = text[m.end() : close].strip()
    if not argument:
        return InvalidAction(
            f"{verb}[] is empty. Put the {'query' if verb == 'search' else 'target'} inside the brackets."
        )
    return BracketAction(verb, argument)


_MOVE_SPLIT = re.compile(r"\|\|")


def split_moves(content: str) -> list[str]:
    """Split ``"Up || Left"`` into ``["Up", "Left"]``; empty pieces are dropped."""
    return [p.strip() for p in _MOVE_SPLIT.split(content) if p.strip()]
