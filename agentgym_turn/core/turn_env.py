"""The ``TurnEnv`` base class: the turn contract, implemented once.

A subclass supplies the game (``_reset``, ``parse_action``, ``_act``, ``_state_text``,
``expert_action``) and this class supplies the contract every env shares:

* ``reset`` seeds ``self.np_random`` and returns the first user message;
* ``step`` accepts *any* value: non-strings, over-long strings and responses the subclass's
  parser rejects become an invalid turn (``info["action_is_valid"] = False``, reward
  ``format_penalty``, an observation that says what was wrong and shows the state) instead
  of an exception;
* every ``info`` carries ``turn``, ``action_is_valid``, ``action_is_effective``, ``success``,
  ``score``, when the env has a finite action list ``available_actions``, and the env's own keys
  from ``_extra_info()``, so the key set is the same on every ``reset`` and ``step``;
* ``reset(options=...)`` rejects option names the env does not declare in ``reset_options``;
* observations always lie in ``observation_space`` (characters outside it become U+FFFD and
  an over-long page is cut with a marker), so an echo of the agent's own text is safe;
* ``render_mode="ansi"`` returns ``_state_text()``;
* every ``info`` also carries ``exit_status`` and ``reward_valid`` (:mod:`~agentgym_turn.core.contract`),
  ``reward_components`` (the names in ``metadata["reward_components"]``, summing to the reward) and,
  when the env defines ``_state_fields``, ``state_key``; a fault inside a turn (:class:`InfraError`,
  or any other exception: a bug) ends the episode (``truncated``) with ``exit_status`` ``infra_error``
  or ``env_error`` and ``reward_valid=False`` instead of raising;
* ``snapshot()`` / ``restore(snapshot)`` / ``fork(n)`` copy the episode's state (RNG included), so a
  restored or forked env continues exactly as the original would.

The turn limit is not the env's business: it is the registered ``max_episode_steps``
(Gymnasium's ``TimeLimit`` sets ``truncated``), overridable with
``gymnasium.make(id, max_episode_steps=N)``.
"""

from __future__ import annotations

import abc
import functools
import inspect
import logging
import math
from typing import Any, ClassVar

import gymnasium as gym

from .contract import FAULT_STATUSES, InfraError, digest_text, key_json
from .parsing import InvalidAction
from .snapshots import seal, unseal
from .spaces import TurnText, sanitize_text

logger = logging.getLogger(__name__)

#: The ``info`` keys every env returns from ``reset`` and ``step``, with their types.
COMMON_INFO_KEYS: dict[str, type | tuple[type, ...]] = {
    "turn": int,
    "action_is_valid": bool,
    "action_is_effective": bool,
    "success": bool,
    "score": float,
}

#: What RL infrastructure reads (:mod:`~agentgym_turn.core.contract`): every ``TurnEnv`` returns them;
#: ``state_key`` only where the env defines ``_state_fields``. The checker holds any env that returns one to it.
CONTRACT_INFO_KEYS: dict[str, type | tuple[type, ...]] = {
    "exit_status": str,
    "reward_valid": bool,
    "reward_components": dict,
    "state_key": str,
}

#: Default ``max_length`` of the action space: long enough for a response with ``<think>``.
DEFAULT_MAX_ACTION_LENGTH = 65_536
#: Default ``max_length`` of the observation space.
DEFAULT_MAX_OBSERVATION_LENGTH = 65_536
_TRUNCATION_MARK = "\n…[observation truncated]"
#: Attributes every snapshot leaves out: the spaces and spec (set once when the env is made, never by a turn) and
#: the last fault's exception (a traceback does not pickle, and is not state).
_NOT_SNAPSHOTTED = ("action_space", "observation_space", "spec", "last_error")


@functools.cache
def _class_json(cls: type) -> str:
    """``cls``'s name as the state key's JSON, written once per class (it is on every turn's path)."""
    return key_json(cls.__name__)


