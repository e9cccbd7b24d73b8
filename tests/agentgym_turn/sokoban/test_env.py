"""TurnSokoban env: turn format, rewards, episode end, prompts, rendering, levels from text."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import agentgym_turn  # noqa: F401
from agentgym_turn.sokoban import TurnSokobanEnv, parse_level

# A corridor: the box is one push right of the player, the target one more to the right.
CORRIDOR = """
#######
#@$ . #
#######
"""


def make(**kwargs) -> TurnSokobanEnv:
    return TurnSokobanEnv(**kwargs)


def test_sokoban__compact_prompt_is_a_header_and_the_grid():
    env = make(prompt_style="compact")
    obs, info = env.reset(options={"level": CORRIDOR})
    assert obs == "turn 1 moves 10\n#######\n#PX_O_#\n#######"
    obs, reward, terminated, truncated, info = env.step("<answer>Right</answer>")
    assert obs == "turn 2 moves 9\n#######\n#_PXO_#\n#######"
    obs, *_ = env.step("no answer")
    assert obs == "invalid: answer like <answer>Up || Left</answer>\nturn 3 moves 9\n#######\n#_PXO_#\n#######"
    obs, reward, terminated, *_ = env.step("<answer>right</answer>")
    assert obs == "solved\nturn 4 moves 8\n#######\n#__P√_#\n#######"
    assert terminated and reward == pytest.approx(-0.1 + 1 + 10)


def test_sokoban__rewards_are_gym_sokobans_constants_summed_exactly():
    env = make()
    env.reset(options={"level": CORRIDOR})
    _, reward, terminated, _, info = env.step("<answer>Left || Right || Right</answer>")
    # Left bumps the wall (-0.1), Right pushes (-0.1), Right pushes onto the target (-0.1 + 1 + 10).
    assert reward == 10.7 and terminated and info["success"]
    assert info["score"] == 10.7 and info["moves"] == 3 and info["executed_moves"] == ["Left", "Right", "Right"]


def test_sokoban__a_box_pushed_off_a_target_costs_one():
    env = make(max_actions_per_episode=None)
    env.reset(options={"level": "########\n#      #\n#@$. $.#\n#      #\n########"})
    _, r1, *_ = env.step("<answer>Right</answer>")
    _, r2, *_ = env.step("<answer>Right</answer>")  # pushes the box from the target
    assert (r1, r2) == (0.9, -1.1)


def test_sokoban__moves_beyond_the_turn_cap_are_ignored_and_said_so():
    env = make(max_actions_per_turn=2, max_actions_per_episode=None)
    env.reset(options={"level": "#########\n#@    $.#\n#########"})
    obs, reward, *_, info = env.step("<answer>Right || Right || Right || Right</answer>")
    assert info["executed_moves"] == ["Right", "Right"] and reward == -0.2
    assert "first 2 moves" in obs


def test_sokoban__running_out_of_moves_terminates_without_success():
    env = make(max_actions_per_episode=2)
    env.reset(options={"level": "#########\n#@    $.#\n#########"})
    obs, _, terminated, truncated, info = env.step("<answer>Right || Right || Right</answer>")
    assert terminated and not truncated and not info["success"] and info["moves_left"] == 0
    assert info["executed_moves"] == ["Right", "Right"]


def test_sokoban__pushing_a_box_into_a_corner_ends_the_episode_as_deadlocked():
    level = "######\n#    #\n# $@.#\n#    #\n######"
    env = make()
    env.reset(options={"level": level})
    _, _, terminated, _, info = env.step("<answer>Down || Left || Up || Right</answer>")
    assert terminated and info["deadlocked"] and not info["success"]
    assert info["executed_moves"] == ["Down", "Left", "Up"]  # the move after the deadlock is not played
    env = make(terminate_on_deadlock=False)
    env.reset(options={"level": level})
    _, _, terminated, _, info = env.step("<answer>Down || Left || Up</answer>")
    assert not terminated and info["deadlocked"]


@pytest.mark.parametrize(
    "response",
    ["", "Up", "<answer></answer>", "<answer>Up, Left</answer>", "<answer>Jump</answer>", "<answer>|| ||</answer>"],
)
def test_sokoban__malformed_answers_are_invalid_turns_that_move_nothing(response):
    env = make()
    env.reset(options={"level": CORRIDOR})
    obs, reward, terminated, _, info = env.step(response)
    assert not info["action_is_valid"] and reward == -0.1 and not terminated
    assert info["moves"] == 0 and env.player == parse_level(CORRIDOR).player
    assert "Up, Down, Left, Right" in obs


def test_sokoban__moves_are_case_insensitive_and_think_is_ignored():
    env = make()
    env.reset(options={"level": CORRIDOR})
    _, _, _, _, info = env.step("<think>push <answer>Left</answer></think> <ANSWER> rIGHT ||  right </answer>")
    assert info["executed_moves"] == ["Right", "Right"] and info["success"]


def test_sokoban__full_prompt_states_rules_legend_format_and_budget():
    env = gym.make("TurnSokoban-v0")
    obs, info = env.reset(seed=3)
    for needle in (
        "Sokoban",
        "# wall",
        "√ box on target",
        "<answer>",
        "||",
        "10 moves in total",
        "at most 5 per turn",
        "Turn 1.",
    ):
        assert needle in obs
    assert info["optimal_certified"] and 1 <= info["optimal_moves"] <= 10


def test_sokoban__rgb_render_is_a_small_image():
    env = gym.make("TurnSokoban-v0", render_mode="rgb_array")
    env.reset(seed=0)
    img = env.render()
    assert img.shape == (96, 96, 3) and img.dtype == np.uint8 and len(np.unique(img.reshape(-1, 3), axis=0)) > 4


def test_sokoban__symbols_can_be_boxoban_or_custom():
    env = make(symbols="boxoban", prompt_style="compact")
    obs, _ = env.reset(options={"level": CORRIDOR})
    assert obs.splitlines()[2] == "#@$ . #"
    env = make(symbols={"floor": ".", "target": "T"}, prompt_style="compact")
    obs, _ = env.reset(options={"level": CORRIDOR})
    assert obs.splitlines()[2] == "#PX.T.#"
    with pytest.raises(ValueError):
        make(symbols="##_____")


def test_sokoban__levels_file_is_drawn_by_seed_and_picked_by_index(tmp_path):
    from agentgym_turn.sokoban import builtin_levels_path

    env = make(levels=builtin_levels_path(), max_actions_per_episode=None)
    names = {env.reset(seed=s)[1]["level_name"] for s in range(30)}
    assert names <= {f"handmade.txt;{i}" for i in range(6)} and len(names) >= 4
    _, info = env.reset(options={"level": 3})
    assert info["level_name"] == "handmade.txt;3" and info["optimal_moves"] == 19 and info["optimal_certified"]
    # A directory of files and a file given by path load the same way.
    (tmp_path / "a.txt").write_text("; 7\n#####\n#@$.#\n#####\n")
    env = make(levels=tmp_path)
    _, info = env.reset(seed=0)
    assert info["level_name"] == "a.txt;7" and info["optimal_moves"] == 1


def test_sokoban__bad_level_options_raise_clearly():
    env = make()
    with pytest.raises(ValueError, match="no levels="):
        env.reset(options={"level": 0})
    with pytest.raises(ValueError, match="no solution"):
        env.reset(options={"level": "#######\n#@$$. #\n#   . #\n#######"})
    with pytest.raises(ValueError, match="player"):
        env.reset(options={"level": "#####\n#$ .#\n#####"})


def test_sokoban__loaded_level_beyond_the_solver_budget_is_reported_uncertified():
    from agentgym_turn.sokoban import builtin_levels_path, load_levels

    # 150 push states prove nothing here (the proof takes about 380), but the weighted search
    # behind it finds a plan (in about 90).
    env = make(max_actions_per_episode=None, solver_budget=150)
    _, info = env.reset(options={"level": load_levels(builtin_levels_path())[5]})
    # The plan is the shortest found, never reported as optimal: optimal_moves stays -1.
    assert not info["optimal_certified"] and info["optimal_moves"] == -1 and info["solution_moves"] >= 19
    assert len(env.solution) == info["solution_moves"]
    for _ in range(40):
        _, _, terminated, _, info = env.step(env.expert_action())
        if terminated:
            break
    assert info["success"]


def test_expert__replans_after_the_agent_deviates():
    env = gym.make("TurnSokoban-8x8-v0")
    _, info = env.reset(seed=11)
    u = env.unwrapped
    first = u.solution[0]
    detour = {"Up": "Down", "Down": "Up", "Left": "Right", "Right": "Left"}[first]
    env.step(f"<answer>{detour}</answer>")
    for _ in range(10):
        _, _, terminated, truncated, info = env.step(u.expert_action())
        if terminated or truncated:
            break
    assert info["success"] and info["moves"] <= info["optimal_moves"] + 2


def test_sokoban__parse_and_format_round_trip_in_boxoban_symbols():
    from agentgym_turn.sokoban import LevelFormatError, parse_levels

    text = "; 0\n#####\n#@$.#\n#####\n\n; 1\n  ####\n###  #\n#+$* #\n######\n"
    a, b = parse_levels(text, "f.txt")
    assert (a.name, b.name) == ("f.txt;0", "f.txt;1") and a.to_text() == "#####\n#@$.#\n#####"
    # Cells outside the room (the leading spaces) become walls; the player stands on a target.
    assert b.to_text() == "######\n###  #\n#+$* #\n######"
    assert parse_level(b.to_text()) == b
    for bad, why in [
        ("#####\n#@$ #\n#####", "as many boxes"),
        ("####\n#@@#\n####", "one player"),
        ("#####\n#@$x#\n#####", "unknown symbol"),
    ]:
        with pytest.raises(LevelFormatError, match=why):
            parse_level(bad)


def test_cli__a_person_can_play_sokoban_in_the_terminal():
    import subprocess
    import sys

    out = subprocess.run(
        [sys.executable, "-m", "agentgym_turn", "play", "TurnSokoban-v0"],
        input="<answer>Up\n:auto\n:auto\n:auto\n:quit\n",
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    assert "Symbols: # wall" in out.stdout and "(expert) <answer>" in out.stdout and "success True" in out.stdout


# ---------------------------------------------------------------------- show_border


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), dim=st.sampled_from([(5, 5), (6, 6), (6, 8), (7, 7)]))
def test_show_border_false_shows_exactly_the_inside_of_an_all_wall_ring(seed, dim):
    full = gym.make("TurnSokoban-v0", dim=dim, prompt_style="compact")
    inner = gym.make("TurnSokoban-v0", dim=dim, prompt_style="compact", show_border=False)
    a, _ = full.reset(seed=seed)
    b, _ = inner.reset(seed=seed)
    for _ in range(3):
        head_a, *grid_a = a.split("\n")
        head_b, *grid_b = b.split("\n")
        assert head_a == head_b
        assert set(grid_a[0]) == set(grid_a[-1]) == {"#"} and all(r[0] == r[-1] == "#" for r in grid_a)
        assert grid_b == [r[1:-1] for r in grid_a[1:-1]]
        move = full.unwrapped.expert_action()
        a, _, term, _, _ = full.step(move)
        b, _, term_b, _, _ = inner.step(move)
        assert term == term_b
        if term:
            break


def test_show_border_false_keeps_a_ring_with_an_opening():
    env = gym.make("TurnSokoban-v0", prompt_style="compact", show_border=False)
    obs, _ = env.reset(options={"level": "######\n#@$. -\n######"})  # floor on the right edge
    assert obs.split("\n")[1:] == ["######", "#PXO__", "######"]
    obs, _ = env.reset(options={"level": "######\n#@$. #\n######"})  # closed: the ring goes
    assert obs.split("\n")[1:] == ["PXO_"]


def test_the_trainer_recipes_observation_settings_keep_the_turn_contract():
    from agentgym_turn.testing import check_turn_env

    report = check_turn_env(
        lambda: gym.make("TurnSokoban-v0", prompt_style="compact", show_border=False, format_penalty=-1.0),
        seed=0,
        episodes=2,
        fuzz_actions=16,
    )
    assert report.ok and report.expert_successes == 2


def test_quick_calls__a_reset_that_may_generate_many_levels_is_not_quick():
    """A served env runs the calls its env declares quick on the event loop: never one that can take tens of ms."""

    def quick(env_id, **kw):
        return gym.make(env_id, **kw).unwrapped.quick_calls

    assert quick("TurnSokoban-v0") == quick("TurnSokoban-v0", split="train") == {"reset", "step", "render"}
    assert "reset" in quick("TurnSokoban-8x8-v0")
    for slow in (quick("TurnSokoban-v0", split="test"), quick("TurnSokoban-10x10-v0")):
        assert slow == {"step", "render"}
