"""GroupedVectorEnv: k copies of one task per group, kept across autoreset, for every id."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.vector import AutoresetMode

import agentgym_turn
from agentgym_turn.vector import GroupedVectorEnv, make_group_vec

ALL_IDS = agentgym_turn.env_ids()
NUM_GROUPS, GROUP_SIZE, SEED = 2, 3, 11


def _actions(envs: GroupedVectorEnv, step: int, policy: str = "mixed") -> list[str]:
    """``mixed``: member 0 plays the expert, member 1 garbage, member 2 alternates (members end at
    different turns); ``expert``/``garbage``: everyone; ``split``: group 0 expert, the others garbage."""
    experts = envs.call("expert_action")
    out = []
    for i in range(envs.num_envs):
        member, group = i % envs.group_size, i // envs.group_size
        expert = {
            "mixed": member == 0 or (member == 2 and step % 2 == 1),
            "expert": True,
            "garbage": False,
            "split": group == 0,
        }[policy]
        out.append(experts[i] if expert else "I do not know.")
    return out


def _run(
    env_id: str,
    mode: AutoresetMode,
    tasks_per_group: int = 3,
    max_steps: int = 200,
    policy: str = "mixed",
    **env_kwargs,
):
    """Step a grouped vector env until every group has started ``tasks_per_group`` tasks.

    Returns the tasks as ``{(group, task_seed): [first observation of each member]}`` and the
    number of steps taken; asserts the waiting rule on the way.
    """
    envs = make_group_vec(env_id, NUM_GROUPS, GROUP_SIZE, autoreset_mode=mode, **env_kwargs)
    tasks: dict[tuple[int, int], list[str]] = {}
    obs, infos = envs.reset(seed=SEED)
    for i in range(envs.num_envs):
        tasks.setdefault((int(infos["group"][i]), int(infos["task_seed"][i])), []).append(obs[i])
    done = np.zeros(envs.num_envs, dtype=bool)
    seeds = np.array(infos["task_seed"])
    steps = 0
    while min(sum(1 for g, _ in tasks if g == group) for group in range(NUM_GROUPS)) < tasks_per_group:
        assert steps < max_steps, "groups stopped starting new tasks"
        before = obs
        obs, rewards, terminated, truncated, infos = envs.step(_actions(envs, steps, policy))
        steps += 1
        new_seeds = np.array(infos["task_seed"])
        for i in range(envs.num_envs):
            g = i // GROUP_SIZE
            members = slice(g * GROUP_SIZE, (g + 1) * GROUP_SIZE)
            if new_seeds[i] != seeds[i]:  # a new task: only once every member was done
                assert done[members].all() or (
                    mode is AutoresetMode.SAME_STEP and (done[members] | terminated[members] | truncated[members]).all()
                )
                tasks.setdefault((g, int(new_seeds[i])), []).append(obs[i])
                if mode is AutoresetMode.NEXT_STEP:
                    assert rewards[i] == 0.0 and not terminated[i] and not truncated[i]
                elif terminated[i] or truncated[i]:  # SAME_STEP: the finished episode is in final_obs
                    assert infos["_final_obs"][i] and isinstance(infos["final_obs"][i], str)
            elif infos["waiting"][i]:
                assert done[i] and rewards[i] == 0.0 and not terminated[i] and not truncated[i] and obs[i] == before[i]
            else:
                assert not done[i]
        for i in range(envs.num_envs):
            if new_seeds[i] != seeds[i]:
                done[i] = False
            elif terminated[i] or truncated[i]:
                done[i] = True
        seeds = new_seeds
    envs.close()
    return tasks, steps


@pytest.mark.parametrize("mode", [AutoresetMode.NEXT_STEP, AutoresetMode.SAME_STEP], ids=["next_step", "same_step"])
@pytest.mark.parametrize("env_id", ALL_IDS)
def test_groups__members_share_each_task_across_autoresets(env_id, mode):
    tasks, _ = _run(env_id, mode)
    for (group, seed), first_messages in tasks.items():
        assert len(first_messages) == GROUP_SIZE  # every member started this task, once
        assert len(set(first_messages)) == 1  # ... the same task
        # the task is the one its seed gives: group g's e-th task has seed SEED + g + e * NUM_GROUPS
        assert (seed - SEED - group) % NUM_GROUPS == 0 and seed >= SEED + group
        alone = gym.make(env_id)
        assert alone.reset(seed=seed)[0] == first_messages[0]
    by_group = {g: sorted(s for gg, s in tasks if gg == g) for g in range(NUM_GROUPS)}
    for g, seeds in by_group.items():
        assert seeds[:3] == [SEED + g + e * NUM_GROUPS for e in range(3)]


def test_groups__task_sequence_of_a_group_does_not_depend_on_the_other_groups():
    # The same base seed gives each group the same tasks whether its episodes end soon (experts)
    # or only at the turn limit (garbage), and whatever the other group does.
    runs = [_run("TurnSokoban-v0", AutoresetMode.NEXT_STEP, policy=p) for p in ("expert", "split", "garbage")]
    assert runs[0][1] < runs[2][1]  # experts finish their tasks in fewer steps
    for g in range(NUM_GROUPS):
        firsts = [sorted((s, m[0]) for (gg, s), m in tasks.items() if gg == g)[:3] for tasks, _ in runs]
        assert firsts[0] == firsts[1] == firsts[2]


def test_groups__same_step_needs_fewer_steps_than_next_step_for_the_same_tasks():
    same, same_steps = _run("TurnSokoban-v0", AutoresetMode.SAME_STEP)
    nxt, next_steps = _run("TurnSokoban-v0", AutoresetMode.NEXT_STEP)
    assert set(same) >= {k for k in nxt if k[1] < SEED + 2 * NUM_GROUPS}
    assert same_steps < next_steps


def test_groups__reset_options_reach_every_member_and_infos_name_groups():
    envs = make_group_vec("TurnSokoban-v0", 2, 2)
    level = "#####\n#@$.#\n#####"
    obs, infos = envs.reset(seed=0, options={"level": level})
    assert len(set(obs)) == 1  # options apply to every group at this reset
    assert list(infos["group"]) == [0, 0, 1, 1] and list(infos["task_seed"]) == [0, 0, 1, 1]
    assert not infos["waiting"].any()
    envs.close()


def test_groups__mixed_envs_one_per_group():
    envs = make_group_vec(["TurnSokoban-v0", "TurnSearchQA-v0"], None, 2)
    obs, _ = envs.reset(seed=3)
    assert obs[0] == obs[1] and "Sokoban" in obs[0]
    assert obs[2] == obs[3] and "Question:" in obs[2]
    envs.close()


def test_groups__bad_arguments_are_named():
    with pytest.raises(ValueError, match=r"group_size \(the third argument\) must be an integer >= 1"):
        make_group_vec("TurnSokoban-v0", 2, 0)
    with pytest.raises(ValueError, match="got 3 env factories for group_size=2"):
        GroupedVectorEnv([lambda: gym.make("TurnSokoban-v0")] * 3, 2)
    with pytest.raises(ValueError, match="must be NEXT_STEP or SAME_STEP"):
        make_group_vec("TurnSokoban-v0", 1, 2, autoreset_mode=AutoresetMode.DISABLED)
    envs = make_group_vec("TurnSokoban-v0", 1, 2)
    with pytest.raises(RuntimeError, match="call reset"):
        envs.step(["x", "y"])
    envs.reset(seed=0)
    with pytest.raises(ValueError, match="got 1 actions for 2 sub-envs"):
        envs.step(["x"])
    with pytest.raises(ValueError, match="one base seed for all groups"):
        envs.reset(seed=[0, 1])
