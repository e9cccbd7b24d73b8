"""Token-in/token-out conversation assembly: ids, per-token roles and turn ids, by construction.

A conversation is ``[system] user_1 assistant_1 user_2 assistant_2 ...``: the env's first
observation is the first user message, every response an assistant message, every later
observation a user message. :class:`ChatFormat` reads, once, from the tokenizer's own chat
template, which template tokens go before and after each message's content; the
:class:`Conversation` then grows by appending

* the ids of each observation, tokenised **once**, wrapped in those template tokens
  (role ``ROLE_TEMPLATE``/``ROLE_OBSERVATION``, loss mask 0);
* the ids the policy **sampled**, exactly as sampled (role ``ROLE_ACTION``, loss mask 1),
  ending with the end-of-turn token when the policy emitted it;
* the rest of the assistant message's template (e.g. the ``\\n`` after ``<|im_end|>``, or the
  whole end-of-turn sequence when the response hit ``max_new_tokens``), loss mask 0.

Decoded text is never re-encoded. For a tokenizer whose template pieces are separated from the
content by special tokens or pre-tokenizer boundaries (the tiny tokenizer, ChatML/Qwen2.5
templates when the content does not start or end with whitespace), the ids equal
``tokenizer.apply_chat_template(whole_conversation)`` whenever the sampled ids are the
canonical encoding of the decoded text; ``tests/reference_trainer/test_rollout.py`` asserts it for
the tiny tokenizer. Where they differ (a sampled non-canonical split such as ``"Le" + "ft"``;
templates that rewrite history, e.g. Qwen3 dropping earlier ``<think>`` blocks; whitespace
merged across a template boundary), the assembled ids are the ones the policy actually saw.

Observation text is encoded with ``split_special_tokens=True``: an env message (or an echo of
the agent's own text) that contains ``<|im_end|>`` can never inject a control token.

:class:`TokenEpisode` keeps those pieces by turn, so that a history policy (keep the last ``k`` turns,
or the current state alone) builds each turn's input from the same exact ids, and reports the tokens each
turn costs. The reference trainer's rollouts and ``agentgym_turn.chat.ChatView(env, tokenizer=...)`` both
assemble tokens here: one implementation. :func:`agentgym_turn.tokens.audit_template` checks a chat template against it.
No torch: a tokenizer is any object with Hugging Face's ``encode``/``decode``/``apply_chat_template``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

ROLE_TEMPLATE = 0  # chat-template tokens (role headers, end-of-message markers) and the system prompt
ROLE_OBSERVATION = 1  # the env's text
ROLE_ACTION = 2  # tokens the policy sampled (the only ones with loss mask 1)

_PLACEHOLDER = "\u2063PLACEHOLDER{}\u2063"  # invisible separator: never produced by a template


class ChatTemplateError(ValueError):
    """The tokenizer's chat template cannot be split into per-message pieces."""


def _clean(text: str) -> str:
    """``text`` with lone surrogates replaced (tokenizers reject them)."""
    return text.encode("utf-8", "replace").decode("utf-8") if not text.isascii() else text


def _render(tokenizer: Any, messages: list[dict[str, str]], generation_prompt: bool) -> str:
    return tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=generation_prompt)


def _user(content: str) -> dict[str, str]:
    return {"role": "user", "content": content}


def _dialog(contents: Sequence[str]) -> list[dict[str, str]]:
    """User and assistant messages in turn, the first a user's."""
    return [{"role": "user" if i % 2 == 0 else "assistant", "content": c} for i, c in enumerate(contents)]


def _split(text: str, markers: Sequence[str], strict: bool = True) -> list[str] | None:
    """``text`` cut at each of ``markers``, which must each appear once, in order (else ``None``, or, ``strict``,
    a :class:`ChatTemplateError`)."""
    parts, rest = [], text
    for marker in markers:
        if text.count(marker) != 1 or marker not in rest:
            if not strict:
                return None
            raise ChatTemplateError(
                "The chat template does not render each message's content once, in order, so it cannot be split "
                "into per-message pieces. Pass a template that writes every user and assistant message's content "
                "as given as tokenizer.chat_template."
            )
        head, rest = rest.split(marker, 1)
        parts.append(head)
    return parts + [rest]


#: History policies for reasoning (:class:`TokenEpisode`'s ``reasoning``): the ids as sampled, or earlier turns'
#: reasoning stripped as the chat template strips it (a new sequence at each rewrite).
KEEP, STRIP = "keep", "strip"
REASONING_POLICIES = (KEEP, STRIP)


@dataclass(frozen=True)
class ReasoningRule:
    """How a chat template writes an earlier response that holds reasoning, as :class:`ChatFormat` found it by probes.

    The template keeps what follows the last ``marker`` of the response's text (Qwen3's and R1's ``</think>``,
    harmony's ``<|channel|>final<|message|>``), less the leading characters in ``lstrip`` (Qwen3: ``"\\n"``; R1 and
    harmony: none). ``open``, ``close`` and ``gap`` are how a thinking model of the family writes a response:
    ``open`` reasoning ``close`` ``gap`` answer (``open`` is ``""`` where the generation prompt opens the reasoning,
    as R1's does).
    """

    marker: str
    marker_ids: tuple[int, ...]
    lstrip: str
    open: str
    close: str
    gap: str


