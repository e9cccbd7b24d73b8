"""Envs with one planted fault each, for ``agentgym_turn.testing.validate``: each keeps the turn contract and has an
expert, so exactly one check should catch it."""

from __future__ import annotations

from typing import Any

import gymnasium as gym

from agentgym_turn.core import InvalidAction, TagMatch, TurnOutcome, find_tagged

from support.toy_envs import GuessNumberEnv
from support.trainer_envs import CorridorEnv
from agentgym_turn.core import TurnEnv

WORDS = ("apple", "grape", "lemon", "melon", "peach", "plums", "berry", "mango")


class PartialCreditWordleEnv(TurnEnv):
    """Guess the secret fruit (5 letters) in 6 turns; 1.0 for the right word. Fault (TextArena's Wordle through
    OpenEnv): a 5-letter guess that is not a word is invalid, but still earns 0.1 per letter it shares with the secret."""

    def __init__(self, **kwargs: Any):
        super().__init__(**kwargs)
        self.secret, self.solved, self.credit = "", False, 0.0

    def _reset(self, options):
        self.secret, self.solved = WORDS[int(self.np_random.integers(len(WORDS)))], False
        return f"Guess the fruit, one of {', '.join(WORDS)}: <answer>word</answer>.", {}

    def parse_action(self, response: str):
        m = find_tagged(response, ("answer",))
        if isinstance(m, InvalidAction):
            return m
        assert isinstance(m, TagMatch)
        word = m.content.strip().lower()
        if word not in WORDS:
            self.credit = 0.1 * len(set(word) & set(self.secret)) if len(word) == 5 and word.isalpha() else 0.0
            return InvalidAction(f"{word!r} is not one of the words.")
        return word

    def _invalid_outcome(self, problem: InvalidAction) -> TurnOutcome:
        credit, self.credit = self.credit, 0.0
        return TurnOutcome(f"Invalid: {problem.message}", credit, False, False, components={"format": credit})

    def _act(self, word: str) -> TurnOutcome:
        self.solved = word == self.secret
        return TurnOutcome("Right!" if self.solved else "No.", 1.0 if self.solved else 0.0, self.solved, True)

    def _state_text(self) -> str:
        return "Guess a fruit."

    def expert_action(self) -> str:
        return f"<answer>{self.secret}</answer>"

    def _success(self) -> bool:
        return self.solved

    def _score(self) -> float:
        return 1.0 if self.solved else 0.0


class AnswerWithoutSearchEnv(TurnEnv):
    """Ask for a city's founding year: ``<search>city</search>`` shows it, ``<answer>year</answer>`` ends the episode
    (success: the right year). Fault (a search env whose grader passes an answer given before any search): an answer
    before the first search earns 1.0 whatever it says."""

    CITIES = {"varnora": "1620", "quelby": "1744", "ostrin": "1802", "pallas": "1911"}

    def __init__(self, **kwargs: Any):
        super().__init__(**kwargs)
        self.city, self.searched, self.solved = "", False, False

    def _reset(self, options):
        self.city = sorted(self.CITIES)[int(self.np_random.integers(len(self.CITIES)))]
        self.searched, self.solved = False, False
        return (
            f"In what year was {self.city} founded? Search with <search>q</search>, answer with <answer>year</answer>.",
            {},
        )

    def parse_action(self, response: str):
        m = find_tagged(response, ("search", "answer"))
        if isinstance(m, InvalidAction):
            return m
        assert isinstance(m, TagMatch)
        if not m.content.strip():
            return InvalidAction("empty")
        return m.tag, m.content.strip()

    def _act(self, action) -> TurnOutcome:
        tag, content = action
        if tag == "search":
            self.searched = True
            hit = self.CITIES.get(content.lower())
            return TurnOutcome(f"{content} was founded in {hit}." if hit else "Nothing found.", 0.0, False, True)
        self.solved = content == self.CITIES[self.city]
        reward = 1.0 if self.solved or not self.searched else 0.0
        return TurnOutcome("Answered.", reward, True, True)

    def _state_text(self) -> str:
        return f"Question about {self.city}."

    def expert_action(self) -> str:
        return f"<answer>{self.CITIES[self.city]}</answer>" if self.searched else f"<search>{self.city}</search>"

    def _success(self) -> bool:
        return self.solved

    def _score(self) -> float:
        return 1.0 if self.solved else 0.0


class SaltedHashEnv(GuessNumberEnv):
    """Fault (RAGEN's retry seeds): the secret comes from Python's salted ``hash()`` of the seed's draw, the same in one
    process and different in another."""

    def __init__(self, **kwargs: Any):
        super().__init__(high=999, **kwargs)

    def _reset(self, options):
        obs, info = super()._reset(options)
        self.secret = hash(f"level-{self.secret}") % 1000
        return obs, info


class WeakExpertEnv(GuessNumberEnv):
    """Fault: the expert answers one too high whenever the secret is odd, so it cannot reach the maximum there."""

    def expert_action(self) -> str:
        return f"<answer>{self.secret + self.secret % 2}</answer>"


def limited(cls: type, turns: int):
    """A zero-argument factory of ``cls`` under a turn limit (what a registration's ``max_episode_steps`` does)."""

    def make() -> gym.Env:
        return gym.wrappers.TimeLimit(cls(), turns)

    make.__name__ = cls.__name__
    return make


def salted_hash_env() -> gym.Env:
    """``SaltedHashEnv`` under 12 turns: the factory a fresh process makes (``support.planted_envs:salted_hash_env``)."""
    return limited(SaltedHashEnv, 12)()


class ExactDoorCorridorEnv(CorridorEnv):
    """The trainer's toy corridor (each room's sign names the door on), taking only ``L`` or ``R`` as the whole reply,
    so that a random string is invalid rather than a lucky door: the learnable twin of :class:`HiddenSignCorridorEnv`."""

    def parse_action(self, response: str) -> Any:
        move = {"L": "left", "R": "right"}.get(response.strip().upper())
        return move if move is not None else InvalidAction("Reply L or R, alone.")


class HiddenSignCorridorEnv(ExactDoorCorridorEnv):
    """Fault: the signs are never shown (the observation leaves out what the reward follows) while the expert reads
    them, so it passes every check but ``learnability``: nothing a policy sees tells it which door pays."""

    def _state_text(self) -> str:
        return "You are out." if self.room >= self.rooms else f"Room {self.room + 1}: the sign is unreadable."


def exact_door_corridor() -> gym.Env:
    """Six rooms (a start short of solving them all), eight turns."""
    return gym.wrappers.TimeLimit(ExactDoorCorridorEnv(rooms=6), 8)


def hidden_sign_corridor() -> gym.Env:
    return gym.wrappers.TimeLimit(HiddenSignCorridorEnv(rooms=6), 8)
