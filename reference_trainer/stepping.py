"""Concurrent env stepping with a per-step timeout: :class:`ThreadEnvs` and :class:`ProcessEnvs`.

Both are :class:`~reference_trainer.rollout.EnvBatch` es that :func:`~reference_trainer.rollout.collect`
drives like :class:`~reference_trainer.rollout.ListEnvs`, but every turn they step all active envs
at once:

* :class:`ThreadEnvs` keeps the envs in this process and runs their ``reset``/``step`` calls in
  ``workers`` daemon threads. Right for envs that wait on I/O (``TurnSearchQA-v0`` with
  ``retriever_url``, served envs): a thread waiting on a socket releases the GIL.
* :class:`ProcessEnvs` puts each env in its own worker process, a one-env Gymnasium
  ``AsyncVectorEnv(shared_memory=False)`` (``agentgym_turn.make_vec(..., mode="async")``), for
  CPU-bound envs (Sokoban generation, large WebShop catalogs).

Results equal serial stepping: each env gets its own action and the results come back keyed by env
index, so observations, rewards and their order do not depend on which env finished first.

Per-step timeout (``step_timeout_s > 0``): a ``step`` still running that many seconds after it
started is abandoned. Its result is :func:`timeout_result` (no observation, reward 0, truncated,
``info[STEP_TIMEOUT_KEY] = True``), :func:`~reference_trainer.rollout.collect` ends the episode
as truncated with ``truncation="timeout"``, a warning is logged, and the env is replaced by a
fresh one from its factory (a stuck thread is left to finish on its own, its result dropped and
its env closed once the step returns; a stuck process is terminated), so later episodes run
normally. ``reset`` has no timeout.
"""

from __future__ import annotations

import functools
import logging
import multiprocessing
import queue
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode

from agentgym_turn.chat import split_first_message

__all__ = ["ThreadEnvs", "ProcessEnvs", "STEP_TIMEOUT_KEY", "timeout_result", "unbatch_info"]

log = logging.getLogger(__name__)

#: The info key that marks a step cut off by the timeout.
STEP_TIMEOUT_KEY = "step_timeout"

StepResult = tuple[str, float, bool, bool, dict[str, Any]]


def timeout_result(seconds: float) -> StepResult:
    """What a step cut off after ``seconds`` returns: no observation, reward 0, truncated."""
    return "", 0.0, False, True, {STEP_TIMEOUT_KEY: True, "step_timeout_s": float(seconds)}


def unbatch_info(infos: dict[str, Any], i: int) -> dict[str, Any]:
    """Sub-env ``i``'s info from a Gymnasium vector env's batched info dict (nested dicts too).

    A key counts when its ``"_key"`` mask says sub-env ``i`` returned it; numpy scalars become
    Python numbers, as the env returned them.
    """
    out = {}
    for k, v in infos.items():
        if k.startswith("_") or not infos.get("_" + k, np.ones(i + 1, bool))[i]:
            continue
        value = unbatch_info(v, i) if isinstance(v, dict) else v[i]
        out[k] = value.item() if isinstance(value, np.generic) else value
    return out


def _check_timeout(step_timeout_s: float) -> float:
    if isinstance(step_timeout_s, bool) or not isinstance(step_timeout_s, (int, float)) or not step_timeout_s >= 0:
        raise ValueError(f"step_timeout_s must be a number of seconds >= 0 (0: no timeout), got {step_timeout_s!r}.")
    return float(step_timeout_s)


def _warn_timeout(kind: str, index: int, seconds: float) -> None:
    log.warning("env %d: step exceeded step_timeout_s=%g; its episode ends as truncated (truncation='timeout') "
                "and the env is replaced (%s).", index, seconds, kind)


# ---------------------------------------------------------------------- threads
class _Job:
    """One call on a worker thread; ``started``/``finished`` are read under the pool's condition."""

    __slots__ = ("fn", "on_abandoned", "started", "finished", "abandoned", "result", "error")

    def __init__(self, fn: Callable[[], Any], on_abandoned: Callable[[], Any] | None = None):
        self.fn = fn
        self.on_abandoned = on_abandoned  # run by the worker once an abandoned call returns (e.g. close its env)
        self.started: float | None = None  # time.monotonic() when a worker picked it up
        self.finished = False
        self.abandoned = False
        self.result: Any = None
        self.error: BaseException | None = None


