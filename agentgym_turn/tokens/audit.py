"""Audit a chat template against token-in/token-out assembly: where re-rendering the history parts from it.

A trainer that appends each env message's tokens to the ids the policy sampled (:mod:`agentgym_turn.tokens`)
gives the model, at each turn, an input that a full re-render of the conversation
(``tokenizer.apply_chat_template(messages, add_generation_prompt=True)`` then ``encode``) may not reproduce:
a template can rewrite history (Qwen3 drops earlier ``<think>`` blocks), trim a message (Llama 3), number its
generation prompt, or a tokenizer can merge characters across a template boundary. An inference server that
re-renders, or a model trained on one assembly and served with the other, then sees different tokens.

:func:`audit_template` plays a few expert episodes of an env (responses written as a thinking model writes
them), assembles the tokens exactly as the trainer does (``ChatView(env, tokenizer=...)``) and, at every turn,
compares them with the re-render; each :class:`Divergence` says where they first part and what kind of
difference it is. No torch: the tokenizer is any object with Hugging Face's ``encode``/``decode``/
``apply_chat_template``.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any, Sequence

import numpy as np

from .assembly import (
    KEEP,
    ROLE_ACTION,
    ROLE_OBSERVATION,
    ROLE_TEMPLATE,
    ChatFormat,
    ChatTemplateError,
    EpisodeTokens,
    _common_prefix,
)

#: What a :class:`Divergence` can be (see :class:`Divergence`).
DIVERGENCE_KINDS = (
    "history_rewritten",
    "whitespace_merged",
    "generation_prompt",
    "content_changed",
    "token_split",
    "template",
)

_SNIPPET = 30  # characters of context either side of a divergence in the snippets
_REASONING = (
    "Let me look at the current state.",
    "I check what the message asks for.",
    "The rules allow a few actions here.",
    "I compare the options before acting.",
    "The next step follows from the state.",
    "This should move me closer to the goal.",
)


@dataclass(frozen=True)
class Divergence:
    """One place where the incremental ids and the re-rendered template part.

    Attributes:
        episode: Episode index (0-based; the env is reset with ``seed + episode``); -1 when the template was
            refused before the first episode (kind ``"template"``).
        turn: Turn whose model input was compared (0: the first prompt); -1 when the template was refused
            before the episode's first turn.
        position: Index, in the incremental ids, of the first token where the two id sequences part (-1 for
            kind ``"template"``, as ``char``).
        char: Index, in the incremental text, of the first character where the two texts part (for the
            token-level kinds, where the texts are equal: the first character of token ``position``).
        kind: ``"history_rewritten"`` (the re-render changed an earlier message, e.g. dropped an earlier
            response's ``<think>`` block), ``"whitespace_merged"`` (equal texts, but a token of the re-render
            spans a message/template boundary, or the whitespace that ends a piece is tokenised by what follows it), ``"generation_prompt"`` (the texts part in the trailing
            generation prompt), ``"content_changed"`` (any other text change, e.g. a trimmed message; a
            difference in whitespace alone is this kind even in an earlier message, and a difference already
            found at the same character of the previous turn keeps that turn's kind),
            ``"token_split"`` (equal texts, tokens differ away from any boundary) or ``"template"`` (the
            template could not be used at all; ``detail`` says why).
        detail: What differs, in words.
        incremental: A snippet of the incremental text around ``char``.
        rendered: The same snippet of the re-rendered text.
    """

    episode: int
    turn: int
    position: int
    char: int
    kind: str
    detail: str
    incremental: str
    rendered: str


@dataclass(frozen=True)
class TemplateAudit:
    """What :func:`audit_template` found: at most one :class:`Divergence` per (episode, turn), the first."""

    env_id: str
    episodes: int
    turns_checked: int
    divergences: list[Divergence] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """No divergence: at every turn checked the incremental ids equal the re-rendered template's."""
        return not self.divergences

    def counts(self) -> dict[str, int]:
        """Divergences per kind (kinds with none left out)."""
        out: dict[str, int] = {}
        for d in self.divergences:
            out[d.kind] = out.get(d.kind, 0) + 1
        return out

    def summary(self) -> str:
        """A few lines: turns checked, counts by kind, the first divergence."""
        head = f"{self.env_id}: {self.turns_checked} turns of {self.episodes} episodes checked"
        if self.ok:
            return head + ": no divergence (the incremental tokens equal the re-rendered template at every turn)."
        counts = ", ".join(f"{k} {n}" for k, n in sorted(self.counts().items()))
        d = self.divergences[0]
        return (
            f"{head}: {len(self.divergences)} divergences ({counts}).\n"
            f"First: episode {d.episode}, turn {d.turn}, token {d.position}, char {d.char}: {d.kind}: {d.detail}\n"
            f"  incremental: {d.incremental!r}\n  rendered:    {d.rendered!r}"
        )

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-serialisable data."""
        return {
            "env_id": self.env_id,
            "episodes": self.episodes,
            "turns_checked": self.turns_checked,
            "ok": self.ok,
            "counts": self.counts(),
            "divergences": [asdict(d) for d in self.divergences],
        }

    def to_json(self, **kwargs: Any) -> str:
        """:meth:`to_dict` as JSON text."""
        return json.dumps(self.to_dict(), **kwargs)


def _respond(fmt: ChatFormat, expert: str, rng: np.random.Generator, think: bool) -> str | list[int]:
    """The expert's response as a thinking model writes it: short reasoning, then the action (an expert response
    that already opens with a ``<think>`` block is kept as it is). For a template with a reasoning rule, the ids the
    family's model samples (its markup as the template's tokens: :meth:`ChatFormat.reasoning_response`); otherwise
    the text ``<think>reasoning</think>`` then the action."""
    if not think or expert.lstrip().startswith("<think>"):
        return expert
    picks = rng.choice(len(_REASONING), size=2, replace=False)
    reasoning = " ".join(_REASONING[int(i)] for i in picks)
    if fmt.reasoning_rule is not None:
        return fmt.reasoning_response(reasoning, expert)
    return "<think>" + reasoning + "</think>" + expert


def _decode(tokenizer: Any, ids: Sequence[int]) -> str:
    return (
        tokenizer.decode(list(ids), skip_special_tokens=False, clean_up_tokenization_spaces=False) if len(ids) else ""
    )


@dataclass(frozen=True)
class _Run:
    """A stretch of the incremental ids with one role and one turn, and its characters in the decoded text."""

    role: int
    turn: int
    start: int  # token
    end: int
    cstart: int  # character
    cend: int


def _runs(tokenizer: Any, view: EpisodeTokens) -> tuple[list[_Run], str]:
    """The view's role/turn runs with their character spans, and the decoded text."""
    bounds = (
        [0]
        + [
            i
            for i in range(1, len(view.ids))
            if (view.roles[i], view.turn_ids[i]) != (view.roles[i - 1], view.turn_ids[i - 1])
        ]
        + [len(view.ids)]
    )
    texts = [_decode(tokenizer, view.ids[a:b]) for a, b in zip(bounds, bounds[1:])]
    whole = _decode(tokenizer, view.ids)
    if "".join(texts) != whole:  # a run boundary inside a character (never for ids built from separate strings)
        offsets = [len(_decode(tokenizer, view.ids[:b])) for b in bounds]
    else:
        offsets = [0]
        for t in texts:
            offsets.append(offsets[-1] + len(t))
    runs = [
        _Run(view.roles[a], view.turn_ids[a], a, b, offsets[k], offsets[k + 1])
        for k, (a, b) in enumerate(zip(bounds, bounds[1:]))
        if b > a
    ]
    return runs, whole


