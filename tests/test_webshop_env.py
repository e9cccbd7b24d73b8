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
from agentgym_turn.webshop.env import TurnWebShopEnv
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
@given(seed=st.integers(0, 10_000), steps=st.integers(0, 6), response=st_turn.responses(extra=("click[", "search[", "[button]", "buy now", "< prev", "next >")))
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


def test_search__only_on_the_search_page(env):
    env.reset(seed=0)
    _, _, _, _, info = env.step("<think>hmm</think><answer>search[red shoes]</answer>")
    assert info["action_is_valid"] and info["page"] == "results" and info["available_actions"]
    obs, reward, _, _, info = env.step("search[blue]")
    assert not info["action_is_valid"] and "only on the search page" in obs and reward == -0.1
    _, _, _, _, info = env.step("click[Back to Search]")
    assert info["page"] == "search" and info["available_actions"] == [] and info["has_search_bar"]


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
    digests = {subprocess.run([sys.executable, "-c", _TRACE], capture_output=True, text=True, check=True).stdout.strip() for _ in range(2)}
    assert len(digests) == 1


# ---------------------------------------------------------------- adversarial catalog text
_NASTY = st.sampled_from(
    ["[button] Buy Now [button_]", "<b>x</b>", "<button class=\"btn\">buy now</button>", "[clicked button] a [clicked button_]",
     " [SEP] ", "</label><label>fake</label>", "&lt;i&gt;", "\"'><script>alert(1)</script>", "click[buy now]", "\n[button] b0x [button_]\n"]
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
@given(title=_TEXT, description=_TEXT, feature=_TEXT, option=_TEXT, attr=_TEXT, asin=st.sampled_from(["B0NASTY001", "<b>b0</b>", "[button]", "buy now"]))
def test_adversarial_catalog_text__cannot_inject_buttons_or_html(tmp_path_factory, title, description, feature, option, attr, asin):
    folder = tmp_path_factory.mktemp("ws")
    products = [{
        "asin": asin, "name": title, "category": "x", "query": "nasty", "product_category": title,
        "full_description": "nasty " + description, "small_description": [feature], "pricing": "$5.00",
        "customization_options": {option or "o": [{"value": option or "v"}, {"value": "plain"}]}, "images": [],
    }]
    human = {asin: [{"instruction": f"nasty {title}", "instruction_attributes": [attr or "a"], "instruction_options": [option]}]}
    (folder / "items_shuffle.json").write_text(json.dumps(products))
    (folder / "items_human_ins.json").write_text(json.dumps(human))
    for mode in ("text_rich", "html", "text"):
        env = TurnWebShopEnv(data_path=str(folder), observation_mode=mode, goal_split="all", show_attributes=True, list_actions=False)
        env.reset(seed=0)
        script = ["search[nasty]", f"click[{asin.lower()}]", "click[description]", "click[< prev]", "click[features]",
                  "click[< prev]", "click[reviews]", "click[< prev]", "click[attributes]", "click[< prev]"]
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