@dataclass(frozen=True)
class _Markup:
    """A family's reasoning markup, for the probes: ``open`` reasoning ``close`` ``gap`` answer; ``marker`` ends
    ``close``."""

    open: str
    close: str
    gap: str
    marker: str


_MARKUPS = (
    _Markup("<think>\n", "\n</think>", "\n\n", "</think>"),
    _Markup(
        "<|channel|>analysis<|message|>",
        "<|end|><|start|>assistant<|channel|>final<|message|>",
        "",
        "<|channel|>final<|message|>",
    ),
)
_GAPS = ("", "\n\n", "  ", "\t\t", "\r\r")  # whitespace written after the reasoning, to see what a template strips


@dataclass(frozen=True)
class _Wrapped:
    """Template ids before and after a message's content."""

    before: tuple[int, ...]
    after: tuple[int, ...]


class ChatFormat:
    """The per-message template pieces of a tokenizer's chat template, as token ids.

    Args:
        tokenizer: A Hugging Face tokenizer with a chat template.
        system_prompt: Optional system message put before the first observation.

    Attributes:
        stop_ids: Token ids that end a response (the template's end-of-turn token and the
            tokenizer's ``eos_token_id``).
    """

    def __init__(self, tokenizer: Any, system_prompt: str | None = None):
        if not getattr(tokenizer, "chat_template", None):
            raise ChatTemplateError(
                "The tokenizer has no chat template. Use a chat/instruct checkpoint, or set "
                "tokenizer.chat_template (the tiny model's ChatML template is "
                "reference_trainer.tiny.CHAT_TEMPLATE)."
            )
        self.tokenizer = tokenizer
        self.system_prompt = system_prompt
        self._system_split: tuple[list[int], list[int], list[int]] | None = None
        self._system_cache: tuple[str, list[int]] | None = None
        p = [_PLACEHOLDER.format(i) for i in range(5)]
        head = [{"role": "system", "content": system_prompt}] if system_prompt else []
        self._head = head
        # The first prompt, a history (user, assistant, user) and a final assistant message, each split at the contents.
        before0, after0 = _split(_render(tokenizer, head + [_user(p[0])], True), p[:1])
        before_h, opened, closed, after2 = _split(_render(tokenizer, head + _dialog(p[:3]), True), p[:3])
        before_f, opened_final, suffix = _split(_render(tokenizer, head + _dialog(p[:2]), False), p[:2])
        if not before_h == before_f == before0:
            raise ChatTemplateError(
                "The chat template renders the text before the first user message differently as the conversation "
                "grows, so a conversation cannot be grown token by token. Pass a template whose start is fixed as "
                "tokenizer.chat_template."
            )
        self.content_strip = self._content_strip(head, before0, after0)
        self._prompt_before = self._encode_template(before0)
        self._prompt_after = self._encode_template(after0)
        self._generation_prompt = after0
        # The response follows the generation prompt as sampled; the final assistant message's suffix ends it.
        self.assistant_suffix = tuple(self._encode_template(suffix))
        # Final-turn rule (Qwen3's empty think block, harmony's final channel): text the template puts between the
        # generation prompt and a final assistant message's content; a response known as text gets it too.
        extra = opened_final[len(after0) :] if opened_final.startswith(after0) else ""
        self.final_prefix = tuple(self._encode_template(extra))
        # In the history: the text after each user message (the generation prompt, or not: R1 drops its <think>),
        # and after each assistant message, up to the next user message's content.
        self._history_after = tuple(self._encode_template(opened))
        history_suffix, before2 = self._split_assistant_end(closed, suffix)
        self.history_suffix = tuple(history_suffix)
        self._user = _Wrapped(tuple(before2), tuple(self._encode_template(after2)))
        stops = set()
        if self.assistant_suffix and self.assistant_suffix[0] in set(getattr(tokenizer, "all_special_ids", [])):
            stops.add(self.assistant_suffix[0])
        if tokenizer.eos_token_id is not None:
            stops.add(int(tokenizer.eos_token_id))
        if not stops:
            raise ChatTemplateError("Found no end-of-turn token: set tokenizer.eos_token.")
        self.stop_ids = frozenset(stops)
        self.reasoning_rule, self.strip_problem = self._history_rule(p, opened, closed)

    def _split_assistant_end(self, closed: str, suffix: str) -> tuple[list[int], list[int]]:
        """The history's text between an assistant message's content and the next user message's, as the ids that end
        the assistant message and those that open the user message. Where the history ends an assistant message as a
        final one does, the split is there; otherwise (harmony: ``<|return|>`` there, ``<|end|>`` here) after the first
        special token and the whitespace after it."""
        if closed.startswith(suffix):
            return self._encode_template(suffix), self._encode_template(closed[len(suffix) :])
        ids = self._encode_template(closed)
        special = set(getattr(self.tokenizer, "all_special_ids", []))
        end = next((i + 1 for i, t in enumerate(ids) if t in special), None)
        if end is None:
            raise ChatTemplateError(
                f"The chat template ends an earlier assistant message with {closed!r}, with no special token to tell "
                "it from the next user message. Pass a template that ends each message with its end-of-turn token."
            )
        while end < len(ids) and not self._decode([ids[end]]).strip():
            end += 1
        return ids[:end], ids[end:]

    def _history_rule(self, p: list[str], opened: str, closed: str) -> tuple[ReasoningRule | None, str | None]:
        """Probe how the template writes an earlier response that holds reasoning: the rule it follows, and why
        ``reasoning="strip"`` cannot follow the template (``None`` when it can)."""
        try:
            return self._probe_history(p, opened, closed)
        except Exception as err:  # noqa: BLE001 - a template that fails on a probe only rules out "strip"
            return None, (
                f"The chat template fails to render the longer probes reasoning='strip' needs ({type(err).__name__}: "
                f"{err}); use reasoning='keep' (the ids as sampled)."
            )

    def _probe_history(self, p: list[str], opened: str, closed: str) -> tuple[ReasoningRule | None, str | None]:
        parts = _split(_render(self.tokenizer, self._head + _dialog(p[:5]), True), p[:5], strict=False)
        if parts is None or parts[3] != opened or parts[4] != closed:
            return None, (
                "The chat template writes the history's template text differently from turn to turn (e.g. it "
                "numbers the turns), so reasoning='strip' cannot rebuild an earlier message from fixed pieces; use "
                "reasoning='keep' (the ids as sampled)."
            )
        for markup in _MARKUPS:
            kept: dict[str, str | None] = {}
            for gap in _GAPS:
                content = markup.open + p[1] + markup.close + gap + p[3]
                rendered = _render(self.tokenizer, self._head + _dialog([p[0], content, p[2]]), True)
                found = _split(rendered, [p[0], p[2]], strict=False)
                block = found[1] if found else ""
                if block == opened + content + closed:
                    kept[gap] = None  # the template keeps this reasoning as written
                elif block.startswith(opened) and block.endswith(p[3] + closed) and p[1] not in block:
                    kept[gap] = block[len(opened) : len(block) - len(p[3] + closed)]
                else:
                    kept[gap] = "?"
            if all(v is None for v in kept.values()):
                continue
            if any(v is None or v not in (gap, "") for gap, v in kept.items()) or kept[""] != "":
                return None, (
                    f"The chat template rewrites an earlier response's reasoning ({markup.marker!r}) in a way "
                    f"ChatFormat cannot follow (what it keeps after the reasoning, by the whitespace written after "
                    f"it: {kept!r}). Use reasoning='keep' (the ids as sampled), or a template that keeps what "
                    f"follows the last {markup.marker!r} of an earlier response, less leading whitespace."
                )
            lstrip = "".join(gap[0] for gap, v in kept.items() if gap and v == "")
            rule = ReasoningRule(
                marker=markup.marker,
                marker_ids=tuple(self._encode_template(markup.marker)),
                lstrip=lstrip,
                open="" if self._generation_prompt.endswith(markup.open) else markup.open,
                close=markup.close,
                gap=markup.gap,
            )
            return rule, None
        return None, None

    def _content_strip(self, head: list[dict[str, str]], before: str, after: str) -> str | None:
        """How the template changes a message's surrounding whitespace (Llama 3's ``| trim``): ``"both"``, ``"left"``,
        ``"right"`` or ``None`` (kept). Message content is encoded as the template renders it."""
        marker = _PLACEHOLDER.format("W")
        padded = _render(self.tokenizer, head + [{"role": "user", "content": f" \n{marker}\n "}], True)
        if not (padded.startswith(before) and padded.endswith(after)):
            return None
        inner = padded[len(before) : len(padded) - len(after)]
        return {marker: "both", f"{marker}\n ": "left", f" \n{marker}": "right"}.get(inner)

    def _content_text(self, text: str) -> str:
        """``text`` as the template renders a message's content (trimmed where it trims)."""
        strip = self.content_strip
        if strip is None:
            return text
        return text.strip() if strip == "both" else text.lstrip() if strip == "left" else text.rstrip()

    # ------------------------------------------------------------------ encoding
    def _encode_template(self, text: str) -> list[int]:
        return (
            list(self.tokenizer.encode(_clean(text), add_special_tokens=False)) if text else []
        )  # a system prompt may hold lone surrogates

    def encode_content(self, text: str) -> list[int]:
        """Ids of message content: special-token strings in it stay plain text; whitespace the template trims
        from every message (Llama 3's) is trimmed here too."""
        text = self._content_text(text)
        if not text:
            return []
        return list(self.tokenizer.encode(_clean(text), add_special_tokens=False, split_special_tokens=True))

    def encode_contents(self, texts: Sequence[str]) -> list[list[int]]:
        """:meth:`encode_content` of every text, in one tokenizer call (a fast tokenizer encodes the batch in
        parallel native threads, outside the GIL: a rollout tokenises all of a turn's observations at once)."""
        if not texts:
            return []
        texts = [self._content_text(t) for t in texts]
        cleaned = [_clean(t) for t in texts]
        ids = self.tokenizer(cleaned, add_special_tokens=False, split_special_tokens=True)["input_ids"]
        return [list(row) if text else [] for row, text in zip(ids, texts)]

    def prompt_pieces(
        self,
        observation: str,
        system_prompt: str | None = None,
        content_ids: list[int] | None = None,
        *,
        answered: bool = False,
    ) -> list[tuple[list[int], int]]:
        """The first state: ``[(ids, role), ...]`` for system prompt, first observation, generation prompt.

        ``system_prompt`` is a per-episode system message (the env's instructions, see
        ``agentgym_turn.chat.split_first_message``), put after the format's own system prompt;
        its text is content (special-token strings stay plain text), with the observation role.
        ``content_ids``: the observation's :meth:`encode_content` when the caller has it already.
        ``answered``: the message is followed by an earlier response as the history writes it: the template text
        after it is the history's (R1's without the generation prompt's ``<think>``), not the generation prompt.
        """
        observation_ids = self.encode_content(observation) if content_ids is None else content_ids
        if not system_prompt:
            return [
                (self._prompt_before, ROLE_TEMPLATE),
                (observation_ids, ROLE_OBSERVATION),
                (list(self._history_after) if answered else self._prompt_after, ROLE_TEMPLATE),
            ]
        before, between, after = self._episode_system_template()
        return [
            (list(before), ROLE_TEMPLATE),
            (self._system_ids(system_prompt), ROLE_OBSERVATION),
            (list(between), ROLE_TEMPLATE),
            (observation_ids, ROLE_OBSERVATION),
            (list(self._history_after) if answered else list(after), ROLE_TEMPLATE),
        ]

    def _system_ids(self, system_prompt: str) -> list[int]:
        """Content ids of the system message with ``system_prompt`` (the last one's kept: an episode's inputs all
        open with it)."""
        if self._system_cache is None or self._system_cache[0] != system_prompt:
            system = f"{self.system_prompt}\n\n{system_prompt}" if self.system_prompt else system_prompt
            self._system_cache = (system_prompt, self.encode_content(system))
        return list(self._system_cache[1])

    def _episode_system_template(self) -> tuple[list[int], list[int], list[int]]:
        """Template ids before a system message's content, between it and the first user content, and after."""
        if self._system_split is None:
            ps, p0 = _PLACEHOLDER.format("S"), _PLACEHOLDER.format("U")
            text = _render(self.tokenizer, [{"role": "system", "content": ps}, {"role": "user", "content": p0}], True)
            if text.count(ps) != 1 or text.count(p0) != 1 or text.index(ps) > text.index(p0):
                raise ChatTemplateError(
                    "The chat template does not render a system message before the first user message."
                )
            before, rest = text.split(ps)
            between, after = rest.split(p0)
            self._system_split = (
                self._encode_template(before),
                self._encode_template(between),
                self._encode_template(after),
            )
        return self._system_split

    def observation_pieces(
        self, observation: str, content_ids: list[int] | None = None, *, answered: bool = False
    ) -> list[tuple[list[int], int]]:
        """A later observation as a user message, followed by the generation prompt; ``content_ids``: the
        observation's :meth:`encode_content` when the caller has it already (see :meth:`encode_contents`);
        ``answered``: as for :meth:`prompt_pieces`."""
        return [
            (list(self._user.before), ROLE_TEMPLATE),
            (self.encode_content(observation) if content_ids is None else content_ids, ROLE_OBSERVATION),
            (list(self._history_after if answered else self._user.after), ROLE_TEMPLATE),
        ]

    def encode_response(self, text: str) -> list[int]:
        """A response known only as text (an expert's, a scripted one) as the ids a policy would have sampled:
        the canonical encoding of ``text`` followed by the template's end-of-turn token (so SFT teaches stopping).
        Where the template writes a final assistant message with text before its content (Qwen3's empty
        ``<think>\\n\\n</think>\\n\\n``, harmony's ``<|channel|>final<|message|>``), that text's ids come first,
        unless ``text`` holds reasoning already."""
        stop = self.assistant_suffix[0] if self.assistant_suffix else min(self.stop_ids)
        rule = self.reasoning_rule
        head = list(self.final_prefix) if not (rule is not None and rule.marker in text) else []
        return head + self.encode_content(text) + [stop]

    def reasoning_response(self, reasoning: str, answer: str) -> list[int]:
        """The ids a thinking model of the template's family samples for ``reasoning`` then ``answer``: the family's
        markup (:class:`ReasoningRule`) as the template's tokens, the texts as content, then the end-of-turn token.
        A template with no reasoning rule gets Qwen3's markup as text."""
        rule = self.reasoning_rule
        markup = rule if rule is not None else _MARKUPS[0]
        stop = self.assistant_suffix[0] if self.assistant_suffix else min(self.stop_ids)
        return (
            self._encode_template(markup.open)
            + self.encode_content(reasoning)
            + self._encode_template(markup.close)
            + self.encode_content(markup.gap + answer)
            + [stop]
        )

    def history_response(self, response_ids: Sequence[int]) -> tuple[list[int], list[int]]:
        """An earlier response as the template writes it in the history: ``(ids, tail)``, the response's ids (its
        reasoning dropped by :attr:`reasoning_rule`) and the template ids that close the message.

        The ids are the sampled ones from the first token after the last reasoning marker, less the whole tokens the
        template's whitespace rule strips. Only where the template's cut falls inside a token (a marker written as
        plain text, whitespace merged with a word) is the part of that token the template keeps encoded from its
        text, with :meth:`encode_content`'s rule; every other id is a sampled one.
        """
        ids = [int(i) for i in response_ids]
        stop = ids[-1] if ids and ids[-1] in self.stop_ids else None
        body = ids[:-1] if stop is not None else ids
        if self.reasoning_rule is not None:
            body = self._after_reasoning(body, self.reasoning_rule)
        suffix = list(self.history_suffix)
        if stop is not None and suffix and stop == suffix[0]:
            return body + [stop], suffix[1:]
        return body, suffix

    def _after_reasoning(self, body: list[int], rule: ReasoningRule) -> list[int]:
        """The ids of ``body``'s text after its last ``rule.marker``, less the leading ``rule.lstrip`` characters."""
        text = self._decode(body)
        if rule.marker not in text:
            return body
        target = text.split(rule.marker)[-1].lstrip(rule.lstrip)
        n = len(rule.marker_ids)
        at = next((j + n for j in range(len(body) - n, -1, -1) if tuple(body[j : j + n]) == rule.marker_ids), None)
        if at is not None:  # the marker as sampled tokens: cut after it, then drop whole whitespace tokens
            while at < len(body) and rule.lstrip and not self._decode(body[at : at + 1]).lstrip(rule.lstrip):
                at += 1
            if self._decode(body[at:]) == target:
                return body[at:]
        for j in range(len(body) + 1):  # the longest run of sampled ids that ends the kept text
            tail = self._decode(body[j:])
            if target.endswith(tail) and self._decode(body[:j]) + tail == text:
                head = target[: len(target) - len(tail)]
                return self._encode_text(head) + body[j:]
        return self._encode_text(target)  # unreachable: the empty tail always matches

    def _encode_text(self, text: str) -> list[int]:
        """Content ids of ``text`` as it is (no template trimming)."""
        if not text:
            return []
        return list(self.tokenizer.encode(_clean(text), add_special_tokens=False, split_special_tokens=True))

    def rewrites(self, response_ids: Sequence[int], first: bool = False, system_prompt: str | None = None) -> bool:
        """Whether the history writes a response other than as it was sampled: its reasoning dropped, its end
        changed, or the generation prompt before it (``first``: the first response's, after ``system_prompt``)."""
        if first:
            prompt = self.prompt_pieces("", system_prompt, content_ids=[])[-1][0]
        else:
            prompt = list(self._user.after)
        ids = [int(i) for i in response_ids]
        return list(self._history_after) != list(prompt) or self.history_response(ids) != (
            ids,
            self.response_tail(ids),
        )

    def observation_length(self, content_ids: Sequence[int]) -> int:
        """Tokens a later observation whose content is ``content_ids`` appends (:meth:`observation_pieces`)."""
        return len(self._user.before) + len(content_ids) + len(self._user.after)

    def response_tail(self, response_ids: Sequence[int]) -> list[int]:
        """Template ids that close an assistant message whose sampled ids are ``response_ids``.

        If the response ended with the template's end-of-turn token, only the rest of the
        suffix (e.g. ``\\n``); otherwise (cut at ``max_new_tokens``, or ended by another stop
        id such as ``<|endoftext|>``) the whole suffix.
        """
        suffix = self.assistant_suffix
        if response_ids and suffix and response_ids[-1] == suffix[0]:
            return list(suffix[1:])
        return list(suffix)

    def decode_response(self, response_ids: Sequence[int]) -> str:
        """The text the env receives: the sampled ids without a final stop id, decoded as is."""
        ids = list(response_ids)
        if ids and ids[-1] in self.stop_ids:
            ids = ids[:-1]
        return self._decode(ids)

    def _decode(self, ids: Sequence[int]) -> str:
        return self.tokenizer.decode(list(ids), skip_special_tokens=False, clean_up_tokenization_spaces=False)

    def messages(
        self, observations: Sequence[str], responses: Sequence[str], system_prompt: str = ""
    ) -> list[dict[str, str]]:
        """The conversation as chat messages (for ``apply_chat_template`` and for reading);
        ``system_prompt`` is the conversation's per-episode system message, if any."""
        system = "\n\n".join(s for s in (self.system_prompt, system_prompt) if s)
        msgs = [{"role": "system", "content": system}] if system else []
        for i, obs in enumerate(observations):
            msgs.append({"role": "user", "content": obs})
            if i < len(responses):
                msgs.append({"role": "assistant", "content": responses[i]})
        return msgs


