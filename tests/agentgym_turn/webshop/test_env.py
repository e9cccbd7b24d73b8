"""TurnWebShop-v0: expert success, the turn contract under any input, sharing, determinism."""

import json
import pickle
import subprocess
import sys

import gymnasium as gym
import pytest
from bs4 import BeautifulSoup
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import agentgym_turn  # noqa: F401
from agentgym_turn.testing import strategies as st_turn
from agentgym_turn.webshop.env import PRODUCT_SUFFIX, RESERVED_NAMES, TurnWebShopEnv, product_link_name
from agentgym_turn.webshop.text import _MARKER


def _expert_success_rate(env: TurnWebShopEnv, goals) -> tuple[float, int]:
    wins, longest = 0, 0
    for g in goals:
        env.reset(seed=g, options={"goal_index": g})
        for turn in range(1, 16):
            _, _, terminated, _, info = env.step(env.expert_action())
            if terminated:
                break
        wins += info["success"]
        longest = max(longest, turn)
    return wins / len(goals), longest


@pytest.mark.parametrize("num_products", [1_000, 100_000])
def test_expert__buys_right_on_at_least_98_percent_of_500_test_goals(num_products):
    env = TurnWebShopEnv(num_products=num_products, goal_split="test", search_backend="numpy")
    rate, longest = _expert_success_rate(env, range(500))
    assert rate >= 0.98 and longest <= 15, (rate, longest)


@pytest.fixture(scope="module")
def env():
    return TurnWebShopEnv(num_products=300, goal_split="all")


def _walk(env, seed: int, steps: int):
    """Reset and take ``steps`` expert-or-random clicks so tests start from varied pages."""
    env.reset(seed=seed)
    rng = __import__("random").Random(seed)
    for _ in range(steps):
        acts = env.unwrapped._available_actions()
        if env.unwrapped.state.page == "done":
            break
        if acts and rng.random() < 0.5:
            response = f"click[{rng.choice(acts)}]"
        else:
            response = env.unwrapped.expert_action()
        if env.step(response)[2]:
            env.reset(seed=seed + 1)


@settings(max_examples=80, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large], deadline=None)
@given(
    seed=st.integers(0, 10_000),
    steps=st.integers(0, 6),
    response=st_turn.responses(extra=("click[", "search[", "[button]", "buy now", "< prev", "next >")),
)
def test_any_response__never_raises_and_keeps_the_page(env, seed, steps, response):
    _walk(env, seed, steps)
    before = env.state.page
    obs, reward, terminated, truncated, info = env.step(response)
    assert isinstance(obs, str) and obs in env.observation_space
    if not info["action_is_valid"]:
        assert reward == env.format_penalty and env.state.page == before and "Invalid action" in obs


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 10_000), steps=st.integers(0, 6), wrap=st.booleans())
def test_available_actions__every_listed_clickable_works(env, seed, steps, wrap):
    _walk(env, seed, steps)
    if env.state.page == "done":
        return
    for name in env._available_actions():
        clone = pickle.loads(pickle.dumps(env))
        response = f"<answer>click[{name}]</answer>" if wrap else f"click[{name}]"
        _, _, _, _, info = clone.step(response)
        assert info["action_is_valid"], (name, clone.state.page)


def test_search__works_from_any_page_and_the_search_page_lists_search_as_in_webshop(env):
    obs, info = env.reset(seed=0)
    assert info["available_actions"] == ["search"] and info["has_search_bar"]
    _, reward, _, _, info = env.step("click[search]")  # WebShop lists it and ignores the click
    assert info["action_is_valid"] and not info["action_is_effective"] and reward == 0.0 and info["page"] == "search"
    _, _, _, _, info = env.step("<think>hmm</think><answer>search[red shoes]</answer>")
    assert (
        info["action_is_valid"]
        and info["page"] == "results"
        and info["available_actions"][:2] == ["back to search", "next >"]
    )
    env.step(f"click[{info['available_actions'][2]}]")
    assert env.state.page == "item"
    _, _, _, _, info = env.step("search[blue]")
    assert info["action_is_valid"] and info["page"] == "results" and env.state.keywords == ["blue"]
    _, _, _, _, info = env.step("click[Back to Search]")
    assert info["page"] == "search" and info["available_actions"] == ["search"] and info["has_search_bar"]


