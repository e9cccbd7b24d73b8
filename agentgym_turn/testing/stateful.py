"""A hypothesis state machine that plays whole episodes of any text env against the turn contract.

It mixes the env's own ``expert_action()``, near-misses of it (valid syntax, bad arguments),
arbitrary Unicode (lone surrogates, controls, NUL, combining marks), strings at the action-length
limit and, a few times per run, about 1 MB; it resets with random seeds mid-episode and after the
end, and steps once past the end now and then. After every ``reset`` and ``step`` it asserts:

* nothing raised;
* the observation is a ``str`` inside ``observation_space``;
* the reward is a finite ``float``; ``terminated`` and ``truncated`` are ``bool``;
* ``info`` has the same key set as the first ``info`` this machine saw (reset or step alike);
* a step after the end keeps ``terminated or truncated`` set and, after ``terminated``, pays 0;
* determinism: every finished episode, replayed with the same seed and responses on a second
  instance, gives the identical transcript (observations, rewards, flags, info);
* the contract fields, where the env returns them (:mod:`.contract_checks`): ``exit_status`` from the
  vocabulary, never ``env_error``, ``reward_valid`` false exactly for faults, ``reward_components``
  with the declared names summing to the reward within 1e-9;
* ``fork``: now and then the env is forked (:func:`~agentgym_turn.core.contract.fork_env`, wrappers
  included) and the fork plays the rest of the episode beside it, with the identical transcript;
* ``state_key``: when a key comes back (another episode, another path), a fork of the state it names
  now and a fork of the first state with that key play the same responses identically.

Use it on your own env (needs ``hypothesis``, the ``dev`` extra)::

    import gymnasium as gym
    from hypothesis import settings
    from agentgym_turn.testing.stateful import turn_contract_machine

    Machine = turn_contract_machine(lambda: gym.make("MyEnv-v0"))
    TestMyEnvContract = Machine.TestCase
    TestMyEnvContract.settings = settings(max_examples=50, stateful_step_count=100, deadline=None)
"""

from __future__ import annotations

import functools
import math
import random
from dataclasses import dataclass, field
from typing import Any, Callable

import gymnasium as gym
import numpy as np
from gymnasium.utils.env_checker import data_equivalence
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, rule

from ..core.contract import fork_env
from ..core.parsing import snippet
from . import strategies as st_turn
from .contract_checks import info_problems, same_future, step_problems


@dataclass
class MachineStats:
    """What a machine class did over all its runs (shared by every instance of the class)."""

    steps: int = 0  # env steps taken by the machine, replays not counted
    resets: int = 0
    replayed_steps: int = 0
    long_responses: int = 0  # responses at the length limit or of 1 MB
    steps_after_end: int = 0
    forked_steps: int = 0  # steps a fork played beside the env
    key_probes: int = 0  # state keys that came back and were probed
    kinds: dict[str, int] = field(default_factory=dict)  # steps per kind of response
    info_keys: frozenset[str] | None = None  # the key set every info must have


def _where(label: str, response: Any) -> str:
    if response is None:
        return label
    return f"{label} with response {snippet(repr(response), 80)} (length {len(response)})"


