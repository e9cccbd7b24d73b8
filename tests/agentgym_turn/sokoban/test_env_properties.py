"""For any response: TurnSokoban never raises, stays a legal Sokoban state, and pays exact rewards.

Every step is checked against the independent reference of ``test_sokoban_reference``: the
moves the env reports as played, replayed there from the previous state, must give the
env's new state and exactly its reward.
"""

from __future__ import annotations

import gymnasium as gym
from hypothesis import given
from hypothesis import strategies as st

import agentgym_turn  # noqa: F401
from agentgym_turn.testing import strategies as st_turn
from support.sokoban_reference import RefLevel, ref_move, ref_parse

VARIANTS = ("TurnSokoban-v0", "TurnSokoban-8x8-v0", "TurnSokoban-10x10-v0")
MOVES = ("Up", "Down", "Left", "Right")
_ENVS: dict[tuple[str, str], gym.Env] = {}


def env_for(env_id: str, style: str) -> gym.Env:
    key = (env_id, style)
    if key not in _ENVS:
        _ENVS[key] = gym.make(env_id, prompt_style=style, max_episode_steps=1000)
    return _ENVS[key]


@st.composite
def move_answers(draw) -> tuple[str, list[str]]:
    """A well-formed answer with 0-14 moves in random letter case and spacing, and the moves."""
    moves = draw(st.lists(st.sampled_from(MOVES), max_size=14))
    words = ["".join(c.upper() if draw(st.booleans()) else c.lower() for c in m) for m in moves]
    pad = draw(st.sampled_from(["", " ", "  ", "\n"]))
    think = draw(st.sampled_from(["", "<think>I push it.</think>", "<think><answer>Up</answer></think>"]))
    body = f"{pad}||{pad}".join(words)
    return f"{think}<answer>{pad}{body}{pad}</answer>", moves


responses = st.one_of(
    move_answers(),
    st_turn.responses().map(lambda r: (r, None)),
    st_turn.tag_soup(extra=("Up", "down", "||", "LEFT", "Right ")).map(lambda r: (r, None)),
)


def ref_state(env) -> tuple[RefLevel, frozenset, tuple]:
    u = env.unwrapped
    base = ref_parse(u.level.to_text())
    rc = lambda c: divmod(c, u.level.cols)  # noqa: E731
    return base, frozenset(rc(c) for c in u.boxes), rc(u.player)


def check_legal(env) -> None:
    u = env.unwrapped
    board, boxes = u.board, u.boxes
    assert len(boxes) == u.level.num_boxes, "a box appeared or vanished"
    assert all(board.free[c] for c in boxes), "a box is inside a wall"
    assert board.free[u.player] and u.player not in boxes, "the player is inside a wall or a box"


@given(
    env_id=st.sampled_from(VARIANTS),
    style=st.sampled_from(["full", "compact"]),
    seed=st.integers(0, 40),
    turns=st.lists(responses, min_size=1, max_size=6),
)
def test_sokoban__any_responses_keep_a_legal_state_and_exact_rewards(env_id, style, seed, turns):
    env = env_for(env_id, style)
    u = env.unwrapped
    _, info = env.reset(seed=seed)
    check_legal(env)
    score = 0.0
    for response, intended in turns:
        level, boxes, player = ref_state(env)
        moves_before, left_before = info["moves"], info["moves_left"]
        obs, reward, terminated, truncated, info = env.step(response)
        assert isinstance(obs, str) and obs in env.observation_space
        check_legal(env)
        score += reward
        assert abs(info["score"] - score) < 1e-9
        if not info["action_is_valid"]:
            assert intended is None or intended == []
            assert reward == u.format_penalty and info["executed_moves"] == []
            assert ref_state(env)[1:] == (boxes, player) and info["moves"] == moves_before
        else:
            tenths = 0
            for move in info["executed_moves"]:
                boxes, player, r = ref_move(level, boxes, player, move)
                tenths += r
            assert ref_state(env)[1:] == (boxes, player)
            assert reward == tenths / 10
            assert info["moves"] == moves_before + len(info["executed_moves"])
            if intended is not None:
                played = info["executed_moves"]
                assert played == intended[: len(played)]
                limit = min(len(intended), u.max_actions_per_turn, left_before)
                assert len(played) == limit or terminated
        assert info["success"] == (boxes <= level.targets)
        assert terminated == (info["success"] or info["deadlocked"] or info["moves_left"] == 0)
        if terminated or truncated:
            break


@given(
    st.sampled_from(VARIANTS),
    st.integers(0, 10**6),
    st.lists(st.sampled_from(MOVES), min_size=1, max_size=14),
    st.booleans(),
)
def test_the_written_state_key_is_the_contracts_digest_of_the_state_fields(env_id, seed, moves, deadlock_ends):
    """Sokoban writes its key's JSON itself (the board's part once): it must equal the contract's digest of
    ``_state_fields`` in every state, the episode's end and a deadlock included."""
    from agentgym_turn.core.contract import state_digest

    env = gym.make(env_id, terminate_on_deadlock=deadlock_ends)
    _, info = env.reset(seed=seed)
    u = env.unwrapped

    def digest():
        return state_digest([type(u).__name__, u.turn, u.episode_over, u._state_fields()])

    assert info["state_key"] == digest()
    for move in moves + ["no move"]:
        *_, info = env.step(f"<answer>{move}</answer>")
        assert info["state_key"] == digest(), (u._boxes, u._player, u._deadlocked, u.episode_over)
    for twin in agentgym_turn.fork_env(env, 1):  # a fork draws its own board part, to the same key
        assert twin.unwrapped.state_key() == digest()
