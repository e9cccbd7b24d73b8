"""Parallel env stepping (env modes ``threads`` and ``processes``) and the per-step timeout.

Concurrency is shown by counts (how many envs are inside ``step`` at once), never by time; the
speed-up in turns/s is measured by ``benchmarks/scaling.py``.
"""

from __future__ import annotations

import functools

import gymnasium as gym
import numpy as np
import pytest
import torch

from support import parallel_envs  # noqa: F401  (registers SLOW_ID)
from support import trainer_envs
from agentgym_turn.async_pool import STEP_TIMEOUT_KEY, AsyncTurnEnvPool
from agentgym_turn.vector import unbatch_info
from support.parallel_envs import SLOW_ID, SlowCorridorEnv
from reference_trainer.policy import load_policy
from agentgym_turn.pools import make as make_envs
from reference_trainer.rollout import collect, episode_metrics
from agentgym_turn.tokens import ChatFormat


class ScriptedPolicy:
    """Answers with given texts in turn (an instant stub: no model), closed by the end-of-turn token."""

    def __init__(self, fmt, texts):
        self.fmt, self.texts, self.calls = fmt, list(texts), 0

    def generate(self, prompts, *, max_new_tokens, stop_ids, pad_id, generator, temperature):
        out = []
        for _ in prompts:
            ids = self.fmt.encode_content(self.texts[self.calls % len(self.texts)])[: max_new_tokens - 1]
            self.calls += 1
            out.append(ids + [self.fmt.assistant_suffix[0]])
        return out, [[0.0] * len(i) for i in out]


@pytest.fixture(scope="module")
def fmt(tmp_path_factory):
    _, tokenizer = load_policy(trainer_envs.build_toy_tiny(tmp_path_factory.mktemp("tiny") / "model"))
    return ChatFormat(tokenizer)


def _play(fmt, envs, seeds, texts):
    try:
        return collect(ScriptedPolicy(fmt, texts), fmt, envs, seeds, generator=torch.Generator(), max_new_tokens=24)
    finally:
        envs.close()


def _record(episodes):
    return [(e.seed, e.conversation.ids, e.rewards, e.infos, e.terminated, e.truncated, e.truncation) for e in episodes]


CASES = {
    trainer_envs.ENV_ID: ({}, ["L", "R", "x", "R", "L", "L"]),
    "TurnSokoban-v0": (
        {},
        ["<answer>Up</answer>", "nonsense", "<answer>Left || Down</answer>", "<answer>Right</answer>"],
    ),
    "TurnSearchQA-v0": (
        {},
        ["<search>capital city</search>", "<answer>paris</answer>", "<search>river</search>", "no tags"],
    ),
}


@pytest.mark.parametrize("env_id", sorted(CASES))
@pytest.mark.parametrize("mode", ["threads", "processes", "sync", "async"])
def test_parallel_modes__give_the_episodes_of_serial_stepping(fmt, env_id, mode):
    """Every mode of ``pools.make`` (``sync`` and ``async``, earlier names, resolve to ``list`` and ``processes``)."""
    kwargs, texts = CASES[env_id]
    seeds = list(range(7))  # two chunks of 4 envs, the second one short
    serial = _record(_play(fmt, make_envs(env_id, 4, "list", **kwargs), seeds, texts))
    parallel = _record(_play(fmt, make_envs(env_id, 4, mode, **kwargs), seeds, texts))
    assert parallel == serial
    assert any(t[4] for t in serial) or any(t[5] for t in serial)  # episodes ended


@pytest.mark.parametrize("workers, expected", [(0, 8), (3, 3)])
def test_threads__step_all_active_envs_at_once_up_to_env_workers(workers, expected):
    SlowCorridorEnv.reset_counters(rendezvous=expected)
    envs = make_envs(SLOW_ID, 8, "threads", workers=workers)
    try:
        envs.reset(list(range(8)))
        results = envs.step({i: "L" for i in range(8)})
    finally:
        envs.close()
        rendezvous_reached = SlowCorridorEnv.max_inside
        SlowCorridorEnv.reset_counters()
    assert rendezvous_reached == expected  # all active envs inside step() together, never more than the workers
    assert sorted(results) == list(range(8))


def test_threads__then_runs_in_the_thread_that_stepped_the_env_and_sees_its_result():
    """A rollout tokenises each observation in the env's worker thread (``step_then``/``reset_then``)."""
    import threading

    def then(result):  # reset_then passes the first message, step_then the step's result tuple
        return threading.current_thread().name, result[0] if isinstance(result, tuple) else result

    envs, serial = make_envs(trainer_envs.ENV_ID, 3, "threads"), make_envs(trainer_envs.ENV_ID, 3, "list")
    try:
        first = envs.reset_then([0, 1, 2], then)
        assert [obs for obs, _ in first] == [obs for obs, _ in serial.reset([0, 1, 2])]
        assert all(name.startswith("turn-env") and seen == obs for obs, (name, seen) in first)
        stepped = envs.step_then({0: "L", 2: "R"}, then)
        assert {i: r for i, (r, _) in stepped.items()} == serial.step({0: "L", 2: "R"})
        assert all(name.startswith("turn-env") and seen == result[0] for result, (name, seen) in stepped.values())
    finally:
        envs.close()
        serial.close()


