"""TurnWebShopBrowser-v0 when its browser fails: chromedriver or Chromium killed mid-episode ends the episode with
``exit_status="infra_error"`` (no exception) and the next reset starts a new browser; snapshot, restore and fork
replay the episode in a browser and continue exactly as the original; the contract's info matches TurnWebShop-v0's.

One site serves the module; each test closes the browsers it starts and checks that none is left.
"""

from __future__ import annotations

import os
import signal

import gymnasium as gym
import pytest

pytest.importorskip("selenium")

import agentgym_turn  # noqa: E402
from agentgym_turn.webshop.browser import _children, find_chromium  # noqa: E402
from agentgym_turn.webshop.env import TurnWebShopEnv  # noqa: E402
from agentgym_turn.webshop.server import WebShopServer  # noqa: E402

try:
    find_chromium()
except RuntimeError as err:
    pytest.skip(str(err), allow_module_level=True)

CATALOG = dict(num_products=100, goal_split="all")


def chromium_processes() -> list[int]:
    """Live Chromium or chromedriver processes descending from this test process (zombies are not counted)."""
    out = []
    for pid in _children(os.getpid()):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmd = f.read()
            with open(f"/proc/{pid}/stat", "rb") as f:
                state = f.read().rsplit(b")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if b"chrom" in cmd and state != b"Z":
            out.append(pid)
    return out


@pytest.fixture(scope="module")
def site():
    with WebShopServer(expert=True, **CATALOG) as server:
        yield server


@pytest.fixture
def browser(site):
    env = gym.make("TurnWebShopBrowser-v0", url=site.base_url, page_timeout=20)
    yield env
    env.close()
    assert chromium_processes() == []


def kill(pids: list[int]) -> None:
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            continue


def assert_infra_error_turn(result: tuple) -> None:
    observation, reward, terminated, truncated, info = result
    assert info["exit_status"] == "infra_error" and info["reward_valid"] is False
    assert (reward, terminated, truncated) == (0.0, False, True)
    assert "reset()" in observation and set(info["reward_components"].values()) == {0.0}


@pytest.mark.parametrize("victim", ["chromedriver", "chromium"])
def test_a_browser_killed_mid_episode_ends_it_with_infra_error_and_reset_starts_a_new_one(browser, victim):
    env = browser.unwrapped
    browser.reset(options={"goal_index": 4})
    *_, info = browser.step(env.expert_action())
    assert info["page"] == "results"
    driver_pid = env.driver.service.process.pid
    tree = [driver_pid, *_children(driver_pid)]
    if victim == "chromedriver":
        kill(tree)  # the driver's service process and the browsers under it
    else:
        with_commands = {
            pid: open(f"/proc/{pid}/cmdline", "rb").read() for pid in tree if os.path.exists(f"/proc/{pid}/cmdline")
        }
        kill(
            [pid for pid, cmd in with_commands.items() if b"chromedriver" not in cmd and b"--type=" not in cmd]
        )  # the browser only
    old_driver = env.driver
    assert_infra_error_turn(browser.step(env.expert_action()))
    observation, info = browser.reset(options={"goal_index": 4})
    assert env.driver is not old_driver and info["page"] == "search" and info["exit_status"] == "ok"
    *_, info = browser.step(env.expert_action())
    assert info["page"] == "results" and info["reward_valid"] is True


def test_the_contract_info_equals_the_in_process_envs_through_a_purchase(browser):
    assert browser.unwrapped.metadata["reward_components"] == TurnWebShopEnv.metadata["reward_components"]
    ref = gym.make("TurnWebShop-v0", **CATALOG)
    assert browser.reset(options={"goal_index": 7}) == ref.reset(options={"goal_index": 7})
    for action in ["not an action", "click[search]", *[None] * 12]:
        action = action or ref.unwrapped.expert_action()
        got, want = browser.step(action), ref.step(action)
        assert got == want, action
        assert got[4]["state_key"] == want[4]["state_key"]
        if got[2]:
            break
    assert got[1] > 0 and got[4]["reward_components"] == want[4]["reward_components"]
    assert sum(got[4]["reward_components"].values()) == pytest.approx(got[1])


def test_restore_and_fork_replay_the_episode_and_continue_as_the_original(browser):
    env = browser.unwrapped
    browser.reset(seed=3)
    plan = []
    for _ in range(2):
        plan.append(env.expert_action())
        browser.step(plan[-1])
    snap = env.snapshot()
    key = env.state_key()
    rest = [env.expert_action()]
    first = [browser.step(rest[0])]
    rest.append(env.expert_action())
    first.append(browser.step(rest[1]))
    env.restore(snap)
    assert env.state_key() == key and env.turn == 2
    assert [browser.step(action) for action in rest] == first
    env.restore(snap)
    (twin,) = agentgym_turn.fork_env(browser, 1)
    try:
        assert twin.unwrapped.driver is not env.driver
        assert [twin.step(action) for action in rest] == first
        assert [browser.step(action) for action in rest] == first  # the original is untouched by its fork
    finally:
        twin.close()


def test_a_snapshot_after_a_fault_restores_an_ended_episode(browser):
    env = browser.unwrapped
    browser.reset(options={"goal_index": 4})
    browser.step("not an action")
    driver_pid = env.driver.service.process.pid
    kill([driver_pid, *_children(driver_pid)])
    assert_infra_error_turn(browser.step(env.expert_action()))
    snap = env.snapshot()
    env.restore(snap)  # a new browser replays the turn before the fault; the episode stays over
    assert env.turn == 2 and env.episode_over
    _, _, terminated, _, info = browser.step(env.expert_action())
    assert terminated and info["exit_status"] == "invalid_action"
