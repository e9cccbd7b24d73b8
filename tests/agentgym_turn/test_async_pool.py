"""AsyncTurnEnvPool: envs stepped with await (or in batches) give the transcripts of envs called directly; a step past
step_timeout_s is cut off and its env replaced."""

from __future__ import annotations

import asyncio
import functools
import multiprocessing
import threading

import gymnasium as gym
import pytest

import agentgym_turn  # noqa: F401
from agentgym_turn.async_pool import STEP_TIMEOUT_KEY, AsyncTurnEnvPool, timeout_result
from support.parallel_envs import SlowCorridorEnv

ACTIONS = ["no idea", "<answer>Up</answer>", "<answer>Left || Down</answer>", "<answer>Right</answer>", "x"]


def _direct(env_id: str, seed: int, actions: list[str]) -> list[tuple]:
    env = gym.make(env_id)
    out = [env.reset(seed=seed)]
    for a in actions:
        out.append(env.step(a))
        if out[-1][2] or out[-1][3]:
            break
    return out


async def _episode(pool: AsyncTurnEnvPool, i: int, seed: int, actions: list[str]) -> list[tuple]:
    out = [await pool.reset(i, seed=seed)]
    for a in actions:
        out.append(await pool.step(i, a))
        await asyncio.sleep(0)  # let the other episodes interleave
        if out[-1][2] or out[-1][3]:
            break
    return out


@pytest.mark.parametrize("executor", ["thread", "process"])
def test_pool__concurrent_episodes_equal_direct_episodes(executor):
    n = 3 if executor == "process" else 6
    episodes = [(10 + i, ACTIONS[i % len(ACTIONS) :] + ACTIONS[: i % len(ACTIONS)]) for i in range(n)]

    async def main():
        async with AsyncTurnEnvPool.from_id("TurnSokoban-v0", n, executor=executor) as pool:
            return await asyncio.gather(*(_episode(pool, i, seed, acts) for i, (seed, acts) in enumerate(episodes)))

    results = asyncio.run(main())
    for (seed, acts), got in zip(episodes, results):
        assert got == _direct("TurnSokoban-v0", seed, acts)


def test_pool__calls_on_one_env_run_in_the_order_awaited():
    async def main():
        with AsyncTurnEnvPool.from_id("TurnSokoban-v0", 2, max_episode_steps=20, max_actions_per_episode=None) as pool:
            await pool.reset(0, seed=1)
            steps = await asyncio.gather(*(pool.step(0, "garbage") for _ in range(8)))
            return [info["turn"] for *_, info in steps], await pool.call(0, "expert_action"), await pool.call(1, "turn")

    turns, expert, other_turn = asyncio.run(main())
    assert turns == list(range(1, 9))
    assert expert.startswith("<answer>") and other_turn == 0


def test_pool__rollout_engine_pattern_many_episodes_as_they_come():
    # A bounded engine loop: 4 slots, 12 episodes, each slot takes the next seed when its episode ends.
    seeds = list(range(12))
    finished: dict[int, float] = {}

    async def worker(pool, i):
        while seeds:
            seed = seeds.pop(0)
            await pool.reset(i, seed=seed)
            total, done = 0.0, False
            while not done:
                action = await pool.call(i, "expert_action")
                _, reward, terminated, truncated, _ = await pool.step(i, action)
                total, done = total + reward, terminated or truncated
            finished[seed] = total

    async def main():
        with AsyncTurnEnvPool.from_id("TurnSokoban-v0", 4) as pool:
            await asyncio.gather(*(worker(pool, i) for i in range(4)))

    asyncio.run(main())
    assert sorted(finished) == list(range(12))
    env = gym.make("TurnSokoban-v0")
    for seed, total in finished.items():
        env.reset(seed=seed)
        expected, done = 0.0, False
        while not done:
            _, reward, terminated, truncated, _ = env.step(env.unwrapped.expert_action())
            expected, done = expected + reward, terminated or truncated
        assert total == expected and total >= 10  # the expert solves every level (+10 bonus, +1 box, -0.1 a move)


def test_pool__a_pool_serves_several_asyncio_runs_and_own_executors():
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(2) as executor:
        pool = AsyncTurnEnvPool([functools.partial(gym.make, "TurnSearchQA-v0")] * 2, executor=executor)
        first = asyncio.run(pool.reset(1, seed=4))
        second = asyncio.run(pool.step(1, "<answer> x </answer>"))
        pool.close()
    assert "Question:" in first[0] and second[2] is True


def test_pool__errors_name_what_is_wrong():
    pool = AsyncTurnEnvPool.from_id("TurnSokoban-v0", 2)
    with pytest.raises(IndexError, match=r"env index must be an integer in \[0, 2\), got 2"):
        asyncio.run(pool.step(2, "x"))
    with pytest.raises(gym.error.ResetNeeded, match="before calling env.reset"):  # the env's own error passes through
        asyncio.run(pool.step(0, "x"))
    pool.close()
    with pytest.raises(RuntimeError, match="closed"):
        asyncio.run(pool.reset(0))
    with pytest.raises(ValueError, match="executor must be 'thread', 'process'"):
        AsyncTurnEnvPool.from_id("TurnSokoban-v0", 1, executor="fiber")
    with pytest.raises(ValueError, match="num_envs must be an integer >= 1"):
        AsyncTurnEnvPool.from_id("TurnSokoban-v0", 0)