class _ThreadPool:
    """``workers`` daemon threads; a job that overruns is abandoned and its thread replaced.

    Daemon threads, so a stuck call never blocks the interpreter's exit.
    """

    def __init__(self, workers: int):
        self._jobs: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._cond = threading.Condition()
        self._threads = 0
        self.workers = workers
        for _ in range(workers):
            self._spawn()

    def _spawn(self) -> None:
        self._threads += 1
        threading.Thread(target=self._work, name=f"turn-env-{self._threads}", daemon=True).start()

    def _work(self) -> None:
        while True:
            job = self._jobs.get()
            if job is None:
                return
            with self._cond:
                job.started = time.monotonic()
                self._cond.notify_all()
            try:
                job.result = job.fn()
            except BaseException as exc:  # re-raised in the caller's thread
                job.error = exc
            with self._cond:
                job.finished = True
                self._cond.notify_all()
                abandoned = job.abandoned
            if abandoned:  # a replacement thread took this one's place
                if job.on_abandoned is not None:
                    try:
                        job.on_abandoned()
                    except Exception:  # a late clean-up must not kill anything else
                        log.warning("cleaning up after an abandoned env call failed", exc_info=True)
                return

    def submit(self, fn: Callable[[], Any], on_abandoned: Callable[[], Any] | None = None) -> _Job:
        job = _Job(fn, on_abandoned)
        self._jobs.put(job)
        return job

    def wait(self, jobs: Sequence[_Job], timeout: float) -> list[int]:
        """Wait until every job finished or overran ``timeout`` seconds after it started (0: no limit).

        Returns the positions (in ``jobs``) of the abandoned ones.
        """
        abandoned = []
        with self._cond:
            while True:
                now = time.monotonic()
                wake: float | None = None
                pending = False
                for k, job in enumerate(jobs):
                    if job.finished or job.abandoned:
                        continue
                    if timeout > 0 and job.started is not None:
                        left = job.started + timeout - now
                        if left <= 0:
                            job.abandoned = True
                            abandoned.append(k)
                            self._spawn()  # keep `workers` threads serving while this one is stuck
                            continue
                        wake = left if wake is None else min(wake, left)
                    pending = True
                if not pending:
                    return abandoned
                self._cond.wait(wake)

    def shutdown(self) -> None:
        for _ in range(self._threads):
            self._jobs.put(None)


class ThreadEnvs:
    """Envs in this process, stepped concurrently by ``workers`` threads (see the module docstring).

    Args:
        env_fns: One zero-argument env factory per env (called again to replace a timed-out env).
        workers: Threads (0: one per env). Steps beyond it wait for a free thread.
        step_timeout_s: Seconds a step may run before it is cut off (0: no limit).
    """

    def __init__(self, env_fns: Sequence[Callable[[], gym.Env]], *, workers: int = 0, step_timeout_s: float = 0.0):
        if not env_fns:
            raise ValueError("ThreadEnvs: env_fns is empty; pass one env factory per env.")
        if isinstance(workers, bool) or not isinstance(workers, int) or workers < 0:
            raise ValueError(f"ThreadEnvs: workers (env_workers) must be an integer >= 0 (0: one per env), got {workers!r}.")
        self.env_fns = list(env_fns)
        self.envs = [fn() for fn in self.env_fns]
        self.num_envs = len(self.envs)
        self.step_timeout_s = _check_timeout(step_timeout_s)
        self.timeouts = 0  # steps cut off so far
        self._pool = _ThreadPool(workers or self.num_envs)

    def _run_all(self, calls: dict[int, Callable[[], Any]], timeout: float) -> tuple[dict[int, Any], list[int]]:
        order = list(calls)
        # a call cut off by the timeout closes its env when it finally returns (the env was replaced meanwhile)
        jobs = [self._pool.submit(calls[i], self.envs[i].close) for i in order]
        cut = {order[k] for k in self._pool.wait(jobs, timeout)}
        for i, job in zip(order, jobs):
            if i not in cut and job.error is not None:
                raise job.error
        return {i: job.result for i, job in zip(order, jobs) if i not in cut}, sorted(cut)

    def reset(self, seeds: Sequence[int]) -> list[str]:
        return [obs for obs, _ in self.reset_then(seeds, None)]

    def reset_then(self, seeds: Sequence[int], then: Callable[[str], Any] | None) -> list[tuple[str, Any]]:
        """:meth:`reset`, and ``then(first_message)`` run by the thread that reset the env (None without ``then``)."""
        def call(env: gym.Env, seed: int) -> tuple[str, Any]:
            obs = env.reset(seed=seed)[0]
            return obs, (then(obs) if then is not None else None)

        results, _ = self._run_all({i: functools.partial(call, self.envs[i], int(s)) for i, s in enumerate(seeds)}, 0.0)
        return [results[i] for i in range(len(seeds))]

    def step(self, actions: dict[int, str]) -> dict[int, StepResult]:
        return {i: result for i, (result, _) in self.step_then(actions, None).items()}

    def step_then(self, actions: dict[int, str], then: Callable[[StepResult], Any] | None) -> dict[int, tuple[StepResult, Any]]:
        """:meth:`step`, and ``then(result)`` run by the thread that stepped the env, right after its step: a
        rollout tokenises each observation there, while other envs still wait on I/O. ``then`` counts towards
        the step's timeout; a step cut off gets :func:`timeout_result` and ``None``."""
        def call(env: gym.Env, action: str) -> tuple[StepResult, Any]:  # the env bound now: a timeout replaces envs[i]
            obs, r, term, trunc, info = env.step(action)
            result = (obs, float(r), bool(term), bool(trunc), info)
            return result, (then(result) if then is not None else None)

        results, cut = self._run_all({i: functools.partial(call, self.envs[i], a) for i, a in actions.items()}, self.step_timeout_s)
        out: dict[int, tuple[StepResult, Any]] = {}
        for i in actions:
            out[i] = (timeout_result(self.step_timeout_s), None) if i in cut else results[i]
        for i in cut:  # the stuck env stays with its thread (which closes it once the step returns); a fresh one takes its slot
            self.timeouts += 1
            _warn_timeout("a new env from its factory; the stuck call finishes in the background", i, self.step_timeout_s)
            self.envs[i] = self.env_fns[i]()
        return out

    def split_first(self, index: int, observation: str) -> tuple[str, str]:
        return split_first_message(self.envs[index], observation)

    def close(self) -> None:
        self._pool.shutdown()
        for env in self.envs:
            env.close()


