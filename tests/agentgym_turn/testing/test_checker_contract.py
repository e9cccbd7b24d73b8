"""check_turn_env and the stateful machine hold every env to the contract fields it returns: one small broken
env per rule, each caught, and a correct env passing."""

import pytest
from hypothesis import Phase, settings
from hypothesis.stateful import run_state_machine_as_test

from agentgym_turn.core import TurnOutcome
from agentgym_turn.testing.checker import check_turn_env
from agentgym_turn.testing.stateful import turn_contract_machine

from support.toy_envs import GuessNumberEnv


class KeyedGuess(GuessNumberEnv):
    """The toy guessing game with a state key (secret, bounds, solved) and snapshots: a correct env."""

    def _state_fields(self):
        return [self.secret, self.low_bound, self.high_bound, self.solved]


class ComponentsMissTheReward(KeyedGuess):
    def _act(self, guess):
        outcome = super()._act(guess)
        outcome.components = {"task": outcome.reward + 0.5}
        return outcome


class UndeclaredComponent(KeyedGuess):
    def _act(self, guess):
        outcome = super()._act(guess)
        outcome.components = {"task": outcome.reward, "bonus": 0.0}
        return outcome


class OffVocabularyStatus(KeyedGuess):
    def _act(self, guess):
        outcome = super()._act(guess)
        outcome.status = "finished"
        return outcome


class FaultStillValid(KeyedGuess):
    def _info(self, extra, **kwargs):
        info = super()._info(extra, **kwargs)
        info["reward_valid"] = True
        return info

    def _act(self, guess):
        if self.turn == 2:
            raise ConnectionError("the service is down")
        return super()._act(guess)


class KeyForgetsTheBounds(KeyedGuess):
    def _state_fields(self):
        return [self.solved]  # without the secret: two episodes' first states share a key, not their futures


class SnapshotWithoutRng(KeyedGuess):
    derived_attributes = ("_np_random",)  # left out of the snapshot, and a restore keeps whatever RNG state is there


class ForksShareTheState(KeyedGuess):
    def fork(self, n):
        return [self] * n


class RaisesInsideTheTurn(KeyedGuess):
    def _act(self, guess):
        if self.turn == 2:
            raise ZeroDivisionError("a bug")
        return super()._act(guess)


def _problems(env_class):
    report = check_turn_env(lambda: env_class(), seed=0, episodes=2, fuzz_actions=24, raise_on_problem=False)
    return report.problems


def test_a_correct_env_passes_every_contract_check():
    assert _problems(KeyedGuess) == []


@pytest.mark.parametrize(
    "env_class, words",
    [
        (ComponentsMissTheReward, "must sum to the reward"),
        (UndeclaredComponent, "declares ['task', 'format']"),
        (OffVocabularyStatus, "'finished', not one of"),
        (FaultStillValid, "it must be False exactly for a fault"),
        (KeyForgetsTheBounds, "same state_key have different futures"),
        (SnapshotWithoutRng, "must hold the RNG state"),
        (ForksShareTheState, "does not continue as the original"),
        (RaisesInsideTheTurn, "step raised ZeroDivisionError"),
    ],
)
def test_the_checker_catches_each_broken_rule(env_class, words):
    problems = _problems(env_class)
    assert any(words in p for p in problems), problems


@pytest.mark.parametrize(
    "env_class, words",
    [
        (ComponentsMissTheReward, "must sum to the reward"),
        (OffVocabularyStatus, "not one of"),
        (KeyForgetsTheBounds, "different futures"),
        (RaisesInsideTheTurn, "step raised ZeroDivisionError"),
    ],
)
def test_the_stateful_machine_catches_them_too(env_class, words):
    machine = turn_contract_machine(
        lambda: env_class(), name=f"Contract[{env_class.__name__}]", expert_weight=0.0, near_valid_weight=0.6
    )
    with pytest.raises(AssertionError, match=words):
        # found is enough: shrinking the failing example would cost the most here
        run_state_machine_as_test(
            machine,
            settings=settings(
                max_examples=60,
                stateful_step_count=30,
                deadline=None,
                database=None,
                phases=(Phase.explicit, Phase.generate),
            ),
        )


def test_the_stateful_machine_forks_and_probes_keys_of_a_correct_env():
    machine = turn_contract_machine(
        lambda: KeyedGuess(), name="Contract[KeyedGuess]", expert_weight=0.0, near_valid_weight=0.6, fork_weight=0.2
    )
    run_state_machine_as_test(
        machine, settings=settings(max_examples=30, stateful_step_count=30, deadline=None, database=None)
    )
    assert machine.stats.forked_steps > 0 and machine.stats.key_probes > 0


def test_guess_env_outcome_components_default_to_task_and_format():
    env = KeyedGuess()
    env.reset(seed=0)
    env.secret = 4
    assert env.step("nonsense")[4]["reward_components"] == {"task": 0.0, "format": -0.1}
    assert env.step("<answer>4</answer>")[4]["reward_components"] == {"task": 1.0, "format": 0.0}
    assert isinstance(TurnOutcome("x", 0.0, False, False).components, type(None))
