"""Play any text-turn env through TRL's ``GRPOTrainer(environment_factory=...)``.

TRL's environment integration (TRL >= 1.0, ``environment_factory``) drives a class with a
``reset(**row)`` method and *tool methods*: the model calls a tool, TRL runs the method and
feeds its return value back as a tool message, until the model answers without a tool call;
``get_reward()`` then scores the rollout. :func:`trl_environment` builds such a class for an env
id: each tool call becomes one turn of the env (its text action), the tool's answer is the env's
next message, and ``get_reward()`` is the episode's return (the sum of the turn rewards), so
the rewards TRL logs are the env's returns.

The tools, per env family (the names and arguments a model learns to call):

* TurnSokoban: ``move(moves)`` plays ``<answer>{moves}</answer>`` (``moves``: ``"Up || Left"``).
* TurnWebShop: ``search(query)`` plays ``search[{query}]``, ``click(button)`` plays ``click[{button}]``.
* TurnSearchQA: ``search(query)`` plays ``<search> {query} </search>``, ``answer(answer)`` plays
  ``<answer> {answer} </answer>``.
* any other env: ``respond(response)`` plays ``response`` as is.

A row of the training dataset may carry ``seed`` (and ``options``): ``reset`` passes them to the
env, so the ``num_generations`` rollouts of one row play the same task (GRPO's group). A tool
called after the episode ended raises ``ValueError`` (TRL shows the message to the model, as its
docs recommend). This module does not import TRL: the classes only need its calling convention.

The turn contract's fields travel with each rollout's :class:`EpisodeRecord`: every turn's
``info["reward_components"]`` (:attr:`EpisodeRecord.reward_components`, summed by
:attr:`EpisodeRecord.component_returns`), the last turn's ``exit_status`` and ``reward_valid``
(False once a turn said so). **Faulted episodes**: a turn with ``reward_valid=False`` (the env's
code or a service it needs failed: ``exit_status`` ``env_error``/``infra_error``) ends the episode,
and ``get_reward()`` returns :attr:`TurnEnvironment.fault_reward`, ``None`` by default: TRL counts a
``None`` as NaN, so when no other reward function scores the rollout it is left out of its group's
mean and standard deviation and gets advantage 0 (its tokens still count in TRL's loss
normalisation). The record still goes to ``history``, flagged by ``reward_valid``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from ..core.contract import FAULT_STATUSES, FaultGuard

import gymnasium as gym

__all__ = ["TurnEnvironment", "EpisodeRecord", "trl_environment"]


@dataclass
class EpisodeRecord:
    """One rollout as the env saw it: the reset seed, the text actions played, their rewards and the turn
    contract's fields (``reward_components`` per turn; ``exit_status`` of the last turn; ``reward_valid``: no
    fault ended the episode, so its return scores the policy)."""

    env_id: str
    seed: int | None
    options: dict[str, Any] | None
    actions: list[str] = field(default_factory=list)
    rewards: list[float] = field(default_factory=list)
    done: bool = False
    reward_components: list[dict[str, float]] = field(default_factory=list)
    exit_status: str = "ok"
    reward_valid: bool = True

    @property
    def episode_return(self) -> float:
        """The sum of the turn rewards (0.0 before any turn)."""
        return float(sum(self.rewards))

    @property
    def component_returns(self) -> dict[str, float]:
        """Each reward component summed over the turns (they add up to :attr:`episode_return`)."""
        totals: dict[str, float] = {}
        for turn in self.reward_components:
            for name, value in turn.items():
                totals[name] = totals.get(name, 0.0) + value
        return totals


class TurnEnvironment:
    """Base of the classes :func:`trl_environment` builds (use those: they carry the env id and tools).

    Attributes:
        env: The Gymnasium env (``gymnasium.make(env_id, **env_kwargs)``), built once per instance.
        episode: The current rollout's :class:`EpisodeRecord`.
        history: Class attribute; when a list, every scored rollout's record is appended to it
            (in the order TRL scores them), e.g. to check the logged rewards.
        fault_reward: Class attribute; what :meth:`get_reward` returns for a faulted episode
            (``reward_valid`` False): ``None`` (default; TRL leaves the rollout unscored) or a number.
    """

    env_id: ClassVar[str] = ""
    env_kwargs: ClassVar[dict[str, Any]] = {}
    history: ClassVar[list[EpisodeRecord] | None] = None
    fault_reward: ClassVar[float | None] = None

    def __init__(self) -> None:
        import agentgym_turn  # noqa: F401  (registers the ids in TRL's process)

        self.env = FaultGuard(gym.make(self.env_id, **self.env_kwargs))  # an env that raises ends its episode as faulted
        self.episode = EpisodeRecord(self.env_id, None, None, done=True)

    def reset(self, **row: Any) -> str:
        """Start an episode; ``row`` is the dataset row (``seed`` and ``options`` are used). Returns the first message."""
        seed = row.get("seed")
        seed = None if seed is None else int(seed)
        options = row.get("options") or None
        observation, _ = self.env.reset(seed=seed, options=options)
        self.episode = EpisodeRecord(self.env_id, seed, options)
        return observation

    def get_reward(self) -> float | None:
        """The episode's return so far (TRL calls this once per finished rollout), or :attr:`fault_reward` when a
        fault ended it: its return is not the policy's."""
        if self.history is not None:
            self.history.append(self.episode)
        return self.episode.episode_return if self.episode.reward_valid else self.fault_reward

    def _turn(self, action: str) -> str:
        """Play one turn with the env's text action; return the env's next message."""
        if self.episode.done:
            raise ValueError("The episode is over: give your final answer without calling a tool.")
        observation, reward, terminated, truncated, info = self.env.step(action)
        episode = self.episode
        episode.actions.append(action)
        episode.rewards.append(float(reward))
        episode.reward_components.append({str(k): float(v) for k, v in (info.get("reward_components") or {}).items()})
        episode.exit_status = str(info.get("exit_status") or ("truncated" if truncated and not terminated else "ok"))
        episode.reward_valid = episode.reward_valid and bool(info.get("reward_valid", episode.exit_status not in FAULT_STATUSES))
        episode.done = bool(terminated or truncated) or not episode.reward_valid  # nothing after a fault is the policy's
        return observation + ("\n(The episode is over.)" if episode.done else "")


