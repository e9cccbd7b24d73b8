"""Static geometry of a level, and the rules of play as pure functions.

A game state is ``(boxes, player)``: ``boxes`` is a bitmask over cell indices (bit ``i`` set
when a box stands on cell ``i``; Python ints hash and compare fast) and ``player`` a cell index.
:class:`Board` holds what never changes (walls, targets, neighbour tables, dead squares, push
distances); it is built once per level layout and cached.
"""

from __future__ import annotations

from functools import lru_cache
from typing import NamedTuple

from .constants import DOWN, LEFT, MOVE_DELTAS, OPPOSITE, RIGHT, UP
from .loader import Level
from .reward import STEP_TENTHS, push_reward_tenths

UNREACHABLE = 1 << 30


def mask_of(cells) -> int:
    """Bitmask of an iterable of cell indices."""
    m = 0
    for c in cells:
        m |= 1 << c
    return m


def cells_of(mask: int) -> list[int]:
    """Cell indices of the set bits of ``mask``, ascending."""
    out = []
    while mask:
        low = mask & -mask
        out.append(low.bit_length() - 1)
        mask ^= low
    return out


class Board:
    """What never changes in a level.

    Attributes:
        rows, cols, n: Grid size; ``n = rows * cols`` cells, numbered row-major.
        free: ``free[i]`` is True for a floor cell (anything but a wall).
        step: ``step[d][i]``: the cell one move ``d`` away from ``i``, or -1 (wall / edge).
        adj: ``adj[i]``: the free neighbours of ``i``.
        targets: Target cells (tuple, ascending); ``target_mask`` their bitmask; ``wall_mask`` the walls'.
        dead: ``dead[i]`` is True for a floor cell from which no box can ever reach a target
            (a "dead square"), computed by pulling boxes back from every target.
        push_dist: ``push_dist[k][i]``: least pushes that bring a box from cell ``i`` to
            target ``targets[k]`` on the empty board (UNREACHABLE if impossible).
    """

    def __init__(self, rows: int, cols: int, walls: tuple[bool, ...], targets: frozenset[int]):
        self.rows, self.cols, self.n = rows, cols, rows * cols
        self.free = [not w for w in walls]
        self.step: list[list[int]] = []
        for dr, dc in MOVE_DELTAS:
            row = []
            for i in range(self.n):
                r, c = divmod(i, cols)
                rr, cc = r + dr, c + dc
                j = rr * cols + cc
                row.append(j if 0 <= rr < rows and 0 <= cc < cols and self.free[j] and self.free[i] else -1)
            self.step.append(row)
        self.adj = [[self.step[d][i] for d in range(4) if self.step[d][i] >= 0] for i in range(self.n)]
        self.targets = tuple(sorted(targets))
        self.target_mask = mask_of(self.targets)
        self.wall_mask = mask_of(i for i, free in enumerate(self.free) if not free)
        self.push_dist = [self._pull_distances(t) for t in self.targets]
        self.dead = [self.free[i] and all(pd[i] >= UNREACHABLE for pd in self.push_dist) for i in range(self.n)]
        self.floor_cells = [i for i in range(self.n) if self.free[i]]
        # Bitmasks for bit-parallel flood fills (see solver.solve).
        self.free_mask = mask_of(self.floor_cells)
        self.live_mask = mask_of(i for i in self.floor_cells if not self.dead[i])
        full = (1 << self.n) - 1
        self.not_first_col = full & ~mask_of(range(0, self.n, cols))
        self.not_last_col = full & ~mask_of(range(cols - 1, self.n, cols))

    def _pull_distances(self, target: int) -> list[int]:
        """Pushes needed to bring a box from each cell to ``target`` (BFS over reverse pushes)."""
        dist = [UNREACHABLE] * self.n
        dist[target] = 0
        queue = [target]
        step = self.step
        for y in queue:
            for d in range(4):
                # The box reached y by a push in direction d: it came from x = y - d and the
                # player stood at x - d.
                back = OPPOSITE[d]
                x = step[back][y]
                if x >= 0 and step[back][x] >= 0 and dist[x] == UNREACHABLE:
                    dist[x] = dist[y] + 1
                    queue.append(x)
        return dist


@lru_cache(maxsize=256)
def _cached_board(rows: int, cols: int, walls: tuple[bool, ...], targets: frozenset[int]) -> Board:
    return Board(rows, cols, walls, targets)


def board_for(level: Level) -> Board:
    """The (cached) :class:`Board` of a level's layout."""
    return _cached_board(level.rows, level.cols, level.walls, level.targets)


