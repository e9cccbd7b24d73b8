"""``TurnSokoban``: Sokoban as a text-turn environment (RAGEN's text setting, gym-sokoban's rules)."""

from __future__ import annotations

from typing import Any, Mapping, NamedTuple

from ..core.args import bool_arg, int_arg, is_int, is_number
from ..core.contract import key_json
from ..core.parsing import InvalidAction, TagMatch, find_tagged, snippet, split_moves
from ..core.turn_env import TurnEnv, TurnOutcome
from .board import Board, apply_move, board_for, cells_of, is_deadlocked, mask_of
from .constants import CELL_KINDS, CELL_WORDS, MOVE_BY_NAME, MOVE_NAMES, resolve_symbols
from .expert import answer_text, idle_move, no_plan_reason, plan_from
from .loader import Level, parse_level
from .ragen import parse_ragen_response, ragen_prefix, ragen_reward_text, ragen_turn_block
from .render import GridStyle, rgb_array
from . import reward as _reward
from .reward import PENALTY_BOX_OFF_TARGET, PENALTY_FOR_STEP, REWARD_BOX_ON_TARGET, REWARD_FINISHED, REWARD_COMPONENTS
from .solver import DEFAULT_SOLVER_BUDGET, SolveResult
from .source import LEVEL_KEYWORDS, LevelFile, SokobanGenerator, level_source
from .splits import check_split, level_split

#: Accepted values of ``prompt_style``; the first is the default.
PROMPT_STYLES = ("full", "compact", "ragen")
#: The one message of an invalid turn in the compact style (it never changes).
COMPACT_INVALID = "invalid: answer like <answer>Up || Left</answer>"
_EXAMPLE = "<answer>Right || Right || Up</answer>"
# The env-specific info keys before the first reset (the same keys as after it).
_INFO_BEFORE_RESET: dict[str, Any] = {
    "boxes_on_target": 0,
    "moves": 0,
    "moves_left": -1,
    "executed_moves": [],
    "deadlocked": False,
    "optimal_moves": -1,
    "optimal_certified": False,
    "solution_moves": -1,
    "level_name": "",
}


class _Moves(NamedTuple):
    """A parsed turn: the moves to play, and whether the format penalty applies anyway."""

    moves: list[int]
    penalized: bool


def _money(x: float) -> str:
    return f"{x:+.1f}".replace("+0.0", "0").replace("-0.0", "0")


#: Generated levels drawn at most per reset to find one of the env's split (10% of levels are test levels).
_SPLIT_DRAWS = 1000


def checked_style(prompt_style: Any, symbols: Any) -> dict[str, str]:
    """The grid's symbols for ``symbols=``, after checking ``prompt_style``; a ValueError names the bad one."""
    if not isinstance(prompt_style, str) or prompt_style not in PROMPT_STYLES:
        raise ValueError(
            f"prompt_style={prompt_style!r} is not a style; choose one of {', '.join(map(repr, PROMPT_STYLES))}."
        )
    try:
        return resolve_symbols(symbols)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"symbols={symbols!r}: {exc}") from None


