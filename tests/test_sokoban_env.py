"""TurnSokoban env: turn format, rewards, episode end, prompts, rendering, levels from text."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

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
    obs, reward, *_ , info = env.step("<answer>Right || Right || Right || Right</answer>")
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
    for needle in ("Sokoban", "# wall", "√ box on target", "<answer>", "||", "10 moves in total", "at most 5 per turn", "Turn 1."):
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