def _describe(runs: list[_Run], char: int) -> str:
    """What the incremental text holds at ``char``."""
    contents = [r for r in runs if r.role == ROLE_OBSERVATION and r.turn == runs[0].turn] if runs else []
    for k, r in enumerate(runs):
        if r.cstart <= char < r.cend:
            after = runs[k + 1] if k + 1 < len(runs) else None
            if r.role == ROLE_TEMPLATE and after is not None and (after.role, after.turn) == (ROLE_ACTION, r.turn):
                return f"the generation prompt of response {r.turn}"
            if r.role == ROLE_ACTION:
                return f"response {r.turn} (an assistant message)"
            if r.role == ROLE_OBSERVATION:
                if len(contents) == 2 and r is contents[0]:
                    return "the system message"
                return f"observation {r.turn} (a user message)"
            return f"the template text around turn {r.turn}"
    return "the end of the text"


def _whitespace_only(a: str, b: str) -> bool:
    """Whether two texts that part at their first character realign once leading whitespace is dropped."""
    if not (a[:1].isspace() or b[:1].isspace()):
        return False
    a, b = a.lstrip(), b.lstrip()
    n = min(len(a), len(b), 32)
    return a[:n] == b[:n] and (n > 0 or a == b)


def _snippets(incremental: str, rendered: str, char: int) -> tuple[str, str]:
    lo = max(0, char - _SNIPPET)
    return incremental[lo : char + _SNIPPET], rendered[lo : char + _SNIPPET]