class MoveResult(NamedTuple):
    """What one move did."""

    boxes: int  # box bitmask after the move
    player: int  # player cell after the move
    moved: bool  # the player moved (the state changed)
    pushed_to: int  # the cell a box was pushed onto, or -1
    reward_tenths: int  # gym-sokoban's reward for this move, in tenths


def apply_move(board: Board, boxes: int, player: int, move: int) -> MoveResult:
    """Play one move (0 Up, 1 Down, 2 Left, 3 Right) under gym-sokoban's rules and rewards.

    The player walks onto a free cell, or pushes a box one cell if the cell behind it is free
    floor; otherwise nothing happens (the move still costs -0.1).
    """
    nxt = board.step[move][player]
    if nxt < 0:
        return MoveResult(boxes, player, False, -1, STEP_TENTHS)
    if not (boxes >> nxt) & 1:
        return MoveResult(boxes, nxt, True, -1, STEP_TENTHS)
    beyond = board.step[move][nxt]
    if beyond < 0 or (boxes >> beyond) & 1:
        return MoveResult(boxes, player, False, -1, STEP_TENTHS)
    new_boxes = boxes ^ (1 << nxt) ^ (1 << beyond)
    return MoveResult(new_boxes, nxt, True, beyond, push_reward_tenths(board.target_mask, new_boxes, nxt, beyond))


def _blocked(board: Board, boxes: int, box: int, axis: int, walls_extra: frozenset[int]) -> frozenset[int] | None:
    """Boxes whose freezing blocks ``box`` along ``axis`` (0 vertical, 1 horizontal), or None."""
    d1, d2 = (UP, DOWN) if axis == 0 else (LEFT, RIGHT)
    a, b = board.step[d1][box], board.step[d2][box]
    if a < 0 or b < 0 or a in walls_extra or b in walls_extra:
        return frozenset()
    if board.dead[a] and board.dead[b]:
        return frozenset()
    for nb in (a, b):
        if (boxes >> nb) & 1:
            proof = _freeze_proof(board, boxes, nb, walls_extra)
            if proof is not None:
                return proof
    return None


def _freeze_proof(board: Board, boxes: int, box: int, walls_extra: frozenset[int]) -> frozenset[int] | None:
    """The set of boxes (``box`` included) shown to be frozen for ever, or None."""
    walls_extra = walls_extra | {box}
    proof = {box}
    for axis in (0, 1):
        p = _blocked(board, boxes, box, axis, walls_extra)
        if p is None:
            return None
        proof |= p
    return frozenset(proof)


def is_deadlocked(board: Board, boxes: int, box: int | None = None) -> bool:
    """True when the state provably cannot be solved any more.

    Sound, not complete: it finds a box on a dead square, and a "freeze" deadlock (boxes
    that can never move again, one of them off target). With ``box`` given, only that box
    (the one just pushed) and the boxes it leans on are examined, which is enough after a
    push from a state that was not deadlocked.
    """
    tm = board.target_mask
    candidates = [box] if box is not None else cells_of(boxes & ~tm)
    for b in candidates:
        if board.dead[b]:
            return True
        proof = _freeze_proof(board, boxes, b, frozenset())
        if proof is not None and any(not (tm >> c) & 1 for c in proof):
            return True
    return False


def player_distances(board: Board, boxes: int, start: int) -> list[int]:
    """Walking distance from ``start`` to every cell without pushing (-1: unreachable)."""
    dist = [-1] * board.n
    dist[start] = 0
    queue = [start]
    adj = board.adj
    for c in queue:
        dc = dist[c] + 1
        for nb in adj[c]:
            if dist[nb] < 0 and not (boxes >> nb) & 1:
                dist[nb] = dc
                queue.append(nb)
    return dist


def walk_path(board: Board, boxes: int, start: int, goal: int) -> list[int] | None:
    """Moves of a shortest walk from ``start`` to ``goal`` without pushing, or None."""
    if start == goal:
        return []
    parent = {start: (-1, -1)}
    queue = [start]
    step = board.step
    for c in queue:
        for d in range(4):
            nb = step[d][c]
            if nb >= 0 and nb not in parent and not (boxes >> nb) & 1:
                parent[nb] = (c, d)
                if nb == goal:
                    moves = []
                    cur = goal
                    while cur != start:
                        cur, move = parent[cur]
                        moves.append(move)
                    moves.reverse()
                    return moves
                queue.append(nb)
    return None