def test_list_mode__steps_one_env_at_a_time():
    SlowCorridorEnv.reset_counters()
    envs = make_envs(SLOW_ID, 4, "list")
    try:
        envs.reset(list(range(4)))
        envs.step({i: "L" for i in range(4)})
    finally:
        envs.close()
    assert SlowCorridorEnv.max_inside == 1


@pytest.mark.parametrize("mode", ["threads", "processes"])
def test_step_timeout__a_stuck_env_is_cut_off_and_the_run_continues(fmt, mode):
    SlowCorridorEnv.reset_counters()
    stall = dict(stall_seeds=(2,), stall_room=0, stall_s=120.0)
    envs = make_envs(SLOW_ID, 3, mode, step_timeout_s=2.0, **stall)
    texts = ["L"]
    try:
        first = collect(ScriptedPolicy(fmt, texts), fmt, envs, [0, 1, 2], generator=torch.Generator(), max_new_tokens=8)
        later = collect(ScriptedPolicy(fmt, texts), fmt, envs, [0, 1, 5], generator=torch.Generator(), max_new_tokens=8)
        cut = envs.timeouts
    finally:
        envs.close()
    stuck = first[2]
    assert stuck.truncated and stuck.truncation == "timeout" and not stuck.terminated
    assert stuck.infos[-1][STEP_TIMEOUT_KEY] and stuck.infos[-1]["step_timeout_s"] == 2.0
    assert stuck.bootstrap_pos is None and stuck.num_turns == 1  # the first step never answered
    assert cut == 1
    # The other episodes of the batch, and every later one (the replaced env too), are those of a run without the stall.
    reference = make_envs(SLOW_ID, 3, "list", **stall)
    try:
        expected = collect(
            ScriptedPolicy(fmt, texts), fmt, reference, [0, 1], generator=torch.Generator(), max_new_tokens=8
        )
        expected_later = collect(
            ScriptedPolicy(fmt, texts), fmt, reference, [0, 1, 5], generator=torch.Generator(), max_new_tokens=8
        )
    finally:
        reference.close()
    assert _record(first[:2]) == _record(expected)
    assert _record(later) == _record(expected_later)
    assert all(e.truncation != "timeout" for e in later)


def test_step_timeout__the_abandoned_env_is_closed_once_its_stuck_step_returns(fmt):
    """A replaced env must not leak (a browser, a connection): its worker closes it when the step finally returns."""
    SlowCorridorEnv.reset_counters()
    envs = make_envs(SLOW_ID, 2, "threads", step_timeout_s=0.5, stall_seeds=(1,), stall_room=0, stall_s=3.0)
    try:
        episodes = collect(ScriptedPolicy(fmt, ["L"]), fmt, envs, [0, 1], generator=torch.Generator(), max_new_tokens=8)
        assert episodes[1].truncation == "timeout" and envs.timeouts == 1
        with SlowCorridorEnv._cond:  # liveness bound only: the stuck step sleeps 3 s, then its worker closes the env
            SlowCorridorEnv._cond.wait_for(lambda: SlowCorridorEnv.closed >= 1, timeout=60.0)
            closed_by_worker = SlowCorridorEnv.closed
    finally:
        envs.close()
    assert closed_by_worker == 1  # the replaced env, before envs.close()
    assert SlowCorridorEnv.closed == 3  # then the two live envs


def test_step_timeout__is_refused_by_modes_that_cannot_cut_a_step():
    with pytest.raises(ValueError, match="step_timeout_s.*threads"):
        make_envs(trainer_envs.ENV_ID, 2, "list", step_timeout_s=1.0)
    with pytest.raises(ValueError, match="workers=2 sets the threads"):
        make_envs(trainer_envs.ENV_ID, 2, "processes", workers=2)
    with pytest.raises(ValueError, match="step_timeout_s must be"):
        AsyncTurnEnvPool([functools.partial(gym.make, trainer_envs.ENV_ID)], step_timeout_s=-1)


def test_unbatch_info__returns_each_sub_envs_own_info_with_nested_dicts():
    infos = {
        "a": np.array([1, 2]),
        "_a": np.array([True, True]),
        "b": np.array(["x", None], dtype=object),
        "_b": np.array([True, False]),
        "n": {"c": np.array([0.5, 1.5]), "_c": np.array([False, True])},
        "_n": np.array([True, True]),
    }
    assert unbatch_info(infos, 0) == {"a": 1, "b": "x", "n": {}}
    assert unbatch_info(infos, 1) == {"a": 2, "n": {"c": 1.5}}
    assert type(unbatch_info(infos, 0)["a"]) is int


def test_trainer__env_mode_threads_with_a_timeout_logs_the_cut_episodes(tmp_path):
    from reference_trainer.config import preset
    from reference_trainer.trainer import Trainer

    model = trainer_envs.build_toy_tiny(tmp_path / "model")
    cfg = preset(
        "turn-ppo",
        model=str(model),
        env=SLOW_ID,
        imports=["support.parallel_envs"],
        out=str(tmp_path / "run"),
        tasks_per_iteration=4,
        num_envs=4,
        max_new_tokens=3,
        minibatch_size=4,
        iterations=1,
        eval_episodes=4,
        progress=False,
        env_mode="threads",
        step_timeout_s=30.0,
    )
    trainer = Trainer(cfg)
    try:
        metrics = trainer.train_iteration()
    finally:
        trainer.close()
    assert metrics["rollout/step_timeouts"] == 0.0 and metrics["rollout/episodes"] == 4.0
    assert "rollout/step_timeouts" not in episode_metrics([])  # default runs keep their metric keys
