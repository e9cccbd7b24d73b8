"""Step many text-turn envs concurrently, each env at its own pace, with an optional per-step timeout.

A rollout engine generates for many episodes at once and wants to step an env as soon as its
response is ready, without blocking the event loop or waiting for the slowest env of a batch
(which a Gymnasium vector env does). :class:`AsyncTurnEnvPool` holds ``n`` envs and runs each
``reset``/``step`` on a worker thread::

    pool = AsyncTurnEnvPool.from_id("TurnSokoban-v0", 8)
    observation, info = await pool.reset(3, seed=0)
    observation, reward, terminated, truncated, info = await pool.step(3, response)

* ``executor="thread"`` (default): the envs live in this process and calls run on daemon
  threads named ``turn-env-N``. Right for served envs (``agentgym_turn/Remote-v0``: a call is
  network I/O), envs that wait on a retriever or a browser, and envs whose steps are short.
* ``executor="process"``: each env lives in its own worker process (built there by its
  factory), for CPU-heavy local steps (large WebShop catalogs, 10x10 Sokoban certification);
  a thread of the pool sends each call down the worker's pipe and waits for the reply.

Calls on one env run one at a time, in the order they were awaited; calls on different envs run
concurrently. Results are exactly those of the env called directly. Synchronous code (a trainer
that steps a batch of envs each turn) calls :meth:`~AsyncTurnEnvPool.reset_all` and
:meth:`~AsyncTurnEnvPool.step_all` instead: the same calls and timeout, without an event loop.

Per-step timeout (``step_timeout_s > 0``): a ``step`` still running that many seconds after it
started is abandoned. It returns :func:`timeout_result` (no observation, reward 0, not
terminated, truncated, ``info[STEP_TIMEOUT_KEY] = True``), a warning is logged,
:attr:`AsyncTurnEnvPool.timeouts` counts it, and the env is replaced by a fresh one from its
factory, so later calls run normally: a stuck thread is left to finish (a new thread takes its
place, its result is dropped and its env closed once the step returns); a stuck worker process
is terminated. ``reset`` and :meth:`~AsyncTurnEnvPool.call` have no timeout.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import multiprocessing
import queue
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Executor, Future
from concurrent.futures import wait as wait_for_futures
from multiprocessing.connection import wait as wait_for_replies
from typing import Any, Literal

import gymnasium as gym

__all__ = ["AsyncTurnEnvPool", "STEP_TIMEOUT_KEY", "timeout_result"]

log = logging.getLogger(__name__)

#: The info key that marks a step cut off by the timeout.
STEP_TIMEOUT_KEY = "step_timeout"


def timeout_result(seconds: float) -> tuple[str, float, bool, bool, dict[str, Any]]:
    """What a step cut off after ``seconds`` returns: no observation, reward 0, truncated."""
    return "", 0.0, False, True, {STEP_TIMEOUT_KEY: True, "step_timeout_s": float(seconds)}


def _call(env: gym.Env, method: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """``env.reset/step/render/close(...)``, or any other attribute of the env (through wrappers)."""
    if method in ("reset", "step", "render", "close"):
        return getattr(env, method)(*args, **kwargs)
    attr = env.get_wrapper_attr(method)
    return attr(*args, **kwargs) if callable(attr) else attr


# ---------------------------------------------------------------------- worker processes
def _serve(conn: Any, factory: Callable[[], gym.Env]) -> None:
    """A worker process: build the env, answer ``(method, args, kwargs)`` with ``(ok, value)``, close it on ``None``."""
    import agentgym_turn  # noqa: F401  (a spawned worker registers the ids before making one)

    env, error = None, None
    try:
        env = factory()
    except Exception as exc:  # told to the first call
        error = exc
    try:
        while (message := conn.recv()) is not None:
            try:
                if error is not None:
                    raise error
                reply = (True, _call(env, *message))
            except Exception as exc:
                reply = (False, exc)
            conn.send(reply)
    except (EOFError, KeyboardInterrupt):  # the pool's process is gone, or Ctrl-C: just stop
        pass
    if env is not None:
        env.close()


#: What a call cut off by the timeout gives back inside the pool.
_CUT = object()


class _Worker:
    """An env in its own process (``executor="process"``), called through a pipe by a thread of the pool."""

    def __init__(self, factory: Callable[[], gym.Env], context: Any):
        self.conn, child = context.Pipe()
        self._process = context.Process(target=_serve, args=(child, factory), name="turn-env-worker", daemon=True)
        self._process.start()
        child.close()  # the parent keeps one end: a dead worker reads as EOFError
        self.lock = threading.Lock()  # one call at a time on the pipe, even when an awaiting caller gave up

    def terminate(self) -> None:
        self._process.terminate()
        self._process.join()

    def close(self) -> None:
        if self._process.is_alive():
            self.conn.send(None)
            self._process.join()
        self.conn.close()


# ---------------------------------------------------------------------- threads
def _outcome(future: Future) -> tuple[bool, Any]:
    """A finished future's ``(ok, value)``: its result, or the error it raised."""
    error = future.exception()
    return (True, future.result()) if error is None else (False, error)


