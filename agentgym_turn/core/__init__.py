"""The turn contract: base class, text spaces and the shared action parsers.

Only the contract lives here; the HTTP stack every server shares is :mod:`agentgym_turn.serving` and the BM25 index
:mod:`agentgym_turn.bm25`.
"""

from .parsing import (
    BracketAction,
    InvalidAction,
    TagMatch,
    find_tagged,
    parse_bracket_action,
    break_control_tokens,
    snippet,
    split_moves,
    strip_think,
)
from .contract import EXIT_STATUSES, FAULT_STATUSES, InfraError, TurnStatus, fork_env, state_digest
from .spaces import TurnText, is_turn_text, sanitize_text
from .turn_env import COMMON_INFO_KEYS, CONTRACT_INFO_KEYS, TurnEnv, TurnOutcome

__all__ = [
    "BracketAction",
    "COMMON_INFO_KEYS",
    "CONTRACT_INFO_KEYS",
    "EXIT_STATUSES",
    "FAULT_STATUSES",
    "InfraError",
    "TurnStatus",
    "fork_env",
    "state_digest",
    "InvalidAction",
    "TagMatch",
    "TurnEnv",
    "TurnOutcome",
    "TurnText",
    "find_tagged",
    "is_turn_text",
    "parse_bracket_action",
    "sanitize_text",
    "break_control_tokens",
    "snippet",
    "split_moves",
    "strip_think",
]
