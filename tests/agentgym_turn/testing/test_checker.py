"""check_turn_env finds each kind of contract violation and names it."""

import gymnasium as gym
import pytest

from agentgym_turn.core import TagMatch, find_tagged
from agentgym_turn.testing import TurnContractError, check_turn_env
from support.toy_envs import (
    AlphanumericSpaceEnv,
    BellInEveryObservationEnv,
    EscapingObservationEnv,
    GlobalNumpyRandomEnv,
    GuessNumberEnv,
    HintOnInvalidTurnsEnv,
    IgnoresSeedEnv,
    IntSuccessEnv,
    NanRewardOnValidEnv,
    NonStrObservationOnValidEnv,
    PlaysOnAfterTheEndEnv,
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


# ---------------------------------------------------------------- blind spots of earlier versions
def _violations(env, **kwargs):
    options = dict(episodes=2, fuzz_actions=16, max_turns=12, raise_on_problem=False) | kwargs
    return check_turn_env(env, **options).violations


def test_check_turn_env__type_checks_the_experts_steps_too():
    # the bytes observation comes only after valid guesses, which random fuzzing almost never makes
    # no random fuzzing at all: only the expert's own steps (in the determinism and expert checks) are valid
    found = [
        v
        for v in _violations(NonStrObservationOnValidEnv(), fuzz_actions=0)
        if "observation is bytes, expected str" in v.what
    ]
    assert len(found) == 1 and found[0].check in ("determinism", "expert"), found
    assert found[0].count >= 2 + 2  # both expert episodes and the determinism runs hit it


def test_check_turn_env__reports_a_nan_reward_on_valid_moves():
    found = [v for v in _violations(NanRewardOnValidEnv()) if "not a finite number" in v.what]
    assert found and "reward=nan" in found[0].first, found


def test_check_turn_env__reports_an_int_success_as_a_wrong_type_not_a_failure():
    violations = _violations(IntSuccessEnv())
    assert any(v.what == "info['success'] is int, expected bool." for v in violations), violations
    assert not any("without success" in v.what for v in violations), violations


def test_check_turn_env__names_the_alphanumeric_charset_not_the_length():
    problems = check_turn_env(
        AlphanumericSpaceEnv(), episodes=1, fuzz_actions=4, max_turns=12, raise_on_problem=False
    ).problems
    escapes = [p for p in problems if "escapes observation_space" in p]
    assert escapes and all("exceeds max_length" not in p for p in escapes), problems
    assert "ASCII letters and digits only" in escapes[0] and "TurnText" in escapes[0]
    assert any("action_space rejects printable Unicode" in p for p in problems)


def test_check_turn_env__reports_each_distinct_violation_once_with_a_count():
    violations = _violations(BellInEveryObservationEnv())
    escapes = [v for v in violations if "escapes observation_space" in v.what]
    assert len(escapes) == 1, escapes  # one entry for one bug, however many steps and checks hit it
    assert escapes[0].count >= 40 and escapes[0].first.startswith("fuzz step 0")
    assert f"{escapes[0].count} times in all" in str(escapes[0])


def test_check_turn_env__reports_an_info_key_set_that_changes():
    found = [v for v in _violations(HintOnInvalidTurnsEnv()) if v.check == "info_keys"]
    assert len(found) == 1 and "new ['hint']" in found[0].what and found[0].count > 1, found


def test_check_turn_env__catches_the_global_numpy_random_state():
    found = [v for v in _violations(GlobalNumpyRandomEnv()) if v.check == "determinism"]
    assert any("diverge at reset" in v.what for v in found), found


def test_check_turn_env__reports_an_env_that_plays_on_after_the_end():
    found = [v for v in _violations(PlaysOnAfterTheEndEnv()) if v.check == "after_end"]
    assert any("terminated=False and truncated=False" in v.what for v in found), found
    assert any("nonzero reward" in v.what and "reward=1.0" in v.first for v in found), found


def test_check_turn_env__a_good_env_is_clean_on_every_new_check():
    report = check_turn_env(GuessNumberEnv(), episodes=2, fuzz_actions=16, max_turns=12)
    assert report.ok and not any(w.startswith("after truncation") for w in report.warnings)


def test_check_turn_env__fuzzes_near_misses_of_the_experts_response():
    class CrashesOnBigGuesses(GuessNumberEnv):
        def parse_action(self, response):
            m = find_tagged(response, ("answer",))
            if isinstance(m, TagMatch) and str(self.secret) in m.content and not m.content.isascii():
                raise OverflowError("odd guess")  # only a well-formed answer near the right one gets here
            return super().parse_action(response)

    found = [v for v in _violations(CrashesOnBigGuesses()) if "step raised OverflowError" in v.what]
    assert found and found[0].first.startswith("near-miss step"), found


def test_check_turn_env__explains_the_step_after_truncation_where_it_prints():
    """The README's own example: the one warning says why it is expected and what to do."""
    report = check_turn_env("TurnSokoban-v0", episodes=1, fuzz_actions=4)
    noted = [w for w in report.warnings if w.startswith("after truncation")]
    assert report.ok and len(noted) == 1, report.warnings
    assert "Not a violation" in noted[0] and "reset()" in noted[0] and "turn-contract" in noted[0]
    assert noted[0] in report.summary()