class TurnOutcome:
    """What one action did. ``info`` holds env-specific keys (may be empty); ``components`` the reward's
    named parts (``None``: all of it under ``"task"``, or ``"format"`` for an invalid turn); ``status``
    the ``exit_status`` (``None``: ``ok`` or ``invalid_action``); ``truncated`` ends the episode without
    a terminal state (faults)."""

    __slots__ = ("observation", "reward", "terminated", "effective", "info", "components", "status", "truncated")

    def __init__(
        self,
        observation: str,
        reward: float,
        terminated: bool,
        effective: bool,
        info: dict[str, Any] | None = None,
        components: dict[str, float] | None = None,
        *,
        status: str | None = None,
        truncated: bool = False,
    ):
        self.observation = observation
        self.reward = reward
        self.terminated = terminated
        self.effective = effective
        self.info = info if info is not None else {}
        self.components = components
        self.status = status
        self.truncated = truncated


class TurnEnv(gym.Env[str, str], abc.ABC):
    """Base class for text-turn environments (see the module docstring for the contract).

    Args:
        format_penalty: Reward of an invalid turn (RAGEN's convention: a negative number that is
            *added*; default -0.1).
        render_mode: ``None`` or ``"ansi"``.
        max_action_length: ``action_space.max_length``; a longer response is an invalid turn.
        max_observation_length: ``observation_space.max_length``.
    """

    #: ``reward_components``: the names of ``info["reward_components"]``, whose values sum to the reward.
    metadata: ClassVar[dict[str, Any]] = {
        "render_modes": ["ansi"],
        "render_fps": 4,
        "reward_components": ("task", "format"),
    }
    #: Attributes that :meth:`snapshot` leaves out and :meth:`fork` shares: read-only world data (a
    #: catalog, a level generator, a retriever) that no turn changes.
    shared_attributes: ClassVar[tuple[str, ...]] = ()
    #: Attributes that :meth:`snapshot` leaves out because :meth:`_rebuild` computes them again from the rest.
    derived_attributes: ClassVar[tuple[str, ...]] = ()
    #: The option names ``reset(options=...)`` accepts; any other name is a ValueError.
    reset_options: ClassVar[frozenset[str]] = frozenset()
    #: ``info`` keys that reveal the task's solution (an oracle): a served env hands them to clients
    #: only when its server opts in (``agentgym-turn serve env ID --expert``).
    oracle_info_keys: ClassVar[tuple[str, ...]] = ()
    #: Constructor arguments that name files or servers the env reads or calls (a data path, a retriever URL):
    #: ``replay`` and ``rescore`` of a record file use them only when told to (``--allow-external``).
    external_kwargs: ClassVar[frozenset[str]] = frozenset()
    #: Reset options that may carry content the env must process (a level text it solves) rather than an
    #: index into its own tasks: a served env accepts them only when its server opts in (``--client-content``).
    content_reset_options: ClassVar[frozenset[str]] = frozenset()
    #: The methods (``"reset"``, ``"step"``, ``"render"``) whose every call is a few milliseconds of CPU at most and
    #: waits on no I/O (a step's action of ordinary length): a served env runs them on its server's event loop, where
    #: handing them to a worker thread and back would cost more than the call (``agentgym_turn.remote.sessions``).
    quick_calls: ClassVar[frozenset[str]] = frozenset()
    #: Keywords that build the env's task source (``source=`` replaces them): taken through ``**kwargs``, accepted
    #: like named parameters (a misspelt one is refused with the accepted keywords).
    source_keywords: ClassVar[tuple[str, ...]] = ()

    def __new__(cls, *args: Any, **kwargs: Any):
        # An __init__ without **kwargs would reject a misspelt keyword with Python's bare message;
        # reject it here with the class, the accepted keywords and a did-you-mean instead.
        if kwargs and not any(p.kind is p.VAR_KEYWORD for p in inspect.signature(cls.__init__).parameters.values()):
            unknown = [name for name in kwargs if name not in _init_keywords(cls)]
            if unknown:
                raise TypeError(_unknown_keywords_message(cls, unknown))
        return super().__new__(cls)

    def __init__(
        self,
        *,
        format_penalty: float = -0.1,
        render_mode: str | None = None,
        max_action_length: int = DEFAULT_MAX_ACTION_LENGTH,
        max_observation_length: int = DEFAULT_MAX_OBSERVATION_LENGTH,
        **unknown: Any,
    ):
        if unknown:  # a keyword no subclass took fell through to here: name it and the accepted ones
            raise TypeError(_unknown_keywords_message(type(self), list(unknown)))
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(
                f"render_mode={render_mode!r} is not supported; choose one of {self.metadata['render_modes']} or None."
            )
        if not math.isfinite(format_penalty):
            raise ValueError(f"format_penalty must be a finite number, got {format_penalty!r}.")
        self.render_mode = render_mode
        self.format_penalty = float(format_penalty)
        self.action_space = TurnText(max_action_length)
        self.observation_space = TurnText(max_observation_length)
        self.turn = 0
        self._episode_over = True
        self._started = False
        #: The exception that ended the last faulted turn (``env_error``/``infra_error``), for checkers and logs; else None.
        self.last_error: BaseException | None = None

    # ------------------------------------------------------------------ subclass API
    @abc.abstractmethod
    def _reset(self, options: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        """Start an episode using ``self.np_random``; return the first message and extra info."""

    @abc.abstractmethod
    def parse_action(self, response: str) -> Any:
        """Turn a response into an action, or return :class:`InvalidAction`. Must not raise."""

    @abc.abstractmethod
    def _act(self, action: Any) -> TurnOutcome:
        """Apply a parsed, valid action."""

    @abc.abstractmethod
    def _state_text(self) -> str:
        """The current state as text (used by ``render("ansi")`` and invalid-turn messages)."""

    def task_key(self) -> str | None:
        """The content that defines the current task, as text (a level, a goal, a question): two
        resets pose the same task exactly when their keys are equal, whatever seeds produced them,
        so splits and contamination checks compare these. ``None``: unknown (the default)."""
        return None

    @abc.abstractmethod
    def expert_action(self) -> str:
        """A response an expert would give now (optimal where the env can compute it)."""

    def _state_fields(self) -> Any:
        """What decides the episode's future besides the turn number, as JSON-able data (override;
        ``None``: the env has no ``state_key``). Two states must give equal fields exactly when every
        action sequence gives them the same observations, rewards and flags."""
        return None

    def _state_fields_json(self) -> str | None:
        """:meth:`_state_fields` as the key's JSON (``contract.key_json``); an env whose key is on every turn's path
        may write it faster (part of it once per task), as long as the text is the same."""
        fields = self._state_fields()
        return None if fields is None else key_json(fields)

    def state_key(self) -> str | None:
        """``info["state_key"]`` now: a digest of the env's class, the turn, whether the episode is
        over and :meth:`_state_fields` (``None`` when the env defines none): ``contract.state_digest([class name, turn,
        over, fields])``, its JSON put together from :meth:`_state_fields_json`."""
        fields = self._state_fields_json()
        if fields is None:
            return None
        over = "true" if self._episode_over else "false"
        return digest_text(f"[{_class_json(type(self))},{int(self.turn)},{over},{fields}]")

    def shown_reward(self, reward: float, terminated: bool, truncated: bool, info: dict[str, Any]) -> float:
        """The reward a chat view may show the agent after this turn (``ChatView(reward_template=...)``): the
        turn's reward, unless the env scores something the agent must not learn mid-episode (override)."""
        return reward

    def _success(self) -> bool:
        """Whether the task is solved (override)."""
        return False

    def _score(self) -> float:
        """The benchmark's own metric so far (override)."""
        return 0.0

    def _extra_info(self) -> dict[str, Any]:
        """Env-specific ``info`` keys computed from the current state (override).

        Merged into the info of ``reset``, every ``step`` (valid, invalid, or after the episode
        ended); a key an outcome also sets takes the outcome's value. Returning the same keys in
        every state keeps the env's info key set constant, as the turn contract requires.
        """
        return {}

    def _available_actions(self) -> list[str] | None:
        """The finite list of actions allowed now, or ``None`` when the action set is open."""
        return None

    def _invalid_outcome(self, problem: InvalidAction) -> TurnOutcome:
        """What an invalid turn returns; override to change the message or info."""
        return TurnOutcome(
            observation=f"Invalid action: {problem.message}\n\n{self._state_text()}",
            reward=self.format_penalty,
            terminated=False,
            effective=False,
        )

    @property
    def has_started(self) -> bool:
        """``reset()`` has been called (``step`` is allowed)."""
        return self._started

    @property
    def episode_over(self) -> bool:
        """The episode has terminated (or not started): ``step`` returns the "episode is over" turn."""
        return self._episode_over

    # ------------------------------------------------------------------ Gymnasium API
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        super().reset(seed=seed)
        options = dict(options or {})
        unknown = sorted(set(options) - set(self.reset_options), key=str)
        if unknown:
            accepted = ", ".join(sorted(self.reset_options)) or "none"
            hints = [_did_you_mean(str(name), self.reset_options) for name in unknown]
            raise ValueError(
                f"{type(self).__name__}.reset got unknown option(s) {unknown}"
                + "".join(f" ({h})" for h in hints if h)
                + f"; accepted options: {accepted}."
            )
        self.turn = 0
        observation, extra = self._reset(options)
        self._started = True
        self._episode_over = False
        info = self._info(extra, valid=True, effective=False)
        return self._observe(observation), info

    def step(self, action: Any) -> tuple[str, float, bool, bool, dict[str, Any]]:
        if not self._started:
            raise RuntimeError("Call reset() before step().")
        if self._episode_over:
            # Stepping a finished episode is a caller bug, but still not an exception.
            info = self._info({}, valid=False, effective=False, status="invalid_action")
            return self._observe("The episode is over. Call reset() to start a new one."), 0.0, True, False, info
        self.turn += 1
        valid = False
        try:
            parsed = self._parse(action)
            valid = not isinstance(parsed, InvalidAction)
            outcome = self._act(parsed) if valid else self._invalid_outcome(parsed)
        except InfraError as exc:
            outcome = self._fault_outcome("infra_error", exc)
        except Exception as exc:  # a bug in the env: logged, and the episode ends instead of the rollout
            logger.exception("%s: the turn raised; the episode ends with exit_status='env_error'", type(self).__name__)
            outcome = self._fault_outcome("env_error", exc)
        status = outcome.status or ("ok" if valid else "invalid_action")
        self._episode_over = bool(outcome.terminated or outcome.truncated)
        components = self._components(outcome, valid)
        info = self._info(
            outcome.info, valid=valid, effective=bool(outcome.effective) and valid, components=components, status=status
        )
        return (
            self._observe(outcome.observation),
            float(outcome.reward),
            bool(outcome.terminated),
            bool(outcome.truncated),
            info,
        )

    def render(self) -> str | None:
        if self.render_mode == "ansi":
            return self._state_text() if self._started else ""
        return None

    # ------------------------------------------------------------------ snapshot, restore, fork
    def snapshot(self) -> bytes:
        """The episode's state as bytes (pickled attributes, ``np_random`` included, without
        :attr:`shared_attributes`): :meth:`restore` on this env or on a :meth:`fork` of it continues
        exactly where this one is."""
        state = self.__getstate__()
        state = dict(state) if isinstance(state, dict) else dict(self.__dict__)
        for name in (*_NOT_SNAPSHOTTED, *self.shared_attributes, *self.derived_attributes):
            state.pop(name, None)
        return seal((type(self).__qualname__, state))

    def restore(self, snapshot: bytes) -> None:
        """Return to the state :meth:`snapshot` saved (from this env or one made the same way). Only bytes this
        process sealed load (:mod:`agentgym_turn.core.snapshots`): others are a ``SnapshotError``, never unpickled."""
        kind, state = unseal(snapshot)
        if kind != type(self).__qualname__:
            raise ValueError(f"this snapshot is of a {kind}, not of a {type(self).__qualname__}.")
        self.__dict__.update(state)
        self._rebuild()

    def _rebuild(self) -> None:
        """Recompute :attr:`derived_attributes` after :meth:`restore` (override with them)."""

    def fork(self, n: int) -> list["TurnEnv"]:
        """``n`` independent envs in this env's current state (unwrapped; ``agentgym_turn.fork_env`` keeps
        the wrappers): each shares :attr:`shared_attributes` and owns a copy of everything else."""
        if not isinstance(n, int) or n < 0:
            raise ValueError(f"fork(n) takes a count >= 0, got {n!r}.")
        saved = self.snapshot()
        out = []
        for _ in range(n):
            twin = object.__new__(
                type(self)
            )  # a shallow copy that skips __setstate__ (which may re-resolve shared data)
            twin.__dict__.update(self.__dict__)
            twin.restore(saved)
            out.append(twin)
        return out

    # ------------------------------------------------------------------ internals
    def _parse(self, action: Any) -> Any:
        if isinstance(action, bytes):
            action = action.decode("utf-8", errors="replace")
        if not isinstance(action, str):
            return InvalidAction(
                f"A response must be a string, got {type(action).__name__}. Write your action as text."
            )
        limit = self.action_space.max_length
        if len(action) > limit:
            return InvalidAction(f"The response is longer than {limit} characters, the limit. Answer more briefly.")
        return self.parse_action(str(action))

    def _fault_outcome(self, status: str, exc: BaseException) -> TurnOutcome:
        """A turn that a fault ended: no reward for the policy, the episode over (truncated)."""
        self.last_error = exc
        what = "A service the environment needs failed" if status == "infra_error" else "The environment failed"
        message = (
            f"{what} ({type(exc).__name__}: {str(exc)[:300]}). This episode is over; call reset() to start a new one."
        )
        return TurnOutcome(message, 0.0, False, False, status=status, truncated=True)

    def _components(self, outcome: TurnOutcome, valid: bool) -> dict[str, float]:
        """The declared components of ``outcome``'s reward, every name present (0.0 where it does not apply)."""
        names = self.metadata.get("reward_components", ("task", "format"))
        out = dict.fromkeys(names, 0.0)
        if outcome.components is not None:
            for k, v in outcome.components.items():
                out[k] = float(v)
        elif outcome.reward:
            where = "format" if not valid and "format" in out else "task" if "task" in out else names[0]
            out[where] = float(outcome.reward)
        return out

    def _info(
        self,
        extra: dict[str, Any],
        *,
        valid: bool,
        effective: bool,
        components: dict[str, float] | None = None,
        status: str = "ok",
    ) -> dict[str, Any]:
        info: dict[str, Any] = self._extra_info()
        info.update(extra)
        info["turn"] = int(self.turn)
        info["action_is_valid"] = bool(valid)
        info["action_is_effective"] = bool(effective)
        info["success"] = bool(self._success())
        info["score"] = float(self._score())
        actions = self._available_actions()
        if actions is not None:
            info["available_actions"] = list(actions)
        info["exit_status"] = status
        info["reward_valid"] = status not in FAULT_STATUSES
        if components is None:
            components = {name: 0.0 for name in self.metadata.get("reward_components", ("task", "format"))}
        info["reward_components"] = components
        key = self.state_key()
        if key is not None:
            info["state_key"] = key
        return info

    def _observe(self, text: str) -> str:
        text = sanitize_text(text)
        limit = self.observation_space.max_length
        if len(text) > limit:
            text = text[: limit - len(_TRUNCATION_MARK)] + _TRUNCATION_MARK
        return text


def _did_you_mean(name: str, choices: frozenset[str]) -> str:
    """``"did you mean 'x'?"`` for the closest of ``choices``, or ``""``."""
    import difflib

    close = difflib.get_close_matches(name, sorted(choices), n=1)
    return f"did you mean {close[0]!r}?" if close else ""


def _init_keywords(cls: type) -> list[str]:
    """The keywords ``cls(...)`` accepts: named ``__init__`` parameters along the MRO, down to
    the first ``__init__`` without ``**kwargs`` (nothing past it is reachable)."""
    names: dict[str, None] = {}
    for klass in cls.__mro__:
        if "__init__" not in vars(klass):
            continue
        params = inspect.signature(vars(klass)["__init__"]).parameters.values()
        names.update(
            (p.name, None) for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) and p.name != "self"
        )
        if not any(p.kind is p.VAR_KEYWORD for p in params) or klass is TurnEnv:
            break
    names.update((name, None) for name in getattr(cls, "source_keywords", ()))
    return list(names)


def _unknown_keywords_message(cls: type, unknown: list[str]) -> str:
    """``"TurnSokobanEnv got an unexpected keyword argument 'dimm' (did you mean 'dim'?).
    Accepted keywords: [dim, ...]"`` (``gymnasium.make`` appends the id and the kwargs)."""
    accepted = _init_keywords(cls)
    hints = [_did_you_mean(name, frozenset(accepted)) for name in unknown]
    return (
        f"{cls.__name__} got an unexpected keyword argument "
        + ", ".join(f"{name!r}" + (f" ({hint})" if hint else "") for name, hint in zip(unknown, hints))
        + f". Accepted keywords: [{', '.join(accepted)}]"
    )
