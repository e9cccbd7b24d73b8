"""The contract state machine (agentgym_turn.testing.stateful) catches each kind of broken env."""

import pytest
from hypothesis import HealthCheck, Phase, settings
from hypothesis.stateful import run_state_machine_as_test

from agentgym_turn.core import InvalidAction
from agentgym_turn.testing.stateful import turn_contract_machine
from support.toy_envs import (
    GlobalNumpyRandomEnv,
    GuessNumberEnv,
    HintOnInvalidTurnsEnv,
    IntSuccessEnv,
    NanRewardOnValidEnv,
    NonStrObservationOnValidEnv,
    PlaysOnAfterTheEndEnv,
)

# no shrinking: these tests need the failure, not the smallest example of it
_SETTINGS = settings(
    max_examples=10,
    stateful_step_count=30,
    deadline=None,
    database=None,
    derandomize=True,
    phases=[Phase.generate],
    suppress_health_check=list(HealthCheck),
)


def _run(make_env, **kwargs):
    machine = turn_contract_machine(make_env, **kwargs)
    run_state_machine_as_test(machine, settings=_SETTINGS)
    return machine.stats


def _failure(make_env, **kwargs) -> str:
    with pytest.raises(AssertionError) as err:
        _run(make_env, **kwargs)
    return str(err.value)


class RaisesOnSurrogatesEnv(GuessNumberEnv):
    """Encodes the response as UTF-8, as a search backend would: a lone surrogate raises."""

    def parse_action(self, response: str):
        response.encode("utf-8")
        return super().parse_action(response)


class SwallowsUnicodeEnv(GuessNumberEnv):
    def parse_action(self, response: str):
        if any(ord(c) > 0xFFFF for c in response):
            return InvalidAction("astral")
        return super().parse_action(response)


def test_machine__passes_a_good_env_and_counts_what_it_ran():
    stats = _run(lambda: GuessNumberEnv())
    assert stats.steps > 200 and stats.replayed_steps == stats.steps
    assert {"expert", "near_valid", "random"} <= set(stats.kinds) and stats.resets >= 10
    assert _run(lambda: SwallowsUnicodeEnv()).steps > 200  # rejecting text is fine; raising is not


@pytest.mark.parametrize(
    "env_class, words",
    [
        (RaisesOnSurrogatesEnv, "raised UnicodeEncodeError"),
        (NonStrObservationOnValidEnv, "observation is bytes, expected str"),
        (NanRewardOnValidEnv, "is not finite"),
        (HintOnInvalidTurnsEnv, "info keys changed"),
        (GlobalNumpyRandomEnv, "replaying seed="),
        (PlaysOnAfterTheEndEnv, "after the end"),
    ],
)
def test_machine__catches_a_broken_env(env_class, words):
    message = _failure(lambda: env_class())
    assert words in message, message


def test_machine__catches_an_int_flag():
    class IntTerminated(GuessNumberEnv):
        def step(self, action):
            obs, reward, terminated, truncated, info = super().step(action)
            return obs, reward, int(terminated), truncated, info

    assert "terminated is int, expected bool" in _failure(lambda: IntTerminated())


def test_machine__does_not_flag_int_success_it_leaves_that_to_check_turn_env():
    # the machine checks types of the step tuple and the key set; info value types are check_turn_env's
    assert _run(lambda: IntSuccessEnv()).steps > 200
