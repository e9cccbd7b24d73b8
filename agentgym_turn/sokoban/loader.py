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

from ..core.files import DataFileError, iter_text_lines
from .constants import BOXOBAN_SYMBOLS

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


class LevelFormatError(DataFileError):
    """A level that cannot be read or played; the message names the file and line when known."""


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
        origin: ``"path/to/file.txt:LINE"`` of the level's first row in its file (for error
            messages), empty when it was not read from a file.
    """

    rows: int
    cols: int
    walls: tuple[bool, ...]
    targets: frozenset[int]
    boxes: frozenset[int]
    player: int
    name: str = field(default="", compare=False)
    origin: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        n = self.rows * self.cols
        if self.rows < 3 or self.cols < 3 or len(self.walls) != n:
            raise LevelFormatError(
                f"a level needs at least 3x3 cells and {n} wall flags, got {self.rows}x{self.cols} / {len(self.walls)}."
            )
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
        return Level(self.rows, self.cols, self.walls, self.targets, self.boxes, self.player, name, self.origin)


#: Limits on what a level file can make the loader do (a level file is untrusted input).
MAX_LEVEL_FILE_BYTES = 64 << 20
MAX_ROW_CHARS = 256
MAX_LEVEL_CELLS = 65_536


def _where(source: str, line: int, name: str) -> str:
    """``FILE:LINE: level NAME`` (parts that are unknown are left out), for error messages."""
    place = f"{source}:{line}" if source and line else (source or (f"line {line}" if line else ""))
    label = f"level {name}" if name else "level"
    return f"{place}: {label}" if place else label


def _parse_rows(rows: list[tuple[int, str]], name: str, source: str) -> Level:
    """Read one level from ``(line number, row text)`` pairs; errors name ``source:line``."""
    if not rows:
        raise LevelFormatError(f"{_where(source, 0, name)}: no rows.")
    first_line = rows[0][0]
    height, width = len(rows), max(len(text) for _, text in rows)
    if height * width > MAX_LEVEL_CELLS:
        raise LevelFormatError(
            f"{_where(source, first_line, name)}: {height}x{width} cells, more than the limit of "
            f"{MAX_LEVEL_CELLS:,}; split the level or check the file's format."
        )
    walls: list[bool] = []
    missing: set[int] = set()  # cells past the end of a short row: neither wall nor floor
    targets, boxes, players = set(), set(), []
    for r, (line_no, text) in enumerate(rows):
        for c in range(width):
            i = r * width + c
            if c >= len(text):
                missing.add(i)
                walls.append(True)
                continue
            kind = _READ.get(text[c])
            if kind is None:
                raise LevelFormatError(
                    f"{_where(source, line_no, name)}: unknown symbol {text[c]!r} at column {c + 1}; "
                    "use # (wall), space (floor), . (target), $ (box), * (box on target), @ (player), + (player on target)."
                )
            walls.append(kind[0])
            if kind[1]:
                targets.add(i)
            if kind[2]:
                boxes.add(i)
            if kind[3]:
                players.append(i)
    if len(players) != 1:
        raise LevelFormatError(
            f"{_where(source, first_line, name)}: expected one player (@ or +), found {len(players)}."
        )
    player = players[0]
    # The player's room: floor connected to the player. Outside floor becomes wall; a room that
    # runs into the missing end of a short row is an error (padding it would open a wall).
    inside = {player}
    stack = [player]
    while stack:
        i = stack.pop()
        r, c = divmod(i, width)
        for rr, cc in ((r - 1, c), (r + 1, c), (r, c - 1), (r, c + 1)):
            if not (0 <= rr < height and 0 <= cc < width):
                continue
            j = rr * width + cc
            if j in missing:
                line_no, text = rows[rr]
                raise LevelFormatError(
                    f"{source + ':' if source else 'line '}{line_no}: row {rr + 1} of "
                    f"{'level ' + name if name else 'the level'} is {len(text)} characters long, shorter than the "
                    f"level's {width}, and the room reaches past its end at column {cc + 1}; "
                    "add the missing wall (#) or floor characters."
                )
            if not walls[j] and j not in inside:
                inside.add(j)
                stack.append(j)
    stray = (targets | boxes) - inside
    if stray:
        r, c = divmod(min(stray), width)
        raise LevelFormatError(
            f"{_where(source, rows[r][0], name)}: a box or target at column {c + 1} lies outside the player's room; "
            "the player can never reach it."
        )
    walls = [w or i not in inside for i, w in enumerate(walls)]
    try:
        return Level(
            height,
            width,
            tuple(walls),
            frozenset(targets),
            frozenset(boxes),
            player,
            name,
            f"{source}:{first_line}" if source else "",
        )
    except LevelFormatError as exc:
        raise LevelFormatError(f"{_where(source, first_line, name)}: {exc}") from None


def parse_level(text: str, name: str = "") -> Level:
    """Read one level from its rows (Boxoban/XSB symbols).

    Rows may differ in length (XSB files trim what lies outside the walls), but the player's
    room must be closed: a room that reaches past the end of a short row is an error (it is
    never padded with floor). Floor cells the player cannot reach even with every box removed
    lie outside the level and become walls, so the grid shows one room.
    """
    rows = [
        (k, ln.rstrip("\r"))
        for k, ln in enumerate(text.split("\n"), start=1)
        if ln.strip() and not ln.lstrip().startswith(";")
    ]
    return _parse_rows(rows, name, "")


def _parse_lines(lines: Iterable[tuple[int, str]], source: str, label_prefix: str) -> list[Level]:
    levels: list[Level] = []
    block: list[tuple[int, str]] = []
    label = ""

    def flush() -> None:
        nonlocal block
        if block:
            tag = label if label else str(len(levels))
            levels.append(_parse_rows(block, f"{label_prefix};{tag}" if label_prefix else tag, source))
        block = []

    for line_no, line in lines:
        line = line.rstrip("\r")
        stripped = line.strip()
        if stripped.startswith(";"):
            flush()
            label = stripped[1:].strip()
        elif not stripped:
            flush()
            label = ""
        else:
            block.append((line_no, line))
    flush()
    return levels


def parse_levels(text: str, source: str = "") -> list[Level]:
    """Read every level of a Boxoban-format text (``; index`` headers or blank-line separated).

    Levels are named ``"source;index"``; errors name ``source:line``.
    """
    return _parse_lines(enumerate(text.split("\n"), start=1), source, source)


def load_levels(path: str | os.PathLike | Iterable[str | os.PathLike]) -> list[Level]:
    """Load levels from a Boxoban ``.txt`` (or ``.txt.gz``) file, a directory of them (sorted by
    name), or a list of paths.

    Files are read through :mod:`agentgym_turn.core.files`: special files (FIFOs, devices,
    symlinks to them) are refused, and a file over 64 MiB or with a row over 256 characters
    fails; every error names the file (and line). Solvability is checked where the levels are
    played (``TurnSokobanEnv(levels=...)`` solves each one when it is made).
    """
    if isinstance(path, (str, os.PathLike)):
        p = Path(path)
        if p.is_dir():
            files = sorted(q for q in p.iterdir() if q.name.endswith((".txt", ".txt.gz")))
            if not files:
                raise DataFileError(
                    f"{p}: no .txt level files in this directory; give a level file or a directory of them."
                )
        else:
            files = [p]
    else:
        files = [Path(q) for q in path]
    levels: list[Level] = []
    for f in files:
        lines = iter_text_lines(
            f, max_bytes=MAX_LEVEL_FILE_BYTES, max_line_chars=MAX_ROW_CHARS, what="Sokoban level file"
        )
        levels.extend(_parse_lines(lines, str(f), f.name.removesuffix(".gz")))
    if not levels:
        raise LevelFormatError(
            f"{', '.join(str(f) for f in files)}: no levels found; see the Boxoban format in docs/envs/sokoban.md."
        )
    return levels


def builtin_levels_path() -> Path:
    """The directory of the hand-checked levels shipped with the package."""
    return Path(__file__).with_name("data")
