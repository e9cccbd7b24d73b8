"""Exact multi-turn tokens: the assembly every trainer can share, and an audit of chat templates.

* :mod:`.assembly`: :class:`ChatFormat` (a chat template's per-message pieces, as ids), :class:`Conversation` and
  :class:`TokenEpisode` (an episode's ids, roles and turn ids, appended piece by piece and never re-rendered, with
  history policies). The reference trainer's rollouts and ``agentgym_turn.chat.ChatView(env, tokenizer=...)``
  both assemble tokens here.
* :mod:`.audit`: :func:`audit_template`, where a full re-render of a chat template parts from those ids.

No torch: a tokenizer is any object with Hugging Face's ``encode``/``decode``/``apply_chat_template``.
"""

from .assembly import (
    COMPACT,
    ROLE_ACTION,
    ROLE_OBSERVATION,
    ROLE_TEMPLATE,
    ChatFormat,
    ChatTemplateError,
    Conversation,
    EpisodeTokens,
    TokenEpisode,
    TurnSpan,
    as_token_ids,
    continues_with,
)
from .audit import DIVERGENCE_KINDS, Divergence, TemplateAudit, audit_template

__all__ = [
    "COMPACT",
    "ROLE_ACTION",
    "ROLE_OBSERVATION",
    "ROLE_TEMPLATE",
    "ChatFormat",
    "ChatTemplateError",
    "Conversation",
    "EpisodeTokens",
    "TokenEpisode",
    "TurnSpan",
    "as_token_ids",
    "continues_with",
    "DIVERGENCE_KINDS",
    "Divergence",
    "TemplateAudit",
    "audit_template",
]
