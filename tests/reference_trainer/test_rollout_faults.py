"""Episodes a fault ended (``info["reward_valid"]`` False) are counted, never trained on, and never stop a rollout."""

from __future__ import annotations

import dataclasses
import logging
import math
from typing import Any

import gymnasium as gym
import pytest
import torch

from agentgym_turn.core import InfraError
from reference_trainer.config import preset
from agentgym_turn.pools import SerialPool, make as make_envs
from reference_trainer.rollout import collect, episode_metrics, loss_rows, make_batch
from reference_trainer.trainer import Trainer
from support import trainer_envs
from support.scripted import Scripted
from support.trainer_envs import CorridorEnv

FAULTY_ID = "TrainerToyFaultyCorridor-v0"


class FaultyCorridorEnv(CorridorEnv):
    """The toy corridor whose service fails at turn ``fault_turn`` (0: never), or at the first turn of every task whose
    first sign is ``fault_when_first``: the turn raises :class:`InfraError` inside :class:`TurnEnv`."""

    def __init__(self, fault_turn: int = 0, fault_when_first: str | None = None, **kwargs: Any):
        super().__init__(**kwargs)
        self.fault_turn, self.fault_when_first = fault_turn, fault_when_first

    def parse_action(self, response: str) -> Any:
        if self.turn == self.fault_turn or (self.turn == 1 and self.signs[0] == self.fault_when_first):
            raise InfraError("the corridor's door service is down")
        return super().parse_action(response)


class StepRaisesCorridorEnv(CorridorEnv):
    """A third-party env that breaks the contract: its ``step`` raises."""

    def step(self, action: Any) -> Any:
        raise RuntimeError("step is broken")


class ResetRaisesCorridorEnv(CorridorEnv):
    """A third-party env whose ``reset`` raises :class:`InfraError` (its service is down before the episode starts)."""

    def reset(self, **kwargs: Any) -> Any:
        raise InfraError("no service to start the episode")


if FAULTY_ID not in gym.registry:
    gym.register(id=FAULTY_ID, entry_point=FaultyCorridorEnv, max_episode_steps=5)
for _cls in (StepRaisesCorridorEnv, ResetRaisesCorridorEnv):
    if f"TrainerToy{_cls.__name__}-v0" not in gym.registry:
        gym.register(id=f"TrainerToy{_cls.__name__}-v0", entry_point=_cls, max_episode_steps=5)


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory):
    return str(trainer_envs.build_toy_tiny(tmp_path_factory.mktemp("tiny") / "model"))


def _trainer(tiny_dir, out, algo, **kw):
    group = 2 if algo == "grpo" else 1
    cfg = preset(
        algo,
        **{
            "model": tiny_dir,
            "tasks_per_iteration": 4 // group,
            "group_size": group,
            "num_envs": 4,
            "max_new_tokens": 3,
            "minibatch_size": 4,
            "epochs": 1,
            "lr": 3e-3,
            "kl_coef": 0.1,
            "ent_coef": 0.01,
            "env": FAULTY_ID,
            "iterations": 1,
            "eval_episodes": 4,
            "eval_every": 0,
            "out": str(out),
            "progress": False,
            **kw,
        },
    )
    return Trainer(cfg)


# Seeds 3, 3, 3 (group 0) and 5, 5 (group 1); episode 2 (group 0) and episode 4 (group 1) fault at their first turn.
SEEDS, GROUPS, FAULTY = [3, 3, 3, 5, 5], [0, 0, 0, 1, 1], (2, 4)


def _episodes(fmt):
    envs = SerialPool([gym.make(FAULTY_ID, fault_turn=1 if i in FAULTY else 0) for i in range(len(SEEDS))])
    return collect(
        Scripted(fmt, ["L", "R", "L", "R", "L", "R"]),
        fmt,
        envs,
        SEEDS,
        generator=torch.Generator(),
        max_new_tokens=4,
        groups=GROUPS,
    )


