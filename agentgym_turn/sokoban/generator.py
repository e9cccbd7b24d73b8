"""Level generator: gym-sokoban's method, seeded, bounded, and certified.

The method is gym-sokoban's (``room_utils.generate_room``): a random walk stamps 3x3 masks
to carve the room; targets and the player are placed on random floor cells; then the game
is played *backwards* from the solved state (boxes on the targets): the player walks and
pulls boxes, and the state with the best score ``pulls x box displacement`` (0 while any
target is covered) becomes the start. Differences, each for a reason:

* Randomness comes only from the ``numpy.random.Generator`` passed in, so a seed fixes the
  level in every process (gym-sokoban draws from the global ``random`` / ``numpy.random``).
* Reverse play is a few random pull walks instead of an exhaustive depth-first search over
  up to 300,000 states; this is what makes generation fast.
* The retry loop is bounded (``max_attempts``) and deterministic; failing raises
  :class:`GenerationError` instead of retrying for ever.
* Every level comes with a plan, replayed to the solved state before the level is returned
  (solvable by construction, and checked), and the :mod:`solver` then proves the shortest
  plan within a budget, which drives the difficulty filter ``min_moves <= optimal <= max_moves``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from ..core.args import is_int
from .board import Board, cells_of, player_distances, walk_path
from .constants import OPPOSITE
from .loader import Level
from .solver import DEFAULT_SOLVER_BUDGET, replay, solve

# The five 3x3 stamps of gym-sokoban's random walk.
_MASKS = np.array(
    [
        [[0, 0, 0], [1, 1, 1], [0, 0, 0]],
        [[0, 1, 0], [0, 1, 0], [0, 1, 0]],
        [[0, 0, 0], [1, 1, 0], [0, 1, 0]],
        [[0, 0, 0], [1, 1, 0], [1, 1, 0]],
        [[0, 0, 0], [0, 1, 1], [0, 1, 0]],
    ],
    dtype=bool,
)
_WALK_DIRECTIONS = ((1, 0), (0, 1), (-1, 0), (0, -1))


def dim_arg(dim: Any) -> tuple[int, int]:
    """``dim`` as ``(rows, cols)``: one int for a square, or two ints; at least 3x3."""
    fix = "give dim=(rows, cols) with two integers, e.g. dim=(6, 6), or one integer for a square, e.g. dim=6"
    if is_int(dim, numpy=True):
        pair: Any = (dim, dim)
    elif isinstance(dim, Sequence) and not isinstance(dim, str) and len(dim) == 2:
        pair = tuple(dim)
    else:
        raise ValueError(f"dim={dim!r} is not a grid size; {fix}.")
    if not all(is_int(v, numpy=True) for v in pair):
        raise ValueError(f"dim={dim!r} is not a grid size; {fix}.")
    rows, cols = int(pair[0]), int(pair[1])
    if min(rows, cols) < 3:
        raise ValueError(f"dim={dim!r}: a grid needs at least 3x3 cells (the outer walls included).")
    return rows, cols


class GenerationError(RuntimeError):
    """No level met the constraints within the attempt budget."""


@dataclass(frozen=True)
class GeneratedLevel:
    """A generated level with its certificate.

    Attributes:
        level: The level.
        solution: A plan (move indices) that solves the level from its start; a shortest
            one when ``certified``, else the shortest the solver found (the reverse play's plan
            or a weighted search's), which may be longer than optimal.
        certified: True when the solver proved ``solution`` move-optimal within its budget.
        lower_bound: Proven lower bound on the optimal number of moves (``== len(solution)``
            when certified).
        attempts: Attempts used (1 = the first room was accepted).
        expansions: Push states the solver expanded for the accepted level (its work).
    """

    level: Level
    solution: tuple[int, ...]
    certified: bool
    lower_bound: int
    attempts: int
    expansions: int = 0

    @property
    def optimal_moves(self) -> int:
        """Length of the best known plan: the optimum when ``certified``, else an upper bound."""
        return len(self.solution)


def default_gen_steps(rows: int, cols: int) -> int:
    """gym-sokoban's number of random-walk steps for a room: ``int(1.7 * (rows + cols))``."""
    return int(1.7 * (rows + cols))


def room_topology(
    rng: np.random.Generator, rows: int, cols: int, num_steps: int, p_change_directions: float = 0.35
) -> np.ndarray:
    """Carve a room by a random walk stamping 3x3 masks; returns a ``(rows, cols)`` floor mask."""
    floor = np.zeros((rows, cols), dtype=bool)
    changes = rng.random(num_steps)
    new_dirs = rng.integers(0, 4, size=num_steps + 1)
    stamps = rng.integers(0, len(_MASKS), size=num_steps)
    r, c = int(rng.integers(1, rows)), int(rng.integers(1, cols))
    dr, dc = _WALK_DIRECTIONS[new_dirs[num_steps]]
    for s in range(num_steps):
        if changes[s] < p_change_directions:
            dr, dc = _WALK_DIRECTIONS[new_dirs[s]]
        r = max(min(r + dr, rows - 2), 1)
        c = max(min(c + dc, cols - 2), 1)
        floor[r - 1 : r + 2, c - 1 : c + 2] |= _MASKS[stamps[s]]
    floor[:, [0, cols - 1]] = False
    floor[[0, rows - 1], :] = False
    return floor


@dataclass
class _Candidate:
    score: int
    pulls: list[tuple[int, int, int]]  # (box cell before the pull, player cell before, direction)
    boxes: int
    player: int
    length: int  # plan length from (boxes, player): pushes plus the walks between them


def _reverse_walk(
    board: Board, rng: np.random.Generator, player: int, num_pulls: int, max_moves: int, best: _Candidate | None
) -> _Candidate | None:
    """One random walk of pulls from the solved state; keep the best-scoring prefix."""
    targets = board.targets
    tmask = board.target_mask
    cols = board.cols
    step = board.step
    boxes = tmask
    origin = list(targets)  # box id -> target it started on
    where = list(targets)  # box id -> current cell
    box_id = {c: i for i, c in enumerate(targets)}
    pulls: list[tuple[int, int, int]] = []
    length = 0
    draws = rng.random(num_pulls)
    for k in range(num_pulls):
        dist = player_distances(board, boxes, player)
        options = []
        for b in where:
            for d in range(4):
                c = step[d][b]  # the player stands here, then steps on to q
                if c < 0 or dist[c] < 0:
                    continue
                q = step[d][c]
                if q < 0 or (boxes >> q) & 1:
                    continue
                options.append((b, c, q, d))
        if not options:
            break
        b, c, q, d = options[int(draws[k] * len(options))]
        length += 1 if k == 0 else dist[c] + 1
        i = box_id.pop(b)
        box_id[c] = i
        where[i] = c
        boxes ^= (1 << b) | (1 << c)
        pulls.append((b, c, d))
        player = q
        if length > max_moves or boxes & tmask or (tmask >> player) & 1:
            continue
        displacement = 0
        for j, cell in enumerate(where):
            (r0, c0), (r1, c1) = divmod(origin[j], cols), divmod(cell, cols)
            displacement += abs(r0 - r1) + abs(c0 - c1)
        score = len(pulls) * displacement
        if best is None or score > best.score:
            best = _Candidate(score, list(pulls), boxes, player, length)
    return best


def _forward_plan(board: Board, cand: _Candidate, start_player: int) -> list[int]:
    """The pulls, undone in reverse order as pushes, with shortest walks between them."""
    boxes, player = cand.boxes, start_player
    moves: list[int] = []
    for b, c, d in reversed(cand.pulls):
        push_from = board.step[d][c]  # where the player stood after the pull
        walk = walk_path(board, boxes, player, push_from)
        if walk is None:
            raise AssertionError("reverse play produced an unreachable push")
        moves.extend(walk)
        moves.append(OPPOSITE[d])
        boxes ^= (1 << c) | (1 << b)
        player = c
    return moves


def generate_level(
    rng: np.random.Generator,
    dim: tuple[int, int] = (6, 6),
    num_boxes: int = 1,
    *,
    min_moves: int = 1,
    max_moves: int | None = None,
    num_gen_steps: int | None = None,
    p_change_directions: float = 0.35,
    walks: int = 4,
    pulls_per_walk: int | None = None,
    solver_budget: int = DEFAULT_SOLVER_BUDGET,
    max_attempts: int = 500,
) -> GeneratedLevel:
    """Generate a level whose shortest solution has ``min_moves..max_moves`` moves.

    Args:
        rng: The only source of randomness; the same generator state gives the same level.
        dim: ``(rows, cols)`` of the grid, outer walls included.
        num_boxes: Boxes (and targets).
        min_moves, max_moves: Accepted range of the optimal number of moves (``max_moves``
            None: no upper limit). When the solver's budget runs out, the level is accepted
            only if its proven lower bound is ``>= min_moves`` and its known plan ``<= max_moves``.
        num_gen_steps: Random-walk steps carving the room (gym-sokoban's ``1.7 * (rows + cols)``).
        p_change_directions: Probability that the carving walk turns at a step.
        walks, pulls_per_walk: Reverse-play effort per room: this many random walks of this
            many pulls (default ``3 * (rows + cols)``).
        solver_budget: Push states the solver may expand to certify optimality.
        max_attempts: Rooms tried before giving up with :class:`GenerationError`.
    """
    rows, cols = int(dim[0]), int(dim[1])
    if rows < 3 or cols < 3:
        raise ValueError(f"dim must be at least (3, 3), got {dim!r}.")
    if num_boxes < 1:
        raise ValueError(f"num_boxes must be >= 1, got {num_boxes}.")
    cap = max_moves if max_moves is not None else 1 << 30
    if min_moves > cap:
        raise ValueError(f"min_moves={min_moves} exceeds max_moves={max_moves}.")
    steps = default_gen_steps(rows, cols) if num_gen_steps is None else int(num_gen_steps)
    pulls = 3 * (rows + cols) if pulls_per_walk is None else int(pulls_per_walk)
    for attempt in range(1, max_attempts + 1):
        floor = room_topology(rng, rows, cols, steps, p_change_directions)
        floor_cells = np.flatnonzero(floor)
        if len(floor_cells) <= num_boxes + 1:
            continue
        picks = rng.choice(len(floor_cells), size=num_boxes + 1, replace=False)
        player0 = int(floor_cells[picks[0]])
        targets = frozenset(int(floor_cells[i]) for i in picks[1:])
        walls = tuple(bool(w) for w in ~floor.ravel())
        board = Board(rows, cols, walls, targets)
        best = None
        for _ in range(walks):
            best = _reverse_walk(board, rng, player0, pulls, cap, best)
        if best is None:
            continue
        # Start the player anywhere in its room within the move budget (not on a target).
        dist = player_distances(board, best.boxes, best.player)
        room = [
            c
            for c in board.floor_cells
            if dist[c] >= 0 and best.length + dist[c] <= cap and not (board.target_mask >> c) & 1
        ]
        start = room[int(rng.integers(len(room)))]
        plan = _forward_plan(board, best, start)
        assert len(plan) == best.length + dist[start]
        if replay(board, best.boxes, start, plan)[0] != board.target_mask:
            raise AssertionError("the generator's plan does not solve its level")
        result = solve(board, best.boxes, start, max_expansions=solver_budget, known_plan=plan)
        solution = result.moves if result.moves is not None else tuple(plan)
        expansions = result.expansions
        if not result.optimal and solver_budget > 0:
            # No proof within the budget: a weighted search usually finds a far shorter plan
            # than the reverse play's (its length is then reported, never called optimal).
            fast = solve(board, best.boxes, start, max_expansions=solver_budget, weight=3.0)
            expansions += fast.expansions
            if fast.moves is not None and len(fast.moves) < len(solution):
                solution = fast.moves
        if result.optimal:
            if not min_moves <= len(solution) <= cap:
                continue
        elif result.lower_bound < min_moves or len(solution) > cap:
            continue
        level = Level(rows, cols, walls, targets, frozenset(cells_of(best.boxes)), start)
        return GeneratedLevel(
            level,
            tuple(solution),
            bool(result.optimal),
            int(min(result.lower_bound, len(solution))),
            attempt,
            expansions,
        )
    raise GenerationError(
        f"no {rows}x{cols} level with {num_boxes} box(es) and an optimal solution of "
        f"{min_moves}..{max_moves} moves in {max_attempts} attempts; widen the range or raise max_attempts."
    )
