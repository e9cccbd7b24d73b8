"""The trainer's token-in/token-out assembly is the env suite's: :mod:`agentgym_turn.tokens`.

One implementation builds the ids, per-token roles and turn ids of a conversation, for this trainer's
rollouts and for ``agentgym_turn.chat.ChatView(env, tokenizer=...)``, which users of other trainers call:
what they train on is, token for token, what this trainer trains on.
"""

from agentgym_turn.tokens import (ROLE_ACTION, ROLE_OBSERVATION, ROLE_TEMPLATE, ChatFormat, ChatTemplateError, Conversation, TokenEpisode,
                                  continues_with)

__all__ = ["ROLE_TEMPLATE", "ROLE_OBSERVATION", "ROLE_ACTION", "ChatFormat", "Conversation", "ChatTemplateError", "TokenEpisode",
           "continues_with"]
