"""Sokoban levels: the :class:`Level` record and the Boxoban / XSB text format.

A Boxoban file holds levels like this (``; index`` header, then the rows)::

    ; 0
    ##########
    #   #    #
    #  $  .  #
    #  @     #
    ##########

Symbols: ``#`` wall, space floor, ``.`` target, ``$`` box, ``*`` box on target, ``@`` player,
``+`` player on target. The parser also reads ``-`` and ``_`` as floor and RAGEN's symbols
(``O X √ P S``). Cells are numbered row-major: ``cell = row * cols + col``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Mapping

from .constants import BOXOBAN_SYMBOLS

__all__ = ["Level", "LevelFormatError", "parse_level", "parse_levels", "load_levels", "builtin_levels_path"]

# character -> (wall, target, box, player)
_READ: dict[str, tuple[bool, bool, bool, bool]] = {}
for _chars, _kind in (
    ("#", (True, False, False, False)),
    (" -_", (False, False, False, False)),
    (".O", (False, True, False, False)),
    ("$X", (False, False, True, False)),
    ("*√", (False, True, True, False)),
    ("@P", (False, False, False, True)),
    ("+S", (False, True, False, True)),
):
    for _c in _chars:
        _READ[_c] = _kind


class LevelFormatError(ValueError):
    """A level text that cannot be read, with the reason."""


@dataclass(frozen=True)
class Level:
    """One Sokoban level: fixed geometry plus the starting positions.

    Attributes:
        rows, cols: Grid size in cells.
        walls: ``rows * cols`` booleans, row-major; cells outside the grid count as walls.
        targets: Cell indices of the targets.
        boxes: Cell indices of the boxes at the start.
        player: Cell index of the player at the start.
        name: Where the level came from (``"file.txt;17"``), empty for generated levels.
    """

    rows: int
    cols: int
    walls: tuple[bool, ...]
    targets: frozenset[int]
    boxes: frozenset[int]
    player: int
    name: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        n = self.rows * self.cols
        if self.rows < 3 or self.cols < 3 or len(self.walls) != n:
            raise LevelFormatError(f"a level needs at least 3x3 cells and {n} wall flags, got {self.rows}x{self.cols} / {len(self.walls)}.")
        cells = {self.player, *self.targets, *self.boxes}
        if any(not 0 <= c < n or self.walls[c] for c in cells):
            raise LevelFormatError("the player, boxes and targets must lie on floor cells inside the grid.")
        if self.player in self.boxes:
            raise LevelFormatError("the player stands on a box.")
        if not self.boxes or len(self.boxes) != len(self.targets):
            raise LevelFormatError(
                f"a level needs as many boxes as targets, at least one: got {len(self.boxes)} boxes and {len(self.targets)} targets."
            )

    @property
    def num_boxes(self) -> int:
        return len(self.boxes)

    def rc(self, cell: int) -> tuple[int, int]:
        """``(row, col)`` of a cell index."""
        return divmod(cell, self.cols)

    def to_text(self, symbols: Mapping[str, str] = BOXOBAN_SYMBOLS) -> str:
        """The level as rows of symbols (Boxoban's by default), joined by newlines."""
        out = []
        for r in range(self.rows):
            row = []
            for c in range(self.cols):
                i = r * self.cols + c
                if self.walls[i]:
                    kind = "wall"
                elif i in self.boxes:
                    kind = "box_on_target" if i in self.targets else "box"
                elif i == self.player:
                    kind = "player_on_target" if i in self.targets else "player"
                else:
                    kind = "target" if i in self.targets else "floor"
                row.append(symbols[kind])
            out.append("".join(row))
        return "\n".join(out)

    def with_name(self, name: str) -> "Level":
        return Level(self.rows, self.cols, self.walls, self.targets, self.boxes, self.player, name)


def parse_level(text: str, name: str = "") -> Level:
    """Read one level from its rows (Boxoban/XSB symbols; ragged rows are padded with floor).

    Floor cells the player cannot reach even with every box removed lie outside the level
    and become walls, so the grid shows one room.
    """
    lines = [ln.rstrip("\r\n") for ln in text.split("\n")]
    lines = [ln for ln in lines if ln.strip() and not ln.lstrip().startswith(";")]
    if not lines:
        raise LevelFormatError(f"{name or 'level'}: no rows.")
    rows, cols = len(lines), max(len(ln) for ln in lines)
    walls: list[bool] = []
    targets, boxes, players = set(), set(), []
    for r, line in enumerate(lines):
        for c, ch in enumerate(line.ljust(cols)):
            kind = _READ.get(ch)
            if kind is None:
                raise LevelFormatError(f"{name or 'level'}: unknown symbol {ch!r} at row {r}, column {c}.")
            i = r * cols + c
            walls.append(kind[0])
            if kind[1]:
                targets.add(i)
            if kind[2]:
                boxes.add(i)
            if kind[3]:
                players.append(i)
    if len(players) != 1:
        raise LevelFormatError(f"{name or 'level'}: expected one player, found {len(players)}.")
    player = players[0]
    # Outside cells: floor not connected to the player through non-wall cells.
    inside = {player}
    stack = [player]
    while stack:
        i = stack.pop()
        r, c = divmod(i, cols)
        for rr, cc in ((r - 1, c), (r + 1, c), (r, c - 1), (r, c + 1)):
            j = rr * cols + cc
            if 0 <= rr < rows and 0 <= cc < cols and not walls[j] and j not in inside:
                inside.add(j)
                stack.append(j)
    stray = (targets | boxes) - inside
    if stray:
        raise LevelFormatError(f"{name or 'level'}: boxes or targets outside the player's room at cells {sorted(stray)}.")
    walls = [w or i not in inside for i, w in enumerate(walls)]
    try:
        return Level(rows, cols, tuple(walls), frozenset(targets), frozenset(boxes), player, name)
    except LevelFormatError as exc:
        raise LevelFormatError(f"{name or 'level'}: {exc}") from None


def parse_levels(text: str, source: str = "") -> list[Level]:
    """Read every level of a Boxoban-format text (``; index`` headers or blank-line separated)."""
    levels: list[Level] = []
    block: list[str] = []
    label = ""

    def flush() -> None:
        nonlocal block
        if any(ln.strip() for ln in block):
            tag = label if label else str(len(levels))
            levels.append(parse_level("\n".join(block), f"{source};{tag}" if source else tag))
        block = []

    for line in text.split("\n"):
        line = line.rstrip("\r")
        stripped = line.strip()
        if stripped.startswith(";"):
            flush()
            label = stripped[1:].strip()
        elif not stripped:
            flush()
            label = ""
        else:
            block.append(line)
    flush()
    return levels


def load_levels(path: str | os.PathLike | Iterable[str | os.PathLike]) -> list[Level]:
    """Load levels from a Boxoban ``.txt`` file, a directory of them (sorted by name), or a list of paths."""
    if isinstance(path, (str, os.PathLike)):
        p = Path(path)
        if p.is_dir():
            files = sorted(q for q in p.iterdir() if q.suffix == ".txt")
            if not files:
                raise FileNotFoundError(f"no .txt level files in {p}")
        elif p.is_file():
            files = [p]
        else:
            raise FileNotFoundError(f"no level file or directory at {p}")
    else:
        files = [Path(q) for q in path]
    levels: list[Level] = []
    for f in files:
        levels.extend(parse_levels(f.read_text(encoding="utf-8"), f.name))
    if not levels:
        raise LevelFormatError(f"no levels found in {', '.join(str(f) for f in files)}")
    return levels


def builtin_levels_path() -> Path:
    """The directory of the hand-checked levels shipped with the package."""
    return Path(__file__).with_name("data")
