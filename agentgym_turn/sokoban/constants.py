"""Sokoban constants: moves and symbol vocabularies (the rewards are in :mod:`.reward`)."""

from __future__ import annotations

from types import MappingProxyType
from typing import Mapping

#: Move names in index order; a move is an ``int`` index into this tuple.
MOVE_NAMES: tuple[str, ...] = ("Up", "Down", "Left", "Right")
UP, DOWN, LEFT, RIGHT = range(4)
#: (row, column) change of each move.
MOVE_DELTAS: tuple[tuple[int, int], ...] = ((-1, 0), (1, 0), (0, -1), (0, 1))
#: The opposite of each move.
OPPOSITE: tuple[int, ...] = (DOWN, UP, RIGHT, LEFT)
#: Lower-case move name -> move index (the parser is case-insensitive).
MOVE_BY_NAME: Mapping[str, int] = MappingProxyType({name.lower(): i for i, name in enumerate(MOVE_NAMES)})

#: The seven cell kinds, in the order every symbol vocabulary lists them.
CELL_KINDS: tuple[str, ...] = (
    "wall",
    "floor",
    "target",
    "box",
    "box_on_target",
    "player",
    "player_on_target",
)
WALL, FLOOR, TARGET, BOX, BOX_ON_TARGET, PLAYER, PLAYER_ON_TARGET = range(7)

#: RAGEN's text symbols (the default): ``# _ O X √ P S``.
RAGEN_SYMBOLS: Mapping[str, str] = MappingProxyType(dict(zip(CELL_KINDS, "#_OX√PS")))
#: The Boxoban / XSB file symbols: ``# (space) . $ * @ +``.
BOXOBAN_SYMBOLS: Mapping[str, str] = MappingProxyType(dict(zip(CELL_KINDS, "# .$*@+")))
#: Named vocabularies accepted by ``symbols=``.
SYMBOL_SETS: Mapping[str, Mapping[str, str]] = MappingProxyType({"ragen": RAGEN_SYMBOLS, "boxoban": BOXOBAN_SYMBOLS})

#: Words of the legend, per cell kind, for prompts.
CELL_WORDS: Mapping[str, str] = MappingProxyType(
    {
        "wall": "wall",
        "floor": "floor",
        "target": "target",
        "box": "box",
        "box_on_target": "box on target",
        "player": "player (you)",
        "player_on_target": "player on target",
    }
)


def resolve_symbols(symbols: str | Mapping[str, str] | None) -> dict[str, str]:
    """Return a complete ``{cell kind: symbol}`` dict from a name, a mapping or a 7-char string.

    Accepted: ``"ragen"``, ``"boxoban"``, a 7-character string listing the symbols in
    :data:`CELL_KINDS` order (``"#_OX√PS"``), or a mapping from some cell kinds to symbols
    (the rest stay RAGEN's). Symbols must be single printable characters, all distinct.
    """
    if symbols is None:
        table = dict(RAGEN_SYMBOLS)
    elif isinstance(symbols, str) and symbols.lower() in SYMBOL_SETS:
        table = dict(SYMBOL_SETS[symbols.lower()])
    elif isinstance(symbols, str):
        if len(symbols) != len(CELL_KINDS):
            raise ValueError(
                f"symbols={symbols!r}: give a name ({', '.join(SYMBOL_SETS)}), a mapping, or "
                f"{len(CELL_KINDS)} characters in the order {', '.join(CELL_KINDS)}."
            )
        table = dict(zip(CELL_KINDS, symbols))
    elif isinstance(symbols, Mapping):
        unknown = set(symbols) - set(CELL_KINDS)
        if unknown:
            raise ValueError(f"symbols has unknown cell kinds {sorted(unknown)}; known: {', '.join(CELL_KINDS)}.")
        table = dict(RAGEN_SYMBOLS)
        table.update(symbols)
    else:
        raise TypeError(f"symbols must be a name, a string or a mapping, got {type(symbols).__name__}.")
    for kind, sym in table.items():
        if not isinstance(sym, str) or len(sym) != 1 or not sym.isprintable():
            raise ValueError(f"symbol for {kind!r} must be one printable character, got {sym!r}.")
    if len(set(table.values())) != len(table):
        raise ValueError(f"symbols must be distinct, got {table}.")
    return table