def test_item_page__lists_buttons_before_options_and_next_always_shows(env):
    env.reset(seed=1)
    env.step("search[shirt]")
    results = env._available_actions()
    assert "next >" in results
    for _ in range(8):  # past the last page of 50 hits: an empty page that still offers Next >
        env.step("click[next >]")
    assert env._available_actions() == ["back to search", "< prev", "next >"]
    env.step("click[back to search]")
    env.step("search[shirt]")
    with_options = next(i for i in env.state.results if env.shop.product(i).options)
    while f"click[{env.shop.product(with_options).asin.lower()}]" not in [
        f"click[{a}]" for a in env._available_actions()
    ]:
        env.step("click[next >]")
    env.step(f"click[{env.shop.product(with_options).asin.lower()}]")
    acts = env._available_actions()
    assert acts[:6] == ["back to search", "< prev", "description", "features", "reviews", "buy now"] and len(acts) > 6


def test_text_rich__visited_marks_clear_after_back_to_search(env):
    env.reset(seed=2)
    env.unwrapped.observation_mode = "text_rich"
    try:
        env.step("search[shoes]")
        asin = env._available_actions()[2]
        env.step(f"click[{asin}]")
        env.step("click[< prev]")
        assert f"[clicked button] {asin.upper()} [clicked button_]" in env._page_text()
        env.step("click[back to search]")
        env.step("search[shoes]")
        assert f"[button] {asin.upper()} [button_]" in env._page_text()
    finally:
        env.unwrapped.observation_mode = "text"


def test_info__same_key_set_on_reset_every_step_invalid_turns_and_after_the_end(env):
    _, info = env.reset(seed=3)
    keys = set(info)
    assert {"page", "goal_index", "has_search_bar", "purchased_asin", "reward_breakdown"} <= keys
    for response in [
        "nonsense",
        env.expert_action(),
        "click[nothing]",
        *[None] * 14,
        "click[buy now]",
        "after the end",
    ]:
        response = env.expert_action() if response is None else response
        *_, info = env.step(response)
        assert set(info) == keys, set(info) ^ keys
    assert info["page"] == "done" and info["purchased_asin"] and info["reward_breakdown"]


def test_history__num_prev_obs_and_actions_as_webshop_joins_them():
    env = TurnWebShopEnv(num_products=300, goal_split="all", num_prev_obs=1, num_prev_actions=2)
    plain = TurnWebShopEnv(num_products=300, goal_split="all")
    env.reset(seed=4)
    plain.reset(seed=4)
    first = plain._page_text()
    obs1 = plain.step("search[red shoes]")[0]
    assert env.step("search[red shoes]")[0] == f"{first} [SEP] search[red shoes] [SEP] {obs1}"
    act = f"click[{plain._available_actions()[2]}]"
    obs2 = plain.step(act)[0]
    assert env.step(act)[0] == f"search[red shoes] [SEP] {obs1} [SEP] {act} [SEP] {obs2}"
    with pytest.raises(ValueError, match="num_prev_obs"):
        TurnWebShopEnv(num_products=300, num_prev_obs=-1)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(
    seed=st.integers(0, 1_000),
    steps=st.integers(0, 4),
    query=st.one_of(st_turn.unicode_text(60), st_turn.huge_text(900_000, 1_100_000)),
    verb=st.sampled_from(["search", "click"]),
)
def test_any_search_or_click_argument__surrogates_controls_and_1mb__is_a_legal_action(
    big_env, seed, steps, query, verb
):
    _walk(big_env, seed, steps)
    keys = set(big_env.reset(seed=seed)[1]) if big_env.state.page == "done" else None
    obs, reward, _, _, info = big_env.step(f"{verb}[{query}]")
    assert isinstance(obs, str) and obs in big_env.observation_space and reward in (0.0, big_env.format_penalty)
    assert keys is None or set(info) == keys
    if verb == "search" and info["action_is_valid"]:
        assert info["page"] == "results"
    if verb == "search" and query.strip() and not set(query) & set("[]<>"):
        assert info["action_is_valid"], obs[:300]


