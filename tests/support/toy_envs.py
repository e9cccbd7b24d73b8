"""Small envs for testing the foundation: one that keeps the turn contract and broken ones."""

from __future__ import annotations

import random
from typing import Any

import numpy as np
from gymnasium.spaces import Text

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


class NonStrObservationOnValidEnv(GuessNumberEnv):
    """Returns bytes instead of a str observation, but only after a valid guess (the expert's moves)."""

    def step(self, action):
        obs, reward, terminated, truncated, info = super().step(action)
        if info["action_is_valid"]:
            obs = obs.encode()
        return obs, reward, terminated, truncated, info


class NanRewardOnValidEnv(GuessNumberEnv):
    """Pays NaN for every valid guess; invalid turns pay the (finite) format penalty."""

    def _act(self, guess: int) -> TurnOutcome:
        outcome = super()._act(guess)
        outcome.reward = float("nan")
        return outcome


class IntSuccessEnv(GuessNumberEnv):
    """Reports ``info["success"]`` as the int 1 or 0 instead of a bool."""

    def _info(self, extra, **kwargs):
        info = super()._info(extra, **kwargs)
        info["success"] = int(info["success"])
        return info


class AlphanumericSpaceEnv(GuessNumberEnv):
    """Uses Gymnasium's default ``Text`` spaces (ASCII letters and digits only)."""

    def __init__(self, **kwargs: Any):
        super().__init__(**kwargs)
        self.action_space = Text(4096)
        self.observation_space = Text(4096)


class HintOnInvalidTurnsEnv(GuessNumberEnv):
    """Adds an info key ``hint`` on invalid turns only: the key set changes from step to step."""

    def step(self, action):
        obs, reward, terminated, truncated, info = super().step(action)
        if not info["action_is_valid"]:
            info["hint"] = "Answer as <answer>N</answer>."
        return obs, reward, terminated, truncated, info


class GlobalNumpyRandomEnv(GuessNumberEnv):
    """Draws the secret from the global ``numpy.random`` state instead of ``self.np_random``."""

    def _reset(self, options):
        obs, info = super()._reset(options)
        self.secret = int(np.random.randint(0, self.high + 1))
        return f"{obs} (session {np.random.randint(0, 2**31):08x})", info  # so two runs differ for sure


class PlaysOnAfterTheEndEnv(GuessNumberEnv):
    """Forgets that the episode ended: a guess after the end is played and paid again."""

    def step(self, action):
        result = super().step(action)
        self._episode_over = False
        self.solved = False
        return result


class BellInEveryObservationEnv(GuessNumberEnv):
    """One bug on every step: a control character appended to every observation."""

    def step(self, action):
        obs, reward, terminated, truncated, info = super().step(action)
        return obs + "\x07", reward, terminated, truncated, info
