"""Chat views of any turn env: ``ChatView(env, tokenizer=...)`` keeps an episode as chat messages and, with a
tokenizer, as the exact token ids a trainer samples and trains on.

This is the face; the code lives in :mod:`agentgym_turn.tokens.chat`, beside the token assembly it is built on and
the template audit that uses it (so the arrows between them run one way).
"""

from .tokens.chat import DEFAULT_REWARD_TEMPLATE, ChatSpace, ChatView, Message, split_first_message

__all__ = ["ChatView", "ChatSpace", "Message", "split_first_message", "DEFAULT_REWARD_TEMPLATE"]
