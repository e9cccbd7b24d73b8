"""A corridor env that waits, for the parallel-stepping tests: ``TrainerToySlowCorridor-v0``.

It plays :class:`support.trainer_envs.CorridorEnv` and can sleep in ``step`` (an env waiting on I/O), stall
on chosen tasks (a stuck env), and count how many of its instances are inside ``step`` at once.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import gymnasium as gym

from support.trainer_envs import CorridorEnv

SLOW_ID = "TrainerToySlowCorridor-v0"


class SlowCorridorEnv(CorridorEnv):
    """:class:`~support.trainer_envs.CorridorEnv` with waits. Same rules, rewards, info keys.

    ## Arguments
    ``gymnasium.make("TrainerToySlowCorridor-v0", step_delay_s=0.01, stall_seeds=(3,), stall_room=1, stall_s=60)``

    * ``step_delay_s``: seconds every step sleeps.
    * ``stall_seeds``, ``stall_room``, ``stall_s``: a task reset with a seed in ``stall_seeds``
      sleeps ``stall_s`` seconds in its step from room ``stall_room`` (0-based).

    Class-level counters (one process): :attr:`max_inside` is the most instances ever inside
    ``step`` at the same time; with :attr:`rendezvous` ``= n`` a step waits (up to 30 s) until
    ``n`` instances have been inside at once, so a test proves concurrency by a count.
    """

    rendezvous = 0
    max_inside = 0
    closed = 0  # instances closed so far (one process)
    _inside = 0
    _cond = threading.Condition()

    def __init__(
        self,
        step_delay_s: float = 0.0,
        stall_seeds: tuple[int, ...] = (),
        stall_room: int = 0,
        stall_s: float = 60.0,
        **kwargs: Any,
    ):
        super().__init__(**kwargs)
        self.step_delay_s, self.stall_seeds, self.stall_room, self.stall_s = (
            step_delay_s,
            tuple(stall_seeds),
            stall_room,
            stall_s,
        )
        self.task_seed: int | None = None

    @classmethod
    def reset_counters(cls, rendezvous: int = 0) -> None:
        with cls._cond:
            cls.rendezvous, cls.max_inside, cls._inside, cls.closed = rendezvous, 0, 0, 0

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        self.task_seed = seed
        return super().reset(seed=seed, options=options)

    def step(self, action: Any) -> tuple[str, float, bool, bool, dict[str, Any]]:
        cls = type(self)
        with cls._cond:
            cls._inside += 1
            cls.max_inside = max(cls.max_inside, cls._inside)
            cls._cond.notify_all()
            if cls.rendezvous:
                cls._cond.wait_for(lambda: cls.max_inside >= cls.rendezvous, timeout=30.0)
        try:
            if self.task_seed in self.stall_seeds and self.room == self.stall_room:
                time.sleep(self.stall_s)
            if self.step_delay_s:
                time.sleep(self.step_delay_s)
            return super().step(action)
        finally:
            with cls._cond:
                cls._inside -= 1

    def close(self) -> None:
        with type(self)._cond:
            type(self).closed += 1
            type(self)._cond.notify_all()
        super().close()


if SLOW_ID not in gym.registry:
    gym.register(id=SLOW_ID, entry_point=f"{__name__}:SlowCorridorEnv", max_episode_steps=5)
