"""check_text_aec_env finds what it claims to find (each broken env fails the check it names)."""

from __future__ import annotations

import pytest

from agentgym_turn.multiagent.webshop_dialog import WebShopDialogEnv
from agentgym_turn.testing import check_text_aec_env

SHOP = dict(goal_split="test", max_cycles=20)


class RaisesOnEmpty(WebShopDialogEnv):
    def step(self, action):
        if action == "":
            raise ValueError("empty move")
        super().step(action)


class ExtraInfoOnce(WebShopDialogEnv):
    def _info(self, agent):
        info = super()._info(agent)
        if self.moves == 3:
            info["surprise"] = True
        return info


class SeedIgnored(WebShopDialogEnv):
    calls = 0

    def reset(self, seed=None, options=None):
        SeedIgnored.calls += 1
        super().reset(seed=SeedIgnored.calls, options=options)


class ObservationOutsideSpace(WebShopDialogEnv):
    def observe(self, agent):
        return super().observe(agent) + "\x00"


@pytest.mark.parametrize(
    "broken, check",
    [
        (RaisesOnEmpty, "step raised"),
        (ExtraInfoOnce, "info keys"),
        (SeedIgnored, "determinism"),
        (ObservationOutsideSpace, "observation"),
    ],
)
def test_check_text_aec_env__names_the_broken_check(broken, check):
    with pytest.raises(AssertionError, match=rf"\[{check}\]"):
        check_text_aec_env(lambda: broken(**SHOP), seeds=(0, 1, 2, 3))


def test_check_text_aec_env__passes_the_dialog_and_counts_its_moves():
    report = check_text_aec_env(lambda: WebShopDialogEnv(**SHOP), seeds=(0,))
    assert report.episodes == 1 and 0 < report.steps <= 20
