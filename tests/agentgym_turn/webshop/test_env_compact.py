"""TurnWebShop-v0's opt-in compact options (observation_style, results_per_page, goal_from_seed)
keep the turn contract and do what docs/envs/webshop.md says; the defaults stay WebShop's."""

from __future__ import annotations

import gymnasium as gym
import pytest

import agentgym_turn  # noqa: F401
from agentgym_turn.testing import check_turn_env
from agentgym_turn.webshop.expert import best_reward, goal_query, instruction_clause, product_phrase
from agentgym_turn.webshop.product import Goal

COMPACT = {"observation_style": "compact", "results_per_page": 3}


def _expert_episode(env, seed):
    obs, info = env.reset(seed=seed)
    pages = [obs]
    for _ in range(15):
        obs, reward, terminated, truncated, info = env.step(env.unwrapped.expert_action())
        pages.append(obs)
        if terminated or truncated:
            break
    return pages, info


def test_compact_style__keeps_the_turn_contract():
    check_turn_env(lambda: gym.make("TurnWebShop-v0", **COMPACT), episodes=3, fuzz_actions=12)


def test_compact_style__pages_are_short_and_never_repeat_the_instruction():
    env = gym.make("TurnWebShop-v0", **COMPACT)
    for seed in range(5):
        pages, info = _expert_episode(env, seed)
        instruction = env.unwrapped.goal.instruction_text
        assert info["success"] and instruction in pages[0]
        assert all(instruction not in p and "Available actions" not in p for p in pages[1:])
        assert len(pages[1].splitlines()) == 1 + 3  # header + results_per_page products
        assert all(len(p) < 600 for p in pages[1:])


def test_compact_style__results_are_clicked_by_their_number_on_the_page():
    env = gym.make("TurnWebShop-v0", **COMPACT)
    env.reset(seed=2)
    page, _, _, _, info = env.step("search[coffee]")
    assert info["available_actions"] == ["back to search", "next >", "1", "2", "3"]
    second_title = page.splitlines()[2].split(": ", 1)[1]
    item, _, _, _, info = env.step("click[2]")
    assert info["page"] == "item" and item.startswith(second_title.rsplit(" $", 1)[0])


def test_compact_style__chosen_option_group_shows_only_its_choice():
    env = gym.make("TurnWebShop-v0", **COMPACT)
    env.reset(seed=0)
    env.step(env.unwrapped.expert_action())  # search
    item, *_ = env.step(env.unwrapped.expert_action())  # open the product
    product = env.unwrapped.shop.product(env.unwrapped.state.product)
    name, values = next(iter(product.options.items()))
    after, *_ = env.step(f"click[{values[-1]}]")
    assert f"{name}: {' | '.join(values)}" in item
    assert f"{name}: {values[-1]} (chosen)" in after and " | ".join(values) not in after


def test_results_per_page__pages_and_clickables_follow_it():
    env = gym.make("TurnWebShop-v0", results_per_page=4)
    env.reset(seed=1)
    _, _, _, _, info = env.step("search[coffee]")
    products = [a for a in info["available_actions"] if a not in ("back to search", "next >", "< prev")]
    assert len(products) == 4
    _, _, _, _, info2 = env.step("click[next >]")
    assert not set(products) & set(info2["available_actions"])


@pytest.mark.parametrize("value", [0, -1, True, 2.5])
def test_results_per_page__rejects_a_non_positive_int(value):
    with pytest.raises(ValueError, match="results_per_page"):
        gym.make("TurnWebShop-v0", results_per_page=value)


def test_observation_style__rejects_unknown_names():
    with pytest.raises(ValueError, match="observation_style"):
        gym.make("TurnWebShop-v0", observation_style="short")


def test_goal_from_seed__consecutive_seeds_visit_every_test_goal_once():
    env = gym.make("TurnWebShop-v0", goal_split="test", goal_from_seed=True, **COMPACT)
    start = 1_000_000_000
    goals = [env.reset(seed=start + i)[1]["goal_index"] for i in range(500)]
    assert sorted(goals) == list(range(500))
    assert env.reset(seed=start + 500)[1]["goal_index"] == goals[0]
    assert env.reset(seed=3, options={"goal_index": 42})[1]["goal_index"] == 42  # an explicit goal still wins


def test_defaults__draw_goals_uniformly_and_show_webshop_pages():
    env = gym.make("TurnWebShop-v0", goal_split="test")
    goals = {env.reset(seed=1_000_000_000 + i)[1]["goal_index"] for i in range(200)}
    assert len(goals) < 200  # uniform draws repeat (200 of 500: almost surely)
    obs, _ = env.reset(seed=0)
    assert "[SEP]" in obs and "Available actions" in obs


def _goal(instruction: str, name: str, options: dict[str, str]) -> Goal:
    return Goal(
        index=0,
        asin="B0",
        instruction_text=instruction,
        attributes=(),
        goal_options=options,
        price_upper=50.0,
        query="",
        category="",
        product_category="",
        name=name,
    )


