"""TurnWebShop-v0 pages equal the original WebShop text env's, on recorded lock-step episodes.

``tests/data/webshop_pages_original.json`` holds the ``text`` and ``text_rich`` observations and
available actions the original ``WebAgentTextEnv`` produced, step by step, on a catalog written by
``benchmarks/webshop_pages_agreement.py`` (which regenerates the file from a WebShop checkout
with ``--write-fixtures``). Here the same catalog is written again, the same actions are replayed
on our env, and every page must be equal.
"""

import json

import pytest

from agentgym_turn.webshop.env import TurnWebShopEnv
from benchmarks import webshop_pages_agreement
from support.paths import ROOT

FIXTURES = json.loads((ROOT / "tests" / "data" / "webshop_pages_original.json").read_text())


AGREEMENT = webshop_pages_agreement


@pytest.fixture(scope="module")
def catalog(tmp_path_factory):
    folder = tmp_path_factory.mktemp("webshop_catalog")
    AGREEMENT.write_catalog(folder, FIXTURES["catalog"]["products"])
    return folder


def test_fixtures__cover_every_page_kind_and_both_goal_kinds():
    kinds = {step["page"] for episode in FIXTURES["episodes"] for step in episode["steps"]}
    assert kinds == {"search", "search_results", "item_page", "item_sub_page", "done"}
    assert {episode["human_goals"] for episode in FIXTURES["episodes"]} == {False, True}


@pytest.mark.parametrize("k", range(len(FIXTURES["episodes"])))
def test_recorded_episode__every_page_and_action_list_equals_the_originals(catalog, k):
    episode = FIXTURES["episodes"][k]
    human = episode["human_goals"]
    envs = {
        mode: TurnWebShopEnv(
            data_path=str(catalog),
            human_goals=human,
            observation_mode=mode,
            goal_split="all",
            list_actions=False,
            show_attributes=human,
        )
        for mode in ("text", "text_rich")
    }
    for env in envs.values():
        env.reset(seed=0, options={"goal_index": episode["goal_index"]})
    for n, step in enumerate(episode["steps"]):
        if step["action"] is not None:
            for env in envs.values():
                env.step(step["action"])
        where = f"episode {k}, step {n} ({step['page']}, after {step['action']!r})"
        # the done page's score is the reward's business (tests/agentgym_turn/webshop/test_reward.py), so it is masked
        same = AGREEMENT._mask_score if step["page"] == "done" else (lambda text: text)
        assert same(envs["text"]._page_text()) == same(step["text"]), where
        assert same(envs["text_rich"]._page_text()) == same(step["text_rich"]), where
        assert envs["text"]._available_actions() == step["available_actions"], where
