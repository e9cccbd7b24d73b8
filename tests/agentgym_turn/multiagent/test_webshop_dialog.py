"""The shopping dialog (webshop_dialog_v0) and its assistant's side (TurnWebShopDialog-v0)."""

from __future__ import annotations

import re

import gymnasium as gym
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pettingzoo.test import parallel_api_test, parallel_seed_test, seed_test
from pettingzoo.utils.conversions import parallel_to_aec

import agentgym_turn  # noqa: F401 - registers the ids
from agentgym_turn.multiagent import webshop_dialog_v0
from agentgym_turn.multiagent.assistant_env import silent_assistant_action
from agentgym_turn.multiagent.customer import customer_answer, disclosed, goal_facts, question_topics
from agentgym_turn.multiagent.webshop_dialog import ASSISTANT, CUSTOMER, INFO_KEYS
from agentgym_turn.testing import check_text_aec_env
from support.paths import ROOT

SHOP = dict(goal_split="test")
#: Goals of the quality claim in the test (benchmarks/webshop_dialog.py measures 300).
TEST_GOALS = 60


def play_single(env, policy, goal_index: int, seed: int = 0) -> tuple[float, dict]:
    """One episode of TurnWebShopDialog-v0 on ``goal_index``: (return, last info)."""
    env.reset(seed=seed, options={"goal_index": goal_index})
    total, info = 0.0, {}
    for _ in range(env.spec.max_episode_steps if env.spec else 20):
        _, reward, terminated, truncated, info = env.step(policy(env))
        total += reward
        if terminated or truncated:
            break
    return total, info


# ---------------------------------------------------------------- PettingZoo API
def test_aec_env__passes_the_text_aware_aec_contract_check():
    report = check_text_aec_env(lambda: webshop_dialog_v0.env(render_mode="ansi", **SHOP), seeds=(0, 1, 2))
    assert report.episodes == 3 and report.kinds.get("expert", 0) > 0 and report.kinds.get("adversarial", 0) > 0
    report = check_text_aec_env(lambda: webshop_dialog_v0.raw_env(max_cycles=7, **SHOP), seeds=(5,))
    assert report.steps == 7  # truncated after max_cycles moves


def test_parallel_env__passes_pettingzoo_parallel_api_test():
    with pytest.warns(UserWarning, match="ignores unknown option"):  # the test resets with options={"options": 1}
        parallel_api_test(webshop_dialog_v0.parallel_env(**SHOP), num_cycles=60)


def test_aec_and_parallel_env__pass_pettingzoo_seed_tests():
    seed_test(lambda: webshop_dialog_v0.env(**SHOP), num_cycles=30)
    parallel_seed_test(lambda: webshop_dialog_v0.parallel_env(**SHOP), num_cycles=30)


def test_parallel_view__plays_the_same_dialog_as_the_aec_env_and_converts_back():
    aec = webshop_dialog_v0.env(**SHOP)
    par = webshop_dialog_v0.parallel_env(**SHOP)
    aec.reset(seed=4, options={"goal_index": 7})
    observations, infos = par.reset(seed=4, options={"goal_index": 7})
    assert observations == {a: aec.observe(a) for a in aec.agents}
    aec_return = par_return = 0.0
    while aec.agents:
        agent = aec.agent_selection
        done = aec.terminations[agent] or aec.truncations[agent]
        move = None if done else aec.unwrapped.expert_action(agent)
        aec.step(move)
        aec_return += aec.rewards.get(ASSISTANT, 0.0) if aec.agents else 0.0
        if done:
            continue
        assert infos[CUSTOMER]["active_agent"] == agent
        other = CUSTOMER if agent == ASSISTANT else ASSISTANT
        observations, rewards, _, _, infos = par.step({agent: move, other: "ignored: not this agent's turn"})
        par_return += rewards[ASSISTANT]
        assert observations == {a: aec.observe(a) for a in aec.agents}
    assert par.agents == [] and aec_return == pytest.approx(par_return) and aec_return > 0.9
    back = parallel_to_aec(webshop_dialog_v0.parallel_env(**SHOP))
    assert isinstance(back.unwrapped, webshop_dialog_v0.raw_env)
    check_text_aec_env(lambda: parallel_to_aec(webshop_dialog_v0.parallel_env(**SHOP)), seeds=(3,))


