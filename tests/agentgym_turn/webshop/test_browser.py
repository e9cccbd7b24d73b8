"""TurnWebShopBrowser-v0 in real headless Chromium: the oracle reaches reward 1 with the in-process
env's observations, rewards and info; a crashed browser is replaced; close() leaves no process.

One browser serves the whole module (starting Chromium costs seconds); the last test closes it.
"""

import os
import signal

import gymnasium as gym
import pytest

pytest.importorskip("selenium")

import agentgym_turn  # noqa: E402,F401
from agentgym_turn.webshop.browser import _children, find_chromium, screenshot_item_page  # noqa: E402
from agentgym_turn.webshop.server import WebShopServer  # noqa: E402

try:
    find_chromium()
except RuntimeError as err:  # `make test` installs chromium + chromium-driver; elsewhere say what is missing
    pytest.skip(str(err), allow_module_level=True)

GOALS = (3, 7, 11)


def chromium_processes() -> list[int]:
    """Chromium or chromedriver processes descending from this test process."""
    out = []
    for pid in _children(os.getpid()):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if b"chrom" in f.read():
                    out.append(pid)
        except OSError:
            continue
    return out


@pytest.fixture(scope="module")
def browser():
    # the site runs beside the env here (url=...); the docs' example and the screenshot command cover the in-process site
    with WebShopServer(goal_split="all", expert=True) as server:
        env = gym.make("TurnWebShopBrowser-v0", url=server.base_url)
        yield env
        env.close()


def lock_step(browser, ref, action):
    got = browser.step(action)
    want = ref.step(action)
    assert got[0] == want[0], action
    assert got[1:] == want[1:], action
    return got


def test_browser__oracle_reaches_reward_1_with_the_in_process_observations(browser):
    ref = gym.make("TurnWebShop-v0", goal_split="all")
    for goal in GOALS:
        got, want = browser.reset(options={"goal_index": goal}), ref.reset(options={"goal_index": goal})
        assert got == want
        for _ in range(15):
            action = browser.unwrapped.expert_action()
            assert action == ref.unwrapped.expert_action()
            _, reward, terminated, _, info = lock_step(browser, ref, action)
            if terminated:
                break
        assert reward == 1.0 and info["success"] and info["purchased_asin"]


def test_browser__every_kind_of_action_reads_as_in_process(browser):
    ref = gym.make("TurnWebShop-v0", goal_split="all")
    assert browser.reset(seed=5) == ref.reset(seed=5)  # a seed opens the goal TurnWebShop-v0 draws with it
    for action in [
        "hello",
        "",
        "x" * 70_000,
        "click[nothing]",
        "search[]",
        "click[search]",
        "<answer><answer>click[search]</answer>",
        "<answer>search[red\nshoes]</answer>",
        "\x00click[\ud800]",
        "search[\U0001f600 mug]",
        "search[a\ud800b]",
        "search[" + "\u00e9\u0000\t" * 2000 + "]",
        "search[shoes]",
        "click[next >]",
        "click[next >]",
        "click[< prev]",
    ]:
        _, _, _, _, info = lock_step(browser, ref, action)
    product = info["available_actions"][3]
    _, _, _, _, info = lock_step(browser, ref, f"click[{product}]")
    assert info["page"] == "item"
    options = [
        a
        for a in info["available_actions"]
        if a not in ("back to search", "< prev", "description", "features", "reviews", "buy now")
    ]
    for action in [
        "click[description]",
        "click[< prev]",
        "click[reviews]",
        "click[< prev]",
        *[f"click[{o}]" for o in options[:2]],
        *[f"click[{o}]" for o in options[:1]],
        "click[< prev]",
        f"click[{product}]",
        "click[back to search]",
        "search[mug]",
    ]:
        lock_step(browser, ref, action)
    # text_rich: chosen options and visited products are marked from the DOM as the text env marks them
    browser.unwrapped.observation_mode = ref.unwrapped.observation_mode = "text_rich"
    assert browser.reset(options={"goal_index": 40}) == ref.reset(options={"goal_index": 40})
    for _ in range(15):
        *_, terminated, _, info = lock_step(browser, ref, ref.unwrapped.expert_action())
        if terminated:
            break
    assert info["success"]
    browser.unwrapped.observation_mode = "text"


def test_browser__screenshot_of_the_item_page(browser, tmp_path):
    out = screenshot_item_page(tmp_path / "item.png", env=browser.unwrapped)
    data = out.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000
    assert (
        browser.unwrapped.driver.execute_script("return document.querySelectorAll('input[type=radio]:checked').length")
        == 1
    )


def test_browser__a_site_with_a_token_is_played_through_its_start_page():
    token = "browser-test-token_0123456789"
    with WebShopServer(num_products=100, goal_split="all", expert=True, token=token) as server:
        env = gym.make("TurnWebShopBrowser-v0", url=server.base_url, token=token)
        try:
            ref = gym.make("TurnWebShop-v0", goal_split="all", num_products=100)
            assert env.reset(seed=2) == ref.reset(seed=2)
            assert env.reset(options={"goal_index": 4}) == ref.reset(options={"goal_index": 4})
            assert len(server.site) == 1  # one session per episode, the previous one ended
            lock_step(env, ref, env.unwrapped.expert_action())
            assert "token=" not in env.unwrapped.driver.current_url
        finally:
            env.close()


def test_browser__a_crashed_browser_is_replaced_at_reset_and_close_leaves_no_process(browser):
    env = browser.unwrapped
    assert chromium_processes()
    commands = {}
    for pid in chromium_processes():
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            commands[pid] = f.read()
    main = [pid for pid, cmd in commands.items() if b"--type=" not in cmd and b"chromedriver" not in cmd]
    assert main, "no Chromium browser process found"
    for pid in main:
        os.kill(pid, signal.SIGKILL)  # the browser dies under the driver
    old_driver = env.driver
    observation, reward, _, truncated, info = browser.step(
        env.expert_action()
    )  # mid-episode: a typed fault, not an exception
    assert (info["exit_status"], info["reward_valid"], reward, truncated) == ("infra_error", False, 0.0, True)
    assert "reset()" in observation  # the message says what to do
    observation, info = browser.reset(options={"goal_index": 3})
    assert env.driver is not old_driver and info["page"] == "search" and "Instruction" in observation
    *_, info = browser.step(browser.unwrapped.expert_action())
    assert info["page"] == "results"
    browser.close()
    assert chromium_processes() == []


@pytest.mark.parametrize(
    "options", [{"goal_index": 1.5}, {"goal_index": "1"}, {"goal_index": True}, {"goal_index": 10**9}]
)
def test_browser__a_bad_goal_index_is_a_value_error_as_in_process(browser, options):
    with pytest.raises(ValueError, match="goal"):
        gym.make("TurnWebShop-v0", goal_split="all").reset(seed=0, options=options)
    with pytest.raises(ValueError, match="goal"):
        browser.reset(seed=0, options=options)


def test_browser__a_large_seed_plays_the_goal_it_draws_in_process_and_one_past_the_sites_bound_is_a_value_error(
    browser,
):
    got, _ = browser.reset(seed=2**200)
    want, _ = gym.make("TurnWebShop-v0", goal_split="all").reset(seed=2**200)
    assert got == want
    with pytest.raises(ValueError, match="seed"):
        browser.reset(seed=2**300)
