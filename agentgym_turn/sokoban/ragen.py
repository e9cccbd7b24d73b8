"""RAGEN's Sokoban text protocol, as its code runs it: the prompt, the answer parser, the penalty.

Read from RAGEN (github.com/RAGEN-AI/RAGEN, ``ragen/llm_agent/ctx_manager.py`` and
``es_manager.py``, ``config/base.yaml`` and ``config/envs.yaml`` for ``SimpleSokoban``):

* ``ContextManager._parse_response`` (with ``enable_think: True``, the default) takes the
  first match of ``<think>(.*?)</think>\\s*<answer>(.*?)</answer>`` (case-sensitive, dot
  matches newlines); no match means no actions. It removes the special tokens ``<think>``,
  ``</think>``, ``<answer>``, ``</answer>``, ``<|im_start|>``, ``<|im_end|>`` from the answer
  (one after the other, stripping after each), splits it on ``||``, strips the pieces, drops
  empty ones and keeps the first ``max_actions_per_turn`` (5).
* ``EnvStateManager._extract_map_valid_actions`` keeps the pieces whose lower-case form is a
  move name (``up``, ``down``, ``left``, ``right``); ``EnvStateManager.step`` plays them (no
  more than the actions left in the episode, stopping when the level is solved) and adds
  ``format_penalty`` (-0.1) to the episode when a piece was dropped or no move was left.
* The prompt (``_init_prefix_lookup`` and ``get_lm_inputs``): the env instruction, the symbol
  meanings, the action names and the action budget, then per turn ``Turn k:``, ``State:``, the
  grid, the actions left and the format reminder; after a turn, ``Reward:`` and the sum of the
  turn's gym-sokoban rewards as Python prints that float.

This module re-implements those rules in linear time (RAGEN's regular expression rescans the
text once per ``<think>``, quadratic on adversarial input); ``tests/agentgym_turn/sokoban/test_ragen.py``
checks it against RAGEN's own function on a committed fixture.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from .constants import MOVE_BY_NAME

#: ``env_instruction`` of RAGEN's ``SimpleSokoban`` (config/envs.yaml).
RAGEN_INSTRUCTION = (
    "You are solving the Sokoban puzzle. You are the player and you need to push all boxes to targets. "
    "When you are right next to a box, you can push it by moving in the same direction. You cannot push "
    "a box through a wall, and you cannot pull a box. The answer should be a sequence of actions, like "
    "<answer>Right || Right || Up</answer>"
)
#: ``max_tokens`` of RAGEN's ``SimpleSokoban``: only quoted in the prompt.
RAGEN_MAX_TOKENS = 100
#: RAGEN's ``action_sep``.
ACTION_SEP = "||"
#: ``ContextManager.special_token_list``, in its order (the order of removal matters).
SPECIAL_TOKENS = ("<think>", "</think>", "<answer>", "</answer>", "<|im_start|>", "<|im_end|>")
#: ``grid_vocab`` of RAGEN's ``SokobanEnvConfig``: (cell kind, word), in its order.
_VOCAB_ORDER = (
    ("wall", "wall"),
    ("floor", "empty"),
    ("target", "target"),
    ("box_on_target", "box on target"),
    ("box", "box"),
    ("player", "player"),
    ("player_on_target", "player on target"),
)
_FORMAT_PROMPT = "<think> [Your thoughts] </think> <answer> [your answer] </answer>"


@dataclass(frozen=True)
class RagenAnswer:
    """What RAGEN makes of one response.

    Attributes:
        actions: The answer's pieces after splitting on ``||`` and keeping the first
            ``max_actions`` (RAGEN's ``actions``), as written.
        moves: The pieces that are moves, as move indices (RAGEN's valid actions).
        penalized: RAGEN adds ``format_penalty``: a piece was not a move, or no move is left.
    """

    actions: tuple[str, ...]
    moves: tuple[int, ...]
    penalized: bool


def _first_think_answer(text: str) -> str | None:
    """The answer group of the first match of ``<think>(.*?)</think>\\s*<answer>(.*?)</answer>``.

    Equivalent to ``re.search`` with ``re.DOTALL`` (leftmost start, lazy groups), in one pass:
    the match starts at the first ``<think>``, the think group ends at the first ``</think>``
    after it that is followed by whitespace and ``<answer>`` with a ``</answer>`` somewhere
    after, and the answer runs to the first ``</answer>``.
    """
    start = text.find("<think>")
    if start < 0:
        return None
    last_close = text.rfind("</answer>")
    n = len(text)
    j = text.find("</think>", start + 7)
    while 0 <= j:
        k = j + 8
        while k < n and text[k].isspace():  # \s in a str pattern is str.isspace()
            k += 1
        if text.startswith("<answer>", k):
            if last_close < k + 8:
                return None  # no closing tag after this answer, nor after any later one
            return text[k + 8 : text.find("</answer>", k + 8)]
        j = text.find("</think>", j + 8)
    return None


def parse_ragen_response(response: str, max_actions: int = 5) -> RagenAnswer:
    """Parse a whole response (the opening ``<think>`` included) as RAGEN does; never raises.

    ``max_actions`` is RAGEN's ``agent_proxy.max_actions_per_turn`` (5).
    """
    content = _first_think_answer(response)
    if content is None:
        return RagenAnswer((), (), True)
    for token in SPECIAL_TOKENS:
        content = content.replace(token, "").strip()
    actions = [piece.strip() for piece in content.split(ACTION_SEP) if piece.strip()]
    actions = actions[:max_actions]
    moves = tuple(MOVE_BY_NAME[a.lower()] for a in actions if a.lower() in MOVE_BY_NAME)
    return RagenAnswer(tuple(actions), moves, len(moves) != len(actions) or not moves)


def ragen_prefix(symbols: Mapping[str, str], max_actions_per_episode: int) -> str:
    """The first user message's fixed part: instruction, symbol meanings, actions and budget."""
    vocab = ", ".join(f"{symbols[kind]}: {word}" for kind, word in _VOCAB_ORDER)
    return (
        f"{RAGEN_INSTRUCTION}\nThe meaning of each symbol in the state is:\n{vocab}"
        "\nYour available actions are:\nUp, Down, Left, Right"
        f'\nYou can make up to {max_actions_per_episode} actions, separated by the action separator " {ACTION_SEP} "\n'
    )


def ragen_turn_block(turn: int, grid: str, actions_left: int) -> str:
    """``Turn k:`` and the state block of ``get_lm_inputs`` (turn counts from 1)."""
    return (
        f"\nTurn {turn}:\nState:\n{grid}\nYou have {actions_left} actions left. Always output: {_FORMAT_PROMPT} "
        f"with no extra text. Strictly follow this format. Max response length: {RAGEN_MAX_TOKENS} words (tokens).\n"
    )


def ragen_reward_text(move_rewards_tenths: list[int]) -> str:
    """``Reward:`` and the turn's reward as RAGEN prints it.

    RAGEN sums gym-sokoban's float rewards from the integer 0 (``acc_reward``), so a turn with
    no move prints ``0`` and three plain moves print ``-0.30000000000000004``.
    """
    acc: float | int = 0
    for tenths in move_rewards_tenths:
        acc += _gym_sokoban_float(tenths)
    return f"Reward:\n{acc}\n"


def _gym_sokoban_float(tenths: int) -> float:
    """One move's reward as gym-sokoban computes it in floats (``_calc_reward``)."""
    reward = -0.1  # penalty_for_step
    rest = tenths + 1
    if rest >= 100:  # reward_finished, which comes with a box onto a target
        reward += 1
        reward += 10
    elif rest == 10:
        reward += 1  # reward_box_on_target
    elif rest == -10:
        reward += -1  # penalty_box_off_target
    return reward
