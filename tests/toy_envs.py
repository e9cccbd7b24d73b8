"""Small envs for testing the foundation: one that keeps the turn contract and broken ones."""

from __future__ import annotations

import random
from typing import Any

from agentgym_turn.core import InvalidAction, TagMatch, TurnEnv, TurnOutcome, find_tagged


class GuessNumberEnv(TurnEnv):
    """Guess a secret digit; the env answers 'higher' or 'lower'. Reward 1 when found."""

    def __init__(self, high: int = 9, **kwargs: Any):
        super().__init__(**kwargs)
        self.high = high
        self.secret = 0
        self.solved = False
        self.low_bound, self.high_bound = 0, high

    def _reset(self, options):
        self.secret = int(self.np_random.integers(0, self.high + 1))
        self.solved = False
        self.low_bound, self.high_bound = 0, self.high
        return f"Guess a number from 0 to {self.high}. Answer as <answer>N</answer>.", {}

    def parse_action(self, response: str):
        m = find_tagged(response, ("answer",))
        if isinstance(m, InvalidAction):
            return m
        assert isinstance(m, TagMatch)
        if not m.content.isascii() or not m.content.isdigit() or int(m.content) > self.high:
            return InvalidAction(f"{m.content!r} is not a number from 0 to {self.high}.")
        return int(m.content)

    def _act(self, guess: int) -> TurnOutcome:
        if guess == self.secret:
            self.solved = True
            return TurnOutcome("Correct!", 1.0, True, True)
        if guess < self.secret:
            self.low_bound = max(self.low_bound, guess + 1)
            return TurnOutcome(f"{guess} is too low.", 0.0, False, True)
        self.high_bound = min(self.high_bound, guess - 1)
        return TurnOutcome(f"{guess} is too high.", 0.0, False, True)

    def _state_text(self) -> str:
        return f"The number lies in [{self.low_bound}, {self.high_bound}]."

    def expert_action(self) -> str:
        return f"<answer>{self.secret}</answer>"

    def _success(self) -> bool:
        return self.solved

    def _score(self) -> float:
        return 1.0 if self.solved else 0.0

    def _available_actions(self):
        return [f"<answer>{i}</answer>" for i in range(self.low_bound, self.high_bound + 1)]


class RaisesOnBadActionEnv(GuessNumberEnv):
    def parse_action(self, response: str):
        return int(find_tagged(response).content)  # AttributeError on an InvalidAction


class IgnoresSeedEnv(GuessNumberEnv):
    def _reset(self, options):
        obs, info = super()._reset(options)
        self.secret = random.randint(0, self.high)  # the global RNG: seeds do nothing
        # A 64-bit tag from the same global RNG, so two resets with one seed differ for sure
        # (the digit alone coincides one time in ten, which made the checker's test flaky).
        return f"{obs} (session {random.getrandbits(64):016x})", info


class WrongInfoKeyEnv(GuessNumberEnv):
    def step(self, action):
        obs, reward, terminated, truncated, info = super().step(action)
        info["succes"] = info.pop("success")
        return obs, reward, terminated, truncated, info


class EscapingObservationEnv(GuessNumberEnv):
    def step(self, action):
        obs, reward, terminated, truncated, info = super().step(action)
        return obs + "\x07bell", reward, terminated, truncated, info  # bypasses the base's sanitising
