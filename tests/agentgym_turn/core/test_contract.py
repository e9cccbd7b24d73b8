"""The fields RL infrastructure reads from every turn: exit_status and reward_valid, reward components,
state keys, snapshot/restore/fork (agentgym_turn/core/contract.py and the TurnEnv base)."""

import math

import gymnasium as gym
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import agentgym_turn
from agentgym_turn.core import EXIT_STATUSES, InfraError, TurnOutcome, fork_env

from support.toy_envs import GuessNumberEnv

IDS = agentgym_turn.env_ids()


class _Flaky(GuessNumberEnv):
    """Guess the number; a guess of ``fault`` raises ``error`` inside the turn (a service down, or a bug)."""

    def __init__(self, error: type[BaseException] = InfraError, fault: int = 7, **kwargs):
        super().__init__(**kwargs)
        self.error, self.fault = error, fault

    def _act(self, guess: int) -> TurnOutcome:
        if guess == self.fault:
            raise self.error("the retriever at http://127.0.0.1:1 refused the connection")
        return super()._act(guess)


@pytest.mark.parametrize("error, status", [(InfraError, "infra_error"), (KeyError, "env_error")])
def test_a_fault_inside_a_turn_ends_the_episode_typed_without_raising(error, status, caplog):
    env = _Flaky(error=error)
    _, info = env.reset(seed=0)
    assert (info["exit_status"], info["reward_valid"]) == ("ok", True)
    env.secret = 3
    _, reward, terminated, truncated, info = env.step("<answer>1</answer>")
    assert (info["exit_status"], info["reward_valid"], terminated, truncated) == ("ok", True, False, False)
    obs, reward, terminated, truncated, info = env.step("<answer>7</answer>")
    assert (info["exit_status"], info["reward_valid"], reward, terminated, truncated) == (
        status,
        False,
        0.0,
        False,
        True,
    )
    assert info["action_is_valid"] and "This episode is over" in obs
    assert env.episode_over and env.step("<answer>3</answer>")[2]  # the episode stays over until reset
    assert (status == "env_error") == any("env_error" in r.getMessage() for r in caplog.records)  # a bug is logged
    env.reset(seed=0)
    env.secret = 3
    assert env.step("<answer>3</answer>")[1] == 1.0


def test_exit_status__invalid_action_and_truncated_by_the_registered_turn_limit():
    env = gym.make("TurnSokoban-v0")
    env.reset(seed=0)
    statuses = [env.step("no answer here")[4]["exit_status"] for _ in range(5)]
    assert statuses == ["invalid_action"] * 5  # an invalid turn keeps its own status at the limit
    env.reset(seed=0)
    seen = []
    for _ in range(5):
        _, _, terminated, truncated, info = env.step("<answer>Up</answer>")  # 5 of the 10 moves
        seen.append((info["exit_status"], terminated, truncated))
    assert seen[-1] == ("truncated", False, True) and all(s == ("ok", False, False) for s in seen[:-1])
    assert set(s for s, _, _ in seen) <= set(EXIT_STATUSES)


@pytest.mark.parametrize("env_id", IDS)
def test_a_reset_that_raises_leaves_the_env_ready_for_the_next_reset_and_step(env_id):
    env = gym.make(env_id)  # Gymnasium's passive checker included, as users get it
    with pytest.raises(ValueError, match="unknown option"):
        env.reset(seed=0, options={"evil": 1})
    first, _ = env.reset(seed=0)
    _, reward, _, _, info = env.step("no answer here")
    assert isinstance(first, str) and info["action_is_valid"] is False and reward <= 0
    env.close()


def _play(env, seed, steps=12, expert_share=0.7):
    """Expert and stray responses from ``reset(seed)``; every (reward, info) of the episode."""
    rng = np.random.default_rng(seed)
    _, info = env.reset(seed=seed)
    out = [(0.0, info)]
    strays = [
        "garbage",
        "<answer>Left</answer>",
        "search[red shoes]",
        "click[back to search]",
        "<say>hi</say>",
        "<search>who</search>",
    ]
    for _ in range(steps):
        response = (
            env.unwrapped.expert_action() if rng.random() < expert_share else strays[int(rng.integers(len(strays)))]
        )
        _, reward, terminated, truncated, info = env.step(response)
        out.append((reward, info))
        if terminated or truncated:
            break
    return out


@pytest.mark.parametrize("env_id", IDS)
def test_reward_components__declared_names_sum_to_every_reward(env_id):
    env = gym.make(env_id)
    declared = tuple(env.unwrapped.metadata["reward_components"])
    nonzero = set()
    for seed in range(6):
        for reward, info in _play(env, seed):
            parts = info["reward_components"]
            assert tuple(parts) == declared
            assert math.isclose(math.fsum(parts.values()), reward, abs_tol=1e-9), (reward, parts)
            nonzero |= {k for k, v in parts.items() if v}
    assert nonzero  # the components carry the rewards, not only zeros
    env.close()


def test_reward_components__name_the_papers_terms():
    assert gym.make("TurnSokoban-v0").unwrapped.metadata["reward_components"] == (
        "step",
        "box_on_target",
        "box_off_target",
        "finish",
        "format",
    )
    assert gym.make("TurnWebShop-v0").unwrapped.metadata["reward_components"] == (
        "attributes",
        "options",
        "price",
        "format",
    )
    assert gym.make("TurnSearchQA-v0").unwrapped.metadata["reward_components"] == ("exact_match", "format")
    env = gym.make("TurnSokoban-v0")
    env.reset(seed=3)
    for _ in range(5):
        _, reward, terminated, _, info = env.step(env.unwrapped.expert_action())
        if terminated:
            break
    assert (
        info["success"]
        and info["reward_components"]["finish"] == 10.0
        and info["reward_components"]["box_on_target"] == 1.0
    )


