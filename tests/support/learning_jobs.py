"""The suite's learning jobs: every recipe's SFT start, then its Turn-PPO run (and, for the recipes in
``controls``, a negative control from the same start: Turn-PPO paid shuffled rewards), on two single-thread processes;
and the work of the tests marked ``background`` (``extras``), which fills the workers' time after them.

Each recipe is two tasks, ``suite_sft_policy`` and then ``learn`` (which reuses the saved SFT policy), so
that two workers can share three recipes evenly: run whole, one worker would get two recipes and
finish minutes after the other. A worker that frees up takes the ready task with the most work
behind it (an SFT counts its RL and control too: :attr:`Recipe.sft_minutes`, :attr:`Recipe.rl_minutes`,
:attr:`Recipe.control_minutes`). Tasks
are handed to the pool only when a worker is free, so its FIFO queue never reorders them; every
task runs in a fresh spawned process (``maxtasksperchild=1``).
"""

from __future__ import annotations

import multiprocessing as mp
import os
import threading
import time
from typing import Any


#: The jobs' niceness: below the foreground tests, which would otherwise run on two thirds of a core until the jobs end
#: and then alone on one of the two cores.
NICE = 10


class LearningJobs:
    """Start with :meth:`start`; :meth:`results` waits for ``{recipe name: learn(...) result}``; :meth:`stop` kills what runs."""

    #: The negative control's overrides: each episode paid another episode's score (``--reward shuffled``).
    CONTROL = {"reward": "shuffled"}

    def __init__(
        self,
        names: list[str],
        work: str,
        workers: int = 2,
        *,
        recipes: dict | None = None,
        tasks: tuple | None = None,
        controls: tuple[str, ...] = (),
        extras: dict[str, tuple[Any, tuple, float]] | None = None,
    ):
        from reference_trainer.recipes import RECIPES, learn
        from reference_trainer.recipes.runs import suite_start

        self.recipes = {name: (recipes or RECIPES)[name] for name in names}
        #: Other tests' work, ``{key: (function, args, minutes)}``: ready at once, handed out by their minutes as the
        #: recipes' tasks are, so that the workers fill the time the foreground tests would otherwise run alone. What
        #: one returns (or the exception it raised) is its result under ``key``.
        self.extras = dict(extras or {})
        #: What the two tasks of a recipe run: ``sft(name, work)``, then ``rl((name, algo, seed, iterations, eval_every, work))``.
        self.sft, self.rl = tasks or (suite_start, learn)
        self.work = work
        self.controls = set(controls)
        self.workers = workers
        self.ready: list[tuple[str, str]] = [("sft", name) for name in names] + [("extra", key) for key in self.extras]
        self.order: list[tuple[str, str]] = []  # the tasks in the order they were handed out
        #: ``(kind, name, start_s, end_s)`` of every task that ended, seconds since :meth:`start` (the suite prints them)
        self.timeline: list[tuple[str, str, float, float]] = []
        self._began: dict[tuple[str, str], float] = {}
        self._t0 = time.monotonic()
        self.running = 0
        self.done: dict[str, Any] = {}
        self.error: tuple[tuple[str, str], BaseException] | None = None
        self.finished = threading.Event()
        self.lock = threading.RLock()
        self.pool = None
        self.waiting_since: float | None = None

    def start(self) -> "LearningJobs":
        self._t0 = time.monotonic()
        # niced: the foreground tests take a core whenever they need one, the jobs fill the time they leave (a job's
        # result does not depend on its speed: no learning job has a time budget)
        self.pool = mp.get_context("spawn").Pool(
            self.workers, initializer=os.nice, initargs=(NICE,), maxtasksperchild=1
        )
        self._dispatch()
        return self

    def priority(self, task: tuple[str, str]) -> float:
        kind, name = task
        if kind == "extra":
            return self.extras[name][2]
        recipe = self.recipes[name]
        control = getattr(recipe, "control_minutes", None) or recipe.rl_minutes
        if kind == "sft":  # what waits behind it: its RL run and its control
            return recipe.sft_minutes + recipe.rl_minutes + (control if name in self.controls else 0)
        return control if kind == "control" else recipe.rl_minutes

    def _dispatch(self) -> None:
        with self.lock:
            while self.error is None and self.running < self.workers and self.ready:
                task = max(self.ready, key=self.priority)
                self.ready.remove(task)
                self.order.append(task)
                self._began[task] = time.monotonic() - self._t0
                self.running += 1
                kind, name = task
                if kind == "extra":
                    fn, args = self.extras[name][0], self.extras[name][1]
                elif kind == "sft":
                    fn, args = self.sft, (name, self.work)
                elif kind == "rl":
                    fn, args = self.rl, ((name, "turn-ppo", 0, 0, 0, self.work),)
                else:
                    fn, args = self.rl, ((name, "turn-ppo", 0, 0, 0, self.work, dict(self.CONTROL)),)
                self.pool.apply_async(
                    fn,
                    args,
                    callback=lambda result, t=task: self._finish(t, result),
                    error_callback=lambda exc, t=task: self._finish(t, None, exc),
                )
            if self.error is not None or (not self.ready and self.running == 0):
                self.finished.set()

    def _finish(self, task: tuple[str, str], result: Any, exc: BaseException | None = None) -> None:
        with self.lock:
            self.running -= 1
            kind, name = task
            self.timeline.append((kind, name, self._began.get(task, 0.0), time.monotonic() - self._t0))
            if exc is not None and kind == "extra":  # its test alone fails, raising it
                self.done[name] = exc
            elif exc is not None:
                self.error = self.error or (task, exc)
            elif kind == "sft":
                self.done[f"{name}/start"] = result
                self.ready.append(("rl", name))
                if name in self.controls:
                    self.ready.append(("control", name))
            elif kind in ("rl", "extra"):
                self.done[name] = result
            else:
                self.done[f"{name}/shuffled"] = result
        self._dispatch()

    def results(self) -> dict[str, Any]:
        self.finished.wait()
        if self.error is not None:
            (kind, name), exc = self.error
            what = f"the background task of {name}" if kind == "extra" else f"the {name} recipe's {kind.upper()} job"
            raise RuntimeError(f"{what} failed: {exc!r}") from exc
        return dict(self.done)

    def waited(self) -> None:
        """Note that the suite's other tests are done (the first test that needs the results starts)."""
        self.waiting_since = self.waiting_since if self.waiting_since is not None else time.monotonic() - self._t0

    def report(self) -> str:
        """One line per finished task, in the order they ended: ``kind name start-end s``; then when the suite's other
        tests were done (from then on, the suite waited for the jobs)."""
        lines = [f"{kind:8s} {name[-40:]:10s} {start:7.0f}-{end:.0f} s" for kind, name, start, end in self.timeline]
        if self.waiting_since is not None:
            lines.append(f"{'tests':8s} {'the rest':10s} {0:7.0f}-{self.waiting_since:.0f} s")
        return "\n".join(lines)

    def stop(self) -> None:
        if self.pool is not None:
            self.pool.terminate()
            self.pool.join()
            self.pool = None
