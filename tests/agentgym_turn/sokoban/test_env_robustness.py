"""TurnSokoban's rough edges: level files, arguments, the info contract, seeds, the expert in dead states."""

from __future__ import annotations

import os

import gymnasium as gym
import numpy as np
import pytest

import agentgym_turn  # noqa: F401
from agentgym_turn.core.files import DataFileError
from agentgym_turn.sokoban import LevelFormatError, TurnSokobanEnv, generate_level, load_levels
from agentgym_turn.sokoban.board import apply_move
from agentgym_turn.sokoban.constants import MOVE_BY_NAME
from support.sokoban_reference import RefLevel, ref_parse, ref_shortest

# ---------------------------------------------------------------------- level files


def test_level_file__a_short_row_that_opens_the_room_fails_with_file_and_line(tmp_path):
    path = tmp_path / "short.txt"
    path.write_text("; 0\n#####\n#@$.#\n#####\n\n; 1\n######\n#@$. \n######\n")
    with pytest.raises(LevelFormatError, match=rf"{path}:8: row 2 of level short.txt;1 is 5 characters long"):
        load_levels(path)
    # A short row whose missing end lies outside the walls (XSB files trim it) is fine.
    path.write_text("; 0\n######\n#@$.#\n#####\n")
    (level,) = load_levels(path)
    assert level.to_text() == "######\n#@$.##\n######"


def test_level_file__unknown_symbol_names_file_line_and_column(tmp_path):
    path = tmp_path / "bad.txt"
    path.write_text("; 0\n#####\n#@$.#\n#####\n\n; 1\n#####\n#@$x.#\n#####\n")
    with pytest.raises(LevelFormatError, match=rf"{path}:8: level bad.txt;1: unknown symbol 'x' at column 4"):
        load_levels(path)


def test_level_file__an_unsolvable_level_fails_when_the_env_is_made(tmp_path):
    path = tmp_path / "levels.txt"
    path.write_text("; 0\n#####\n#@$.#\n#####\n\n; 1\n#######\n#@$$. #\n#   . #\n#######\n")
    with pytest.raises(LevelFormatError, match=rf"{path}:7: level levels.txt;1 has no solution"):
        TurnSokobanEnv(levels=path)
    # With verify_levels=False the file loads; the level fails, with the same message, when drawn.
    env = TurnSokobanEnv(levels=path, verify_levels=False)
    env.reset(options={"level": 0})
    with pytest.raises(LevelFormatError, match=rf"{path}:7: level levels.txt;1 has no solution"):
        env.reset(options={"level": 1})


def _ten_box_level_text() -> str:
    level = generate_level(np.random.default_rng(1), (12, 12), 10, solver_budget=0).level
    return "; 0\n" + level.to_text() + "\n"


def test_level_file__a_ten_box_level_is_bounded_by_the_solver_budget(tmp_path):
    path = tmp_path / "ten.txt"
    path.write_text(_ten_box_level_text())
    # The budget bounds the work: 50 push states find no plan, and the message says what to do.
    with pytest.raises(
        LevelFormatError,
        match=r"ten\.txt:2: level ten\.txt;0: no plan found within solver_budget=50 .*raise solver_budget",
    ):
        TurnSokobanEnv(levels=path, solver_budget=50)
    # 2,000 are not enough for a proof, but the weighted search finds a plan, reported as not optimal.
    env = TurnSokobanEnv(levels=path, solver_budget=2000, max_actions_per_episode=None)
    _, info = env.reset(seed=0)
    assert not info["optimal_certified"] and info["optimal_moves"] == -1 and info["solution_moves"] > 0


def test_level_file__special_files_are_refused(tmp_path):
    fifo = tmp_path / "levels.txt"
    os.mkfifo(fifo)
    with pytest.raises(DataFileError, match="not a regular file"):
        load_levels(fifo)
    link = tmp_path / "zero.txt"
    link.symlink_to("/dev/zero")
    with pytest.raises(DataFileError, match="not a regular file"):
        TurnSokobanEnv(levels=link)
    with pytest.raises(DataFileError, match="not found"):
        load_levels(tmp_path / "missing.txt")