@pytest.mark.parametrize("env_id", IDS)
def test_snapshot_restore_and_fork_continue_exactly_rng_included(env_id):
    env = gym.make(env_id)
    base = env.unwrapped
    for seed in range(3):
        env.reset(seed=seed)
        env.step(base.expert_action())
        snap, forks = base.snapshot(), base.fork(2)
        script = [base.expert_action(), "garbage", "<answer>Up</answer>", "click[< prev]"]

        def trace(e):
            out = []
            for response in script:
                result = e.step(response)
                out.append(result[:4] + (result[4].get("state_key"), result[4]["reward_components"]))
                if result[2]:
                    break
            return out, e.reset()  # a reset without a seed draws from the env's RNG

        reference = trace(base)
        assert trace(forks[0]) == reference and trace(forks[1]) == reference
        base.restore(snap)
        assert trace(base) == reference
    env.close()


def test_fork_env_keeps_the_wrappers_and_the_turns_played():
    env = gym.make("TurnSokoban-v0")
    env.reset(seed=1)
    for _ in range(3):
        env.step("no move")
    (twin,) = fork_env(env, 1)
    assert repr(twin) == repr(env) and twin.unwrapped is not env.unwrapped
    assert [twin.step("no move")[3] for _ in range(2)] == [False, True]  # TimeLimit's count came along
    assert env.unwrapped.turn == 3  # the original did not move


def _sokoban_after(seed, turns):
    env = gym.make("TurnSokoban-v0", max_episode_steps=10)
    _, info = env.reset(seed=seed)
    for t in turns:
        _, _, _, _, info = env.step(f"<answer>{t}</answer>" if t else "no move")
    u = env.unwrapped
    return info["state_key"], (u._boxes, u._player, u._moves, u.turn, u.episode_over, u._deadlocked)


MOVES = st.sampled_from(
    ["Up", "Down", "Left", "Right", "Up || Down", "Left || Right", "Down || Up", "Right || Left", ""]
)


@settings(max_examples=60, deadline=None)
@given(
    seed=st.integers(0, 2**31 - 1), a=st.lists(MOVES, min_size=2, max_size=2), b=st.lists(MOVES, min_size=2, max_size=2)
)
def test_sokoban_state_key__equal_exactly_when_board_moves_and_turn_are(seed, a, b):
    """Two action sequences from one level: the keys are equal exactly when they reach the same boxes, player,
    moves played and turn (the level's walls and targets are shared)."""
    key_a, state_a = _sokoban_after(seed, a)
    key_b, state_b = _sokoban_after(seed, b)
    assert (key_a == key_b) == (state_a == state_b)


def test_sokoban_state_key__two_paths_to_one_state_and_two_levels_apart():
    # a walk there and back within one turn, and the other way round, lands on one state
    for seed in range(40):
        key_a, state_a = _sokoban_after(seed, ["Up || Down"])
        key_b, state_b = _sokoban_after(seed, ["Down || Up"])
        if state_a == state_b:
            assert key_a == key_b
            break
    else:
        pytest.fail("no level let the player walk up and down both ways")
    assert _sokoban_after(0, [])[0] != _sokoban_after(1, [])[0]  # other levels (other boards)
    assert _sokoban_after(0, [""])[0] != _sokoban_after(0, [])[0]  # one turn fewer left


def test_webshop_state_key__same_page_by_two_searches_and_other_goals_apart():
    def after(seed, actions):
        env = gym.make("TurnWebShop-v0")
        _, info = env.reset(seed=seed)
        for a in actions:
            _, _, _, _, info = env.step(a)
        return info["state_key"]

    assert after(0, ["search[red shoes]", "search[blue mug]"]) == after(0, ["search[green tea]", "search[blue mug]"])
    assert after(0, ["search[red shoes]", "search[blue mug]"]) != after(0, ["search[red shoes]", "search[blue mugs]"])
    goals = {after(seed, []) for seed in range(20)}
    assert len(goals) > 10  # the first page, under different goals


def test_searchqa_state_key__searches_in_either_order_and_other_questions_apart():
    def after(seed, actions, **kwargs):
        env = gym.make("TurnSearchQA-v0", protocol="strict", **kwargs)
        _, info = env.reset(seed=seed)
        for a in actions:
            _, _, _, _, info = env.step(a)
        return info["state_key"]

    x, y = "<search>capital city</search>", "<search>born in</search>"
    assert after(0, [x, y]) == after(0, [y, x])  # the same passages retrieved, the same budget left
    assert after(0, [x, y]) != after(0, [x, x])
    assert (
        after(0, []) != after(1, [])
        or gym.make("TurnSearchQA-v0").reset(seed=0)[1]["question_id"]
        == gym.make("TurnSearchQA-v0").reset(seed=1)[1]["question_id"]
    )


def test_dialog_state_key__follows_both_sides_histories():
    env = gym.make("TurnWebShopDialog-v0")
    _, first = env.reset(seed=0)
    keys = [first["state_key"]]
    for _ in range(3):
        keys.append(env.step(env.unwrapped.expert_action())[4]["state_key"])
    assert len(set(keys)) == len(keys)
    env.reset(seed=0)
    assert env.step("<say>hello</say>")[4]["state_key"] != keys[1]  # another question, another history
