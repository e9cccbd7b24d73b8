"""Move-optimal Sokoban solver: A* over push states with dead-square and freeze pruning.

The search runs over states ``(boxes, player)`` reached right after a push. From a state, the
player walks (breadth-first, around the boxes) to any cell next to a box and pushes it; that
edge costs the walk plus one move. The heuristic is the least total number of pushes over
all assignments of boxes to distinct targets (each box's pushes measured on the empty board),
an admissible and consistent bound on the moves left, so the first solved state popped is
move-optimal. A known plan (the generator's) caps the search: a node that cannot beat it is
never queued, and an exhausted queue proves that plan optimal.

The search has a budget in expanded states. When it runs out, the result still carries a
proven lower bound on the optimal number of moves.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass
from typing import Sequence

from .board import UNREACHABLE, Board, apply_move, cells_of, is_deadlocked, walk_path
from .constants import OPPOSITE

#: Default budget of :func:`solve`, in expanded push states.
DEFAULT_SOLVER_BUDGET = 20_000
# Up to this many boxes the matching bound is a subset DP (exact and cheap); beyond, Hungarian.
_DP_MAX_BOXES = 4
# Boards with more floor cells skip the lone-box move bound (its table has floor^2 entries).
_LONE_BOX_MAX_FLOOR = 400


@dataclass(frozen=True)
class SolveResult:
    """What :func:`solve` found.

    Attributes:
        moves: A plan (move indices) that solves the state, or None when none was found.
        optimal: True when ``moves`` is proven to be a shortest plan (or, with ``moves``
            None, when no plan exists).
        unsolvable: True when the search proved that no plan exists.
        lower_bound: A proven lower bound on the length of a shortest plan (moves).
        expansions: Push states expanded.
    """

    moves: tuple[int, ...] | None
    optimal: bool
    unsolvable: bool
    lower_bound: int
    expansions: int

    @property
    def length(self) -> int | None:
        return None if self.moves is None else len(self.moves)


def replay(board: Board, boxes: int, player: int, moves: Sequence[int]) -> tuple[int, int]:
    """Play ``moves`` from ``(boxes, player)``; return the final ``(boxes, player)``."""
    for m in moves:
        boxes, player = apply_move(board, boxes, player, m)[:2]
    return boxes, player


def _matching_heuristic(board: Board):
    """``h(boxes)``: least pushes over one-to-one assignments of boxes to targets (cached)."""
    pd = board.push_dist
    k = len(pd)
    cache: dict[int, int] = {}

    if k == 1:
        row = pd[0]

        def h1(boxes: int) -> int:
            return row[boxes.bit_length() - 1]

        return h1

    if k <= _DP_MAX_BOXES:
        full = (1 << k) - 1

        def h(boxes: int) -> int:
            v = cache.get(boxes)
            if v is not None:
                return v
            # dp over subsets of targets: dp[mask] = least pushes sending the first
            # popcount(mask) boxes onto the targets in mask.
            dp = {0: 0}
            for b in cells_of(boxes):
                nxt: dict[int, int] = {}
                for mask, cost in dp.items():
                    for t in range(k):
                        if not (mask >> t) & 1:
                            c = cost + pd[t][b]
                            m2 = mask | (1 << t)
                            if c < nxt.get(m2, UNREACHABLE):
                                nxt[m2] = c
                dp = nxt
            v = min(dp.get(full, UNREACHABLE), UNREACHABLE)
            cache[boxes] = v
            return v

        return h

    def h_many(boxes: int) -> int:
        v = cache.get(boxes)
        if v is None:
            cells = cells_of(boxes)
            v = min(min_cost_matching([[pd[t][b] for t in range(k)] for b in cells]), UNREACHABLE)
            cache[boxes] = v
        return v

    return h_many


def min_cost_matching(cost: list[list[int]]) -> int:
    """Least total cost of a perfect matching of rows to columns of a square ``cost`` matrix.

    The Hungarian method with potentials, O(k^3) for k rows (a subset DP is O(2^k k^2), too
    slow beyond a few boxes).
    """
    n = len(cost)
    big = sum(max(row) for row in cost) + 1
    u = [0] * (n + 1)
    v = [0] * (n + 1)
    match = [0] * (n + 1)  # match[column] = row (1-based; 0 = free)
    for i in range(1, n + 1):
        match[0] = i
        j0 = 0
        minv = [big] * (n + 1)
        used = [False] * (n + 1)
        way = [0] * (n + 1)
        while True:
            used[j0] = True
            i0 = match[j0]
            row = cost[i0 - 1]
            ui0 = u[i0]
            delta, j1 = big, 0
            for j in range(1, n + 1):
                if not used[j]:
                    cur = row[j - 1] - ui0 - v[j]
                    if cur < minv[j]:
                        minv[j] = cur
                        way[j] = j0
                    if minv[j] < delta:
                        delta, j1 = minv[j], j
            for j in range(n + 1):
                if used[j]:
                    u[match[j]] += delta
                    v[j] -= delta
                else:
                    minv[j] -= delta
            j0 = j1
            if match[j0] == 0:
                break
        while j0:
            j1 = way[j0]
            match[j0] = match[j1]
            j0 = j1
    return sum(cost[match[j] - 1][j - 1] for j in range(1, n + 1))


def lone_box_moves(board: Board) -> list[int] | None:
    """``t[box * n + player]``: least moves that put a box on a target when it is the only box.

    With the other boxes removed every move of a real solution is still legal, so for any
    state, ``max`` of this over its boxes is an admissible, consistent bound on the moves left
    (it counts the walking that push distances leave out). Computed once per board by a
    backward breadth-first search over (box, player) pairs; None for boards of more than
    ``_LONE_BOX_MAX_FLOOR`` floor cells (the table is quadratic in them).
    """
    cached = getattr(board, "_lone_box_moves", False)
    if cached is not False:
        return cached
    table = None
    if len(board.floor_cells) <= _LONE_BOX_MAX_FLOOR:
        n, step = board.n, board.step
        table = [UNREACHABLE] * (n * n)
        queue = []
        for t in board.targets:
            for p in board.floor_cells:
                if p != t:
                    table[t * n + p] = 0
                    queue.append(t * n + p)
        for state in queue:
            b, p = divmod(state, n)
            nd = table[state] + 1
            for d in range(4):
                q = step[OPPOSITE[d]][p]  # the cell a move d came from
                if q < 0:
                    continue
                if q != b and table[b * n + q] == UNREACHABLE:  # a walk q -> p
                    table[b * n + q] = nd
                    queue.append(b * n + q)
                if step[d][p] == b and table[p * n + q] == UNREACHABLE:  # a push from q: box p -> b
                    table[p * n + q] = nd
                    queue.append(p * n + q)
    board._lone_box_moves = table
    return table


def push_lower_bound(board: Board, boxes: int) -> int:
    """Least pushes (hence moves) any solution needs; ``>= UNREACHABLE`` when impossible."""
    return _matching_heuristic(board)(boxes)


def solve(
    board: Board,
    boxes: int,
    player: int,
    *,
    max_expansions: int = DEFAULT_SOLVER_BUDGET,
    known_plan: Sequence[int] | None = None,
    weight: float = 1.0,
) -> SolveResult:
    """Find a shortest plan (in moves) from ``(boxes, player)`` to all boxes on targets.

    Args:
        board: The level's geometry.
        boxes, player: The state to solve from.
        max_expansions: Budget in expanded push states.
        known_plan: A plan known to solve the state (it is not re-checked); the search then
            only looks for shorter ones and returns this plan, proven optimal, if none exists.
        weight: ``f = g + weight * h``. Above 1 the search is faster and no longer optimal
            (``optimal`` is then False unless it matched a proven bound).
    """
    tm = board.target_mask
    if boxes == tm:
        return SolveResult((), True, False, 0, 0)
    h = _matching_heuristic(board)
    multi = bin(tm).count("1") > 1
    # With several boxes the bound is max(matching pushes, the worst lone box's moves). One
    # box keeps the push bound alone, which fixes the plans (and expert) of 1-box levels.
    lone = lone_box_moves(board) if multi else None
    n = board.n
    h0 = h(boxes)
    if lone is not None:
        h0 = max(h0, max(lone[b * n + player] for b in cells_of(boxes)))
    if h0 >= UNREACHABLE or is_deadlocked(board, boxes):
        return SolveResult(None, True, True, UNREACHABLE, 0)
    incumbent = tuple(known_plan) if known_plan is not None else None
    bound = len(incumbent) if incumbent is not None else UNREACHABLE
    if bound <= h0:  # the plan already meets the lower bound
        return SolveResult(incumbent, True, False, bound, 0)

    cols, nf, nl = board.cols, board.not_first_col, board.not_last_col
    free_mask = board.free_mask
    deltas = (-cols, cols, -1, 1)
    start = (boxes, player)
    best_g = {start: 0}
    parent: dict[tuple[int, int], tuple[tuple[int, int], int, int]] = {}
    # Heap entries: (f, -g, boxes, player, pushed_to). A child is queued with a lower bound on
    # its f from its parent's h (see child_h below) and pushed_to >= 0;
    # its own h and deadlock test run only if it is popped, which most children never are.
    heap = [(weight * h0, 0, boxes, player, -1)]
    expansions = 0
    proven_lb = h0
    goal = None
    exhausted = False
    while heap:
        f, neg_g, bx, pl, pushed_to = heapq.heappop(heap)
        g = -neg_g
        if g > best_g.get((bx, pl), UNREACHABLE):
            continue  # stale entry
        hv = hp = h(bx)
        hm = -UNREACHABLE
        if lone is not None:
            hm = max(lone[b * n + pl] for b in cells_of(bx))
            hv = max(hp, hm)
        if pushed_to >= 0:
            if hv >= UNREACHABLE or g + hv >= bound:
                continue
            if multi and is_deadlocked(board, bx, pushed_to):
                continue
            fe = g + weight * hv
            if fe > f:
                heapq.heappush(heap, (fe, neg_g, bx, pl, -1))
                continue
            f = fe
        if weight == 1.0 and f > proven_lb:
            proven_lb = int(f)  # consistent heuristic: popped f never decreases
        if bx == tm:
            goal = (bx, pl)
            break
        if expansions >= max_expansions:
            exhausted = True
            break
        expansions += 1
        # A push lowers the push bound by at most one; an edge of k walks and a push lowers the
        # lone-box bound by at most k + 1 (both are consistent).
        child_h = hp - 1
        child_key = weight * child_h
        # Bit-parallel search: push_from[d] holds the cells from which a push in direction d
        # is legal (a box next to the cell, a live free cell behind the box); a breadth-first
        # flood from the player meets them layer by layer, at walking distance k.
        open_ = free_mask & ~bx
        push_from = _push_sources(board, bx, open_)
        any_push = push_from[0] | push_from[1] | push_from[2] | push_from[3]
        frontier = seen = 1 << pl
        k = 0
        while frontier:
            if frontier & any_push:
                if hm - k - 1 > hp - 1:
                    child_h = hm - k - 1
                    child_key = weight * child_h
                else:
                    child_h = hp - 1
                    child_key = weight * child_h
                for d in range(4):
                    hits = frontier & push_from[d]
                    while hits:
                        low = hits & -hits
                        hits ^= low
                        frm = low.bit_length() - 1
                        ng = g + k + 1
                        if ng + child_h >= bound:
                            continue
                        b = frm + deltas[d]
                        to = b + deltas[d]
                        nbx = bx ^ (1 << b) ^ (1 << to)
                        key = (nbx, b)
                        if ng >= best_g.get(key, UNREACHABLE):
                            continue
                        best_g[key] = ng
                        parent[key] = ((bx, pl), frm, d)
                        heapq.heappush(heap, (ng + child_key, -ng, nbx, b, to))
            frontier = (
                ((frontier >> cols) | (frontier << cols) | ((frontier >> 1) & nl) | ((frontier << 1) & nf))
                & open_
                & ~seen
            )
            seen |= frontier
            k += 1

    if goal is None:
        return _result_without_goal(incumbent, bound, proven_lb, expansions, exhausted)
    moves = _plan_from_parents(board, parent, start, goal)
    optimal = weight == 1.0
    return SolveResult(tuple(moves), optimal, False, len(moves) if optimal else proven_lb, expansions)


def _push_sources(board: Board, boxes: int, open_: int) -> tuple[int, int, int, int]:
    """Per direction (Up, Down, Left, Right), the bit mask of cells from which a push is legal:
    a box next to the cell that way, and a live free cell behind the box (``open_``: free cells
    without a box)."""
    cols, nf, nl = board.cols, board.not_first_col, board.not_last_col
    dest = board.live_mask & ~boxes
    return (
        open_ & (boxes << cols) & (dest << (2 * cols)),
        open_ & (boxes >> cols) & (dest >> (2 * cols)),
        open_ & (boxes << 1) & nf & (((dest << 1) & nf) << 1) & nf,
        open_ & (boxes >> 1) & nl & (((dest >> 1) & nl) >> 1) & nl,
    )


def _result_without_goal(
    incumbent: tuple[int, ...] | None, bound: int, proven_lb: int, expansions: int, exhausted: bool
) -> SolveResult:
    """The result of a search that reached no goal: out of budget, or with its queue empty."""
    if exhausted:
        lb = min(proven_lb, bound)
        return SolveResult(incumbent, incumbent is not None and lb >= bound, False, lb, expansions)
    # Queue empty: every state that could beat the incumbent was expanded (pruning used
    # only admissible bounds), so the incumbent is optimal, or no solution exists.
    if incumbent is not None:
        return SolveResult(incumbent, True, False, bound, expansions)
    return SolveResult(None, True, True, UNREACHABLE, expansions)


def _plan_from_parents(board: Board, parent: dict, start: tuple[int, int], goal: tuple[int, int]) -> list[int]:
    """The moves from ``start`` to ``goal``: the pushes the search recorded (``parent``), with the
    walks between them re-derived as breadth-first paths."""
    pushes = []
    key = goal
    while key != start:
        prev, frm, d = parent[key]
        pushes.append((prev, frm, d))
        key = prev
    pushes.reverse()
    moves: list[int] = []
    for (pbx, ppl), frm, d in pushes:
        walk = walk_path(board, pbx, ppl, frm)
        assert walk is not None
        moves.extend(walk)
        moves.append(d)
    return moves