@dataclass
class Conversation:
    """One episode's tokens, grown turn by turn, with a role and a turn id per token.

    ``turn_ids[t] = k`` for the tokens of state ``s_k``'s new message and of response ``a_k``
    (0-based: the system prompt and first observation belong to turn 0). ``action_spans[k]``
    is ``(start, end)``: the response of turn ``k`` is ``ids[start:end]``; its value is read
    at ``start - 1``, the last token of the state.
    """

    ids: list[int] = field(default_factory=list)
    roles: list[int] = field(default_factory=list)
    turn_ids: list[int] = field(default_factory=list)
    action_spans: list[tuple[int, int]] = field(default_factory=list)
    observations: list[str] = field(default_factory=list)
    responses: list[str] = field(default_factory=list)
    #: The per-episode system message the conversation opened with ("" when none).
    system_prompt: str = ""

    def __len__(self) -> int:
        return len(self.ids)

    @property
    def num_turns(self) -> int:
        """Responses appended so far."""
        return len(self.action_spans)

    def extend(self, pieces: Sequence[tuple[Sequence[int], int]], turn: int) -> None:
        for ids, role in pieces:
            self.ids.extend(map(int, ids))
            self.roles.extend([role] * len(ids))
            self.turn_ids.extend([turn] * len(ids))

    def add_observation(
        self,
        fmt: ChatFormat,
        observation: str,
        system_prompt: str | None = None,
        pieces: Sequence[tuple[Sequence[int], int]] | None = None,
    ) -> None:
        """Append the state's new message (the first one opens the conversation, with
        ``system_prompt`` as a per-episode system message when given). ``pieces``: the observation's
        ``fmt.observation_pieces`` (``fmt.prompt_pieces`` for the first) when the caller has them already."""
        if self.ids:
            pieces = fmt.observation_pieces(observation) if pieces is None else pieces
        else:
            pieces = fmt.prompt_pieces(observation, system_prompt) if pieces is None else pieces
            self.system_prompt = system_prompt or ""
        self.observations.append(observation)
        self.extend(pieces, self.num_turns)

    def add_response(self, fmt: ChatFormat, response_ids: Sequence[int], text: str) -> None:
        """Append the sampled ids of this turn's response, then the template that closes it."""
        turn = self.num_turns
        start = len(self.ids)
        if start == 0:
            raise ValueError("add_observation must come before the first response.")
        self.extend([(response_ids, ROLE_ACTION)], turn)
        self.action_spans.append((start, len(self.ids)))
        self.responses.append(text)
        self.extend([(fmt.response_tail(response_ids), ROLE_TEMPLATE)], turn)