def _token_ends(tokenizer: Any, ids: Sequence[int], first: int, base: int, limit: int) -> set[int]:
    """Character offsets where the tokens ``ids[first:]`` end, up to ``limit`` tokens (``base``: offset of token ``first``)."""
    out = set()
    for k in range(1, min(limit, len(ids) - first) + 1):
        out.add(base + len(_decode(tokenizer, ids[first : first + k])))
    return out


def _compare(
    tokenizer: Any,
    view: EpisodeTokens,
    messages: list[dict[str, str]],
    episode: int,
    turn: int,
    previous: Divergence | None,
) -> Divergence | None:
    """The first place where ``view`` (the incremental input at ``turn``) and the re-render of ``messages`` part."""
    rendered = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    rendered_ids = [int(i) for i in tokenizer.encode(rendered, add_special_tokens=False)]
    ids = [int(i) for i in view.ids]
    if ids == rendered_ids:
        return None
    position = _common_prefix(ids, rendered_ids)
    runs, text = _runs(tokenizer, view)
    char = _common_prefix(text, rendered)
    if text != rendered:
        without = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=False)
        prompt_start = len(without) if rendered.startswith(without) else _common_prefix(without, rendered)
        current = view.turns[-1].observation[0] if view.turns else 0  # first token of this turn's new message
        current_char = next((r.cstart for r in runs if r.start >= current), len(text))
        where = _describe(runs, char)
        if char >= prompt_start:
            kind = "generation_prompt"
            detail = "the re-rendered generation prompt differs from the one the incremental ids end with"
        elif (
            previous is not None
            and previous.turn == turn - 1
            and previous.char == char
            and previous.kind in ("history_rewritten", "content_changed")
        ):
            kind, detail = previous.kind, previous.detail  # the same difference as at the previous turn
        elif _whitespace_only(text[char:], rendered[char:]):
            kind = "content_changed"
            detail = f"the template trimmed whitespace in {where}"
        elif char < current_char:
            kind = "history_rewritten"
            detail = f"re-rendering changed an earlier message: {where}"
        else:
            kind = "content_changed"
            detail = f"the template changed {where}"
        inc, ren = _snippets(text, rendered, char)
        return Divergence(episode, turn, position, char, kind, detail, inc, ren)
    # Equal texts: the tokens part. Where both tokenisations meet again, and is a run boundary in between?
    char = len(_decode(tokenizer, ids[:position]))
    ends_inc = _token_ends(tokenizer, ids, position, char, 64)
    ends_ren = _token_ends(tokenizer, rendered_ids, position, char, 64)
    shared = sorted(ends_inc & ends_ren)
    stop = shared[0] if shared else len(text)
    boundaries = {r.cstart for r in runs[1:]}
    merged = sorted(b for b in boundaries if char < b < stop)
    inc, ren = _snippets(text, rendered, char)
    if merged:
        where = _describe(runs, merged[0])
        detail = (
            f"equal texts, but the re-render's tokens span the boundary before {where} "
            f"(incremental {ids[position : position + 3]}, rendered {rendered_ids[position : position + 3]})"
        )
        return Divergence(episode, turn, position, char, "whitespace_merged", detail, inc, ren)
    if stop in boundaries and not text[char:stop].strip():  # whitespace that ends a piece, split by what follows it
        detail = (
            f"equal texts, but the re-render tokenises the whitespace before {_describe(runs, stop)} by what follows "
            f"it (incremental {ids[position : position + 3]}, rendered {rendered_ids[position : position + 3]})"
        )
        return Divergence(episode, turn, position, char, "whitespace_merged", detail, inc, ren)
    detail = (
        f"equal texts, tokenised differently inside {_describe(runs, char)} "
        f"(incremental {ids[position : position + 3]}, rendered {rendered_ids[position : position + 3]})"
    )
    return Divergence(episode, turn, position, char, "token_split", detail, inc, ren)