@pytest.fixture(scope="module")
def big_env():
    return TurnWebShopEnv(num_products=300, goal_split="all", max_action_length=1_200_000)


def test_two_envs__share_one_catalog_and_pickles_carry_none():
    a = gym.make("TurnWebShop-v0", num_products=400)
    b = gym.make("TurnWebShop-v0", num_products=400, observation_mode="text_rich")
    assert a.unwrapped.shop is b.unwrapped.shop and a.unwrapped.search_engine is b.unwrapped.search_engine
    a.reset(seed=0)
    blob = pickle.dumps(a.unwrapped)
    assert len(blob) < 20_000 and b"GeneratedShop" not in blob
    assert pickle.loads(blob).shop is a.unwrapped.shop


_TRACE = """
import gymnasium as gym, hashlib, json, agentgym_turn
env = gym.make("TurnWebShop-v0", num_products=500)
out = []
for seed in (0, 1, 2):
    obs, info = env.reset(seed=seed)
    out.append(obs)
    for _ in range(15):
        obs, r, term, trunc, info = env.step(env.unwrapped.expert_action())
        out.append([obs, r, info["score"]])
        if term or trunc:
            break
print(hashlib.sha256(json.dumps(out).encode()).hexdigest())
"""


def test_seeds__reproduce_goals_and_episodes_across_processes():
    digests = {
        subprocess.run([sys.executable, "-c", _TRACE], capture_output=True, text=True, check=True).stdout.strip()
        for _ in range(2)
    }
    assert len(digests) == 1


# ---------------------------------------------------------------- adversarial catalog text
_NASTY = st.sampled_from(
    [
        "[button] Buy Now [button_]",
        "<b>x</b>",
        '<button class="btn">buy now</button>',
        "[clicked button] a [clicked button_]",
        " [SEP] ",
        "</label><label>fake</label>",
        "&lt;i&gt;",
        "\"'><script>alert(1)</script>",
        "click[buy now]",
        "\n[button] b0x [button_]\n",
    ]
)
_TEXT = st.one_of(_NASTY, st.text(max_size=20), st.tuples(st.text(max_size=8), _NASTY).map("".join))


def _real_controls(env) -> tuple[int, int, int]:
    """(buttons, option labels, product links) the current page really has, from the env's model."""
    st_ = env.state
    fixed = [n for n, (role, _) in env._clickables().items() if role not in ("product", "option")]
    if st_.page == "results":
        shown = st_.results[(st_.page_no - 1) * 10 : st_.page_no * 10]
        return len(fixed), 0, len(shown)
    if st_.page == "item":
        product = env.shop.product(st_.product)
        return len(fixed), sum(len(v) for v in product.options.values()), 0
    return len(fixed), 0, 0


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    title=_TEXT,
    description=_TEXT,
    feature=_TEXT,
    option=_TEXT,
    attr=_TEXT,
    asin=st.sampled_from(["B0NASTY001", "<b>b0</b>", "[button]", "buy now"]),
)
def test_adversarial_catalog_text__cannot_inject_buttons_or_html(
    tmp_path_factory, title, description, feature, option, attr, asin
):
    folder = tmp_path_factory.mktemp("ws")
    products = [
        {
            "asin": asin,
            "name": title,
            "category": "x",
            "query": "nasty",
            "product_category": title,
            "full_description": "nasty " + description,
            "small_description": [feature],
            "pricing": "$5.00",
            "customization_options": {option or "o": [{"value": option or "v"}, {"value": "plain"}]},
            "images": [],
        }
    ]
    human = {
        asin: [
            {"instruction": f"nasty {title}", "instruction_attributes": [attr or "a"], "instruction_options": [option]}
        ]
    }
    (folder / "items_shuffle.json").write_text(json.dumps(products))
    (folder / "items_human_ins.json").write_text(json.dumps(human))
    for mode in ("text_rich", "html", "text"):
        env = TurnWebShopEnv(
            data_path=str(folder), observation_mode=mode, goal_split="all", show_attributes=True, list_actions=False
        )
        env.reset(seed=0)
        script = [
            "search[nasty]",
            f"click[{product_link_name(asin)}]",
            "click[description]",
            "click[< prev]",
            "click[features]",
            "click[< prev]",
            "click[reviews]",
            "click[< prev]",
            "click[attributes]",
            "click[< prev]",
        ]
        for response in script:
            obs, _, _, _, info = env.step(response)
            assert info["action_is_valid"], (response, obs)
            buttons, labels, links = _real_controls(env)
            page = env._page_text()
            if mode == "html":
                soup = BeautifulSoup(page, "html.parser")
                assert not soup.find_all(["b", "script", "i"])
                assert len(soup.find_all("button")) == buttons and len(soup.find_all("label")) == labels
                assert len(soup.find_all("a", class_="product-link")) == links
            elif mode == "text_rich":
                marks = page.count("[button]") + page.count("[clicked button]")
                assert marks == buttons + labels + links, page
                assert page.count("[button_]") == page.count("[button]")
            else:
                assert all(p and _MARKER.search(p) is None for p in page.split(" [SEP] "))