def test_pool__served_envs_step_concurrently_and_equal_local_episodes():
    from agentgym_turn.remote.server import EnvServer

    with EnvServer("TurnSokoban-v0", port=0) as server:

        async def main():
            pool = AsyncTurnEnvPool.from_id(
                "agentgym_turn/Remote-v0", 3, base_url=server.base_url, env_id="TurnSokoban-v0"
            )
            async with pool:
                return await asyncio.gather(*(_episode(pool, i, 20 + i, ACTIONS) for i in range(3)))

        results = asyncio.run(main())
    for i, got in enumerate(results):
        assert got == _direct("TurnSokoban-v0", 20 + i, ACTIONS)


class _Gated(gym.Wrapper):
    """An env whose step with the action ``"block"`` waits for ``gate`` (a stuck env); ``closed`` is set by close()."""

    def __init__(self, env: gym.Env, gate: threading.Event):
        super().__init__(env)
        self.gate, self.closed = gate, threading.Event()

    def step(self, action):
        if action == "block":
            self.gate.wait()
        return super().step(action)

    def close(self):
        self.closed.set()
        super().close()


def test_pool__a_step_past_step_timeout_s_is_cut_off_and_a_fresh_env_takes_its_place(caplog):
    gate, made = threading.Event(), []

    def factory():
        made.append(_Gated(gym.make("TurnSokoban-v0"), gate))
        return made[-1]

    async def main(pool):
        await asyncio.gather(pool.reset(0, seed=1), pool.reset(1, seed=2))
        # One thread: env 1's step waits for it behind the stuck step, and its own timeout starts only when it runs.
        cut, other = await asyncio.gather(pool.step(0, "block", then=lambda r: "then"), pool.step(1, ACTIONS[1]))
        return cut, other, await _episode(pool, 0, 5, ACTIONS)

    pool = AsyncTurnEnvPool([factory] * 2, max_workers=1, step_timeout_s=0.5)
    try:
        cut, other, after = asyncio.run(main(pool))
        stuck_env_closed_early = made[0].closed.is_set()
        gate.set()
        assert made[0].closed.wait(timeout=60.0)  # liveness bound: the abandoned call closes its env once it returns
        assert pool.timeouts == 1 and len(made) == 3 and pool.envs == [made[2], made[1]]
    finally:
        gate.set()
        pool.close()
    assert (
        cut
        == (timeout_result(0.5), None)
        == (("", 0.0, False, True, {STEP_TIMEOUT_KEY: True, "step_timeout_s": 0.5}), None)
    )
    assert other == _direct("TurnSokoban-v0", 2, [ACTIONS[1]])[1]
    assert after == _direct("TurnSokoban-v0", 5, ACTIONS)  # the fresh env plays like one called directly
    assert not stuck_env_closed_early
    assert "env 0: a step ran past step_timeout_s=0.5" in caplog.text


def test_pool__step_all_steps_a_batch_from_synchronous_code_with_the_same_timeout():
    gate = threading.Event()
    pool = AsyncTurnEnvPool([lambda: _Gated(gym.make("TurnSokoban-v0"), gate)] * 3, step_timeout_s=0.5)
    try:
        first = pool.reset_all([1, 2, 3])
        stepped = pool.step_all({2: "block", 0: ACTIONS[1]})
    finally:
        gate.set()
        pool.close()
    assert first == [_direct("TurnSokoban-v0", seed, [])[0] for seed in (1, 2, 3)]
    assert stepped == {2: timeout_result(0.5), 0: _direct("TurnSokoban-v0", 1, [ACTIONS[1]])[1]} and list(stepped) == [
        2,
        0,
    ]
    assert pool.timeouts == 1


def test_pool__a_stuck_worker_process_is_terminated_and_replaced():
    factory = functools.partial(SlowCorridorEnv, stall_seeds=(1,), stall_room=0, stall_s=3600.0)

    async def main(pool):
        await asyncio.gather(pool.reset(0, seed=1), pool.reset(1, seed=0))  # env 0 stalls in its first step
        cut, other = await asyncio.gather(pool.step(0, "L"), pool.step(1, "L"))
        await pool.reset(0, seed=0)
        return cut, other, await pool.step(0, "L")

    pool = AsyncTurnEnvPool([factory] * 2, executor="process", step_timeout_s=1.0)
    try:
        cut, other, again = asyncio.run(main(pool))
        workers = [p for p in multiprocessing.active_children() if p.name == "turn-env-worker"]
        assert len(workers) == 2 and pool.timeouts == 1  # the stuck worker is gone, a new one serves env 0
    finally:
        pool.close()
    direct = SlowCorridorEnv()
    direct.reset(seed=0)
    assert cut == timeout_result(1.0)
    assert other == again == direct.step("L")


def test_pool__refuses_a_step_timeout_that_is_not_a_number_of_seconds():
    for bad in (-1, True, "5"):
        with pytest.raises(ValueError, match="step_timeout_s must be a number of seconds >= 0"):
            AsyncTurnEnvPool.from_id("TurnSokoban-v0", 1, step_timeout_s=bad)


def test_pool__a_worker_call_given_up_by_its_caller_does_not_answer_the_next_call():
    async def main(pool):
        await pool.reset(0, seed=0)
        step = asyncio.ensure_future(pool.step(0, "L"))
        await asyncio.sleep(0)  # the step may have been sent to the worker, or not yet
        step.cancel()
        return await pool.call(0, "room"), await pool.call(0, "turn")

    with AsyncTurnEnvPool([SlowCorridorEnv], executor="process") as pool:
        room, turn = asyncio.run(main(pool))
    direct = SlowCorridorEnv()
    direct.reset(seed=0)
    direct.step("L")
    assert (room, turn) in ((0, 0), (direct.room, 1))  # each call got its own reply, never the step's