def as_token_ids(response: Any) -> list[int] | None:
    """``response`` as token ids when it is a sequence of integers (a list, a tuple, a 1-d array or tensor);
    ``None`` for anything else (text, bytes, a scalar, a sequence holding other things)."""
    if isinstance(response, (str, bytes)) or not hasattr(response, "__len__"):
        return None
    values = response.tolist() if hasattr(response, "tolist") else list(response)
    if not isinstance(values, list) or not all(isinstance(v, int) and not isinstance(v, bool) for v in values):
        return None
    return values


def continues_with(terminated: bool, info: Mapping[str, Any]) -> bool:
    """Whether the observation a step returned joins the episode's tokens: not after termination (there is
    nothing left to answer) nor after a fault (``info["reward_valid"]`` False: nothing after it is the policy's
    doing); after truncation it does, so that a critic can bootstrap from the final state."""
    return not terminated and info.get("reward_valid", True) is not False


#: History policies of :class:`TokenEpisode` (and ``ChatView(history_window=...)``): ``None`` keeps every turn,
#: an integer ``k`` the last ``k`` user messages (the current one included) and the responses between them,
#: ``"compact"`` the env's current state text alone.
COMPACT = "compact"


@dataclass(frozen=True)
class TurnSpan:
    """Where one turn lies in an :class:`EpisodeTokens`: its state's new message (template tokens included)
    and its response's sampled ids (``None`` while the response is due). ``turn`` counts from the episode's start."""

    turn: int
    observation: tuple[int, int]
    response: tuple[int, int] | None