class _Call:
    """One env call, run by an executor thread, its start and end told to ``cond`` (where its caller waits).

    A step the timeout abandons runs on, then closes its env.
    """

    def __init__(self, fn: Callable[[], Any], then: Callable[[Any], Any] | None, cond: threading.Condition):
        self.fn, self.then, self.cond = fn, then, cond
        self.started: float | None = None  # time.monotonic() when a thread took it
        self.done = self.abandoned = False
        self._late: Callable[[], Any] | None = None

    def __call__(self) -> Any:
        with self.cond:
            self.started = time.monotonic()
            self.cond.notify_all()
        try:
            result = self.fn()
            return (result, self.then(result)) if self.then is not None else result
        finally:
            with self.cond:
                self.done = True
                self.cond.notify_all()
            if self.abandoned:
                try:
                    self._late()
                except Exception:  # a late clean-up must not kill anything else
                    log.warning("closing an env after its abandoned step returned failed", exc_info=True)

    def abandon(self, late: Callable[[], Any]) -> bool:
        """Give the call up unless it has returned; ``late()`` runs when it does. Whether it was abandoned."""
        with self.cond:
            if not self.done:
                self.abandoned, self._late = True, late
            return self.abandoned


class _Threads(Executor):
    """Daemon threads ``{name}-N``: a stuck env call never blocks the interpreter's exit.

    A thread whose call was abandoned exits once the call returns; :meth:`add` starts the one
    that takes its place. :meth:`shutdown` does not wait for running calls.
    """

    def __init__(self, workers: int, name: str = "turn-env"):
        self.name = name
        self._jobs: queue.SimpleQueue[tuple[Future, Callable[[], Any]] | None] = queue.SimpleQueue()
        self._count = 0
        for _ in range(workers):
            self.add()

    def add(self) -> None:
        self._count += 1
        threading.Thread(target=self._work, name=f"{self.name}-{self._count}", daemon=True).start()

    def _work(self) -> None:
        while (job := self._jobs.get()) is not None:
            future, fn = job
            if future.set_running_or_notify_cancel():
                try:
                    future.set_result(fn())
                except BaseException as exc:  # raised where the call is awaited
                    future.set_exception(exc)
            if getattr(fn, "abandoned", False):  # a new thread took this one's place
                return

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future:
        future: Future = Future()
        self._jobs.put((future, functools.partial(fn, *args, **kwargs) if args or kwargs else fn))
        return future

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        for _ in range(self._count):
            self._jobs.put(None)


