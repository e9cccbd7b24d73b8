"""``check_text_aec_env``: PettingZoo's AEC API checks, for envs whose observations and actions are text.

PettingZoo's ``api_test`` assumes numpy observations (it compares them with ``np.array_equal``,
reads their ``dtype`` and samples observation spaces), so a text env fails it for no fault of its
own. This check keeps its checks and adds the turn contract's, per agent:

* after ``reset``: ``agents`` is a non-empty sub-list of ``possible_agents``, ``agent_selection``
  is one of them, ``rewards``, ``terminations``, ``truncations``, ``infos`` and
  ``_cumulative_rewards`` are keyed by exactly ``agents``, spaces are Gymnasium ``Text`` spaces,
  ``observe(agent)`` lies in ``observation_space(agent)`` and ``last()`` returns the acting agent's;
* while playing adversarial, random and (when the env has ``expert_action``) expert moves: no
  move of a live agent raises, the above keeps holding, rewards are finite floats, every agent's
  ``info`` has the same key set all episode, ``last()``'s reward is the sum of the step rewards the
  agent got since it last moved, a finished agent is stepped with ``None`` until ``agents`` is empty;
* the same seed and moves give the same episode (observations, rewards, flags, infos, order), and
  ``render()`` returns text when ``render_mode="ansi"``.

Any violation raises ``AssertionError`` naming the check, the step, the agent and the move.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np
from gymnasium.spaces import Text

from ..core.parsing import snippet
from .fuzz import fixed_adversarial_responses, random_responses

_DICTS = ("rewards", "terminations", "truncations", "infos", "_cumulative_rewards")


@dataclass
class AECReport:
    """What :func:`check_text_aec_env` played: ``episodes``, live-agent ``steps``, and moves by kind."""

    episodes: int = 0
    steps: int = 0
    kinds: dict[str, int] = field(default_factory=dict)


def _fail(check: str, where: str, what: str) -> None:
    raise AssertionError(f"[{check}] {where}: {what}")


def _check_state(env: Any, where: str) -> None:
    agents = list(env.agents)
    if not set(agents) <= set(env.possible_agents):
        _fail("agents", where, f"agents {agents} are not all in possible_agents {env.possible_agents}")
    if len(set(agents)) != len(agents):
        _fail("agents", where, f"agents {agents} repeats an agent")
    for name in _DICTS:
        keys = set(getattr(env, name, {}) or {})
        if keys != set(agents):
            _fail("dicts", where, f"env.{name} is keyed by {sorted(keys)}, agents are {sorted(agents)}")
    if agents and env.agent_selection not in agents:
        _fail("agent_selection", where, f"agent_selection {env.agent_selection!r} is not a live agent {agents}")
    for agent in agents:
        obs = env.observe(agent)
        space = env.observation_space(agent)
        if not isinstance(obs, str) or not space.contains(obs):
            _fail("observation", where, f"observe({agent!r}) = {snippet(repr(obs))} is not in {space}")
        if not isinstance(env.terminations[agent], (bool, np.bool_)) or not isinstance(
            env.truncations[agent], (bool, np.bool_)
        ):
            _fail("flags", where, f"terminations/truncations of {agent!r} are not booleans")
        if not isinstance(env.infos[agent], dict):
            _fail("info", where, f"infos[{agent!r}] is not a dict")
        reward = env.rewards[agent]
        if not isinstance(reward, (int, float, np.floating, np.integer)) or not math.isfinite(float(reward)):
            _fail("reward", where, f"rewards[{agent!r}] = {reward!r} is not a finite number")


def _episode(
    env_fn: Callable[[], Any], seed: int, moves: Callable[[Any, int], Any], max_steps: int, report: AECReport | None
) -> list[tuple]:
    """Play one episode; return its record (for the determinism check)."""
    env = env_fn()
    env.reset(seed=seed)
    for agent in env.possible_agents:
        for space in (env.observation_space(agent), env.action_space(agent)):
            if not isinstance(space, Text):
                _fail("spaces", f"seed {seed}", f"{agent!r}'s space {space} is not a gymnasium Text space")
    _check_state(env, f"seed {seed}, after reset")
    keys = {a: set(env.infos[a]) for a in env.agents}
    owed = {a: 0.0 for a in env.agents}  # rewards each agent got since it last moved
    record: list[tuple] = [("reset", tuple(env.agents), env.agent_selection, tuple(env.observe(a) for a in env.agents))]
    live = 0  # moves of live agents so far
    for step in range(max_steps):
        if not env.agents:
            break
        agent = env.agent_selection
        obs, reward, terminated, truncated, info = env.last()
        where = f"seed {seed}, step {step}, agent {agent!r}"
        if obs != env.observe(agent):
            _fail("last", where, "last() observation differs from observe(agent_selection)")
        if not math.isclose(float(reward), owed.get(agent, 0.0), abs_tol=1e-9):
            _fail(
                "cumulative reward",
                where,
                f"last() reward {reward} is not the {owed.get(agent, 0.0)} the agent got since its last move",
            )
        if set(info) != keys.get(agent, set(info)):
            _fail("info keys", where, f"info keys changed: {sorted(set(info) ^ keys[agent])}")
        action = None if terminated or truncated else moves(env, live)
        try:
            env.step(action)
        except Exception as error:  # noqa: BLE001 - any exception is the violation reported
            _fail("step raised", where, f"step({snippet(repr(action))}) raised {type(error).__name__}: {error}")
        owed[agent] = 0.0
        for a in env.agents:
            owed[a] = owed.get(a, 0.0) + float(env.rewards[a])
        _check_state(env, where + f" after {snippet(repr(action))}")
        for a in env.agents:
            if set(env.infos[a]) != keys.setdefault(a, set(env.infos[a])):
                _fail("info keys", where, f"infos[{a!r}] keys changed: {sorted(set(env.infos[a]) ^ keys[a])}")
        if action is not None:
            live += 1
            if report is not None:
                report.steps += 1
        record.append(
            (
                agent,
                repr(action),
                tuple(env.agents),
                env.agent_selection if env.agents else None,
                tuple(env.observe(a) for a in env.agents),
                tuple(float(env.rewards[a]) for a in env.agents),
                tuple(bool(env.terminations[a]) for a in env.agents),
                tuple(bool(env.truncations[a]) for a in env.agents),
                tuple(repr(sorted(env.infos[a].items())) for a in env.agents),
            )
        )
    else:
        if env.agents:
            _fail(
                "episode end",
                f"seed {seed}",
                f"agents {env.agents} still live after {max_steps} steps; bound the episode (max_cycles)",
            )
    if getattr(env, "render_mode", None) == "ansi" and not isinstance(env.render(), str):
        _fail("render", f"seed {seed}", "render() with render_mode='ansi' did not return a str")
    env.close()
    if report is not None:
        report.episodes += 1
    return record


def check_text_aec_env(
    env_fn: Callable[[], Any],
    *,
    seeds: tuple[int, ...] = (0, 1),
    expert_weight: float = 0.5,
    max_steps: int = 1_000,
) -> AECReport:
    """Check a text AEC env made by ``env_fn()`` (see the module docstring); raise ``AssertionError``
    on the first violation. Each seed plays one episode of mixed moves (adversarial strings,
    random text, non-strings, and with probability ``expert_weight`` the env's
    ``expert_action(agent)``), then replays it on a fresh env to check determinism."""
    report = AECReport()
    adversarial: list[Any] = [*fixed_adversarial_responses(), 12345, 3.5, b"bytes \xff"]
    for seed in seeds:
        rng = np.random.default_rng(seed)
        choices: list[Any] = []

        def moves(env: Any, step: int) -> Any:
            if step < len(choices):  # replaying
                return choices[step]
            draw = rng.random()
            expert = getattr(env.unwrapped, "expert_action", None)
            if expert is not None and draw < expert_weight:
                move, kind = expert(env.agent_selection), "expert"
            elif draw < expert_weight + (1 - expert_weight) / 2:
                move, kind = adversarial[int(rng.integers(len(adversarial)))], "adversarial"
            else:
                move, kind = random_responses(rng, 1)[0], "random"
            report.kinds[kind] = report.kinds.get(kind, 0) + 1
            choices.append(move)
            return move

        first = _episode(env_fn, seed, moves, max_steps, report)
        replay = _episode(
            env_fn, seed, lambda env, step: choices[step] if step < len(choices) else None, max_steps, None
        )
        for i, (a, b) in enumerate(zip(first, replay)):
            if a != b:
                _fail("determinism", f"seed {seed}, step {i}", "the same seed and moves gave a different step")
        if len(first) != len(replay):
            _fail("determinism", f"seed {seed}", "the replay's episode has a different length")
    return report