# ---------------------------------------------------------------- turn contract per agent
_MOVE = st.one_of(
    st.text(max_size=60),
    st.text(max_size=30).map(lambda t: f"<say>{t}</say>"),
    st.sampled_from(
        ["<done/>", "<DONE />", "search[shoes]", "click[buy now]", "click[< prev]", "<say></say>", "<say>x", "</say>"]
    ),
    st.just("EXPERT"),
)


@settings(max_examples=40)
@given(moves=st.lists(_MOVE, min_size=1, max_size=25), seed=st.integers(0, 50))
def test_any_string_from_either_agent__never_raises_and_keeps_the_turn_order(moves, seed):
    env = webshop_dialog_v0.raw_env(max_cycles=30, **SHOP)
    env.reset(seed=seed)
    assert env.agent_selection == CUSTOMER  # the customer opens
    for move in moves:
        if not env.agents or env.terminations[env.agent_selection]:
            break
        mover = env.agent_selection
        other = ASSISTANT if mover == CUSTOMER else CUSTOMER
        move = env.expert_action(mover) if move == "EXPERT" else move
        messages = env.infos[mover]["messages"]
        env.step(move)
        info = env.infos[mover]
        assert set(info) == set(INFO_KEYS) and info["active_agent"] == env.agent_selection
        said = info["action_is_valid"] and re.search(r"<\s*say", move, re.I) is not None
        if mover == ASSISTANT:
            assert info["messages"] == messages + (1 if said else 0)
        # a valid message hands the turn over; anything else (a shop action, an invalid move) keeps it
        assert (
            env.agent_selection == (other if said and not env.terminations[mover] else mover) or env.terminations[mover]
        )
        for agent in env.agents:
            assert env.observation_space(agent).contains(env.observe(agent))


def test_same_seed_and_moves__same_dialog():
    def transcript(seed):
        env = webshop_dialog_v0.raw_env(render_mode="ansi", **SHOP)
        env.reset(seed=seed)
        rng = np.random.default_rng(seed)
        while env.agents and not env.terminations[env.agent_selection]:
            env.step(env.expert_action() if rng.random() < 0.7 else "nonsense")
        return env.render(), env.infos[ASSISTANT]

    assert transcript(11) == transcript(11)
    assert transcript(11)[0] != transcript(12)[0]


def test_the_assistant_never_sees_the_goal_and_the_customer_does():
    env = webshop_dialog_v0.raw_env(**SHOP)
    env.reset(seed=0, options={"goal_index": 2})
    goal, facts = env.goal, env.facts
    assert goal.instruction_text in env.observe(CUSTOMER)
    seen = [env.observe(ASSISTANT)]
    while env.agents and not env.terminations[env.agent_selection]:
        env.step(env.expert_action())
        seen.append(env.observe(ASSISTANT))
    assert env.infos[ASSISTANT]["success"]
    assert not any(goal.instruction_text in text for text in seen)
    assert disclosed(facts, seen[:1]) == []  # the first message names only the category


def test_customer_done__ends_the_episode_with_nothing_bought():
    env = webshop_dialog_v0.raw_env(**SHOP)
    env.reset(seed=0)
    env.step("<think>never mind</think><done/>")
    assert all(env.terminations.values()) and env.infos[ASSISTANT]["score"] == 0.0 and env.rewards[ASSISTANT] == 0.0


def test_rewards__purchase_score_minus_message_cost_and_format_penalty():
    env = webshop_dialog_v0.raw_env(message_cost=0.05, format_penalty=-0.3, **SHOP)
    env.reset(seed=0, options={"goal_index": 1})
    env.step("hello")  # customer: invalid
    assert env.rewards == {CUSTOMER: -0.3, ASSISTANT: -0.3} and env.agent_selection == CUSTOMER
    env.step(env.expert_action())  # customer's request: free
    assert env.rewards[ASSISTANT] == 0.0
    env.step("<say>What kind of product?</say>")
    assert env.rewards == {CUSTOMER: -0.05, ASSISTANT: -0.05}