def test_level_file__errors_are_data_file_errors_and_value_errors():
    assert issubclass(LevelFormatError, DataFileError) and issubclass(LevelFormatError, ValueError)


# ---------------------------------------------------------------------- arguments


@pytest.mark.parametrize(
    "kwargs, needle",
    [
        ({"dim": "6x6"}, "dim='6x6' is not a grid size; give dim=(rows, cols)"),
        ({"dim": (6,)}, "dim=(6,) is not a grid size"),
        ({"dim": (6, 6.5)}, "dim=(6, 6.5) is not a grid size"),
        ({"dim": 2}, "dim=2: a grid needs at least 3x3"),
        ({"num_boxes": "2"}, "num_boxes must be an integer >= 1"),
        ({"num_boxes": 0}, "num_boxes must be >= 1"),
        ({"max_actions_per_turn": 2.5}, "max_actions_per_turn must be an integer"),
        ({"max_actions_per_episode": "ten"}, "max_actions_per_episode must be an integer >= 1 or None"),
        ({"min_moves": 0}, "min_moves must be >= 1"),
        ({"max_moves": "5"}, "max_moves must be an integer >= 1 or None"),
        ({"min_moves": 8, "max_moves": 4}, "min_moves=8 exceeds max_moves=4"),
        ({"prompt_style": "fancy"}, "prompt_style='fancy' is not a style; choose one of 'full', 'compact', 'ragen'"),
        ({"symbols": "##"}, "symbols='##'"),
        ({"terminate_on_deadlock": "yes"}, "terminate_on_deadlock must be True or False"),
        ({"show_border": 0}, "show_border must be True or False"),
        ({"solver_budget": -1}, "solver_budget must be >= 0"),
        ({"num_gen_steps": 0}, "num_gen_steps must be >= 1"),
        ({"levels": 3}, "levels must be a level file"),
        ({"levels": []}, "levels must be a level file"),
        ({"format_penalty": float("nan")}, "format_penalty"),
        ({"format_penalty": "abc"}, "format_penalty must be a finite number"),
        ({"max_action_length": "x"}, "max_action_length must be an integer >= 1"),
        ({"verify_levels": None}, "verify_levels must be True or False"),
    ],
)
def test_arguments__a_bad_value_names_the_parameter_and_the_fix(kwargs, needle):
    with pytest.raises(ValueError) as err:
        gym.make("TurnSokoban-v0", **kwargs)
    assert needle in str(err.value)


# ---------------------------------------------------------------------- seeds and levels


def test_seed__the_level_depends_only_on_the_level_parameters():
    def level_of(**kwargs) -> str:
        env = gym.make("TurnSokoban-v0", **kwargs)
        env.reset(seed=123)
        return env.unwrapped.level.to_text()

    base = level_of()
    for kwargs in (
        {"max_actions_per_episode": 50},
        {"max_actions_per_episode": None},
        {"max_actions_per_turn": 1},
        {"prompt_style": "ragen"},
        {"prompt_style": "compact", "show_border": False, "format_penalty": -1.0},
        {"terminate_on_deadlock": False},
        {"symbols": "boxoban"},
        {"solver_budget": 500},
    ):
        assert level_of(**kwargs) == base, kwargs
    assert level_of(max_moves=20) != base or level_of(dim=7) != base  # level parameters do change it


# ---------------------------------------------------------------------- the info contract

MOVE_INDEX = {name.capitalize(): m for name, m in MOVE_BY_NAME.items()}
_CORRIDOR = "#########\n#@ $  . #\n#########"