# ---------------------------------------------------------------------- the pool
class AsyncTurnEnvPool:
    """``n`` envs stepped by ``await``: see the module docstring.

    Args:
        env_fns: One zero-argument env factory per env, also called to replace an env whose step
            timed out (picklable with ``executor="process"``: a ``functools.partial(gymnasium.make,
            id, ...)``, not a lambda).
        executor: ``"thread"``, ``"process"``, or a ``concurrent.futures.Executor`` of your own
            (thread-like: the envs stay in this process; a thread stuck past the timeout stays
            busy until its call returns).
        max_workers: Threads of ``executor="thread"`` (default: one per env, at most 32); calls
            beyond it wait for a free thread, and their timeout starts when one takes them.
        step_timeout_s: Seconds a ``step`` may run before it is abandoned (0: no limit).
        start_method: How ``executor="process"`` starts its workers: ``"spawn"`` (default: safe in
            a process that runs threads), ``"fork"``, ``"forkserver"``, or ``None`` for the
            platform's default (a forked worker knows the envs this process registered at run time).
    """

    def __init__(
        self,
        env_fns: Sequence[Callable[[], gym.Env]],
        *,
        executor: Literal["thread", "process"] | Executor = "thread",
        max_workers: int | None = None,
        step_timeout_s: float = 0.0,
        start_method: str | None = "spawn",
    ):
        if not env_fns:
            raise ValueError("AsyncTurnEnvPool: env_fns is empty; pass one env factory per env.")
        if isinstance(step_timeout_s, bool) or not isinstance(step_timeout_s, (int, float)) or not step_timeout_s >= 0:
            raise ValueError(
                f"AsyncTurnEnvPool: step_timeout_s must be a number of seconds >= 0 (0: no timeout), got {step_timeout_s!r}."
            )
        if max_workers is not None and (
            isinstance(max_workers, bool) or not isinstance(max_workers, int) or max_workers < 1
        ):
            raise ValueError(
                f"AsyncTurnEnvPool: max_workers must be an integer >= 1 (or None: one per env), got {max_workers!r}."
            )
        self.env_fns = list(env_fns)
        self.num_envs = len(self.env_fns)
        self.step_timeout_s = float(step_timeout_s)
        self.timeouts = 0  # steps cut off by the timeout so far
        self._context = multiprocessing.get_context(start_method) if executor == "process" else None
        self._own_executor = not isinstance(executor, Executor)
        if isinstance(executor, Executor):
            self._executor: Executor = executor
        elif executor in ("thread", "process"):  # with processes, one thread per env waits on its worker's pipe
            self._executor = _Threads(self.num_envs if executor == "process" else max_workers or min(self.num_envs, 32))
        else:
            raise ValueError(
                f"AsyncTurnEnvPool: executor must be 'thread', 'process' or a concurrent.futures.Executor, got {executor!r}."
            )
        self._wait_all = self._workers_all if executor == "process" else self._threads_all
        # Where an awaited call waits for its worker's reply or its thread's deadline: one thread per env.
        self._waiters = (
            self._executor
            if executor == "process"
            else _Threads(self.num_envs, "turn-env-wait")
            if step_timeout_s
            else None
        )
        self._envs: list[Any] = [self._make(i) for i in range(self.num_envs)]
        self._locks: list[asyncio.Lock] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self._closed = False

    @classmethod
    def from_id(
        cls,
        env_id: str,
        num_envs: int,
        /,
        *,
        executor: Literal["thread", "process"] | Executor = "thread",
        max_workers: int | None = None,
        step_timeout_s: float = 0.0,
        start_method: str | None = "spawn",
        **env_kwargs: Any,
    ) -> AsyncTurnEnvPool:
        """``num_envs`` envs made with ``gymnasium.make(env_id, **env_kwargs)`` (an ``env_id`` keyword goes to the env)."""
        if isinstance(num_envs, bool) or not isinstance(num_envs, int) or num_envs < 1:
            raise ValueError(f"AsyncTurnEnvPool.from_id: num_envs must be an integer >= 1, got {num_envs!r}.")
        factory = functools.partial(gym.make, env_id, **env_kwargs)
        return cls(
            [factory] * num_envs,
            executor=executor,
            max_workers=max_workers,
            step_timeout_s=step_timeout_s,
            start_method=start_method,
        )

    @property
    def envs(self) -> list[gym.Env] | None:
        """The envs, when they live in this process (``None`` with ``executor="process"``)."""
        return None if self._context is not None else self._envs

    def _make(self, i: int) -> Any:
        return _Worker(self.env_fns[i], self._context) if self._context is not None else self.env_fns[i]()

    # ------------------------------------------------------------------ calls
    async def reset(
        self,
        i: int,
        *,
        seed: int | None = None,
        options: dict[str, Any] | None = None,
        then: Callable[[Any], Any] | None = None,
    ) -> Any:
        """``reset`` env ``i``: its first message and info.

        With ``then``: ``(result, then(result))``, ``then`` run right after the call by the thread
        that made it (a rollout tokenises the observation there, while other envs still wait);
        with ``executor="process"``, by the caller once the reply is in.
        """
        return await self._run(i, "reset", (), {"seed": seed, "options": options}, then)

    async def step(self, i: int, action: Any, *, then: Callable[[Any], Any] | None = None) -> Any:
        """``step`` env ``i`` with one turn's response; :func:`timeout_result` when it runs past ``step_timeout_s``.

        ``then`` as in :meth:`reset`; it counts towards the timeout, and a step cut off gets ``None`` for it.
        """
        return await self._run(i, "step", (action,), {}, then)

    async def call(self, i: int, name: str, *args: Any, **kwargs: Any) -> Any:
        """Call method ``name`` of env ``i`` (through its wrappers), e.g. ``"expert_action"``, or read the attribute."""
        return await self._run(i, name, args, kwargs, None)

    def _check(self, indices: Any, method: str) -> float | None:
        """Refuse a closed pool and bad env indices; the call's timeout (None: none)."""
        if self._closed:
            raise RuntimeError("AsyncTurnEnvPool is closed; build a new one.")
        for i in indices:
            if isinstance(i, bool) or not isinstance(i, int) or not 0 <= i < self.num_envs:
                raise IndexError(f"AsyncTurnEnvPool: env index must be an integer in [0, {self.num_envs}), got {i!r}.")
        return self.step_timeout_s if method == "step" and self.step_timeout_s > 0 else None

    def _finish(self, i: int, outcome: Any, then: Callable[[Any], Any] | None, in_thread: bool) -> Any:
        """A call's outcome as its caller gets it: ``_CUT`` replaces the env and gives :func:`timeout_result`."""
        if outcome is _CUT:
            self._replace(i)
            result = timeout_result(self.step_timeout_s)
            return (result, None) if then is not None else result
        ok, value = outcome
        if not ok:
            raise value
        return value if in_thread or then is None else (value, then(value))

    async def _run(
        self, i: int, method: str, args: tuple[Any, ...], kwargs: dict[str, Any], then: Callable[[Any], Any] | None
    ) -> Any:
        timeout = self._check([i], method)
        loop = asyncio.get_running_loop()
        if loop is not self._loop:  # locks belong to one event loop: a new asyncio.run gets new ones
            self._loop, self._locks = loop, [asyncio.Lock() for _ in range(self.num_envs)]
        async with self._locks[i]:
            if timeout is None and self._context is None:  # nothing to watch: the env's thread answers the event loop
                call = _Call(functools.partial(_call, self._envs[i], method, args, kwargs), then, threading.Condition())
                return await loop.run_in_executor(self._executor, call)
            # else a waiter thread runs it as a batch of one (a worker's pipe, or the deadline of a thread's call)
            outcomes = await loop.run_in_executor(
                self._waiters, self._wait_all, method, {i: (args, kwargs)}, then, timeout
            )
            return self._finish(i, outcomes[i], then, self._context is None)

    # ------------------------------------------------------------------ batches, from synchronous code
    def reset_all(self, seeds: Sequence[int | None], *, then: Callable[[Any], Any] | None = None) -> list[Any]:
        """Reset envs ``0 .. len(seeds) - 1`` at once with these seeds and wait for all: their :meth:`reset` results.

        For synchronous callers; not while awaited calls run on the same envs.
        """
        out = self._run_all("reset", {i: ((), {"seed": seed}) for i, seed in enumerate(seeds)}, then)
        return [out[i] for i in range(len(seeds))]

    def step_all(self, actions: dict[int, Any], *, then: Callable[[Any], Any] | None = None) -> dict[int, Any]:
        """Step env ``i`` with ``actions[i]``, all at once, and wait for all: their :meth:`step` results by env index.

        Each step has its own timeout, from when a thread took it (or it was sent to its worker).
        The first error, in the order of ``actions``, is raised once all are back.
        """
        return self._run_all("step", {i: ((a,), {}) for i, a in actions.items()}, then)

    def _run_all(
        self, method: str, calls: dict[int, tuple[tuple[Any, ...], dict[str, Any]]], then: Callable[[Any], Any] | None
    ) -> dict[int, Any]:
        timeout = self._check(calls, method)
        outcomes = self._wait_all(method, calls, then, timeout)
        cut = {
            i: self._finish(i, _CUT, then, True) for i in calls if outcomes[i] is _CUT
        }  # replaced before an error is raised
        return {i: cut[i] if i in cut else self._finish(i, outcomes[i], then, self._context is None) for i in calls}

    def _threads_all(
        self, method: str, calls: dict[int, Any], then: Callable[[Any], Any] | None, timeout: float | None
    ) -> dict[int, Any]:
        """Each call's ``(ok, value)`` from the pool's threads, or ``_CUT`` when it ran past ``timeout`` after a thread took it."""
        cond = threading.Condition()  # told of this batch's starts and ends only
        jobs = {
            i: _Call(functools.partial(_call, self._envs[i], method, args, kwargs), then, cond)
            for i, (args, kwargs) in calls.items()
        }
        futures = {i: self._executor.submit(job) for i, job in jobs.items()}
        if timeout is None:  # nothing to watch: wait for the results alone
            wait_for_futures(futures.values())
            return {i: _outcome(futures[i]) for i in calls}
        cut: set[int] = set()
        pending = dict(jobs)
        with cond:
            while True:
                now, wake = time.monotonic(), None
                for i, job in list(pending.items()):
                    if job.done:
                        del pending[i]
                        continue
                    if job.started is None:  # queued: its time starts when a thread takes it
                        continue
                    left = job.started + timeout - now
                    if left > 0:
                        wake = left if wake is None else min(wake, left)
                    elif job.abandon(self._envs[i].close):
                        cut.add(i)
                        del pending[i]
                if not pending:
                    break
                cond.wait(wake)
        return {i: _CUT if i in cut else _outcome(futures[i]) for i in calls}

    def _workers_all(self, method: str, calls: dict[int, Any], then: Any, timeout: float | None) -> dict[int, Any]:
        """Each call's ``(ok, value)`` from the workers (all sent at once), or ``_CUT`` when no reply came within ``timeout``.

        ``then`` is left to the caller (:meth:`_finish`): it runs in this process.
        """
        workers = {i: self._envs[i] for i in calls}
        with contextlib.ExitStack() as held:
            for i in sorted(workers):
                held.enter_context(workers[i].lock)
            for i, (args, kwargs) in calls.items():
                workers[i].conn.send((method, args, kwargs))
            deadline = None if timeout is None else time.monotonic() + timeout
            waiting = {workers[i].conn: i for i in calls}
            out = dict.fromkeys(calls, _CUT)
            while waiting and (
                ready := wait_for_replies(
                    list(waiting), None if deadline is None else max(0.0, deadline - time.monotonic())
                )
            ):
                for conn in ready:
                    i = waiting.pop(conn)
                    try:
                        out[i] = conn.recv()  # (ok, value)
                    except EOFError as exc:  # the worker died; the other replies are still read
                        out[i] = (False, exc)
        return out

    def _replace(self, i: int) -> None:
        """A fresh env ``i`` from its factory, after its step was abandoned."""
        self.timeouts += 1
        if isinstance(self._envs[i], _Worker):
            self._envs[i].terminate()
            self._envs[i].close()
            what = "its worker process is terminated"
        else:
            what = "the stuck call finishes in the background, then closes its env"
            if isinstance(self._executor, _Threads):
                self._executor.add()  # keep the pool's threads serving while the stuck one waits
        log.warning(
            "env %d: a step ran past step_timeout_s=%g; it returns a truncated timeout result and the env is replaced "
            "by a new one from its factory (%s).",
            i,
            self.step_timeout_s,
            what,
        )
        self._envs[i] = self._make(i)

    # ------------------------------------------------------------------ lifetime
    def close(self) -> None:
        """Close every env and stop the pool's threads (idempotent)."""
        if self._closed:
            return
        self._closed = True
        for env in self._envs:
            env.close()
        if self._own_executor:
            self._executor.shutdown()
        if self._waiters is not None and self._waiters is not self._executor:
            self._waiters.shutdown()

    def __enter__(self) -> AsyncTurnEnvPool:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    async def __aenter__(self) -> AsyncTurnEnvPool:
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await asyncio.get_running_loop().run_in_executor(None, self.close)