@dataclass(frozen=True)
class EpisodeTokens:
    """One token sequence of an episode, exactly as the model saw (or sees) it.

    ``mask`` is 1 on the policy's own sampled ids only (role ``ROLE_ACTION``); ``turn_ids[i]`` is the episode
    turn token ``i`` belongs to; ``first_turn`` is the turn the sequence's history starts at (0 unless a
    history policy cut earlier turns off: the sequence is then a new prefix that starts there);
    ``sequence_start`` the first turn whose response the sequence was sampled in (mask 1 from there on: see
    :meth:`TokenEpisode.sequence_start`).
    """

    ids: list[int]
    mask: list[int]
    roles: list[int]
    turn_ids: list[int]
    turns: list[TurnSpan]
    first_turn: int = 0
    sequence_start: int = 0

    def __len__(self) -> int:
        return len(self.ids)


class TokenEpisode:
    """An episode's exact tokens under a history policy, appended piece by piece and never re-rendered.

    The whole episode grows in :attr:`conversation` (a :class:`Conversation`: the sequence a trainer trains on
    when every turn is kept). Each observation's content ids and each response's sampled ids are also kept by
    turn, so that a history policy builds the model's input at turn ``t`` from those same pieces:

    * ``history=None``: every turn; the input at turn ``t`` extends the one at ``t - 1``.
    * ``history=k``: the system message, then the last ``k`` user messages and the responses between them.
      Once the episode is longer than ``k`` turns each input starts a new prefix (at turn ``t - k + 1``), so the
      tokens per turn stay flat instead of growing with the episode.
    * ``history="compact"``: the system message and the env's current state text (``render()``), one message.

    ``reasoning`` says how earlier responses are shown:

    * ``"keep"`` (default): as sampled, reasoning included: with ``history=None`` the whole episode is one sequence.
    * ``"strip"``: as the chat template writes them in the history (:meth:`ChatFormat.history_response`: Qwen3 and
      R1 keep what follows ``</think>``, harmony the final message; R1 also drops its generation prompt's
      ``<think>``). Where that rewrites a response, the next input starts a new prefix, so each sequence stays exact:
      :meth:`samples` gives one sequence per rewrite.

    :attr:`tokens_per_turn` is the length of the sequence each response was sampled in (input plus response);
    :attr:`new_tokens_per_turn` what of it did not extend the previous turn's sequence (what a KV cache kept
    across turns, :class:`reference_trainer.policy.TurnCache`, still has to run through the model).
    """

    def __init__(self, fmt: ChatFormat, history: int | str | None = None, *, reasoning: str = KEEP):
        if not (
            history is None
            or history == COMPACT
            or (isinstance(history, int) and not isinstance(history, bool) and history >= 1)
        ):
            raise ValueError(f"history must be None, an integer >= 1 or {COMPACT!r}, got {history!r}.")
        if reasoning not in REASONING_POLICIES:
            raise ValueError(f"reasoning must be one of {REASONING_POLICIES}, got {reasoning!r}.")
        if reasoning == STRIP and fmt.strip_problem:
            raise ChatTemplateError(fmt.strip_problem)
        self.fmt = fmt
        self.history = history
        self.reasoning = reasoning
        self._rewritten: list[bool] = []  # per response ("strip"): the history writes it other than as sampled
        self._shown: list[tuple[list[int], list[int]]] = []  # per response ("strip"): as the history writes it
        self.conversation = Conversation()
        self.system_prompt: str | None = None
        self._contents: list[list[int]] = []  # per turn: the observation's content ids
        self._states: list[list[int]] = []  # per turn ("compact"): the state text's content ids
        self._responses: list[list[int]] = []
        self.tokens_per_turn: list[int] = []
        self.new_tokens_per_turn: list[int] = []
        self._last_sequence: list[int] = []  # the last turn's sequence, under a history policy

    @property
    def num_turns(self) -> int:
        """Responses appended so far."""
        return len(self._responses)

    def open(
        self,
        observation: str,
        system_prompt: str | None = None,
        *,
        content_ids: list[int] | None = None,
        state: str | None = None,
    ) -> None:
        """Start the episode with its first state (``system_prompt``: the per-episode system message, if any;
        ``state``: the env's state text, for ``history="compact"``)."""
        if self.conversation.ids:
            raise ValueError("TokenEpisode.open: the episode has started already.")
        content = self.fmt.encode_content(observation) if content_ids is None else list(content_ids)
        self.system_prompt = system_prompt or None
        self.conversation.add_observation(
            self.fmt,
            observation,
            system_prompt,
            pieces=self.fmt.prompt_pieces(observation, system_prompt, content_ids=content),
        )
        self._note_observation(content, state)

    def observe(self, observation: str, *, content_ids: list[int] | None = None, state: str | None = None) -> None:
        """Append a later state (after a response)."""
        if len(self._contents) != self.num_turns:
            raise ValueError("TokenEpisode.observe: a response must come between two observations.")
        content = self.fmt.encode_content(observation) if content_ids is None else list(content_ids)
        self.conversation.add_observation(
            self.fmt, observation, pieces=self.fmt.observation_pieces(observation, content)
        )
        self._note_observation(content, state)

    def _note_observation(self, content: list[int], state: str | None) -> None:
        self._contents.append(content)
        if self.history == COMPACT:
            if state is None:
                raise ValueError("TokenEpisode: history='compact' needs each observation's state text (state=...).")
            self._states.append(self.fmt.encode_content(state))

    def respond(self, response_ids: Sequence[int], text: str) -> None:
        """Append the ids the policy sampled for the current state (and the template that closes them)."""
        if len(self._contents) != self.num_turns + 1:
            raise ValueError("TokenEpisode.respond: no state is waiting for a response.")
        ids = [int(i) for i in response_ids]
        if self.reasoning == STRIP:
            first = self.num_turns == 0
            self._rewritten.append(self.fmt.rewrites(ids, first, self.system_prompt))
            self._shown.append(self.fmt.history_response(ids))
        if self.history is None and self.reasoning == KEEP:  # the input extends the last turn's whole sequence
            length = len(self.conversation) + len(ids)
            shared = self.tokens_per_turn[-1] if self.tokens_per_turn else 0
        else:
            sequence = self.view().ids + ids
            length, shared = len(sequence), _common_prefix(self._last_sequence, sequence)
            self._last_sequence = sequence
        self.conversation.add_response(self.fmt, ids, text)
        self._responses.append(ids)
        self.tokens_per_turn.append(length)
        self.new_tokens_per_turn.append(length - shared)

    def first_turn(self, turn: int) -> int:
        """The turn the model's input at ``turn`` starts at under the history policy."""
        if self.history is None:
            return 0
        if self.history == COMPACT:
            return turn
        return max(0, turn - int(self.history) + 1)

    def sequence_start(self, turn: int) -> int:
        """The first turn of the sequence turn ``turn``'s response is sampled in: the turns from there to ``turn``
        extend one another's inputs (0 under ``history=None``; under a window of ``k``, 0 for the first ``k``
        turns, then ``turn`` itself; ``turn`` under ``"compact"``). Under ``reasoning="strip"`` a sequence also ends
        at each response the history rewrites: the next turn starts a new one."""
        start = self.first_turn(turn)
        start = 0 if start == 0 and self.history != COMPACT else turn
        if self.reasoning == STRIP:
            at = turn
            while at > start and not self._rewritten[at - 1]:
                at -= 1
            start = at
        return start

    def view(self, turn: int | None = None) -> EpisodeTokens:
        """The model's input at ``turn`` (default: the latest state), ending with the generation prompt. Its
        ``mask`` is 1 on the responses sampled in this same sequence (:meth:`sequence_start`); earlier responses a
        window keeps are context here (mask 0), trained in the sequences they were sampled in; under
        ``reasoning="strip"`` the responses before :meth:`sequence_start` are written as the history writes them. The
        latest view under ``history=None`` and ``reasoning="keep"`` is :attr:`conversation`'s ids (without a last
        response's tail)."""
        last = len(self._contents) - 1
        if last < 0:
            raise ValueError("TokenEpisode.view: the episode has not started (call open first).")
        turn = last if turn is None else turn
        if not 0 <= turn <= last:
            raise ValueError(f"TokenEpisode.view: turn {turn} is not in 0..{last}.")
        start = self.first_turn(turn)
        trained_from = self.sequence_start(turn)
        fmt = self.fmt
        first = self._states[turn] if self.history == COMPACT else self._contents[start]
        builder = _Builder()
        shown = self.reasoning == STRIP and start < trained_from  # the response after it is written as in the history
        builder.add(
            fmt.prompt_pieces("", self.system_prompt, content_ids=first, answered=shown), start, observation=True
        )
        for k in range(start, turn):
            if shown:
                response, tail = self._shown[k]
            else:
                response, tail = self._responses[k], fmt.response_tail(self._responses[k])
            builder.add([(response, ROLE_ACTION)], k, response=True)
            builder.add([(tail, ROLE_TEMPLATE)], k)
            shown = self.reasoning == STRIP and k + 1 < trained_from
            builder.add(fmt.observation_pieces("", self._contents[k + 1], answered=shown), k + 1, observation=True)
        return builder.build(start, trained_from)

    def samples(self) -> list[EpisodeTokens]:
        """The sequences to train on: each response in the sequence it was sampled in (mask 1 on it), the turns of
        one :meth:`sequence_start` sharing one sequence: one in all under ``history=None`` (:attr:`conversation`'s
        ids), one per turn once a window slides, one per turn under ``"compact"``. A final state with no response
        (a truncated episode's, for a critic's bootstrap) ends the last sequence when it belongs to it."""
        out: dict[int, EpisodeTokens] = {}
        for turn in range(len(self._contents)):
            start = self.sequence_start(turn)
            if turn == self.num_turns and start not in out:
                break  # the final state starts no sequence of its own: nothing was sampled there
            view = self.view(turn)
            if turn < self.num_turns:
                builder = _Builder.of(view)
                builder.add([(self._responses[turn], ROLE_ACTION)], turn, response=True)
                builder.add([(self.fmt.response_tail(self._responses[turn]), ROLE_TEMPLATE)], turn)
                view = builder.build(view.first_turn, start)
            out[start] = view
        return list(out.values())


