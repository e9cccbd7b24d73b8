"""Sokoban's rewards: gym-sokoban's constants (``SokobanEnv.__init__``), in tenths so sums are exact."""

from __future__ import annotations

#: Every move, effective or not: -0.1.
STEP_TENTHS = -1
#: A push that puts a box onto a target: +1.
BOX_ON_TARGET_TENTHS = 10
#: A push that takes a box off a target: -1.
BOX_OFF_TARGET_TENTHS = -10
#: The move that puts the last box on its target: +10.
SOLVED_TENTHS = 100
PENALTY_FOR_STEP = STEP_TENTHS / 10
REWARD_BOX_ON_TARGET = BOX_ON_TARGET_TENTHS / 10
PENALTY_BOX_OFF_TARGET = BOX_OFF_TARGET_TENTHS / 10
REWARD_FINISHED = SOLVED_TENTHS / 10


#: The names of ``info["reward_components"]``: gym-sokoban's terms and the invalid-turn penalty.
REWARD_COMPONENTS = ("step", "box_on_target", "box_off_target", "finish", "format")


def push_components_tenths(target_mask: int, boxes_after: int, box_from: int, box_to: int) -> tuple[int, int, int]:
    """The push terms, in tenths, of a move that pushed a box from cell ``box_from`` to ``box_to``:
    ``(box_on_target, box_off_target, finish)`` (``boxes_after`` and ``target_mask``: bit masks of
    box and target cells after the push). The move's own step cost is not among them."""
    on = off = finish = 0
    was_on, now_on = (target_mask >> box_from) & 1, (target_mask >> box_to) & 1
    if now_on and not was_on:
        on = BOX_ON_TARGET_TENTHS
    elif was_on and not now_on:
        off = BOX_OFF_TARGET_TENTHS
    if now_on and boxes_after == target_mask:
        finish = SOLVED_TENTHS
    return on, off, finish


def push_reward_tenths(target_mask: int, boxes_after: int, box_from: int, box_to: int) -> int:
    """The reward, in tenths, of a move that pushed a box from cell ``box_from`` to ``box_to``: the step
    cost plus :func:`push_components_tenths`."""
    return STEP_TENTHS + sum(push_components_tenths(target_mask, boxes_after, box_from, box_to))