# ---------------------------------------------------------------------- processes
class ProcessEnvs:
    """Each env in its own worker process, stepped concurrently (see the module docstring).

    Every env is a one-env Gymnasium ``AsyncVectorEnv`` (``shared_memory=False``); only the
    active envs are stepped. A timed-out worker is terminated and a new one started at the next
    :meth:`reset`.

    Args:
        env_fns: One zero-argument env factory per env (picklable, e.g.
            ``functools.partial(gymnasium.make, id, **kwargs)``).
        step_timeout_s: Seconds a step may run before its process is terminated (0: no limit).
    """

    def __init__(self, env_fns: Sequence[Callable[[], gym.Env]], *, step_timeout_s: float = 0.0):
        if not env_fns:
            raise ValueError("ProcessEnvs: env_fns is empty; pass one env factory per env.")
        self.env_fns = list(env_fns)
        self.num_envs = len(self.env_fns)
        self.step_timeout_s = _check_timeout(step_timeout_s)
        self.timeouts = 0
        self._vecs: list[gym.vector.VectorEnv | None] = [self._start(i) for i in range(self.num_envs)]

    def _start(self, i: int) -> gym.vector.VectorEnv:
        from agentgym_turn import make_vec

        # No autoreset: every episode starts with an explicit reset (and Gymnasium 1.4's worker keeps a pending
        # next-step autoreset across reset() when shared_memory=False, which would swallow the first step).
        return make_vec([self.env_fns[i]], mode="async", vector_kwargs={"autoreset_mode": AutoresetMode.DISABLED})

    def _vec(self, i: int) -> gym.vector.VectorEnv:
        vec = self._vecs[i]
        if vec is None:
            vec = self._vecs[i] = self._start(i)
        return vec

    def reset(self, seeds: Sequence[int]) -> list[str]:
        for i, s in enumerate(seeds):
            self._vec(i).reset_async(seed=[int(s)])
        return [self._vec(i).reset_wait()[0][0] for i in range(len(seeds))]

    def step(self, actions: dict[int, str]) -> dict[int, StepResult]:
        start = time.monotonic()
        for i, a in actions.items():
            self._vec(i).step_async([a])
        out: dict[int, StepResult] = {}
        for i in actions:  # all run at once, so one shared start time is each one's start
            vec = self._vec(i)
            left = None if self.step_timeout_s == 0 else max(0.0, start + self.step_timeout_s - time.monotonic())
            try:
                obs, rew, term, trunc, infos = vec.step_wait(timeout=left)
            except multiprocessing.TimeoutError:
                self.timeouts += 1
                _warn_timeout("its process is terminated; a new one starts at the next reset", i, self.step_timeout_s)
                vec.close(terminate=True)
                self._vecs[i] = None
                out[i] = timeout_result(self.step_timeout_s)
                continue
            out[i] = (obs[0], float(rew[0]), bool(term[0]), bool(trunc[0]), unbatch_info(infos, 0))
        return out

    def split_first(self, index: int, observation: str) -> tuple[str, str]:
        raise ValueError("split_system_prompt needs env_mode 'list', 'sync' or 'threads' (process sub-envs are in other processes).")

    def close(self) -> None:
        for vec in self._vecs:
            if vec is not None:
                vec.close()
        self._vecs = [None] * self.num_envs
