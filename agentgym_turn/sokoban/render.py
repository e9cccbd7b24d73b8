"""Drawing a Sokoban state: text rows of symbols, and a small RGB image."""

from __future__ import annotations

from functools import lru_cache
from typing import Mapping

import numpy as np

from .board import Board, cells_of
from .constants import BOX, BOX_ON_TARGET, CELL_KINDS, FLOOR, PLAYER, PLAYER_ON_TARGET, TARGET, WALL

#: Side of one cell in :func:`rgb_array` images, in pixels.
TILE = 16


def cell_codes(board: Board, boxes: int, player: int) -> list[int]:
    """One code per cell (``constants.WALL .. PLAYER_ON_TARGET``), row-major."""
    codes = list(_static_codes(board))
    tm = board.target_mask
    for b in cells_of(boxes):
        codes[b] = BOX_ON_TARGET if (tm >> b) & 1 else BOX
    codes[player] = PLAYER_ON_TARGET if (tm >> player) & 1 else PLAYER
    return codes


def _static_codes(board: Board) -> tuple[int, ...]:
    cached = getattr(board, "_static_codes", None)
    if cached is None:
        tm = board.target_mask
        cached = tuple(WALL if not board.free[i] else (TARGET if (tm >> i) & 1 else FLOOR) for i in range(board.n))
        board._static_codes = cached
    return cached


def grid_rows(
    board: Board, boxes: int, player: int, symbols: Mapping[str, str], sep: str = "", crop_border: bool = False
) -> list[str]:
    """The grid as text rows, one symbol per cell, cells joined by ``sep``.

    ``crop_border``: leave out the outermost ring of cells when every one of them is a wall
    (then it says nothing; an open edge is always shown).
    """
    table = [symbols[k] for k in CELL_KINDS]
    chars = [table[c] for c in cell_codes(board, boxes, player)]
    cols = board.cols
    r0, r1, c0, c1 = _shown(board, crop_border)
    return [sep.join(chars[r * cols + c0 : r * cols + c1]) for r in range(r0, r1)]


def _shown(board: Board, crop_border: bool) -> tuple[int, int, int, int]:
    """The rows ``r0:r1`` and columns ``c0:c1`` drawn: all, or all but a ring of walls with ``crop_border``."""
    rows, cols = board.rows, board.cols
    if crop_border and rows >= 3 and cols >= 3 and _border_is_wall(board):
        return 1, rows - 1, 1, cols - 1
    return 0, rows, 0, cols


#: Most positions a :class:`GridStyle` remembers the text of. An env keeps one style per board (a new level makes a
#: new one), so it holds the positions of that level's episodes: tens, and this bound only on long user levels.
GRID_MEMO = 1024


class GridStyle:
    """One board drawn with one symbol table, separator and crop (as :func:`grid_rows`): the walls, floor and
    targets are drawn once, as rows of symbols; :meth:`text` redraws only the rows that hold a box or the player."""

    def __init__(self, board: Board, symbols: Mapping[str, str], sep: str = "", crop_border: bool = False):
        self.board, self.sep = board, sep
        self.table = tuple(symbols[k] for k in CELL_KINDS)
        cols = board.cols
        r0, r1, c0, c1 = _shown(board, crop_border)
        self.r0, self.c0 = r0, c0
        chars = [self.table[c] for c in _static_codes(board)]
        #: per shown row, its symbols; a cropped ring holds only walls, so no box or player is ever there
        self.row_chars = [chars[r * cols + c0 : r * cols + c1] for r in range(r0, r1)]
        self.rows = [sep.join(row) for row in self.row_chars]
        self._memo: dict[tuple[int, int], str] = {}

    def text(self, boxes: int, player: int) -> str:
        """The grid with ``boxes`` (a bitmask) and ``player`` on it, rows joined by newlines (remembered for the
        last :data:`GRID_MEMO` positions drawn: an episode revisits few)."""
        key = (boxes, player)
        text = self._memo.get(key)
        if text is None:
            if len(self._memo) >= GRID_MEMO:
                self._memo.clear()
            text = self._memo[key] = self._draw(boxes, player)
        return text

    def _draw(self, boxes: int, player: int) -> str:
        table, tm, cols, r0, c0 = self.table, self.board.target_mask, self.board.cols, self.r0, self.c0
        edited: dict[int, list[str]] = {}
        for cell, code in [(b, BOX_ON_TARGET if (tm >> b) & 1 else BOX) for b in cells_of(boxes)] + [
            (player, PLAYER_ON_TARGET if (tm >> player) & 1 else PLAYER)
        ]:
            r, c = divmod(cell, cols)
            row = edited.get(r - r0)
            if row is None:
                row = edited[r - r0] = self.row_chars[r - r0][:]
            row[c - c0] = table[code]
        rows = self.rows[:]
        for r, row in edited.items():
            rows[r] = self.sep.join(row)
        return "\n".join(rows)