def _common_prefix(a: Sequence[Any], b: Sequence[Any]) -> int:
    """How many leading items ``a`` and ``b`` share."""
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


class _Builder:
    """Grows an :class:`EpisodeTokens` from ``(ids, role)`` pieces, noting each turn's spans."""

    def __init__(self) -> None:
        self.ids: list[int] = []
        self.roles: list[int] = []
        self.turn_ids: list[int] = []
        self.spans: dict[int, list[Any]] = {}

    @classmethod
    def of(cls, tokens: EpisodeTokens) -> "_Builder":
        b = cls()
        b.ids, b.roles, b.turn_ids = list(tokens.ids), list(tokens.roles), list(tokens.turn_ids)
        b.spans = {s.turn: [s.observation, s.response] for s in tokens.turns}
        return b

    def add(
        self,
        pieces: Sequence[tuple[Sequence[int], int]],
        turn: int,
        *,
        observation: bool = False,
        response: bool = False,
    ) -> None:
        start = len(self.ids)
        for ids, role in pieces:
            self.ids.extend(ids)  # ints already: the format's pieces and the episode's stored ids
            self.roles.extend([role] * len(ids))
            self.turn_ids.extend([turn] * len(ids))
        span = self.spans.setdefault(turn, [(start, start), None])
        if observation:
            span[0] = (start, len(self.ids))
        if response:
            span[1] = (start, len(self.ids))

    def build(self, first_turn: int, trained_from: int) -> EpisodeTokens:
        """The sequence; ``mask`` is 1 on the responses of turns ``trained_from`` on."""
        turns = [TurnSpan(t, obs, resp) for t, (obs, resp) in sorted(self.spans.items())]
        mask = [0] * len(self.ids)
        for span in turns:  # the sampled ids (role ROLE_ACTION) of the responses from trained_from on
            if span.response is not None and span.turn >= trained_from:
                mask[span.response[0] : span.response[1]] = [1] * (span.response[1] - span.response[0])
        return EpisodeTokens(
            list(self.ids), mask, list(self.roles), list(self.turn_ids), turns, first_turn, trained_from
        )