def _gradient(tr, episodes) -> dict[str, torch.Tensor]:
    """The gradient of one backward of the trainer's whole loss on ``episodes`` (one minibatch, one micro-batch)."""
    batch = make_batch(episodes, tr.pad_id, min_group=tr.estimator.min_group)
    prepared = tr.prepare(batch)
    tr.optimizer.zero_grad(set_to_none=True)
    loss, _ = tr._losses(
        prepared,
        batch.action_mask.sum().float().clamp(min=1),
        prepared.value_mask.sum().float().clamp(min=1),
        None,
        tr.policy.actor_parameters(),
    )
    loss.backward()
    return {name: p.grad.detach().clone() for name, p in tr.policy.named_parameters() if p.grad is not None}


def _same(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> bool:
    return a.keys() == b.keys() and all(torch.allclose(a[k], b[k], atol=1e-6) for k in a)


# ---------------------------------------------------------------------- the rollout
def test_a_turn_that_raises_infra_error_ends_its_episode_as_faulted_and_the_others_play_on(tiny_dir, tmp_path):
    tr = _trainer(tiny_dir, tmp_path, "turn-ppo")
    eps = _episodes(tr.fmt)
    for i, ep in enumerate(eps):
        if i in FAULTY:
            assert ep.fault == ep.exit_status == "infra_error" and not ep.reward_valid
            assert ep.num_turns == 1 and ep.truncated and ep.truncation == "fault" and ep.bootstrap_pos is None
            assert ep.infos[-1]["reward_valid"] is False and ep.rewards == [0.0]
        else:
            assert ep.reward_valid and ep.fault is None and ep.exit_status in ("ok", "truncated")
    assert loss_rows(eps) == [True, True, False, True, False]
    assert loss_rows(eps, min_group=2) == [
        True,
        True,
        False,
        False,
        False,
    ]  # group 1 keeps one valid member: no baseline
    tr.close()


@pytest.mark.parametrize("mode", ["list", "sync", "threads"])
def test_an_env_whose_step_or_reset_raises_ends_episodes_as_faulted_instead_of_stopping_the_rollout(
    tiny_dir, tmp_path, mode
):
    tr = _trainer(tiny_dir, tmp_path, "turn-ppo")
    for cls, status in ((StepRaisesCorridorEnv, "env_error"), (ResetRaisesCorridorEnv, "infra_error")):
        envs = make_envs(f"TrainerToy{cls.__name__}-v0", 2, mode)
        eps = collect(Scripted(tr.fmt, ["L"]), tr.fmt, envs, [0, 1, 2], generator=torch.Generator(), max_new_tokens=4)
        envs.close()
        assert [(e.fault, e.exit_status, e.num_turns, e.rewards) for e in eps] == [(status, status, 1, [0.0])] * 3
        assert not make_batch(eps, tr.pad_id).action_mask.any()
    tr.close()


def test_a_raising_env_is_logged_once_with_its_traceback(caplog):
    class LoggedOnceCorridorEnv(StepRaisesCorridorEnv):
        pass

    envs = SerialPool([LoggedOnceCorridorEnv() for _ in range(3)])
    envs.reset([0, 1, 2])
    with caplog.at_level(logging.DEBUG, logger="agentgym_turn.core.contract"):
        results = envs.step({0: "L", 1: "L", 2: "R"})
    assert all(r[4]["exit_status"] == "env_error" and r[4]["reward_valid"] is False and r[3] for r in results.values())
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING and "LoggedOnceCorridorEnv" in r.getMessage()]
    assert len(warnings) == 1 and warnings[0].exc_info is not None
    assert sum("LoggedOnceCorridorEnv" in r.getMessage() for r in caplog.records) == 3  # the later ones at debug level


