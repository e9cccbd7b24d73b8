"""The turn contract: base class, text spaces and the shared action parsers."""

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
from .spaces import TurnText, is_turn_text, sanitize_text
from .turn_env import COMMON_INFO_KEYS, TurnEnv, TurnOutcome

__all__ = [
    "BracketAction",
    "COMMON_INFO_KEYS",
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
