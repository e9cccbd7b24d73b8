"""Envs in Ray actors over a local 2-node cluster (ray.cluster_utils.Cluster): placed on both nodes, GRPO groups
aligned, the trainer's rollout on them, and an actor killed mid-iteration ending its episodes as infra_error."""

from __future__ import annotations

import os

import gymnasium as gym
import pytest

ray = pytest.importorskip("ray")  # the "ray" extra; make test installs it

from support.paths import ROOT, TESTS  # noqa: E402


@pytest.fixture(scope="module")
def cluster():
    from ray.cluster_utils import Cluster

    # actors import this checkout and the tests' toy envs: their processes inherit the path
    saved = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), str(TESTS), saved) if p)
    nodes = Cluster(initialize_head=True, head_node_args={"num_cpus": 2, "object_store_memory": 80 * 2**20})
    nodes.add_node(num_cpus=2, object_store_memory=80 * 2**20)
    nodes.wait_for_nodes()  # both nodes registered before any actor is placed
    ray.init(address=nodes.address, include_dashboard=False, logging_level="ERROR", log_to_driver=False)
    try:
        yield nodes
    finally:
        ray.shutdown()
        nodes.shutdown()
        if saved is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = saved


def test_a_pool_spreads_over_both_nodes_and_plays_groups_as_in_process(cluster):
    from agentgym_turn.ray_pool import RayEnvPool

    pool = RayEnvPool("TurnSokoban-v0", 64, envs_per_actor=32)  # two actors: one a node
    try:
        assert len(set(pool.nodes())) == 2  # SPREAD: actors on both nodes
        seeds = [100 + i // 8 for i in range(64)]  # 8 groups of 8 members, each group one task
        first = pool.reset(seeds)
        local = gym.make("TurnSokoban-v0")
        for i in range(0, 64, 8):
            group = {obs for obs, _ in first[i : i + 8]}
            assert group == {local.reset(seed=seeds[i])[0]}  # every member, on whichever node: the same task
        assert len({obs for obs, _ in first}) > 1
        twin = gym.make("TurnSokoban-v0")
        twin.reset(seed=seeds[0])
        for _ in range(3):
            response = twin.unwrapped.expert_action()
            expected = twin.step(response)
            got = pool.step({0: response, 9: "garbage"})
            assert got[0][:4] == expected[:4] and got[0][4]["state_key"] == expected[4]["state_key"]
            assert got[9][4]["exit_status"] == "invalid_action"
            if expected[2]:
                break
    finally:
        pool.close()


def test_a_killed_actor_ends_its_episodes_as_infra_errors_and_is_replaced(cluster):
    from agentgym_turn.ray_pool import RayEnvPool

    pool = RayEnvPool("TurnSokoban-v0", 16, envs_per_actor=8)
    try:
        pool.reset(list(range(16)))
        ray.kill(pool.actors[1], no_restart=True)
        out = pool.step({i: "<answer>Up</answer>" for i in range(16)})
        assert all(
            out[i][4]["exit_status"] == "infra_error" and out[i][4]["reward_valid"] is False and out[i][3]
            for i in range(8, 16)
        )
        assert all(out[i][4]["exit_status"] in ("ok", "truncated") for i in range(8))
        first = pool.reset(list(range(16)))  # the dead actor is replaced; its envs play again
        assert pool.replaced == 1 and all(info["exit_status"] == "ok" for _, info in first)
        assert pool.step({12: "<answer>Up</answer>"})[12][4]["exit_status"] in ("ok", "truncated")
    finally:
        pool.close()


def test_the_trainer_plays_64_envs_in_groups_for_two_iterations_and_counts_a_killed_actors_episodes(cluster, tmp_path):
    from reference_trainer.config import preset
    from reference_trainer.trainer import Trainer
    from support import trainer_envs

    model = trainer_envs.build_toy_tiny(tmp_path / "model")
    cfg = preset(
        "grpo",
        model=str(model),
        env=trainer_envs.ENV_ID,
        env_mode="ray",
        tasks_per_iteration=8,
        group_size=8,
        num_envs=64,
        max_new_tokens=3,
        minibatch_size=64,
        iterations=2,
        eval_every=0,
        eval_episodes=8,
        out=str(tmp_path / "run"),
        progress=False,
    )
    trainer = Trainer(cfg)
    try:
        first = trainer.train_iteration()
        pool = trainer.envs  # the RayEnvPool itself: it keeps the env-pool protocol
        calls = {"n": 0}
        step = pool.step

        def step_then_kill(actions):  # the second turn of the second iteration loses an actor
            calls["n"] += 1
            if calls["n"] == 2:
                ray.kill(pool.actors[3], no_restart=True)
            return step(actions)

        pool.step = step_then_kill
        second = trainer.train_iteration()
    finally:
        trainer.close()
    assert first["rollout/episodes"] == second["rollout/episodes"] == 64  # no episode lost
    assert first["rollout/faulted_episodes"] == 0
    assert (
        0 < second["rollout/faulted_episodes"] <= 8
        and second["rollout/exit_infra_error"] == second["rollout/faulted_episodes"]
    )
