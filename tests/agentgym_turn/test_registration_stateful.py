"""Every registered id, played by a hypothesis state machine against the turn contract.

Per id and per run: at least 10,000 env steps (hypothesis runs of ``EXAMPLES_PER_ROUND`` examples
of up to ``STEPS_PER_EXAMPLE`` steps, repeated until the count is reached, and asserted), mixing the expert's response, near-misses of it, arbitrary Unicode, responses at the
length limit and a few 1 MB ones; resets with random seeds; every finished episode replayed on a
second instance (see :mod:`agentgym_turn.testing.stateful` for the assertions).

Episodes are long (``max_episode_steps`` raised to 40) so that resets, which run a solver for the
larger Sokoban levels, are a small part of the cost; the registered turn limits are tested in
``agentgym_turn/test_registration.py``.
"""

import gymnasium as gym
import pytest
from hypothesis import HealthCheck, settings
from hypothesis.stateful import run_state_machine_as_test

import agentgym_turn
from agentgym_turn.testing.stateful import turn_contract_machine

IDS = agentgym_turn.env_ids()
MIN_STEPS = 10_000
STEPS_PER_EXAMPLE = 100
EXAMPLES_PER_ROUND = 25  # hypothesis ends some examples early, so rounds repeat until MIN_STEPS (overshoot < 1 round)
MAX_ROUNDS = 12
LONG_EPISODE = 40

#: Expert steps on 10x10 Sokoban follow a solver plan (about 10 ms each): fewer of them there.
EXPERT_WEIGHT = {"TurnSokoban-10x10-v0": 0.05}


@pytest.mark.parametrize("env_id", IDS)
def test_registered_env__keeps_the_contract_over_ten_thousand_random_steps(env_id):
    machine = turn_contract_machine(
        lambda: gym.make(env_id, max_episode_steps=max(LONG_EPISODE, gym.spec(env_id).max_episode_steps or 0)),
        name=f"Contract[{env_id}]",
        expert_weight=EXPERT_WEIGHT.get(env_id, 0.3),
        fork_weight=0.02,  # a fork plays the rest of its episode beside the env: about a tenth more steps
    )
    rounds = 0
    while machine.stats.steps < MIN_STEPS and rounds < MAX_ROUNDS:
        rounds += 1
        run_state_machine_as_test(
            machine,
            settings=settings(
                max_examples=EXAMPLES_PER_ROUND,
                stateful_step_count=STEPS_PER_EXAMPLE,
                deadline=None,
                database=None,
                suppress_health_check=list(HealthCheck),  # the step count is asserted below instead
            ),
        )
    stats = machine.stats
    print(
        f"{env_id}: {stats.steps} steps ({stats.kinds}), {stats.resets} resets, {stats.replayed_steps} replayed, "
        f"{stats.forked_steps} forked, {stats.key_probes} key probes, {rounds} rounds"
    )
    assert stats.steps >= MIN_STEPS, (
        f"only {stats.steps} steps ran in {rounds} rounds ({stats.kinds}); raise MAX_ROUNDS"
    )
    assert (
        stats.kinds.get("expert", 0) > 0 and stats.kinds.get("near_valid", 0) > 0 and stats.kinds.get("random", 0) > 0
    )
    assert stats.resets > rounds * EXAMPLES_PER_ROUND  # every example starts with one, episodes end and restart
    assert stats.replayed_steps == stats.steps  # every episode, steps past the end included, was replayed
    assert (
        stats.forked_steps > 100 and stats.key_probes > 20
    )  # forks played beside the env; state keys came back and were probed