def test_info__the_same_keys_on_reset_valid_invalid_and_finished_turns():
    for style in ("full", "compact", "ragen"):
        env = gym.make("TurnSokoban-v0", prompt_style=style, max_actions_per_episode=None)
        _, info = env.reset(options={"level": _CORRIDOR})
        keys = set(info)
        assert {"moves", "executed_moves", "optimal_moves", "optimal_certified", "solution_moves"} <= keys
        infos = []
        for response in (
            "<think>.</think><answer>Left</answer>",
            "garbage",
            "<think>.</think><answer>Right || Right || Right || Right</answer>",
            "<think>.</think><answer>Up</answer>",
            "more garbage",
        ):
            *_, terminated, _, info = env.step(response)
            infos.append(info)
        assert terminated and all(set(i) == keys for i in infos), style
        # A step after the end plays nothing and says so in every key.
        assert infos[-1]["executed_moves"] == [] and infos[-1]["moves"] == infos[2]["moves"]


def test_info__reset_accepts_only_the_level_and_split_options():
    env = gym.make("TurnSokoban-v0")
    with pytest.raises(ValueError, match="lvl"):
        env.reset(options={"lvl": 0})
    assert TurnSokobanEnv.reset_options == frozenset({"level", "split"})


# ---------------------------------------------------------------------- the expert in dead states


def _ref_of(env) -> RefLevel:
    u = env.unwrapped
    base = ref_parse(u.level.to_text())
    rc = lambda c: divmod(c, u.level.cols)  # noqa: E731
    return RefLevel(base.walls, base.targets, frozenset(rc(c) for c in u.boxes), rc(u.player), base.rows, base.cols)


def test_expert__states_from_random_play_are_solved_or_declared_unsolvable_without_wandering():
    """From states reached by random moves, the expert either solves the level within the
    optimal number of moves, or says the state is unsolvable and stays put (brute force agrees)."""
    env = gym.make(
        "TurnSokoban-8x8-v0", terminate_on_deadlock=False, max_actions_per_episode=None, max_episode_steps=400
    )
    u = env.unwrapped
    rng = np.random.default_rng(0)
    dead = 0
    for seed in range(40):
        env.reset(seed=seed)
        for move in rng.integers(0, 4, size=int(rng.integers(5, 40))):
            env.step(f"<answer>{('Up', 'Down', 'Left', 'Right')[move]}</answer>")
        truth = ref_shortest(_ref_of(env))
        verdict = u.expert_verdict()
        assert verdict == ("unsolvable" if truth is None else "solvable"), seed
        if truth is None:
            dead += 1
            # It walks at most to the nearest wall (no push), then answers the same move, which
            # changes nothing, for ever.
            boxes, trail = u.boxes, []
            for _ in range(20):
                response = u.expert_action()
                assert "No plan can solve this state" in response
                trail.append((u.player, response))
                env.step(response)
                assert u.boxes == boxes
            assert trail[-1] == trail[-2] == trail[-3] and len(set(trail)) <= 8, seed
            continue
        moves_before = u._moves
        while not u._solved:
            _, _, terminated, truncated, info = env.step(u.expert_action())
            assert not truncated
        assert u._moves - moves_before == truth, seed
    assert dead >= 5  # the sample holds dead states


def test_expert__a_state_beyond_the_budget_is_unknown_and_answered_the_same_way(tmp_path):
    path = tmp_path / "ten.txt"
    path.write_text(_ten_box_level_text())
    env = TurnSokobanEnv(levels=path, solver_budget=2000, max_actions_per_episode=None)
    env.reset(seed=0)
    boxes = sum(1 << b for b in env.boxes)
    plan_first = MOVE_INDEX[env.solution[0]]
    detour = next(m for m in range(4) if m != plan_first and apply_move(env.board, boxes, env.player, m).moved)
    env.solver_budget = 1  # starve the re-planning solver
    env.step(f"<answer>{('Up', 'Down', 'Left', 'Right')[detour]}</answer>")
    assert env.expert_verdict() == "unknown"
    response = env.expert_action()
    assert "no plan from this state within solver_budget=1" in response and env.expert_action() == response