# ---------------------------------------------------------------------- the loss
@pytest.mark.parametrize("algo", ["turn-ppo", "grpo", "ppo", "st-ppo"])
def test_adding_faulted_episodes_leaves_the_gradient_unchanged(tiny_dir, tmp_path, algo):
    tr = _trainer(tiny_dir, tmp_path, algo)
    eps = _episodes(tr.fmt)
    # without the faulted episodes; under GRPO group 1 is left with one rollout, which has no baseline: it goes too
    keep = [0, 1] if algo == "grpo" else [0, 1, 3]
    assert len({eps[i].ret for i in (0, 1)}) == 2  # group 0 has a signal to compare
    reference = _gradient(tr, [eps[i] for i in keep])
    assert any(g.abs().sum() > 0 for g in reference.values())
    assert _same(_gradient(tr, eps), reference)
    # the check has teeth: the same episodes counted as valid change the gradient
    unmarked = [dataclasses.replace(e, fault=None) for e in eps]
    assert not _same(_gradient(tr, unmarked), reference)
    tr.close()


def test_grpo_statistics_of_a_group_exclude_its_faulted_member(tiny_dir, tmp_path):
    tr = _trainer(tiny_dir, tmp_path, "grpo")
    eps = _episodes(tr.fmt)
    with_fault = tr.prepare(make_batch(eps, tr.pad_id, min_group=2))
    alone = tr.prepare(make_batch(eps[:2], tr.pad_id, min_group=2))
    for row in (
        0,
        1,
    ):  # group 0's valid members: the same advantage on their action tokens with or without the faulted one
        a = with_fault.advantages[row][with_fault.batch.action_mask[row]]
        b = alone.advantages[row][alone.batch.action_mask[row]]
        assert torch.allclose(a, b, atol=1e-6) and a.abs().sum() > 0
    assert not with_fault.batch.action_mask[2:].any() and not with_fault.batch.in_loss[2:].any()
    assert with_fault.advantages[2:].abs().max() == 0
    tr.close()


# ---------------------------------------------------------------------- the metrics
def test_episode_metrics_count_faulted_episodes_and_average_only_the_others(tiny_dir, tmp_path):
    tr = _trainer(tiny_dir, tmp_path, "turn-ppo")
    eps = _episodes(tr.fmt)
    valid = [e for e in eps if e.reward_valid]
    m = episode_metrics(eps)
    assert m["episodes"] == 5 and m["faulted_episodes"] == 2 and m["exit_infra_error"] == 2
    assert m["exit_ok"] + m["exit_truncated"] + m["exit_invalid_action"] == 3 and m["exit_env_error"] == 0
    for key in ("success", "return", "score", "turns", "tokens", "reward_task", "reward_format"):
        assert math.isclose(m[key], episode_metrics(valid)[key], abs_tol=1e-9), key
    assert math.isclose(m["return"], sum(e.ret for e in valid) / len(valid), abs_tol=1e-9)
    assert math.isclose(
        m["reward_task"] + m["reward_format"], m["return"], abs_tol=1e-6
    )  # the components sum to the reward
    tr.close()


@pytest.mark.parametrize("algo", ["grpo", "turn-ppo"])
def test_a_training_iteration_counts_the_faulted_episodes_and_stays_finite(tiny_dir, tmp_path, algo):
    tr = _trainer(tiny_dir, tmp_path, algo, env_kwargs={"fault_when_first": "left"})
    m = tr.train_iteration()
    env = gym.make(FAULTY_ID).unwrapped
    lefts = 0
    for task in tr.played_tasks:
        env.reset(seed=int(task))
        lefts += env.signs[0] == "left"
    faulted = lefts * tr.cfg.rollout.group_size
    assert m["rollout/faulted_episodes"] == faulted == m["rollout/exit_infra_error"] and m["rollout/episodes"] == 4
    assert {"rollout/reward_task", "rollout/reward_format"} <= m.keys()
    assert all(math.isfinite(v) for v in m.values()), m
    assert all(torch.isfinite(p).all() for p in tr.policy.parameters())
    tr.close()