class _SokobanTools(TurnEnvironment):
    def move(self, moves: str) -> str:
        """
        Move the player in the Sokoban puzzle.

        Args:
            moves: One or more moves among Up, Down, Left and Right, separated by ||, e.g. "Up || Left".

        Returns:
            What happened and the new grid.
        """
        return self._turn(f"<answer>{moves}</answer>")


class _WebShopTools(TurnEnvironment):
    def search(self, query: str) -> str:
        """
        Search the shop.

        Args:
            query: The search keywords.

        Returns:
            The results page.
        """
        return self._turn(f"search[{query}]")

    def click(self, button: str) -> str:
        """
        Click a button or link of the current page.

        Args:
            button: The button's text, one of the available actions, e.g. "buy now".

        Returns:
            The next page.
        """
        return self._turn(f"click[{button}]")


class _SearchQATools(TurnEnvironment):
    def search(self, query: str) -> str:
        """
        Search the knowledge base.

        Args:
            query: The search query.

        Returns:
            The top passages.
        """
        return self._turn(f"<search> {query} </search>")

    def answer(self, answer: str) -> str:
        """
        Give the final answer to the question.

        Args:
            answer: The answer, a short phrase (or the option letter for a multiple-choice question).

        Returns:
            Whether the answer was right.
        """
        return self._turn(f"<answer> {answer} </answer>")


class _RespondTools(TurnEnvironment):
    def respond(self, response: str) -> str:
        """
        Play one turn of the environment.

        Args:
            response: The whole response of the turn, in the format the environment asked for.

        Returns:
            The environment's next message.
        """
        return self._turn(response)


_FAMILIES = {"TurnSokoban": _SokobanTools, "TurnWebShop": _WebShopTools, "TurnSearchQA": _SearchQATools}


def trl_environment(env_id: str, /, *, tools: str = "auto", **env_kwargs: Any) -> type[TurnEnvironment]:
    """A class to pass as ``GRPOTrainer(environment_factory=...)`` that plays ``env_id``.

    Args:
        env_id: A registered id (also ``"agentgym_turn/Remote-v0"`` with ``base_url``/``env_id``
            keywords for a served env).
        tools: ``"auto"`` (the env family's tools, see the module docstring) or ``"respond"`` (one
            ``respond(response)`` tool that plays the whole response as is).
        **env_kwargs: Passed to ``gymnasium.make`` (e.g. ``prompt_style="compact"``).

    Returns:
        A subclass of :class:`TurnEnvironment` named after the env (TRL logs its reward as
        ``rewards/<that name>/mean``).
    """
    if not isinstance(env_id, str) or env_id not in gym.registry:
        import agentgym_turn  # noqa: F401

        if not isinstance(env_id, str) or env_id not in gym.registry:
            raise ValueError(f"trl_environment: env_id={env_id!r} is not a registered id; see agentgym_turn.env_ids().")
    if tools not in ("auto", "respond"):
        raise ValueError(f"trl_environment: tools must be 'auto' or 'respond', got {tools!r}.")
    family = env_id.split("/")[-1].split("-")[0]
    base = _FAMILIES.get(family, _RespondTools) if tools == "auto" else _RespondTools
    name = "".join(ch for ch in env_id.split("/")[-1].replace("-", "_") if ch.isalnum() or ch == "_") + "Environment"
    return type(name, (base,), {"env_id": env_id, "env_kwargs": dict(env_kwargs), "__module__": __name__})
