"""``prompt_style="ragen"`` against RAGEN's own code (fixture from ``benchmarks/sokoban_ragen_fixture.py``).

The fixture holds what RAGEN's ``_parse_response``, ``_extract_map_valid_actions``, its
penalty condition and ``get_lm_inputs`` returned on a few hundred responses and on episodes
played in our env; this module checks that our parser and our observations give the same.
"""

from __future__ import annotations

import json
import re

import gymnasium as gym
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import agentgym_turn  # noqa: F401
from agentgym_turn.sokoban.constants import MOVE_NAMES
from agentgym_turn.sokoban.ragen import parse_ragen_response
from agentgym_turn.testing import strategies as st_turn
from support.paths import DATA
from support.sokoban_reference import ref_move, ref_parse

FIXTURE = json.loads((DATA / "sokoban_ragen.json").read_text(encoding="utf-8"))
CASES = FIXTURE["cases"]
# An open room: five moves can never solve it or block the player, so every valid move is played.
ROOM = "#########\n#       #\n#   $   #\n#   @   #\n#       #\n#.      #\n#########"


def test_fixture__covers_clean_partly_valid_and_invalid_answers():
    kinds = {(c["penalized"], bool(c["valid_actions"])) for c in CASES}
    assert len(CASES) >= 300 and kinds == {(False, True), (True, True), (True, False)}
    assert FIXTURE["settings"] == {
        "enable_think": True,
        "action_sep": "||",
        "max_actions_per_turn": 5,
        "format_penalty": -0.1,
        "max_actions_per_traj": 10,
        "max_tokens": 100,
    }


@pytest.mark.parametrize("case", CASES, ids=range(len(CASES)))
def test_parser__agrees_with_ragens_parse_response_and_valid_action_filter(case):
    ours = parse_ragen_response(case["response"], 5)
    assert list(ours.actions) == case["actions"]
    assert [MOVE_NAMES[m] for m in ours.moves] == case["valid_actions"]
    assert ours.penalized == case["penalized"]


def test_env__plays_the_valid_moves_of_each_response_and_adds_ragens_penalty():
    env = gym.make("TurnSokoban-v0", prompt_style="ragen", max_actions_per_episode=None, terminate_on_deadlock=False)
    for case in CASES:
        env.reset(options={"level": ROOM})
        _, reward, terminated, _, info = env.step(case["response"])
        assert info["executed_moves"] == case["valid_actions"] and not terminated
        expected = -0.1 * len(case["valid_actions"]) + (-0.1 if case["penalized"] else 0.0)
        assert reward == pytest.approx(expected)
        assert info["action_is_valid"] == bool(case["valid_actions"])


def test_env__observations_equal_ragens_messages_turn_by_turn():
    for ep in FIXTURE["episodes"]:
        env = gym.make("TurnSokoban-v0", prompt_style="ragen", terminate_on_deadlock=False)
        obs, _ = env.reset(seed=ep["seed"])
        assert obs == ep["user_messages"][0] and obs.startswith(FIXTURE["prefix"])
        for k, turn in enumerate(ep["turns"][:-1]):
            obs, *_ = env.step(turn["response"])
            assert obs == ep["user_messages"][k + 1], (ep["seed"], k)
        assert len(ep["turns"]) >= 2


def test_env__the_expert_answers_in_ragens_format():
    env = gym.make("TurnSokoban-v0", prompt_style="ragen")
    for seed in range(20):
        env.reset(seed=seed)
        done = False
        while not done:
            response = env.unwrapped.expert_action()
            assert not parse_ragen_response(response).penalized
            _, _, terminated, truncated, info = env.step(response)
            done = terminated or truncated
        assert info["success"], seed


# RAGEN's documented rule, as a regular expression: the oracle for any tag soup (on short texts,
# where its rescanning does not matter).
_RAGEN_RULE = re.compile(r"<think>(.*?)</think>\s*<answer>(.*?)</answer>", re.DOTALL)
_PIECES = [
    "<think>",
    "</think>",
    "<answer>",
    "</answer>",
    "<ANSWER>",
    " ",
    "\n",
    "\u00a0",
    "Up",
    "left",
    "||",
    "x",
    "<|im_end|>",
]


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from(_PIECES), max_size=14).map("".join))
def test_parser__matches_ragens_rule_on_any_tag_soup(text):
    m = _RAGEN_RULE.search(text)
    ours = parse_ragen_response(text, 5)
    if m is None:
        assert ours.actions == () and ours.penalized
        return
    content = m.group(2)
    for token in ("<think>", "</think>", "<answer>", "</answer>", "<|im_start|>", "<|im_end|>"):
        content = content.replace(token, "").strip()
    assert list(ours.actions) == [p.strip() for p in content.split("||") if p.strip()][:5]


def test_parser__adversarial_inputs_are_read_in_one_pass():
    # RAGEN's expression rescans the text after every <think>; ours finds the same answer by
    # a bounded number of str.find passes, so these 65,536-character cases parse at once.
    for text in ("<think>" * 9362, "<think>" + "</think>" * 8191, "<think>" + "</think> " * 7281 + "<answer>Up"):
        assert parse_ragen_response(text[:65_536]).moves == ()
    assert parse_ragen_response("<think>" + " " * 65_000 + "</think><answer>Up</answer>").moves == (0,)


_RAGEN_ENVS: dict[str, gym.Env] = {}


@settings(max_examples=60, deadline=None)
@given(
    env_id=st.sampled_from(["TurnSokoban-v0", "TurnSokoban-8x8-v0"]),
    seed=st.integers(0, 30),
    turns=st.lists(
        st.one_of(st_turn.responses(), st_turn.tag_soup(extra=("Up", "down", "||", "LEFT", "<think>", "</think>"))),
        min_size=1,
        max_size=5,
    ),
)
def test_env__any_response_in_the_ragen_style_plays_exactly_ragens_moves(env_id, seed, turns):
    if env_id not in _RAGEN_ENVS:
        _RAGEN_ENVS[env_id] = gym.make(env_id, prompt_style="ragen", max_episode_steps=100)
    env = _RAGEN_ENVS[env_id]
    u = env.unwrapped
    _, info = env.reset(seed=seed)
    level = ref_parse(u.level.to_text())
    rc = lambda c: divmod(c, u.level.cols)  # noqa: E731
    for response in turns:
        boxes, player = frozenset(rc(c) for c in u.boxes), rc(u.player)
        answer = parse_ragen_response(response, u.max_actions_per_turn)
        obs, reward, terminated, truncated, info = env.step(response)
        assert obs in env.observation_space and obs.startswith("Reward:\n")
        played = info["executed_moves"]
        assert played == [MOVE_NAMES[m] for m in answer.moves][: len(played)]
        tenths = 0
        for move in played:
            boxes, player, r = ref_move(level, boxes, player, move)
            tenths += r
        assert (frozenset(rc(c) for c in u.boxes), rc(u.player)) == (boxes, player)
        assert reward == pytest.approx(tenths / 10 + (u.format_penalty if answer.penalized else 0.0))
        if terminated or truncated:
            break
