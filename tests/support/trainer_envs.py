"""A toy multi-turn env for the trainer's tests, registered as ``TrainerToyCorridor-v0``.

Import this module (``--import support.trainer_envs`` on the trainer's command line) to register it.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym

from agentgym_turn.core import InvalidAction, TurnEnv, TurnOutcome

ENV_ID = "TrainerToyCorridor-v0"


class CorridorEnv(TurnEnv):
    """Walk through a corridor of rooms; each room's sign says which door leads on.

    ## Description
    A corridor of ``rooms`` rooms. Each room shows a sign pointing ``left`` or ``right``
    (drawn from ``self.np_random``); taking the other door ends the episode.

    ## Action Space
    Any text; the first letter ``L`` or ``R`` in it (either case) is the move.

    ## Observation Space
    Text: the room number and the sign.

    ## Starting State
    Room 1, with fresh signs for every room.

    ## Rewards
    ``1 / rooms`` for each correct door, 0 for a wrong one, ``format_penalty`` for a response
    without ``L`` or ``R``.

    ## Episode End
    Terminated after the last room or a wrong door; truncated by the registered turn limit.

    ## Information
    The common keys `turn`, `action_is_valid`, `action_is_effective`, `success`, `score`, and
    `room` (0-based index of the current room).

    ## Arguments
    ``gymnasium.make("TrainerToyCorridor-v0", rooms=3)``

    ## Version History
    * v0: first version.
    """

    def __init__(self, rooms: int = 3, **kwargs: Any):
        super().__init__(**kwargs)
        self.rooms = rooms
        self.signs: list[str] = []
        self.room = 0
        self.failed = False

    def _reset(self, options: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        self.signs = ["left" if b else "right" for b in self.np_random.integers(0, 2, size=self.rooms)]
        self.room, self.failed = 0, False
        return f"Reply L or R.\n{self._state_text()}", {"room": 0}

    def parse_action(self, response: str) -> Any:
        for ch in response:
            if ch in "lL":
                return "left"
            if ch in "rR":
                return "right"
        return InvalidAction("Reply L or R.")

    def _act(self, door: str) -> TurnOutcome:
        if door != self.signs[self.room]:
            self.failed = True
            return TurnOutcome("Wrong door.", 0.0, True, True, {"room": self.room})
        self.room += 1
        done = self.room == self.rooms
        text = "You are out." if done else self._state_text()
        return TurnOutcome(text, 1.0 / self.rooms, done, True, {"room": self.room})

    def _extra_info(self) -> dict[str, Any]:
        return {"room": self.room}  # in every info, an invalid turn's too (the turn contract's constant key set)

    def _state_text(self) -> str:
        if self.room >= self.rooms:
            return "You are out."
        return f"Room {self.room + 1}: go {self.signs[self.room]}."

    def expert_action(self) -> str:
        return "L" if self.room < self.rooms and self.signs[self.room] == "left" else "R"

    def _success(self) -> bool:
        return self.room == self.rooms

    def _score(self) -> float:
        return self.room / self.rooms


if ENV_ID not in gym.registry:
    gym.register(id=ENV_ID, entry_point=f"{__name__}:CorridorEnv", max_episode_steps=5)


GUESS_ID = "TrainerToyGuessNumber-v0"
if GUESS_ID not in gym.registry:
    gym.register(id=GUESS_ID, entry_point="support.toy_envs:GuessNumberEnv", max_episode_steps=4)


def build_toy_tiny(directory, seed: int = 0):
    """The tiny model for the toy envs (tokenizer trained on both), in ``directory``."""
    from reference_trainer.tiny import TinySpec, build_tiny

    return build_tiny([ENV_ID, GUESS_ID], directory, seed=seed, spec=TinySpec(corpus_episodes=32))


def toy_config(tiny_dir, out, algo="turn-ppo", **over):
    """A small run of ``algo`` on the toy corridor with the tiny model at ``tiny_dir``: 8 episodes an iteration (GRPO:
    2 tasks x 4), 2 iterations, 3 new tokens, no evaluation during the run; ``over`` sets any other field."""
    from reference_trainer.config import preset

    group = 4 if algo == "grpo" else 1
    return preset(
        algo,
        **{
            "model": tiny_dir,
            "tasks_per_iteration": 8 // group,
            "group_size": group,
            "num_envs": 8,
            "max_new_tokens": 3,
            "minibatch_size": 4,
            "lr": 3e-3,
            "env": ENV_ID,
            "iterations": 2,
            "eval_episodes": 8,
            "eval_every": 0,
            "out": str(out),
            "progress": False,
            **over,
        },
    )


def corridor_from_random_start(algo: str) -> dict:
    """``algo`` trained on the three-room corridor from a random-init tiny model until 95% greedy success on 100
    held-out corridors (evaluated every 10 iterations, at most 150): the summary's start and end, and the iterations.

    A greedy random model scores 0-19% and half its first replies are not even a door. Step counts, seeds and one
    thread make the run reproducible. An entropy bonus keeps a run from collapsing onto one door (measured on seeds
    0-3: PPO variants reach 100% in 40-100 iterations, GRPO in 50-150 with the larger bonus)."""
    import tempfile
    from pathlib import Path

    from transformers.utils import logging as hf_logging

    from reference_trainer.config import preset
    from reference_trainer.trainer import Trainer

    hf_logging.disable_progress_bar()  # a pool's worker: its bars would cut into the suite's dots
    group = 8 if algo == "grpo" else 1
    with tempfile.TemporaryDirectory() as work:
        cfg = preset(
            algo,
            model=str(build_toy_tiny(Path(work) / "model")),
            tasks_per_iteration=64 // group,
            group_size=group,
            num_envs=64,
            max_new_tokens=2,
            lr=3e-3,
            minibatch_size=64,
            ent_coef=0.03 if algo == "grpo" else 0.01,
            env=ENV_ID,
            iterations=150,
            eval_every=10,
            eval_episodes=100,
            target_success=0.95,
            out=str(Path(work) / "run"),
            progress=False,
        )
        trainer = Trainer(cfg)
        try:
            summary = trainer.fit()
        finally:
            trainer.close()
    return {"start": summary["start"], "end": summary["end"], "iterations": trainer.iteration}