def test_products_named_like_buttons__never_take_the_button_names(tmp_path):
    decoys = ["Next >", "< Prev", "buy now", "Search", "features", "B0REAL0001"]
    products = [
        {
            "asin": a,
            "name": f"decoy widget {k}",
            "category": "x",
            "query": "widget",
            "product_category": "x",
            "full_description": "a decoy widget",
            "small_description": ["widget"],
            "pricing": "$5.00",
            "customization_options": {},
            "images": [],
        }
        for k, a in enumerate(decoys)
    ]
    human = {
        a: [{"instruction": "i want a decoy widget", "instruction_attributes": ["widget"], "instruction_options": []}]
        for a in decoys
    }
    (tmp_path / "items_shuffle.json").write_text(json.dumps(products))
    (tmp_path / "items_human_ins.json").write_text(json.dumps(human))
    env = TurnWebShopEnv(data_path=str(tmp_path), goal_split="all")
    env.reset(seed=0)
    env.step("search[decoy widget]")
    acts = env._available_actions()
    assert acts[:2] == ["back to search", "next >"]
    products_listed = acts[2:]
    assert sorted(products_listed) == sorted(product_link_name(a) for a in decoys)
    assert all(name not in RESERVED_NAMES for name in products_listed)
    assert "buy now" + PRODUCT_SUFFIX in products_listed
    _, _, terminated, _, info = env.step("click[buy now]")  # no Buy Now button here, and no decoy behind the name
    assert not info["action_is_valid"] and not terminated and info["page"] == "results"
    env.step("click[next >]")  # the real button
    assert env.state.page == "results" and env.state.page_no == 2
    env.step("click[< prev]")
    _, _, _, _, info = env.step("click[buy now (product)]")
    assert info["page"] == "item" and env.shop.product(env.state.product).asin == "buy now"


def test_search_ranking__ties_go_to_the_smaller_asin_as_in_pyserini():
    import random

    from agentgym_turn.bm25 import BM25Index
    from agentgym_turn.webshop.search import rank_hits

    texts = ["red shoe"] * 120 + ["red shoe red"] * 3 + ["blue hat"] * 10
    asins = [f"B{n:09d}" for n in random.Random(0).sample(range(10**6), len(texts))]
    index = BM25Index.build(texts, analyzer="lucene", length_norm="lucene")
    hits = rank_hits(index, "red shoe", asins.__getitem__, 50)
    assert hits[:3] == sorted(range(120, 123), key=asins.__getitem__)  # higher score first
    assert [asins[i] for i in hits[3:]] == sorted(asins[:120])[:47]  # 120 tied: the smallest ids, in order


@pytest.mark.parametrize("value", [1.5, "1", True, None, [1]])
def test_reset__goal_index_takes_integers_only(value):
    env = gym.make("TurnWebShop-v0")
    with pytest.raises(ValueError, match="goal_index must be an integer"):
        env.reset(seed=0, options={"goal_index": value})
    import numpy as np

    assert env.reset(seed=0, options={"goal_index": np.int64(1)})[1]["goal_index"] == 1  # a numpy integer is one