# ---------------------------------------------------------------- the scripted customer
def test_scripted_customer__answers_truthfully_and_vaguely_to_vague_questions():
    env = webshop_dialog_v0.raw_env(**SHOP)
    env.reset(seed=0, options={"goal_index": 1})
    facts = env.facts
    full = customer_answer("What options and price?", facts)
    assert all(f"{n}: {v}" in full for n, v in facts.options) and f"{facts.price_limit:.2f} dollars" in full
    assert disclosed(facts, [customer_answer("How is the weather?", facts)]) == []
    assert facts.category in customer_answer("How is the weather?", facts)
    terse = customer_answer("Which options do you want?", facts, terseness="terse")
    assert len(disclosed(facts, [terse])) == 1
    second = customer_answer("Which other option?", facts, terseness="terse", already=disclosed(facts, [terse]))
    assert len(disclosed(facts, [terse, second])) == 2
    assert question_topics("Any size preference?", facts) == ["option:size"]
    assert "No preference on flavor" in customer_answer("Which flavour?", facts)


def test_terse_customer__the_expert_still_learns_everything_by_asking_again():
    env = gym.make("TurnWebShopDialog-v0", terseness="terse", max_episode_steps=30, **SHOP)
    total, info = play_single(env, lambda e: e.unwrapped.expert_action(), goal_index=1)
    assert info["success"] and info["facts_disclosed"] == info["facts_total"] and info["messages"] > 3


# ---------------------------------------------------------------- TurnWebShopDialog-v0
def test_single_agent_env__first_observation_holds_only_the_category():
    env = gym.make("TurnWebShopDialog-v0", **SHOP)
    obs, info = env.reset(seed=0, options={"goal_index": 5})
    facts = goal_facts(env.unwrapped.dialog.goal)
    assert facts.category in obs and disclosed(facts, [obs]) == [] and info["facts_disclosed"] == 0


def test_expert_assistant_with_scripted_customer__buys_right_and_never_asking_scores_clearly_lower():
    env = gym.make("TurnWebShopDialog-v0", **SHOP)
    expert = [play_single(env, lambda e: e.unwrapped.expert_action(), g)[1] for g in range(TEST_GOALS)]
    silent = [play_single(env, silent_assistant_action, g)[1] for g in range(TEST_GOALS)]
    expert_success = np.mean([i["success"] for i in expert])
    silent_score, expert_score = np.mean([i["score"] for i in silent]), np.mean([i["score"] for i in expert])
    assert expert_success >= 0.95
    assert silent_score < expert_score - 0.5 and np.mean([i["success"] for i in silent]) < 0.2


def test_single_agent_return__equals_the_shared_return_of_the_same_dialog():
    single = gym.make("TurnWebShopDialog-v0", **SHOP)
    total, info = play_single(single, lambda e: e.unwrapped.expert_action(), goal_index=9)
    aec = webshop_dialog_v0.raw_env(**SHOP)
    aec.reset(seed=0, options={"goal_index": 9})
    shared = 0.0
    while aec.agents and not aec.terminations[aec.agent_selection]:
        aec.step(aec.expert_action())
        shared += aec.rewards[ASSISTANT]
    assert total == pytest.approx(shared) and info["score"] == aec.infos[ASSISTANT]["score"] == 1.0
    assert total == pytest.approx(1.0 - 0.01 * info["messages"])


def test_docs_example_transcript__is_what_the_env_renders():

    page = (ROOT / "docs" / "envs" / "webshop_dialog.md").read_text(encoding="utf-8")
    shown = re.search(r"prints\n\n```text\n(.*?)\n```", page, re.S)
    assert shown, "docs/envs/webshop_dialog.md lost its example transcript block"
    env = webshop_dialog_v0.env(render_mode="ansi", goal_split="test")
    env.reset(seed=0, options={"goal_index": 1})
    for agent in env.agent_iter():
        _, _, terminated, truncated, _ = env.last()
        env.step(None if terminated or truncated else env.unwrapped.expert_action(agent))
    assert env.render() == shown.group(1)
