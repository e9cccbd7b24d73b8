"""check_turn_env finds each kind of contract violation and names it."""

import gymnasium as gym
import pytest

from agentgym_turn.testing import TurnContractError, check_turn_env
from toy_envs import (
    EscapingObservationEnv,
    GuessNumberEnv,
    IgnoresSeedEnv,
    RaisesOnBadActionEnv,
    WrongInfoKeyEnv,
)


def _problems(env):
    return check_turn_env(env, episodes=2, fuzz_actions=16, max_turns=12, raise_on_problem=False).problems


def test_check_turn_env__passes_a_good_env():
    report = check_turn_env(GuessNumberEnv(), episodes=3, fuzz_actions=16, max_turns=12)
    assert report.ok and report.expert_successes == 3 and report.steps_run > 20


def test_check_turn_env__accepts_ids_and_factories():
    gym.register("ToyGuessChecker-v0", entry_point=GuessNumberEnv, max_episode_steps=12)
    try:
        assert check_turn_env("ToyGuessChecker-v0", episodes=1, fuzz_actions=4).ok
        assert check_turn_env(lambda: GuessNumberEnv(high=5), episodes=1, fuzz_actions=4).ok
    finally:
        del gym.registry["ToyGuessChecker-v0"]


def test_check_turn_env__reports_an_env_that_raises_on_a_bad_action():
    problems = _problems(RaisesOnBadActionEnv())
    assert any(p.startswith("[fuzz]") and "raised AttributeError" in p and "legal action" in p for p in problems)


def test_check_turn_env__reports_an_env_whose_reset_ignores_the_seed():
    problems = _problems(IgnoresSeedEnv())
    assert any(p.startswith("[determinism]") and "diverge at reset" in p for p in problems), problems


def test_check_turn_env__reports_a_wrong_info_key():
    problems = _problems(WrongInfoKeyEnv())
    assert any("info has no key 'success'" in p for p in problems), problems


def test_check_turn_env__reports_an_observation_outside_its_space():
    problems = _problems(EscapingObservationEnv())
    assert any("escapes observation_space" in p and "'\\x07'" in p for p in problems), problems


def test_check_turn_env__raises_with_every_problem_listed():
    with pytest.raises(TurnContractError) as err:
        check_turn_env(RaisesOnBadActionEnv(), episodes=1, fuzz_actions=4, max_turns=12)
    assert "problem(s)" in str(err.value) and len(err.value.report.problems) >= 2


def test_check_turn_env__reports_an_expert_that_fails():
    class BadExpert(GuessNumberEnv):
        def expert_action(self):
            return f"<answer>{(self.secret + 1) % (self.high + 1)}</answer>"

    problems = _problems(BadExpert())
    assert any(p.startswith("[expert]") and "without success" in p for p in problems)
