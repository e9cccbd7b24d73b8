"""Where ``TurnSokobanEnv``'s levels come from: generated from a seed or loaded from files.

* :class:`SokobanGenerator` – the settings of :func:`~.generator.generate_level`, one level per
  seed, cached per process (:data:`GENERATED_LEVELS`);
* :class:`LevelFile` – loaded levels (:mod:`.loader`) with their plans, solved once per process
  (:data:`SOLVED_LEVELS`).

A level's split is a function of its content (:mod:`.splits`). Imports run one way: the
loader, board, solver and generator know nothing of this module; the env reads levels only here.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from ..core.args import bool_arg, int_arg, source_arg
from ..core.cache import ProcessCache
from .board import board_for, mask_of
from .generator import GeneratedLevel, dim_arg, generate_level
from .loader import Level, LevelFormatError, load_levels
from .solver import DEFAULT_SOLVER_BUDGET, SolveResult, solve
from .splits import level_split

#: Default ``max_moves``: generated levels need at most this many moves (RAGEN's 10-move episode).
DEFAULT_MAX_MOVES = 10

#: Generated levels by (level seed, generator): evaluation re-uses seeds, so a re-reset is free.
GENERATED_LEVELS: ProcessCache[GeneratedLevel] = ProcessCache("sokoban generated levels", 4096)
#: The content split of each generated level by (level seed, generator): a reset of a split draws level seeds until
#: one falls in it (about ten for the test split), and this remembers the others without keeping their levels.
LEVEL_SPLITS: ProcessCache[str] = ProcessCache("sokoban generated level splits", 1 << 16)


@dataclass(frozen=True)
class SokobanGenerator:
    """Where ``TurnSokobanEnv``'s levels come from when none are loaded: :func:`generate_level`
    with these settings, one level per seed (drawn from the env's ``np_random``).

    Everything that decides the level a seed gives, and nothing else: the episode's move cap,
    the prompt and the rewards never change it. Arguments are checked (a ValueError names the
    bad one); ``dim`` may be one int for a square.

    Attributes:
        dim: ``(rows, cols)`` of the grid, outer walls included.
        num_boxes: Boxes (and targets) per level.
        min_moves, max_moves: Range of the optimal solution length (``max_moves=None``: no limit).
        num_gen_steps: Random-walk steps carving a room (None: gym-sokoban's ``1.7 * (rows + cols)``).
        solver_budget: Push states the solver may expand to certify a level.
    """

    dim: tuple[int, int] = (6, 6)
    num_boxes: int = 1
    min_moves: int = 1
    max_moves: int | None = DEFAULT_MAX_MOVES
    num_gen_steps: int | None = None
    solver_budget: int = DEFAULT_SOLVER_BUDGET

    def __post_init__(self) -> None:
        checked = {
            "dim": dim_arg(self.dim),
            "num_boxes": int_arg("num_boxes", self.num_boxes, 1),
            "min_moves": int_arg("min_moves", self.min_moves, 1),
            "max_moves": int_arg("max_moves", self.max_moves, 1, allow_none=True),
            "num_gen_steps": int_arg("num_gen_steps", self.num_gen_steps, 1, allow_none=True),
            "solver_budget": int_arg("solver_budget", self.solver_budget, 0),
        }
        if checked["max_moves"] is not None and checked["min_moves"] > checked["max_moves"]:
            raise ValueError(
                f"min_moves={self.min_moves} exceeds max_moves={checked['max_moves']}: no level can satisfy both; "
                "lower min_moves or raise max_moves."
            )
        for name, value in checked.items():
            object.__setattr__(self, name, value)

    def level(self, level_seed: int) -> GeneratedLevel:
        """The level of ``level_seed`` (made once per process, then cached)."""
        return GENERATED_LEVELS.get(
            (level_seed, self),
            lambda: generate_level(
                np.random.default_rng(level_seed),
                self.dim,
                self.num_boxes,
                min_moves=self.min_moves,
                max_moves=self.max_moves,
                num_gen_steps=self.num_gen_steps,
                solver_budget=self.solver_budget,
            ),
        )

    def split_of(self, level_seed: int) -> str:
        """The content split of :meth:`level` ``(level_seed)`` (remembered per process, level or not)."""
        return LEVEL_SPLITS.get((level_seed, self), lambda: level_split(self.level(level_seed).level))


#: Plans of loaded levels by (level, solver budget): a levels file is played many times.
SOLVED_LEVELS: ProcessCache[SolveResult] = ProcessCache("sokoban solved levels", 4096)


@dataclass(frozen=True)
class LevelFile:
    """Where ``TurnSokobanEnv``'s levels come from when they are loaded: these levels, one drawn
    per reset from the env's ``np_random`` (or picked with ``reset(options={"level": i})``).

    Attributes:
        levels: The levels (at least one).
        solver_budget: Push states the solver may expand to solve a level (then as much again
            for a weighted search when no shortest plan is proven within it).
        verify: Solve every level now, so a level with no solution (or none found within the
            budget) fails at once naming its file and line; ``False`` defers that to the reset
            that draws it.
    """

    levels: tuple[Level, ...]
    solver_budget: int
    verify: bool = True

    def __post_init__(self) -> None:
        if (
            not isinstance(self.levels, tuple)
            or not self.levels
            or not all(isinstance(lv, Level) for lv in self.levels)
        ):
            raise ValueError(
                "levels must be a level file, a directory of level files, or a non-empty list of Level objects; "
                f"got {type(self.levels).__name__}."
            )
        if self.verify:
            for level in self.levels:
                self.solution(level)  # raises, naming file and line, if the level is not playable

    @classmethod
    def load(
        cls, levels: str | os.PathLike | Sequence[Level] | Any, *, solver_budget: int, verify: bool = True
    ) -> "LevelFile":
        """The levels of a Boxoban file, a directory of them, or a list of :class:`Level`."""
        if isinstance(levels, (str, os.PathLike)):
            return cls(tuple(load_levels(levels)), solver_budget, verify)
        if isinstance(levels, Sequence) and not isinstance(levels, str):
            return cls(tuple(levels), solver_budget, verify)
        return cls(levels, solver_budget, verify)

    def solution(self, level: Level) -> SolveResult:
        """A plan for ``level`` within ``solver_budget`` (cached per process); raises
        :class:`LevelFormatError` naming the level's file and line when there is none."""
        return SOLVED_LEVELS.get((level, self.solver_budget), lambda: solve_loaded_level(level, self.solver_budget))


def solve_loaded_level(level: Level, solver_budget: int) -> SolveResult:
    """A plan for a loaded level within ``solver_budget`` expansions (a proven shortest one when the
    budget allows, else a weighted search's); raises :class:`LevelFormatError` naming the level's
    file and line when it has no solution or none was found."""
    board = board_for(level)
    result = solve(board, mask_of(level.boxes), level.player, max_expansions=solver_budget)
    if result.moves is None and not result.unsolvable:
        # No proof within the budget: a weighted search still gives a plan to report.
        fast = solve(board, mask_of(level.boxes), level.player, max_expansions=solver_budget, weight=3.0)
        if fast.unsolvable:
            result = fast
        elif fast.moves is not None:
            result = SolveResult(fast.moves, False, False, result.lower_bound, result.expansions + fast.expansions)
    where = f"{level.origin}: level {level.name}" if level.origin else f"level {level.name or '(options)'}"
    if result.unsolvable:
        raise LevelFormatError(f"{where} has no solution (proven by search); fix or remove it.")
    if result.moves is None:
        raise LevelFormatError(
            f"{where}: no plan found within solver_budget={solver_budget:,} expanded push states "
            "(the limit on the solver's work per level); raise solver_budget, or remove the level."
        )
    return result


#: The keywords of ``TurnSokobanEnv`` (and ``gymnasium.make``) that build its level source, with their defaults:
#: ``source=`` replaces them. ``dim`` to ``num_gen_steps`` make a :class:`SokobanGenerator`; ``levels`` a :class:`LevelFile`.
LEVEL_KEYWORDS: dict[str, Any] = {
    "dim": (6, 6),
    "num_boxes": 1,
    "min_moves": 1,
    "max_moves": DEFAULT_MAX_MOVES,
    "num_gen_steps": None,
    "levels": None,
    "verify_levels": True,
}


def level_source(source: Any, keywords: dict[str, Any], solver_budget: int) -> SokobanGenerator | LevelFile:
    """The env's level source: ``source`` as given, else one built from the level keywords in ``keywords``
    (:data:`LEVEL_KEYWORDS`, defaults for the rest) with ``solver_budget``. Giving both is an error naming the keywords."""

    def build(**given: Any) -> SokobanGenerator | LevelFile:
        kw = {**LEVEL_KEYWORDS, **given}
        verify = bool_arg("verify_levels", kw["verify_levels"])
        if kw["levels"] is not None:
            return LevelFile.load(kw["levels"], solver_budget=solver_budget, verify=verify)
        return SokobanGenerator(
            kw["dim"], kw["num_boxes"], kw["min_moves"], kw["max_moves"], kw["num_gen_steps"], solver_budget
        )

    return source_arg(
        source,
        keywords,
        defaults=LEVEL_KEYWORDS,
        build=build,
        kinds=(SokobanGenerator, LevelFile),
        env="TurnSokobanEnv",
    )