def check_transition(env: gym.Env, result: Any, where: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
    """Assert that one ``step`` result keeps the contract's types; return it unpacked.

    Raises ``AssertionError`` naming ``where`` and the value at fault.
    """
    assert isinstance(result, tuple) and len(result) == 5, (
        f"{where}: step returned {type(result).__name__}, expected a 5-tuple"
    )
    obs, reward, terminated, truncated, info = result
    check_observation(env, obs, where)
    assert isinstance(reward, (float, np.floating)) and not isinstance(reward, bool), (
        f"{where}: reward is {type(reward).__name__} ({reward!r}), expected a float"
    )
    assert math.isfinite(reward), f"{where}: reward {reward!r} is not finite"
    assert type(terminated) is bool, f"{where}: terminated is {type(terminated).__name__}, expected bool"
    assert type(truncated) is bool, f"{where}: truncated is {type(truncated).__name__}, expected bool"
    assert isinstance(info, dict), f"{where}: info is {type(info).__name__}, expected dict"
    return obs, float(reward), terminated, truncated, info


def check_observation(env: gym.Env, obs: Any, where: str) -> None:
    """Assert ``obs`` is a ``str`` inside ``env.observation_space``."""
    assert isinstance(obs, str), f"{where}: observation is {type(obs).__name__}, expected str"
    if obs not in env.observation_space:
        space = env.observation_space
        bad = next((c for c in obs if not space.contains(c)), None)
        why = f"character {bad!r} at index {obs.index(bad)}" if bad is not None else f"length {len(obs)}"
        raise AssertionError(f"{where}: observation leaves {space!r} ({why})")


def turn_contract_machine(
    make_env: Callable[[], gym.Env],
    *,
    name: str = "TurnContract",
    expert_weight: float = 0.3,
    near_valid_weight: float = 0.3,
    reset_weight: float = 0.02,
    after_end_weight: float = 0.2,
    long_weight: float = 0.0005,
    huge_weight: float = 0.0001,
    max_long: int = 1,
    max_huge: int = 1,
    replay: bool = True,
    fork_weight: float = 0.05,
    max_key_probes: int = 4,
) -> type[RuleBasedStateMachine]:
    """Build a :class:`~hypothesis.stateful.RuleBasedStateMachine` class for one env.

    Args:
        make_env: Zero-argument factory of the env (``lambda: gym.make(id)``). It is called
            twice per class: one instance plays, the other replays finished episodes; both live
            across hypothesis examples, as an env does across a training run.
        name: Class name (shows in hypothesis' failure reports).
        expert_weight: Share of steps that send ``expert_action()`` unchanged (needs the env to
            have one; otherwise those steps send near-misses of the last response).
        near_valid_weight: Share of steps that send a near-miss of the expert's response.
        reset_weight: Chance per step of a reset with a new seed mid-episode.
        after_end_weight: Chance, once an episode ended, of one step past the end before the reset.
        long_weight: Share of steps that send a response at the length limit (``max_length`` - 1,
            0 or + 1 characters): the parsers' worst cases and the slowest steps.
        huge_weight: Share of steps that send a 1 MB response.
        max_long, max_huge: Caps on those two kinds per example (cost control; with the default
            weights a 10,000-step run sends about five of the first and one of the second; hypothesis
            repeats draws across examples, so a run can send a few times more).
        replay: Replay every finished episode on the second instance and compare transcripts.
        fork_weight: Chance per step of forking the env (when it has ``fork``) for the rest of the episode.
        max_key_probes: Cap on the state keys probed per example (each probe plays 2 responses on 2 forks).

    The rest of the steps send arbitrary responses (:func:`~.strategies.responses` and
    :func:`~.strategies.unicode_text`). ``Machine.stats`` (a :class:`MachineStats`) counts what
    was run; ``Machine.TestCase`` is the unittest class to collect.
    """
    envs: dict[str, gym.Env] = {}
    stats = MachineStats()
    # strategies are built once: building one costs more than drawing from it
    arbitrary = st.one_of(st_turn.responses(), st_turn.unicode_text())
    huge = st_turn.long_response((1_048_576,))
    near_miss = functools.lru_cache(maxsize=4096)(st_turn.near_valid)
    at_limit: dict[int, st.SearchStrategy[str]] = {}

    def env_for(role: str) -> gym.Env:
        if role not in envs:
            envs[role] = make_env()
        return envs[role]

    class Machine(RuleBasedStateMachine):
        def __init__(self) -> None:
            super().__init__()
            self.env = env_for("play")
            self.seed: int | None = None
            self.responses: list[Any] = []
            self.transcript: list[tuple] = []
            self.over = False
            self.terminated = False
            self.stepped_after_end = False
            self.last_response = ""
            self.mix_seed = 0
            self.episodes = 0
            # caps per example, not per class: hypothesis replays an example and must see the same draws
            self.long_left, self.huge_left = max_long, max_huge
            # state key -> a snapshot of the first state seen with it: per example, so hypothesis' replays of one agree
            self.keyed: dict[str, Any] = {}
            self.probes_left = max_key_probes

        # ------------------------------------------------------------ contract checks
        def _check_info_keys(self, info: dict[str, Any], where: str) -> None:
            keys = frozenset(info)
            if stats.info_keys is None:
                stats.info_keys = keys
                return
            assert keys == stats.info_keys, (
                f"{where}: info keys changed: missing {sorted(stats.info_keys - keys)}, "
                f"new {sorted(keys - stats.info_keys)} (the key set must be the same on every reset and step)"
            )

        def _reset(self, seed: int) -> None:
            self._replay()
            where = f"reset(seed={seed})"
            try:
                result = self.env.reset(seed=seed)
            except Exception as exc:
                raise AssertionError(f"{where} raised {type(exc).__name__}: {snippet(str(exc), 200)}") from exc
            assert isinstance(result, tuple) and len(result) == 2, (
                f"{where} returned {type(result).__name__}, expected (obs, info)"
            )
            obs, info = result
            check_observation(self.env, obs, where)
            assert isinstance(info, dict), f"{where}: info is {type(info).__name__}, expected dict"
            self._check_info_keys(info, where)
            stats.resets += 1
            self.seed, self.responses, self.transcript = seed, [], [("reset", obs, info)]
            # a new mix per episode: hypothesis often repeats a drawn integer across examples
            self.episodes += 1
            self.rng = random.Random(f"{self.mix_seed}/{seed}/{self.episodes}")
            self.over = self.terminated = self.stepped_after_end = False
            self.twin: gym.Env | None = None
            problems = info_problems(self.env, info)
            assert not problems, f"{where}: {problems[0]}"
            self._probe_key(info, where)

        def _probe_key(self, info: dict[str, Any], where: str) -> None:
            """A key seen before names a state with the same future: forks of both play 2 responses alike."""
            key = info.get("state_key")
            base = self.env.unwrapped
            if key is None or not callable(getattr(base, "fork", None)):
                return
            if key not in self.keyed:
                if len(self.keyed) < 256:
                    self.keyed[key] = base.snapshot()  # a snapshot costs less than a fork; probes restore it
                return
            if self.probes_left <= 0:
                return
            self.probes_left -= 1
            stats.key_probes += 1
            expert = getattr(base, "expert_action", None)
            probe = [expert() if callable(expert) else self.last_response, self.last_response]
            first, now = base.fork(2)
            first.restore(self.keyed[key])
            why = same_future(first, now, probe)
            assert why is None, f"{where}: state_key {key} came back, but the two states have different futures ({why})"

        def _step(self, response: Any, kind: str) -> None:
            after_end = self.over
            where = _where(
                f"seed={self.seed}, step {len(self.responses) + 1}" + (" (after the end)" if after_end else ""),
                response,
            )
            try:
                result = self.env.step(response)
            except Exception as exc:
                raise AssertionError(
                    f"{where}: step raised {type(exc).__name__}: {snippet(str(exc), 200)}. Any string must be a legal "
                    "action: return an invalid turn (message, format_penalty, info['action_is_valid']=False) instead."
                ) from exc
            obs, reward, terminated, truncated, info = check_transition(self.env, result, where)
            self._check_info_keys(info, where)
            problems = step_problems(self.env, reward, info)
            assert not problems, f"{where}: {problems[0]}"
            if self.twin is not None:
                twin = self.twin.step(response)
                stats.forked_steps += 1
                assert data_equivalence(twin, result), (
                    f"{where}: a fork of the env, given the same response, returned another result"
                )
            elif (
                not after_end
                and self.rng.random() < fork_weight
                and callable(getattr(self.env.unwrapped, "fork", None))
            ):
                self.twin = fork_env(self.env, 1)[0]  # it plays the rest of the episode beside the env
            if not after_end:
                self._probe_key(info, where)
            if after_end:
                assert terminated or truncated, f"{where}: a step after the end must keep terminated or truncated set"
                if self.terminated:
                    assert reward == 0.0, f"{where}: a step after termination paid {reward!r}, expected 0.0"
                stats.steps_after_end += 1
                self.stepped_after_end = True
            stats.steps += 1
            stats.kinds[kind] = stats.kinds.get(kind, 0) + 1
            if kind in ("long", "huge"):
                stats.long_responses += 1
            self.responses.append(response)
            self.transcript.append((response, obs, reward, terminated, truncated, info))
            self.terminated = self.terminated or terminated
            self.over = self.over or terminated or truncated
            if isinstance(response, str) and len(response) < 10_000:
                self.last_response = response

        def _replay(self) -> None:
            """Play the finished episode again on the second instance; the transcript must match."""
            if not replay or self.seed is None:
                return
            twin = env_for("replay")
            obs, info = twin.reset(seed=self.seed)
            first = ("reset", obs, info)
            label = f"replaying seed={self.seed} with the same {len(self.responses)} response(s)"
            assert data_equivalence(first, self.transcript[0]), f"{label}: the first observation or info differs"
            for k, response in enumerate(self.responses, start=1):
                got = (response, *twin.step(response))
                stats.replayed_steps += 1
                if not data_equivalence(got, self.transcript[k]):
                    fields = ("response", "observation", "reward", "terminated", "truncated", "info")
                    diff = [f for f, a, b in zip(fields, got, self.transcript[k]) if not data_equivalence(a, b)]
                    raise AssertionError(
                        f"{label}: step {k} differs in {', '.join(diff)} (response {snippet(repr(response), 80)})"
                    )

        # ------------------------------------------------------------ rules
        @initialize(seed=st_turn.seeds(), mix_seed=st.integers(0, 2**63 - 1))
        def start(self, seed: int, mix_seed: int) -> None:
            # The mix of kinds comes from a Random seeded by hypothesis: hypothesis' own draws lean
            # hard to one end, and a truly random one would make its replays of an example differ.
            self.mix_seed = mix_seed
            self._reset(seed)

        @rule(data=st.data())
        def turn(self, data: st.DataObject) -> None:
            """One env step (after a reset when the episode is over or a mid-episode reset is drawn)."""
            if self.over:
                if not self.stepped_after_end and self.rng.random() < after_end_weight:
                    response = self.last_response if self.rng.random() < 0.5 else data.draw(arbitrary)
                    self._step(response, "after_end")
                    return
                self._reset(data.draw(st_turn.seeds()))
            elif self.rng.random() < reset_weight:
                self._reset(data.draw(st_turn.seeds()))
            u = self.rng.random()
            expert = getattr(self.env.unwrapped, "expert_action", None)
            limit = int(self.env.action_space.max_length)
            if u < expert_weight and callable(expert):
                self._step(expert(), "expert")
            elif u < expert_weight + near_valid_weight:
                template = expert() if callable(expert) else self.last_response
                self._step(data.draw(near_miss(template)), "near_valid")
            elif u < expert_weight + near_valid_weight + long_weight and self.long_left > 0:
                self.long_left -= 1
                if limit not in at_limit:
                    at_limit[limit] = st_turn.long_response((limit - 1, limit, limit + 1))
                self._step(data.draw(at_limit[limit]), "long")
            elif u < expert_weight + near_valid_weight + long_weight + huge_weight and self.huge_left > 0:
                self.huge_left -= 1
                self._step(data.draw(huge), "huge")
            else:
                self._step(data.draw(arbitrary), "random")

        def teardown(self) -> None:
            self._replay()

    Machine.__name__ = Machine.__qualname__ = name
    Machine.stats = stats  # type: ignore[attr-defined]
    return Machine
