"""The base class's hooks: env-specific info on every step, declared reset options."""

import pytest

from agentgym_turn.core import TurnOutcome

from support.toy_envs import GuessNumberEnv


class _GuessWithInfo(GuessNumberEnv):
    reset_options = frozenset({"secret"})

    def _reset(self, options):
        message, extra = super()._reset(options)
        if "secret" in options:
            self.secret = int(options["secret"])
        return message, extra

    def _extra_info(self):
        return {"bounds": (self.low_bound, self.high_bound), "solved": self.solved}

    def _act(self, guess: int) -> TurnOutcome:
        outcome = super()._act(guess)
        outcome.info["solved"] = "from the outcome"  # an outcome's key wins over _extra_info's
        return outcome


def test_extra_info__same_keys_on_reset_valid_invalid_and_after_the_end():
    env = _GuessWithInfo()
    _, info = env.reset(seed=0, options={"secret": 3})
    keys = set(info)
    assert {"bounds", "solved", "turn", "score"} <= keys
    for action in ["<answer>1</answer>", "gibberish", "<answer>3</answer>", "<answer>3</answer>"]:
        _, _, terminated, _, info = env.step(action)
        assert set(info) == keys
    assert terminated and info["action_is_valid"] is False  # the step after the end
    env.reset(seed=0, options={"secret": 2})
    assert env.step("<answer>1</answer>")[4]["solved"] == "from the outcome"


def test_reset_options__unknown_name_is_refused_with_a_suggestion():
    env = _GuessWithInfo()
    with pytest.raises(
        ValueError, match=r"unknown option\(s\) \['secrt'\] \(did you mean 'secret'\?\); accepted options: secret"
    ):
        env.reset(seed=0, options={"secrt": 3})
    with pytest.raises(ValueError, match="accepted options: none"):
        GuessNumberEnv().reset(options={"anything": 1})