def _template_error(err: BaseException) -> bool:
    """Whether ``err`` is a chat-template problem (ours, or Jinja's while rendering)."""
    return isinstance(err, ChatTemplateError) or type(err).__module__.split(".")[0] == "jinja2"


def _error_text(err: BaseException) -> str:
    return str(err) if isinstance(err, ChatTemplateError) else f"{type(err).__name__}: {err}"


def audit_template(
    tokenizer: Any,
    *,
    env_id: str = "TurnSokoban-v0",
    episodes: int = 8,
    seed: int = 0,
    max_turns: int = 6,
    env_kwargs: dict[str, Any] | None = None,
    think: bool = True,
    split_system_prompt: bool = True,
    system_prompt: str | None = None,
    reasoning: str = KEEP,
) -> TemplateAudit:
    """Play ``episodes`` expert episodes of ``env_id`` and compare, at each of their first ``max_turns`` turns, the
    incremental token ids of the model's input with the full re-render of the chat template.

    Args:
        tokenizer: A Hugging Face tokenizer (duck-typed) with a chat template.
        env_id: A registered env id; ``env_kwargs`` go to ``gymnasium.make``.
        episodes: Episodes to play; episode ``i`` is reset with ``seed + i``.
        max_turns: Turns (model inputs) checked per episode at most.
        think: Write each response as a thinking model does: ``<think>`` short reasoning ``</think>`` then the
            expert's action (the reasoning is drawn from ``seed``, the episode and the turn).
        split_system_prompt, system_prompt: As for :class:`agentgym_turn.chat.ChatView`.
        reasoning: The history policy audited (``ChatView(reasoning=...)``): ``"keep"`` compares the ids as sampled
            with the re-render, so a template that strips earlier reasoning parts at the first token it drops;
            ``"strip"`` compares the history as the template writes it (a template whose rule ``ChatFormat`` cannot
            follow gives one divergence of kind ``"template"``).

    Returns:
        A :class:`TemplateAudit` with the first divergence of each (episode, turn) that has one. A template that
        cannot be used at all (``ChatFormat`` refuses it, or Jinja fails to render) gives a divergence of kind
        ``"template"`` with the error's text: this function does not raise for a template problem.
    """
    import gymnasium as gym

    from .chat import ChatView

    divergences: list[Divergence] = []
    checked = 0
    for episode in range(int(episodes)):
        env = gym.make(env_id, **(env_kwargs or {}))
        try:
            try:  # reading the template's pieces (ChatFormat), and the per-episode system message's at reset
                chat = ChatView(
                    env,
                    tokenizer=tokenizer,
                    split_system_prompt=split_system_prompt,
                    system_prompt=system_prompt,
                    reasoning=reasoning,
                )
                chat.reset(seed=int(seed) + episode)
            except Exception as err:  # noqa: BLE001 - only template problems are reported, others raise
                if not _template_error(err):
                    raise
                return TemplateAudit(
                    env_id,
                    int(episodes),
                    checked,
                    divergences
                    + [Divergence(-1 if episode == 0 else episode, -1, -1, -1, "template", _error_text(err), "", "")],
                )
            tokens = chat.episode_tokens
            previous: Divergence | None = None
            for turn in range(int(max_turns)):
                if len(tokens.conversation.observations) != turn + 1:
                    break  # the episode ended (or a fault cut it) before this turn
                checked += 1
                try:
                    found = _compare(tokenizer, tokens.view(turn), list(chat.messages), episode, turn, previous)
                except Exception as err:  # noqa: BLE001 - only template problems are reported, others raise
                    if not _template_error(err):
                        raise
                    divergences.append(Divergence(episode, turn, -1, -1, "template", _error_text(err), "", ""))
                    break
                if found is not None:
                    divergences.append(found)
                previous = found
                rng = np.random.default_rng([int(seed), episode, turn])
                response = _respond(chat.format, env.unwrapped.expert_action(), rng, think)
                _, _, terminated, truncated, _ = chat.step(response)
                if terminated or truncated:
                    break
        finally:
            env.close()
    return TemplateAudit(env_id, int(episodes), checked, divergences)