def _border_is_wall(board: Board) -> bool:
    rows, cols = board.rows, board.cols
    ring = [c for c in range(cols)] + [(rows - 1) * cols + c for c in range(cols)]
    ring += [r * cols for r in range(rows)] + [r * cols + cols - 1 for r in range(rows)]
    return not any(board.free[i] for i in ring)


@lru_cache(maxsize=1)
def _tiles() -> np.ndarray:
    """``(7, TILE, TILE, 3)`` uint8 sprites, one per cell code, drawn with numpy."""
    t = TILE
    yy, xx = np.mgrid[0:t, 0:t]
    centre = (t - 1) / 2
    radius = np.hypot(yy - centre, xx - centre)
    floor = np.empty((t, t, 3), np.uint8)
    floor[:] = (236, 228, 206)
    wall = np.empty((t, t, 3), np.uint8)
    wall[:] = (122, 74, 52)
    mortar = (yy % 8 == 7) | ((xx + 4 * ((yy // 8) % 2)) % 8 == 7)
    wall[mortar] = (176, 160, 140)
    target = floor.copy()
    target[(radius >= t * 0.22) & (radius <= t * 0.36)] = (214, 48, 49)
    box_mask = (yy >= 2) & (yy <= t - 3) & (xx >= 2) & (xx <= t - 3)
    box_edge = box_mask & (
        (yy <= 3)
        | (yy >= t - 4)
        | (xx <= 3)
        | (xx >= t - 4)
        | (np.abs(yy - xx) <= 0)
        | (np.abs(yy + xx - (t - 1)) <= 0)
    )
    box = floor.copy()
    box[box_mask] = (214, 153, 68)
    box[box_edge] = (133, 87, 35)
    box_on = target.copy()
    box_on[box_mask] = (120, 190, 90)
    box_on[box_edge] = (50, 120, 45)
    body = radius <= t * 0.34
    player = floor.copy()
    player[body] = (45, 95, 200)
    player_on = target.copy()
    player_on[body] = (45, 95, 200)
    sprites = {
        WALL: wall,
        FLOOR: floor,
        TARGET: target,
        BOX: box,
        BOX_ON_TARGET: box_on,
        PLAYER: player,
        PLAYER_ON_TARGET: player_on,
    }
    out = np.stack([sprites[k] for k in range(7)])
    out.setflags(write=False)
    return out


def rgb_array(board: Board, boxes: int, player: int) -> np.ndarray:
    """The state as an image of shape ``(rows * TILE, cols * TILE, 3)``, dtype uint8."""
    codes = np.asarray(cell_codes(board, boxes, player), dtype=np.intp)
    tiles = _tiles()[codes].reshape(board.rows, board.cols, TILE, TILE, 3)
    return np.ascontiguousarray(tiles.transpose(0, 2, 1, 3, 4).reshape(board.rows * TILE, board.cols * TILE, 3))