def test_product_phrase__is_the_instruction_run_the_title_holds():
    goal = _goal(
        "find me dermatologist tested makeup brush set with color: black, and price lower than 50.00 dollars",
        "Calina Botanical Collagen Makeup Brush Set, Dermatologist Tested - RN373",
        {"color": "black"},
    )
    assert product_phrase(goal) == "makeup brush set"


def test_product_phrase__prefers_the_title_head_over_a_longer_attribute_after_the_comma():
    goal = _goal(
        "i am looking for a hoodie that is slim fit with size: large",
        "Oxley Cotton Hoodie, Slim Fit - UG46",
        {"size": "large"},
    )
    assert product_phrase(goal) == "hoodie"


def test_product_phrase__skips_option_values_and_is_empty_without_a_shared_word():
    goal = _goal("i need a lamp with color: black walnut", "Black Walnut Lamp", {"color": "black walnut"})
    assert product_phrase(goal) == "lamp"
    assert product_phrase(_goal("i need a lamp", "Desk Light", {})) == ""


def test_expert_query_product__keeps_the_turn_contract():
    check_turn_env(lambda: gym.make("TurnWebShop-v0", expert_query="product", **COMPACT), episodes=3, fuzz_actions=12)


def test_expert_query_product__searches_the_phrase_and_still_buys_the_goal():
    env = gym.make("TurnWebShop-v0", goal_split="test", goal_from_seed=True, expert_query="product", **COMPACT)
    scores = []
    for seed in range(20):
        env.reset(seed=seed)
        goal = env.unwrapped.goal
        first = env.unwrapped.expert_action()
        assert first == f"search[{product_phrase(goal)}]" and len(first) < len(goal_query(goal))
        scores.append(_expert_episode(env, seed)[1]["score"])
    assert sum(scores) / len(scores) >= 0.95  # measured: 0.998 on the first 200 test goals


def test_expert_query__default_searches_the_instruction():
    env = gym.make("TurnWebShop-v0", goal_split="test", goal_from_seed=True, **COMPACT)
    env.reset(seed=0)
    assert env.unwrapped.expert_query == "instruction"
    assert env.unwrapped.expert_action() == f"search[{goal_query(env.unwrapped.goal)}]"


def test_expert_query__rejects_unknown_names():
    with pytest.raises(ValueError, match="expert_query"):
        gym.make("TurnWebShop-v0", expert_query="noun")


def test_expert_clause_first_match__keeps_the_turn_contract():
    check_turn_env(
        lambda: gym.make("TurnWebShop-v0", expert_query="clause", expert_browse="first_match", **COMPACT),
        episodes=3,
        fuzz_actions=12,
    )


def test_instruction_clause__is_the_instruction_up_to_its_options():
    goal = _goal(
        "find me dermatologist tested makeup brush set with color: black, and price lower than 50.00 dollars",
        "Calina Makeup Brush Set",
        {"color": "black"},
    )
    assert instruction_clause(goal) == "find me dermatologist tested makeup brush set"
    assert (
        instruction_clause(_goal("i need a lamp, and price lower than 20.00 dollars", "Desk Lamp", {}))
        == "i need a lamp"
    )


@pytest.mark.parametrize("style", [COMPACT, {}])
def test_expert_clause_first_match__opens_the_first_listed_product_that_earns_1(style):
    env = gym.make(
        "TurnWebShop-v0",
        goal_split="test",
        goal_from_seed=True,
        expert_query="clause",
        expert_browse="first_match",
        **style,
    )
    shop = env.unwrapped.shop
    per_page = env.unwrapped.results_per_page
    for seed in range(12):
        env.reset(seed=seed)
        goal = env.unwrapped.goal
        first = env.unwrapped.expert_action()
        assert (
            first == f"search[{instruction_clause(goal)}]"
        )  # its hits hold an R = 1 product (for 200 of 200 test goals)
        for _ in range(15):
            state = env.unwrapped.state
            action = env.unwrapped.expert_action()
            if (
                state.page == "results"
                and action.startswith("click[")
                and action not in ("click[next >]", "click[< prev]")
            ):
                start = (state.page_no - 1) * per_page
                in_view = state.results[start : start + per_page]
                opened = next(
                    i
                    for k, i in enumerate(in_view)
                    if action in (f"click[{k + 1}]", f"click[{shop.product(i).asin.lower()}]")
                )
                listed_before = state.results[: state.results.index(opened)]
                assert best_reward(shop.product(opened), goal)[0] >= 1.0
                assert all(best_reward(shop.product(i), goal)[0] < 1.0 for i in listed_before)
            *_, terminated, truncated, info = env.step(action)
            if terminated or truncated:
                break
        assert info["score"] >= 1.0


def test_expert_browse__rejects_unknown_names_and_defaults_to_the_target():
    with pytest.raises(ValueError, match="expert_browse"):
        gym.make("TurnWebShop-v0", expert_browse="best")
    assert gym.make("TurnWebShop-v0").unwrapped.expert_browse == "target"
