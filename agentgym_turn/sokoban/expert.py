"""Sokoban's expert: shortest plans from any state, and a resting move once no plan exists.

Pure functions over a :class:`~.board.Board` and a state (box bit mask, player cell); the env
keeps the plan between turns and re-plans when the agent deviates (``TurnSokobanEnv.expert_action``).
"""

from __future__ import annotations

from .board import Board, apply_move
from .constants import MOVE_NAMES
from .solver import solve


def plan_from(board: Board, boxes: int, player: int, *, deadlocked: bool, solver_budget: int) -> tuple[list[int], str]:
    """A plan (move indices) from the state and ``""``, or ``[]`` and why there is none:
    ``"stuck"`` (a box is provably stuck), ``"unsolvable"`` (the solver proved it) or ``"unknown"``
    (no plan within ``solver_budget`` expansions). A shortest plan when the budget proves one,
    else a weighted search's."""
    if deadlocked:
        return [], "stuck"
    result = solve(board, boxes, player, max_expansions=solver_budget)
    if result.moves is None and not result.unsolvable:
        result = solve(board, boxes, player, max_expansions=solver_budget, weight=3.0)
    if result.moves is None:
        return [], "unsolvable" if result.unsolvable else "unknown"
    return list(result.moves), ""


def no_plan_reason(why: str, solver_budget: int) -> str:
    """The expert's one-sentence explanation of a :func:`plan_from` verdict without a plan."""
    return {
        "stuck": "No plan can solve this state any more: a box is stuck.",
        "unsolvable": "No plan can solve this state any more: the solver proved it.",
    }.get(why, f"The solver found no plan from this state within solver_budget={solver_budget:,}.")


def answer_text(moves: list[int], *, think: bool) -> str:
    """The response playing ``moves``; RAGEN's parser wants a (here empty) think block first."""
    prefix = "<think></think>" if think else ""
    return f"{prefix}<answer>" + " || ".join(MOVE_NAMES[m] for m in moves) + "</answer>"


def idle_move(board: Board, boxes: int, player: int) -> int:
    """A move that changes nothing (into a wall or a stuck box), or the first step towards
    the nearest cell that has one: the expert comes to rest instead of wandering."""

    def still(cell: int) -> int | None:
        for m in range(4):
            if not apply_move(board, boxes, cell, m).moved:
                return m
        return None

    parent = {player: (-1, -1)}
    queue = [player]
    for cell in queue:  # breadth-first over walkable cells, in move order: deterministic
        m = still(cell)
        if m is not None:
            if cell == player:
                return m
            while parent[cell][0] != player:
                cell = parent[cell][0]
            return parent[cell][1]
        for d in range(4):
            nxt = board.step[d][cell]
            if nxt >= 0 and nxt not in parent and not (boxes >> nxt) & 1:
                parent[nxt] = (cell, d)
                queue.append(nxt)
    return 0