class TurnSokobanEnv(TurnEnv):
    """Push every box onto a target; each turn the agent sends a few moves as text.

    ## Description

    Sokoban as in gym-sokoban and RAGEN's text setting, which the Turn-PPO paper's Sokoban
    numbers follow. The player walks on floor cells and pushes (never pulls) one box at a
    time; a push into a wall or another box does nothing. Levels come from a seeded
    generator (gym-sokoban's method: random-walk room, reverse play from the solved state)
    that also certifies them: every generated level ships with a plan that was replayed to
    the solved state, and the solver proves the shortest plan's length within a budget
    (`optimal_moves`, `optimal_certified`). Levels can also be loaded from Boxoban files.

    ## Action Space

    Any string (`TurnText`). A valid response holds one or more moves, `Up`, `Down`, `Left`
    or `Right` (any letter case), separated by `||` inside `<answer>...</answer>`, e.g.
    `<answer>Right || Right || Up</answer>`; text outside the first answer pair and
    `<think>...</think>` blocks are ignored. At most `max_actions_per_turn` moves are played
    per turn (the rest are ignored and the message says so), and no more than the moves left
    in the episode. A response without a valid answer is an invalid turn: nothing moves, the
    reward is `format_penalty`, and the message says what was wrong.

    With `prompt_style="ragen"` responses are read as RAGEN's code reads them (see
    `agentgym_turn.sokoban.ragen`): a `<think>...</think>` block must come right before the
    answer (only whitespace between), tags are lower-case, the first 5 pieces between `||` are
    kept, and the pieces that are moves are played while the others cost `format_penalty`
    (`Up || Jump || Left` plays Up and Left and adds -0.1). A turn with no move is invalid.

    ## Observation Space

    Text (`TurnText`). With `prompt_style="full"` (the default, RAGEN-like) the first
    message states the task, the legend, the rules, the answer format and the move budget,
    then the grid; later messages report the moves played, their reward, what happened, the
    moves left and the grid. Grid cells use RAGEN's symbols by default (`#` wall, `_` floor,
    `O` target, `X` box, `√` box on target, `P` player, `S` player on target; `symbols=`
    changes them) and are separated by one space in the full style.

    `prompt_style="compact"` (for small models with short contexts) uses this stable format
    for every message, the first one included::

        [status line]          only when something ended the turn: "solved", "deadlock",
                               "out of moves", or "invalid: answer like <answer>Up || Left</answer>"
        turn T moves M         T: the turn about to be played (1 at reset); M: moves left
                               ("moves M" is left out when the episode has no move cap)
        ######                 the grid, one symbol per cell, no separators
        #_OX_#
        ...

    `prompt_style="ragen"` gives RAGEN's messages for `SimpleSokoban` byte for byte: its
    instruction, symbol meanings, actions and budget, then `Turn k:`, `State:`, the grid (no
    separators), the actions left and its format reminder; later messages start with
    `Reward:` and the turn's reward as RAGEN prints it (a float sum, e.g. `-0.30000000000000004`).
    RAGEN's system message ("You're a helpful assistant. ") is the trainer's to add.

    ## Starting State

    A level generated from `self.np_random` (reset with a seed for a fixed level): a
    `dim` room with `num_boxes` boxes off their targets and the player off the targets,
    whose shortest solution has `min_moves..max_moves` moves (by default at most 10, RAGEN's
    episode cap). The level a seed gives depends only on the level parameters (`dim`,
    `num_boxes`, `min_moves`, `max_moves`, `num_gen_steps`, and `solver_budget` only when
    `min_moves > 1` and a proof runs out), never on the episode's move cap, the prompt or the
    rewards. With `levels=` a level of
    the file(s) is drawn instead; `reset(options={"level": ...})` picks one (an index into
    `levels`, a level text in Boxoban/XSB symbols, or a `Level`).
    With `split="train"`, `"validation"` or `"test"`, only levels of that split are played: a
    level's split follows from its content (`agentgym_turn.sokoban.splits`: 80/10/10 by a CRC-32
    of the level's text), so the splits share no level whatever seeds drew them; generation draws
    again until a level of the split comes up, and `levels=` keeps the file's levels of the split.

    ## Rewards

    Per move, gym-sokoban's constants: -0.1 for every move (also one that bumps a wall),
    +1 when the move pushes a box onto a target, -1 when it pushes one off, and +10 more
    when the move puts the last box on its target. A turn's reward is the sum over its moves
    (computed in tenths, so it is exact); an invalid turn gets `format_penalty` (-0.1).

    ## Episode End

    `terminated` when all boxes are on targets (success), when a box is provably stuck
    (`terminate_on_deadlock=True`, the default: a box on a dead square, from which no target
    can be reached, or boxes frozen against walls and each other off target;
    `info["deadlocked"]`), or when the episode's moves are used up. `truncated` when the
    registered turn limit (`max_episode_steps`) is reached.

    ## Information

    Every `reset` and `step` returns:

    * `turn`: turns played so far (0 after reset).
    * `action_is_valid`: the response held a valid answer.
    * `action_is_effective`: the state changed this turn.
    * `success`: all boxes are on targets.
    * `score`: the episode's return so far (format penalties included).
    * `boxes_on_target`: boxes on targets now.
    * `moves`: moves played in the episode so far.
    * `moves_left`: moves the episode still allows (-1 without a cap).
    * `executed_moves`: the moves played this turn, e.g. `["Up", "Left"]`.
    * `deadlocked`: a box is provably stuck (the level can no longer be solved).
    * `optimal_moves`: the proven shortest solution length of the level from its start; -1
      when the solver could not prove one within `solver_budget` (never an upper bound).
    * `optimal_certified`: the solver proved `env.solution` optimal (then `optimal_moves` is its
      length).
    * `solution_moves`: length of the shortest plan known for the level (`env.solution`), optimal
      or not.
    * `level_name`: `"file.txt;index"` for a level loaded from a file, else `""`.
    * `exit_status`, `reward_valid`, `state_key` and `reward_components` (`step`, `box_on_target`,
      `box_off_target`, `finish`, `format`): the fields RL infrastructure reads (``docs/turn-contract.md``).

    ## Arguments

    ```python
    import gymnasium as gym
    import agentgym_turn

    env = gym.make(
        "TurnSokoban-v0",
        dim=(6, 6),
        num_boxes=1,
        max_actions_per_turn=5,
        max_actions_per_episode=10,
        prompt_style="full",
        max_episode_steps=5,
    )
    ```

    * `dim`: `(rows, cols)` of the grid, outer walls included, or one int for a square.
    * `num_boxes`: boxes (and targets) per generated level.
    * `max_actions_per_turn`: moves played per turn at most (RAGEN: 5).
    * `max_actions_per_episode`: moves per episode at most (RAGEN: 10); None for no cap.
    * `min_moves`, `max_moves`: range of the optimal solution length of generated levels
      (default 1..10); `max_moves=None`: no upper limit. Keep `max_moves` at most
      `max_actions_per_episode` so every level can be solved in time.
    * `prompt_style`: `"full"` (default), `"compact"` or `"ragen"` (see Observation Space).
    * `symbols`: `"ragen"`, `"boxoban"`, a 7-character string in the order wall, floor,
      target, box, box on target, player, player on target, or a mapping of some of those.
    * `terminate_on_deadlock`: end the episode as soon as a box is provably stuck.
    * `levels`: a Boxoban-format file or directory, or a list of `Level`; replaces generation.
    * `verify_levels`: solve every level of `levels` when the env is made, so a level with no
      solution (or none found within `solver_budget`) fails at once, naming its file and line;
      `False` defers that to the reset that draws the level.
    * `solver_budget`: push states the solver may expand per level: to certify a generated
      level, to solve a loaded one (then as much again for a weighted search), and for each
      re-plan of `expert_action()`. It bounds the solver's work.
    * `num_gen_steps`: random-walk steps carving a room (gym-sokoban: `1.7 * (rows + cols)`).
    * `source`: where levels come from, as one object (the first positional argument of
      `TurnSokobanEnv`): `SokobanGenerator(dim=(8, 8), num_boxes=2, max_moves=30)` or
      `LevelFile.load("levels.txt", solver_budget=50_000)`. The level keywords above (`dim`,
      `num_boxes`, `min_moves`, `max_moves`, `num_gen_steps`, `levels`, `verify_levels`) build it
      when it is not given; giving both is an error naming the keywords. The env's
      `solver_budget` still bounds `expert_action()`.
    * `split`: `None` (every level, the default), `"train"`, `"validation"` or `"test"`: play
      only levels of that split, disjoint by content (see Starting State). A level given in
      `reset(options={"level": ...})` is played whatever its split; `reset(options={"split": ...})`
      draws one episode's level from another split (the same level as an env made with that
      `split` draws from the same seed), so one served env can play a trainer's training and
      held-out levels.
    * `format_penalty`: reward of an invalid turn (-0.1).
    * `show_border`: `False` leaves the outer ring of the grid out of observations when it is all
      wall (every generated level's is), e.g. a 6x6 level shows its 4x4 inside: 20 fewer tokens
      per observation for a small model (`"ansi"` renders what observations show; `"rgb_array"`
      always draws the whole grid).
    * `render_mode`: `"ansi"` (the text grid) or `"rgb_array"` (16 px per cell).
    * `max_episode_steps` (of `gymnasium.make`): the turn limit.

    ## Version History

    * v0: Initial version. Later in v0 (levels and observations of the registered ids unchanged):
      `prompt_style="ragen"`, `info["solution_moves"]`, `verify_levels`; `optimal_moves` is -1
      unless proven; `max_moves` defaults to 10 rather than the episode's move cap; level files
      are checked at load; `split` (train, validation and test levels disjoint by content), also as a
      reset option.
    """

    metadata = {"render_modes": ["ansi", "rgb_array"], "render_fps": 4, "reward_components": REWARD_COMPONENTS}
    #: The level source and its loaded levels: read-only, shared by forks and left out of snapshots.
    shared_attributes = ("source", "levels", "_levels_by_split")
    derived_attributes = ("_board", "_grid_style", "_key_board")
    reset_options = frozenset({"level", "split"})
    content_reset_options = frozenset({"level"})  # a level text is solved on reset
    external_kwargs = frozenset({"levels"})  # a Boxoban file or folder
    source_keywords = tuple(LEVEL_KEYWORDS)

    def __init__(
        self,
        source: SokobanGenerator | LevelFile | None = None,
        *,
        split: str | None = None,
        max_actions_per_turn: int = 5,
        max_actions_per_episode: int | None = 10,
        prompt_style: str = "full",
        symbols: str | Mapping[str, str] | None = "ragen",
        terminate_on_deadlock: bool = True,
        show_border: bool = True,
        solver_budget: int = DEFAULT_SOLVER_BUDGET,
        format_penalty: float = -0.1,
        render_mode: str | None = None,
        **kwargs: Any,
    ):
        if not is_number(format_penalty, numpy=True):
            raise ValueError(f"format_penalty must be a finite number (RAGEN: -0.1), got {format_penalty!r}.")
        levels = {name: kwargs.pop(name) for name in list(kwargs) if name in LEVEL_KEYWORDS}
        kwargs.update(
            {
                name: int_arg(name, kwargs[name], 1)
                for name in ("max_action_length", "max_observation_length")
                if name in kwargs
            }
        )
        super().__init__(
            format_penalty=format_penalty, render_mode=render_mode, **kwargs
        )  # an unknown keyword fails here
        self.max_actions_per_turn = int_arg("max_actions_per_turn", max_actions_per_turn, 1)
        self.max_actions_per_episode = int_arg("max_actions_per_episode", max_actions_per_episode, 1, allow_none=True)
        self.prompt_style, self.symbols = prompt_style, checked_style(prompt_style, symbols)
        self.terminate_on_deadlock = bool_arg("terminate_on_deadlock", terminate_on_deadlock)
        self.show_border = bool_arg("show_border", show_border)
        self.solver_budget = int_arg("solver_budget", solver_budget, 0)
        #: Where levels come from: a :class:`SokobanGenerator` or a :class:`LevelFile` (built from the level keywords).
        self.source: SokobanGenerator | LevelFile = level_source(source, levels, self.solver_budget)
        #: Only levels of this split are drawn (None: every level).
        self.split = check_split(split)
        #: The loaded levels (a :class:`LevelFile`'s, those of ``split`` when one is set), or None for generated levels.
        self._levels_by_split: dict[str | None, list[Level] | None] = {}
        self.levels = self._split_levels(self.split)
        self._sep = " " if prompt_style == "full" else ""
        self._clear_episode()

    @property
    def quick_calls(self) -> frozenset[str]:  # type: ignore[override]
        """Steps and renders are quick; resets too when they generate levels of at most 64 cells and 2 boxes (6x6/1:
        2 ms at most over 1,000 fresh seeds, 8x8/2: 6 ms) from every split or the training split (8 levels in 10),
        not larger ones (10x10/4's generator and solver took up to 200 ms), nor a held-out split's (1 level in 10:
        ten generated to find one), nor a level file's (a level is solved when first played)."""
        source = self.source
        small = isinstance(source, SokobanGenerator) and source.dim[0] * source.dim[1] <= 64 and source.num_boxes <= 2
        quick_reset = small and self.split in (None, "train")
        return frozenset({"reset", "step", "render"} if quick_reset else {"step", "render"})

    def _split_levels(self, split: str | None) -> list[Level] | None:
        """The loaded levels of ``split`` (computed once per split), or None for generated levels."""
        if not isinstance(self.source, LevelFile):
            return None
        if split not in self._levels_by_split:
            levels = [level for level in self.source.levels if split is None or level_split(level) == split]
            if not levels:
                raise ValueError(
                    f"split={split!r}: none of the {len(self.source.levels)} levels of levels= is in that split."
                )
            self._levels_by_split[split] = levels
        return self._levels_by_split[split]

    def _clear_episode(self) -> None:
        """The episode's state before the first reset."""
        self.level: Level | None = None
        self._board: Board | None = None
        self._boxes = 0
        self._player = 0
        self._moves = 0
        self._reward_tenths = 0
        self._penalties = 0.0
        self._deadlocked = False
        self._solved = False
        self._executed: list[str] = []
        #: The proven shortest plan length from the level's start (-1: not proven).
        self.optimal_moves = -1
        #: The solver proved ``solution`` to be a shortest plan.
        self.optimal_certified = False
        #: The shortest plan known for the level, as move names (``("Up", "Left", ...)``), or None.
        self.solution: tuple[str, ...] | None = None
        self._plan: list[int] | None = None
        # Expert: why a state (boxes, player) has no plan: "stuck", "unsolvable" or "unknown".
        self._hopeless: dict[tuple[int, int], str] = {}

    # ------------------------------------------------------------------ episode set-up
    def _pick_level(self, options: dict[str, Any]) -> tuple[Level, tuple[int, ...] | None, bool]:
        """The level to play, its best known plan (or None) and whether that plan is optimal."""
        choice = options.get("level")
        split = check_split(options["split"]) if "split" in options else self.split
        if choice is None and isinstance(self.source, SokobanGenerator):
            for _ in range(_SPLIT_DRAWS):
                level_seed = int(self.np_random.integers(0, 2**63 - 1))
                if split is None or self.source.split_of(level_seed) == split:
                    gen = self.source.level(level_seed)
                    return gen.level, gen.solution, gen.certified
            raise RuntimeError(
                f"split={split!r}: {_SPLIT_DRAWS} generated levels in a row fell in other splits; "
                "this generator's settings leave too few distinct levels to split."
            )
        if choice is None:
            levels = self._split_levels(split)
            assert levels is not None
            level = levels[int(self.np_random.integers(len(levels)))]
        elif isinstance(choice, Level):
            level = choice
        elif is_int(choice, numpy=True):
            if self.levels is None:
                raise ValueError(
                    "options['level'] is an index, but the env has no levels= to index; pass levels= or a level text."
                )
            if not -len(self.levels) <= int(choice) < len(self.levels):
                raise IndexError(
                    f"options['level']={choice} is out of range: levels= holds {len(self.levels)} levels (0..{len(self.levels) - 1})."
                )
            level = self.levels[int(choice)]
        elif isinstance(choice, str):
            level = parse_level(choice, "options")
        else:
            raise TypeError(f"options['level'] must be an int, a level text or a Level, got {type(choice).__name__}.")
        result = self._solve_level(level)
        return level, result.moves, result.optimal

    def _solve_level(self, level: Level) -> SolveResult:
        """Solve a loaded level within ``solver_budget`` (cached); raise if it cannot be played."""
        source = (
            self.source if isinstance(self.source, LevelFile) else LevelFile((level,), self.solver_budget, verify=False)
        )
        return source.solution(level)

    def _reset(self, options: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        level, plan, certified = self._pick_level(options)
        self.level = level
        self._board = board_for(level)
        self._boxes = mask_of(level.boxes)
        self._player = level.player
        self._moves = 0
        self._reward_tenths = 0
        self._penalties = 0.0
        self._executed = []
        self._solved = self._boxes == self._board.target_mask
        self._deadlocked = not self._solved and is_deadlocked(self._board, self._boxes)
        self.optimal_certified = bool(certified and plan is not None)
        self.optimal_moves = len(plan) if self.optimal_certified else -1
        self.solution = tuple(MOVE_NAMES[m] for m in plan) if plan is not None else None
        self._plan = list(plan) if plan is not None else None
        self._hopeless = {}
        return self._first_message(), {}

    # ------------------------------------------------------------------ the turn
    def parse_action(self, response: str) -> _Moves | InvalidAction:
        if self.prompt_style == "ragen":
            answer = parse_ragen_response(response, self.max_actions_per_turn)
            if not answer.moves:
                return InvalidAction("no move")  # RAGEN shows no message; see _invalid_outcome
            return _Moves(list(answer.moves), answer.penalized)
        m = find_tagged(response, ("answer",))
        if isinstance(m, InvalidAction):
            return InvalidAction(f"{m.message} Moves are Up, Down, Left, Right, separated by ||, e.g. {_EXAMPLE}.")
        assert isinstance(m, TagMatch)
        pieces = split_moves(m.content)
        if not pieces:
            return InvalidAction(
                f"The answer holds no move. Moves are Up, Down, Left, Right, separated by ||, e.g. {_EXAMPLE}."
            )
        moves = []
        for piece in pieces:
            move = MOVE_BY_NAME.get(piece.lower())
            if move is None:
                return InvalidAction(
                    f"'{snippet(piece, 30)}' is not a move. Use only Up, Down, Left, Right, separated by ||, e.g. {_EXAMPLE}."
                )
            moves.append(move)
        return _Moves(moves, False)

    def _act(self, action: _Moves) -> TurnOutcome:
        board = self._board
        assert board is not None
        moves = action.moves
        notes = []
        if len(moves) > self.max_actions_per_turn:
            notes.append(
                f"Only your first {self.max_actions_per_turn} moves were played (the limit is {self.max_actions_per_turn} per turn)."
            )
            moves = moves[: self.max_actions_per_turn]
        executed: list[str] = []
        move_tenths: list[int] = []
        terms = [0, 0, 0]  # box_on_target, box_off_target, finish (tenths)
        on_before = (self._boxes & board.target_mask).bit_count()
        start_state = (self._boxes, self._player)
        for i, move in enumerate(moves):
            if self.max_actions_per_episode is not None and self._moves >= self.max_actions_per_episode:
                notes.append("The episode's moves ran out before all your moves were played.")
                break
            res = apply_move(board, self._boxes, self._player, move)
            self._moves += 1
            move_tenths.append(res.reward_tenths)
            executed.append(MOVE_NAMES[move])
            self._follow_plan(move, res.moved)
            if res.pushed_to >= 0:
                for k, t in enumerate(
                    _reward.push_components_tenths(board.target_mask, res.boxes, res.player, res.pushed_to)
                ):
                    terms[k] += t
            self._boxes, self._player = res.boxes, res.player
            if res.pushed_to >= 0:
                if self._boxes == board.target_mask:
                    self._solved = True
                elif not self._deadlocked and is_deadlocked(board, self._boxes, res.pushed_to):
                    self._deadlocked = True
            if self._solved or (self._deadlocked and self.terminate_on_deadlock):
                if i + 1 < len(moves):
                    notes.append("The moves after that were not played: the episode is over.")
                break
        tenths = sum(move_tenths)
        self._executed = executed
        self._reward_tenths += tenths
        reward = tenths / 10
        components = {
            "step": (tenths - sum(terms)) / 10,
            "box_on_target": terms[0] / 10,
            "box_off_target": terms[1] / 10,
            "finish": terms[2] / 10,
        }
        if action.penalized:
            self._penalties += self.format_penalty
            reward = round(reward + self.format_penalty, 10)  # -0.3, not -0.30000000000000004
            components["format"] = self.format_penalty
        out_of_moves = (
            self.max_actions_per_episode is not None
            and self._moves >= self.max_actions_per_episode
            and not self._solved
        )
        terminated = self._solved or (self._deadlocked and self.terminate_on_deadlock) or out_of_moves
        if self.prompt_style == "ragen":
            observation = ragen_reward_text(move_tenths) + ragen_turn_block(
                self.turn + 1, self._grid(), self._ragen_left()
            )
        else:
            on_after = (self._boxes & board.target_mask).bit_count()
            observation = self._turn_message(executed, tenths, on_after - on_before, notes, out_of_moves)
        effective = (self._boxes, self._player) != start_state
        return TurnOutcome(observation, reward, terminated, effective, {"executed_moves": list(executed)}, components)

    def _invalid_outcome(self, problem: InvalidAction) -> TurnOutcome:
        self._penalties += self.format_penalty
        self._executed = []
        if self.prompt_style == "ragen":
            # RAGEN plays nothing, adds the penalty and shows the next turn as usual.
            text = ragen_reward_text([]) + ragen_turn_block(self.turn + 1, self._grid(), self._ragen_left())
        elif self.prompt_style == "compact":
            text = f"{COMPACT_INVALID}\n{self._state_text()}"
        else:
            text = f"Invalid answer: {problem.message} Nothing moved.\n\n{self._state_text()}"
        return TurnOutcome(text, self.format_penalty, False, False)  # executed_moves: [] from _extra_info

    # ------------------------------------------------------------------ text
    def _grid(self) -> str:
        assert self._board is not None
        style = self.__dict__.get("_grid_style")
        if style is None or style.board is not self._board:
            style = self._grid_style = GridStyle(self._board, self.symbols, self._sep, crop_border=not self.show_border)
        return style.text(self._boxes, self._player)

    def _moves_left(self) -> int:
        if self.max_actions_per_episode is None:
            return -1
        return max(self.max_actions_per_episode - self._moves, 0)

    def _ragen_left(self) -> int:
        """RAGEN's "actions left": the episode's, or the turn's when the episode has no cap."""
        left = self._moves_left()
        return left if left >= 0 else self.max_actions_per_turn

    def _state_text(self) -> str:
        if self._board is None:
            return ""
        left = self._moves_left()
        if self.prompt_style == "ragen":
            return self._grid()
        if self.prompt_style == "compact":
            header = f"turn {self.turn + 1}" + (f" moves {left}" if left >= 0 else "")
            return f"{header}\n{self._grid()}"
        on = (self._boxes & self._board.target_mask).bit_count()
        budget = f"Moves left: {left}. " if left >= 0 else ""
        return f"Turn {self.turn + 1}. {budget}Boxes on targets: {on}/{self.level.num_boxes}.\n{self._grid()}"

    def _legend(self) -> str:
        return " | ".join(f"{self.symbols[k]} {CELL_WORDS[k]}" for k in CELL_KINDS)

    def _first_message(self) -> str:
        if self.prompt_style == "ragen":
            cap = (
                self.max_actions_per_episode if self.max_actions_per_episode is not None else self.max_actions_per_turn
            )
            return ragen_prefix(self.symbols, cap) + ragen_turn_block(1, self._grid(), self._ragen_left())
        if self.prompt_style == "compact":
            return self._state_text()
        assert self.level is not None
        n = self.level.num_boxes
        boxes = "the box onto the target" if n == 1 else f"all {n} boxes onto targets"
        rows, cols = self.level.rows, self.level.cols
        cap = self.max_actions_per_episode
        budget = (
            f"You have {cap} moves in total, at most {self.max_actions_per_turn} per turn."
            if cap is not None
            else f"You may play at most {self.max_actions_per_turn} moves per turn."
        )
        deadlock = (
            "\n- If a box gets stuck where it can never reach a target (in a corner, or against a wall "
            "with no target along it), the episode ends."
            if self.terminate_on_deadlock
            else ""
        )
        return (
            f"You are solving a Sokoban puzzle on a {rows}x{cols} grid. You are the player; push {boxes}.\n\n"
            f"Symbols: {self._legend()}\n\n"
            "Rules:\n"
            "- Up, Down, Left and Right move you one cell (rows run top to bottom).\n"
            "- Walking into a box pushes it one cell the same way, if the cell behind it is free.\n"
            "- You cannot pull a box, push two boxes at once, or walk through walls."
            f"{deadlock}\n\n"
            f"Answer: give one or more moves separated by || inside <answer></answer>, for example {_EXAMPLE}. "
            f"You may think first inside <think></think>. {budget}\n"
            f"Rewards: {_money(PENALTY_FOR_STEP)} per move, {_money(REWARD_BOX_ON_TARGET)} for pushing a box onto a target, "
            f"{_money(PENALTY_BOX_OFF_TARGET)} for pushing one off, {_money(REWARD_FINISHED)} when all boxes are on targets.\n\n"
            f"{self._state_text()}"
        )

    def _turn_message(
        self, executed: list[str], tenths: int, on_change: int, notes: list[str], out_of_moves: bool
    ) -> str:
        if self.prompt_style == "compact":
            status = ""
            if self._solved:
                status = "solved\n"
            elif self._deadlocked and self.terminate_on_deadlock:
                status = "deadlock\n"
            elif out_of_moves:
                status = "out of moves\n"
            return f"{status}{self._state_text()}"
        lines = [f"You played {', '.join(executed) or 'no move'} (reward {tenths / 10:+.1f})."]
        if on_change > 0:
            lines.append("A box reached a target." if on_change == 1 else f"{on_change} boxes reached targets.")
        elif on_change < 0:
            lines.append("A box left its target." if on_change == -1 else f"{-on_change} boxes left targets.")
        lines.extend(notes)
        if self._solved:
            lines.append("Solved: all boxes are on targets!")
        elif self._deadlocked and self.terminate_on_deadlock:
            lines.append("Deadlock: a box is stuck and can never reach a target. The episode is over.")
        elif out_of_moves:
            lines.append("You have used all your moves. The episode is over.")
        elif self._deadlocked:
            lines.append("Warning: a box is stuck; the puzzle can no longer be solved.")
        return " ".join(lines) + "\n\n" + self._state_text()

    # ------------------------------------------------------------------ info, score, render
    def _extra_info(self) -> dict[str, Any]:
        if self._board is None or self.level is None:  # before the first reset
            return dict(_INFO_BEFORE_RESET)
        return {
            "boxes_on_target": (self._boxes & self._board.target_mask).bit_count(),
            "moves": self._moves,
            "moves_left": self._moves_left(),
            # A turn's own moves come with its outcome; any other call (reset, a step after the
            # episode ended) played none.
            "executed_moves": [],
            "deadlocked": self._deadlocked,
            "optimal_moves": self.optimal_moves,
            "optimal_certified": self.optimal_certified,
            "solution_moves": len(self.solution) if self.solution is not None else -1,
            "level_name": self.level.name,
        }

    def _success(self) -> bool:
        return self._solved

    def _score(self) -> float:
        return self._reward_tenths / 10 + self._penalties

    def render(self) -> Any:
        if self.render_mode == "rgb_array":
            if self._board is None:
                return None
            return rgb_array(self._board, self._boxes, self._player)
        return super().render()

    # ------------------------------------------------------------------ state access
    @property
    def boxes(self) -> frozenset[int]:
        """Cells (row-major indices) of the boxes now."""
        return frozenset(cells_of(self._boxes))

    @property
    def player(self) -> int:
        """Cell (row-major index) of the player now."""
        return self._player

    @property
    def board(self) -> Board | None:
        """The static geometry of the current level."""
        return self._board

    # ------------------------------------------------------------------ expert
    def _follow_plan(self, move: int, moved: bool) -> None:
        """Keep the cached plan while the agent follows it (a bump into a wall changes nothing)."""
        if self._plan is None:
            return
        if self._plan and self._plan[0] == move:
            self._plan.pop(0)
        elif moved:
            self._plan = None

    def expert_verdict(self) -> str:
        """Whether the expert can still solve the current state.

        ``"solvable"`` (it has a plan), ``"unsolvable"`` (a box is stuck, or the solver proved
        that no plan exists), or ``"unknown"`` (the solver found no plan within
        ``solver_budget``). Computes (and caches) a plan when none is cached.
        """
        if self._board is None:
            return "unknown"
        if self._solved:
            return "solvable"
        if self._plan is None:
            self._plan = self._replan()
        if self._plan:
            return "solvable"
        return "unknown" if self._hopeless.get((self._boxes, self._player)) == "unknown" else "unsolvable"

    def _rebuild(self) -> None:
        self._board = None if self.level is None else board_for(self.level)

    def _state_fields_json(self) -> str | None:
        """:meth:`_state_fields`'s JSON, written here with the board's part made once per board: the same text for a
        fifth of the cost of encoding every field each turn."""
        board = self._board
        if board is None or self.level is None:
            return None
        made = self.__dict__.get("_key_board")
        if made is None or made[0] is not board:
            made = self._key_board = (board, key_json([board.rows, board.cols, board.targets, board.wall_mask])[1:-1])
        dead = "true" if self._deadlocked else "false"
        return f"[{made[1]},{int(self._boxes)},{int(self._player)},{int(self._moves)},{dead}]"

    def _state_fields(self) -> Any:
        """The room (walls, targets), the boxes, the player, the moves played and the deadlock flag: with the
        turn (in every key), all that the next observations and rewards depend on."""
        if self._board is None or self.level is None:
            return None
        board = self._board  # its targets (ascending) and wall mask are computed once per layout
        return [
            board.rows,
            board.cols,
            board.targets,
            board.wall_mask,
            self._boxes,
            self._player,
            self._moves,
            self._deadlocked,
        ]

    def task_key(self) -> str | None:
        """The current level's Boxoban text (walls, targets, boxes, player at the start): equal for two
        resets that play the same level, whatever their seeds; ``None`` before a reset."""
        return None if self.level is None else self.level.to_text()

    def expert_action(self) -> str:
        """The next moves of a shortest plan from the current state (re-planned after deviations).

        Up to ``max_actions_per_turn`` moves (and no more than the moves left). When the
        solver's budget is not enough to prove a shortest plan, a plan from a weighted search
        is used. In a state that cannot be solved any more (a box stuck, or no plan exists, as
        :meth:`expert_verdict` says), it does not wander: it says so inside ``<think>`` and
        answers a move that leaves the state unchanged (after at most a short walk to a wall),
        the same response from then on.
        """
        if self._board is None or self._solved:
            return "<answer>Up</answer>"
        verdict = self.expert_verdict()
        if verdict != "solvable":
            why = no_plan_reason(self._hopeless.get((self._boxes, self._player), ""), self.solver_budget)
            return (
                f"<think>{why}</think><answer>{MOVE_NAMES[idle_move(self._board, self._boxes, self._player)]}</answer>"
            )
        assert self._plan
        take = self.max_actions_per_turn
        left = self._moves_left()
        if left >= 0:
            take = min(take, max(left, 1))
        return answer_text(self._plan[:take], think=self.prompt_style == "ragen")

    def _replan(self) -> list[int]:
        """A plan from the current state (empty, with the verdict recorded, when there is none)."""
        assert self._board is not None
        plan, why = plan_from(
            self._board, self._boxes, self._player, deadlocked=self._deadlocked, solver_budget=self.solver_budget
        )
        if why:
            self._hopeless[(self._boxes, self._player)] = why
        return plan
