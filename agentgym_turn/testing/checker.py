"""``check_turn_env``: check any text env, ours or yours, against the turn contract.

It collects *every* violation and reports them together instead of stopping at the first failed
assert. Each distinct violation is listed once, with the first place it happened (check, step,
response, value at fault) and how many times it happened in all.
"""

from __future__ import annotations

import copy
import math
import pickle
import random
import re
import traceback
import warnings
from dataclasses import dataclass, field
from numbers import Real
from typing import Any, Callable, Union

import gymnasium as gym
import numpy as np
from gymnasium.spaces import Text
from gymnasium.spaces.text import alphanumeric
from gymnasium.utils.env_checker import check_env, data_equivalence

from ..core.parsing import snippet
from ..core.turn_env import COMMON_INFO_KEYS
from .contract_checks import env_error_problem, info_problems, same_future, snapshot_problems, step_problems
from .fuzz import fixed_adversarial_responses, near_miss, random_responses

EnvSource = Union[gym.Env, str, Callable[[], gym.Env]]

#: Characters a turn env's spaces must accept (printable Unicode plus newline and tab).
PROBE_TEXT = "Az09 !?[]<>/|é√ßΩ中日한🙂e\u0301\n\t"
_DEFAULT_TURN_CAP = 100
_ANSI = re.compile(r"\x1b\[[0-9;]*m")


class TurnContractError(AssertionError):
    """Raised by :func:`check_turn_env` with every violation found."""

    def __init__(self, report: "CheckReport"):
        self.report = report
        super().__init__(report.summary())


@dataclass
class Violation:
    """One distinct contract violation: what, where it first happened, how many times."""

    check: str  # the check that found it: "fuzz", "expert", "determinism", ...
    what: str  # the violation, the same text each time it repeats
    first: str  # where it first happened (step, seed, response) and the value seen there
    count: int = 1

    def __str__(self) -> str:
        times = f"; {self.count} times in all" if self.count > 1 else ""
        where = f" (first: {self.first}{times})" if self.first else (f" ({self.count} times)" if self.count > 1 else "")
        return f"[{self.check}] {self.what}{where}"


@dataclass
class CheckReport:
    """What :func:`check_turn_env` found. ``problems`` is ``violations`` as text, one line each."""

    env_name: str
    violations: list[Violation] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    steps_run: int = 0
    expert_episodes: int = 0
    expert_successes: int = 0

    @property
    def problems(self) -> list[str]:
        return [str(v) for v in self.violations]

    @property
    def ok(self) -> bool:
        return not self.violations

    def summary(self) -> str:
        head = f"check_turn_env({self.env_name}): {len(self.problems)} problem(s)"
        lines = [head] + [f"  - {p}" for p in self.problems]
        if self.warnings:
            lines.append(f"  ({len(self.warnings)} warning(s): {'; '.join(self.warnings[:5])})")
        return "\n".join(lines)


class _Checker:
    def __init__(self, source: EnvSource, seed: int, episodes: int, fuzz_actions: int, max_turns: int | None):
        self.seed = seed
        self.episodes = episodes
        self.fuzz_actions = fuzz_actions
        self._factory, name, self._given = _factory_for(source)
        self.report = CheckReport(env_name=name)
        self.max_turns = max_turns
        self._index: dict[str, Violation] = {}
        self.info_keys: frozenset[str] | None = None  # the first info's key set; every info must match

    # -------------------------------------------------------------- helpers
    def problem(self, check: str, what: str, where: str = "") -> None:
        """Record a violation; a repeat of the same ``what`` (in any check) only raises its count."""
        key = what
        if key in self._index:
            self._index[key].count += 1
            return
        violation = Violation(check, what, where)
        self._index[key] = violation
        self.report.violations.append(violation)

    def fresh(self) -> gym.Env:
        return self._factory()

    def turn_cap(self, env: gym.Env) -> int:
        if self.max_turns is not None:
            return self.max_turns
        spec = getattr(env, "spec", None)
        if spec is not None and spec.max_episode_steps:
            return int(spec.max_episode_steps)
        return _DEFAULT_TURN_CAP

    def check_info(self, check: str, where: str, info: Any, env: gym.Env | None = None, reward: Any = None) -> None:
        if not isinstance(info, dict):
            self.problem(check, f"info is {type(info).__name__}, expected a dict.", where)
            return
        if env is not None:  # the contract fields, where the env returns them
            for what in (
                info_problems(env, info) if reward is None else step_problems(env, reward, info, env_error=False)
            ):
                self.problem("contract", what, where)
            if reward is not None and info.get("exit_status") == "env_error":  # a turn that raised, caught by TurnEnv
                self.problem(check, env_error_problem(env), where)
        for key, expected in COMMON_INFO_KEYS.items():
            if key not in info:
                self.problem(check, f"info has no key {key!r} (required keys: {sorted(COMMON_INFO_KEYS)}).", where)
                continue
            value = info[key]
            if not _has_type(value, expected):
                self.problem(
                    check,
                    f"info[{key!r}] is {type(value).__name__}, expected {expected.__name__}.",
                    f"{where}: {key}={snippet(repr(value))}",
                )
        if "available_actions" in info:
            acts = info["available_actions"]
            if not isinstance(acts, (list, tuple)) or not all(isinstance(a, str) for a in acts):
                self.problem(
                    check, "info['available_actions'] must be a list of str.", f"{where}: {snippet(repr(acts))}"
                )
        keys = frozenset(info)
        if self.info_keys is None:
            self.info_keys = keys
        elif keys != self.info_keys:
            missing, new = sorted(self.info_keys - keys), sorted(keys - self.info_keys)
            self.problem(
                "info_keys",
                f"the info key set changes: missing {missing}, new {new} compared with the first info. Return the "
                "same keys from reset and every step (TurnEnv: compute env-specific keys in _extra_info()).",
                where,
            )

    def check_observation(self, check: str, where: str, env: gym.Env, obs: Any) -> None:
        if not isinstance(obs, str):
            self.problem(check, f"observation is {type(obs).__name__}, expected str.", f"{where}: {snippet(repr(obs))}")
            return
        space = env.observation_space
        if obs not in space:
            why, detail = _why_outside(space, obs)
            self.problem(check, f"observation escapes observation_space: {why}.", f"{where}: {detail}")

    def check_step_result(self, check: str, where: str, env: gym.Env, result: Any) -> bool:
        if not (isinstance(result, tuple) and len(result) == 5):
            self.problem(check, f"step() returned {type(result).__name__}, expected a 5-tuple.", where)
            return False
        obs, reward, terminated, truncated, info = result
        self.check_observation(check, where, env, obs)
        if not isinstance(reward, Real) or isinstance(reward, bool) or not math.isfinite(float(reward)):
            self.problem(
                check,
                f"reward is {type(reward).__name__}, not a finite number.",
                f"{where}: reward={snippet(repr(reward))}",
            )
        for name, flag in (("terminated", terminated), ("truncated", truncated)):
            if not isinstance(flag, (bool, np.bool_)):
                self.problem(
                    check, f"{name} is {type(flag).__name__}, expected bool.", f"{where}: {name}={snippet(repr(flag))}"
                )
        self.check_info(check, where, info, env, reward)
        return True

    def step(self, check: str, where: str, env: gym.Env, response: Any) -> tuple | None:
        """Step ``env``, check the result's types; ``None`` if it raised or is malformed."""
        try:
            result = env.step(response)
        except Exception as exc:
            self.problem(
                check,
                f"step raised {type(exc).__name__} at {_last_frames(exc, 1)}. Any string must be a legal action: "
                "return an invalid turn (message, format_penalty, info['action_is_valid']=False) instead.",
                f"{where}: {type(exc).__name__}: {snippet(str(exc), 200)}",
            )
            return None
        if not self.check_step_result(check, where, env, result):
            return None
        return result

    def reset(self, check: str, env: gym.Env, seed: int) -> tuple | None:
        where = f"reset(seed={seed})"
        result = env.reset(seed=seed)
        if not (isinstance(result, tuple) and len(result) == 2):
            self.problem(check, f"reset() returned {type(result).__name__}, expected (observation, info).", where)
            return None
        self.check_observation(check, where, env, result[0])
        self.check_info(check, where, result[1], env)
        return result

    # -------------------------------------------------------------- checks
    def run(self) -> CheckReport:
        for check in (
            self.check_gymnasium,
            self.check_spaces,
            self.check_reset,
            self.check_fuzz,
            self.check_determinism,
            self.check_pickle,
            self.check_snapshot,
            self.check_state_keys,
            self.check_expert,
            self.check_after_end,
            self.check_render,
        ):
            try:
                check()
            except Exception as exc:  # the env raised where it must not: report, keep checking
                name = check.__name__.removeprefix("check_")
                self.problem(name, f"raised {type(exc).__name__} at {_last_frames(exc)}.", snippet(str(exc), 200))
        return self.report

    def check_gymnasium(self) -> None:
        env = self.fresh()
        try:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                check_env(env.unwrapped)
            self.report.warnings.extend(_ANSI.sub("", str(w.message)) for w in caught)
        except Exception as exc:
            self.problem(
                "gymnasium",
                f"gymnasium.utils.env_checker.check_env failed: {type(exc).__name__}: {snippet(str(exc), 300)}",
            )
        finally:
            env.close()

    def check_spaces(self) -> None:
        env = self.fresh()
        for name in ("action_space", "observation_space"):
            space = getattr(env, name, None)
            if not isinstance(space, Text):
                self.problem("spaces", f"{name} is {type(space).__name__}, expected a gymnasium.spaces.Text.")
                continue
            rejected = [c for c in dict.fromkeys(PROBE_TEXT) if not _holds_char(space, c)]
            if rejected or not space.contains(PROBE_TEXT):
                self.problem(
                    "spaces",
                    f"{name} rejects printable Unicode, newline or tab (e.g. {rejected[:4] or [PROBE_TEXT]!r}); "
                    "use agentgym_turn.core.TurnText(max_length) instead of Gymnasium's alphanumeric Text.",
                )
        env.close()

    def check_reset(self) -> None:
        env = self.fresh()
        self.reset("reset", env, self.seed)
        env.close()

    def check_fuzz(self) -> None:
        env = self.fresh()
        max_len = getattr(env.action_space, "max_length", None)
        rng = np.random.default_rng(self.seed)
        responses = fixed_adversarial_responses(max_len) + random_responses(rng, self.fuzz_actions)
        episode = 0
        env.reset(seed=self.seed)
        for i, response in enumerate(responses):
            result = self.step("fuzz", f"fuzz step {i}, response {snippet(repr(response))}", env, response)
            if result is None:
                episode += 1
                env.reset(seed=self.seed + episode)
                continue
            self.report.steps_run += 1
            if result[2] or result[3]:
                episode += 1
                env.reset(seed=self.seed + episode)
        # near-misses of the expert's response: valid syntax with bad arguments reaches code that
        # random text never does
        expert = getattr(env.unwrapped, "expert_action", None)
        if callable(expert):
            env.reset(seed=self.seed)
            for i in range(self.fuzz_actions):
                response = near_miss(expert(), rng)
                result = self.step("fuzz", f"near-miss step {i}, response {snippet(repr(response))}", env, response)
                if result is None or result[2] or result[3]:
                    episode += 1
                    env.reset(seed=self.seed + episode)
                if result is not None:
                    self.report.steps_run += 1
        env.close()

    def _script(self, n: int) -> list[str]:
        rng = np.random.default_rng(self.seed + 7)
        return random_responses(rng, n, max_pieces=6)

    def _rollout(self, check: str, env: gym.Env, seed: int, script: list[str], use_expert: bool) -> list[tuple]:
        """Reset with ``seed``, then alternate expert and scripted responses; check and record every step."""
        trace: list[tuple] = [("reset", *env.reset(seed=seed))]
        for i, scripted in enumerate(script):
            response = env.unwrapped.expert_action() if use_expert and i % 2 == 0 else scripted
            result = self.step(check, f"seed={seed}, step {i + 1}, response {snippet(repr(response))}", env, response)
            if result is None:
                break
            trace.append((response, *result))
            if result[2] or result[3]:
                break
        return trace

    def _compare(self, check: str, label: str, a: list[tuple], b: list[tuple]) -> bool:
        for k, (x, y) in enumerate(zip(a, b)):
            if not data_equivalence(x, y):
                what = "reset" if k == 0 else f"step {k}"
                fields = ("response", "observation", "reward", "terminated", "truncated", "info")
                if k == 0:
                    fields = ("call", "observation", "info")
                diff = [f for f, u, v in zip(fields, x, y) if not data_equivalence(u, v)]
                self.problem(
                    check, f"{label} diverge at {what} ({', '.join(diff)} {'differs' if len(diff) == 1 else 'differ'})."
                )
                return False
        if len(a) != len(b):
            self.problem(check, f"{label} end after different numbers of turns ({len(a) - 1} vs {len(b) - 1}).")
            return False
        return True

    def check_determinism(self) -> None:
        use_expert = callable(getattr(self.fresh().unwrapped, "expert_action", None))
        script = self._script(12)
        env_a, env_b = self.fresh(), self.fresh()
        # the global RNGs are set differently before each run: an env that draws from them diverges for sure
        saved = random.getstate(), np.random.get_state()
        try:
            random.seed(1), np.random.seed(1)
            a = self._rollout("determinism", env_a, self.seed, script, use_expert)
            random.seed(2), np.random.seed(2)
            b = self._rollout("determinism", env_b, self.seed, script, use_expert)
            self._compare("determinism", f"two fresh instances reset with seed={self.seed}", a, b)
            # the same instance, reset with another seed and then with the first again
            env_a.reset(seed=self.seed + 1)
            random.seed(3), np.random.seed(3)
            c = self._rollout("determinism", env_a, self.seed, script, use_expert)
            self._compare("determinism", f"an instance re-reset with seed={self.seed} and its first episode", a, c)
        finally:
            random.setstate(saved[0])
            np.random.set_state(saved[1])
        env_a.close()
        env_b.close()

    def check_pickle(self) -> None:
        env = self.fresh()
        reason = getattr(env.unwrapped, "unpicklable_because", None)
        if reason:  # declared by the env (a live session, a browser): a warning, not a violation
            self.report.warnings.append(f"pickling not checked: {reason}")
            env.close()
            return
        script = self._script(8)
        env.reset(seed=self.seed)
        for response in script[:2]:
            _, _, terminated, truncated, _ = env.step(response)
            if terminated or truncated:
                env.reset(seed=self.seed)
        try:
            clone = pickle.loads(pickle.dumps(env))
        except Exception as exc:
            self.problem(
                "pickle", f"the env cannot be pickled mid-episode: {type(exc).__name__}: {snippet(str(exc), 200)}"
            )
            return
        a, b = [], []
        for response in script[2:]:
            ra, rb = env.step(response), clone.step(response)
            a.append((response, *ra))
            b.append((response, *rb))
            if ra[2] or ra[3]:
                break
        self._compare("pickle", "an env and its pickle round-trip copy", [("start",)] + a, [("start",)] + b)
        env.close()

    def check_snapshot(self) -> None:
        """``snapshot``/``restore``/``fork``, where the unwrapped env has them: from the middle of an episode, a restored
        env and each fork continue exactly as the original (same responses, same transcript, RNG included)."""
        env = self.fresh()
        if not all(callable(getattr(env.unwrapped, name, None)) for name in ("snapshot", "restore", "fork")):
            env.close()
            return
        script = self._script(8)
        env.reset(seed=self.seed)
        expert = getattr(env.unwrapped, "expert_action", None)
        for response in ([expert()] if callable(expert) else []) + script[:1]:
            _, _, terminated, truncated, _ = env.step(response)
            if terminated or truncated:
                env.reset(seed=self.seed)
        probe = (
            script[1:6]
            if not callable(expert)
            else [expert(), near_miss(expert(), np.random.default_rng(self.seed)), *script[1:4]]
        )
        for what in snapshot_problems(env, probe, self.seed):
            self.problem("snapshot", what, f"seed={self.seed}, after 2 turns")
        env.close()

    def check_state_keys(self) -> None:
        """``info["state_key"]``, where the env gives one: whenever a key comes back (another episode, another path),
        the state it names has the same future as the first state with that key (a fork of each plays the same
        responses: same observations, rewards, flags). Needs ``fork``."""
        env = self.fresh()
        if not callable(getattr(env.unwrapped, "fork", None)):
            env.close()
            return
        use_expert = callable(getattr(env.unwrapped, "expert_action", None))
        script = self._script(24)
        rng = np.random.default_rng(self.seed + 11)
        seen: dict[str, Any] = {}
        probes = 0
        for episode in range(8):
            seed = self.seed + episode % 2  # two seeds, each four times: keys come back by other paths
            _, info = env.reset(seed=seed)
            for turn in range(self.turn_cap(env) + 1):
                key = info.get("state_key") if isinstance(info, dict) else None
                if key is None:
                    break
                if key in seen and probes < 24:
                    probes += 1
                    probe = [script[int(k)] for k in rng.integers(0, len(script), 3)]
                    if use_expert:
                        probe = [env.unwrapped.expert_action(), *probe]
                    why = same_future(seen[key].fork(1)[0], env.unwrapped.fork(1)[0], probe)
                    if why is not None:
                        self.problem(
                            "state_key",
                            f"two states with the same state_key have different futures ({why}).",
                            f"seed={seed}, turn {turn}, key {key}",
                        )
                elif key not in seen:
                    seen[key] = env.unwrapped.fork(1)[0]
                result = self.step(
                    "state_key", f"seed={seed}, turn {turn + 1}", env, self._walk(env, info, rng, script, use_expert)
                )
                if result is None or result[2] or result[3]:
                    break
                info = result[4]
        env.close()

    @staticmethod
    def _walk(env: gym.Env, info: dict[str, Any], rng: np.random.Generator, script: list[str], use_expert: bool) -> str:
        """A response for a random walk that mostly stays valid: the expert's, one of the available actions, a
        near-miss of the expert's, or a scripted one."""
        u = rng.random()
        actions = info.get("available_actions")
        if use_expert and u < 0.5:
            return env.unwrapped.expert_action()
        if u < 0.75 and actions:
            return str(actions[int(rng.integers(len(actions)))])
        if u < 0.75 and use_expert:
            return near_miss(env.unwrapped.expert_action(), rng)
        return script[int(rng.integers(len(script)))]

    def _play_expert(self, env: gym.Env, seed: int, cap: int) -> tuple[dict[str, Any] | None, bool, bool]:
        """Follow ``expert_action()`` from ``reset(seed)``; return the last info, whether it ended, whether it was terminated."""
        reset = self.reset("expert", env, seed)
        info: dict[str, Any] | None = reset[1] if reset is not None else None
        for turn in range(1, cap + 1):
            response = env.unwrapped.expert_action()
            if not isinstance(response, str):
                self.problem(
                    "expert",
                    f"expert_action() returned {type(response).__name__}, expected str.",
                    f"seed={seed}, turn {turn}",
                )
                return info, False, False
            result = self.step(
                "expert", f"seed={seed}, expert turn {turn}, response {snippet(repr(response))}", env, response
            )
            if result is None:
                return None, False, False
            _, _, terminated, truncated, info = result
            if isinstance(info, dict) and info.get("action_is_valid", True) is False:
                self.problem(
                    "expert",
                    "the env rejected the expert's own action.",
                    f"seed={seed}, turn {turn}, response {snippet(repr(response))}",
                )
                return info, False, False
            if terminated or truncated:
                return info, True, bool(terminated)
        return info, False, False

    def check_expert(self) -> None:
        probe = self.fresh()
        if not callable(getattr(probe.unwrapped, "expert_action", None)):
            self.report.warnings.append("no expert_action(): solvability not checked")
            return
        for ep in range(self.episodes):
            env = self.fresh()
            seed = self.seed + ep
            cap = self.turn_cap(env)
            info, ended, _ = self._play_expert(env, seed, cap)
            env.close()
            if info is None:
                continue
            self.report.expert_episodes += 1
            success = info.get("success") if isinstance(info, dict) else None
            if success is True or success is np.True_:
                self.report.expert_successes += 1
            elif isinstance(success, (bool, np.bool_)) or success is None:
                state = "ended" if ended else f"did not end within {cap} turns"
                self.problem(
                    "expert",
                    f"following expert_action() {state} without success.",
                    f"seed={seed}: info={snippet(repr(info), 160)}",
                )
            # a non-bool success was reported by check_info as a wrong type; not also as a failure

    def check_after_end(self) -> None:
        """Steps after the end (terminated, or truncated by the turn limit) do not raise, keep the
        episode over and pay nothing."""
        env = self.fresh()
        cap = self.turn_cap(env)
        if callable(getattr(env.unwrapped, "expert_action", None)):
            seed = self.seed
            _, ended, terminated = self._play_expert(env, seed, cap)
            if ended:
                self._steps_past_end(
                    env,
                    f"after the expert's episode seed={seed} was {'terminated' if terminated else 'truncated'}",
                    strict=terminated,
                )
        spec = getattr(env, "spec", None)
        if spec is not None and spec.max_episode_steps:
            seed = self.seed + 1
            env.reset(seed=seed)
            for turn in range(int(spec.max_episode_steps)):
                result = self.step("after_end", f"seed={seed}, invalid turn {turn + 1}", env, "")
                if result is None:
                    break
                if result[2] or result[3]:
                    self._steps_past_end(
                        env, f"after seed={seed} ended at turn {turn + 1} (invalid turns only)", strict=bool(result[2])
                    )
                    break
        env.close()

    def _steps_past_end(self, env: gym.Env, label: str, *, strict: bool) -> None:
        """Two steps past the end. After ``terminated`` (``strict``) the episode must stay over and
        pay nothing; after truncation by Gymnasium's ``TimeLimit`` the inner env cannot know the
        limit, so playing on is only a warning."""
        expert = getattr(env.unwrapped, "expert_action", None)
        for k in range(2):
            response = "<answer>x</answer>"
            if k == 0 and callable(expert):
                try:
                    response = expert()
                except Exception as exc:
                    self.problem(
                        "after_end",
                        f"expert_action() raised {type(exc).__name__} after the end; return any response instead.",
                        label,
                    )
            result = self.step(
                "after_end", f"{label}, step {k + 1} past the end, response {snippet(repr(response))}", env, response
            )
            if result is None:
                return
            _, reward, terminated, truncated, _ = result
            if not (terminated or truncated):
                self.problem(
                    "after_end",
                    "a step after the end returned terminated=False and truncated=False; keep the episode over until reset().",
                    label,
                )
            if isinstance(reward, Real) and reward != 0:
                message = (
                    "a step after the end paid a nonzero reward (the episode keeps playing); return 0.0 until reset()."
                )
                if strict:
                    self.problem("after_end", message, f"{label}: reward={reward!r}")
                elif not any(w.startswith("after truncation") for w in self.report.warnings):
                    self.report.warnings.append(
                        f"after truncation by the turn limit a further step plays on ({label}: reward={reward!r}); expected of "
                        "any env under Gymnasium's TimeLimit, which the inner env cannot see: call reset() after truncated "
                        "(docs/turn-contract.md, Turn limit). Not a violation."
                    )

    def check_render(self) -> None:
        env = self.fresh()
        if "render_fps" not in env.metadata:
            self.problem("render", "metadata has no 'render_fps'.")
        if "ansi" not in env.metadata.get("render_modes", []):
            self.report.warnings.append("render_mode 'ansi' not declared")
        elif getattr(env.unwrapped, "render_mode", None) == "ansi":
            env.reset(seed=self.seed)
            text = env.render()
            if not isinstance(text, str):
                self.problem("render", f"render() in 'ansi' mode returned {type(text).__name__}, expected str.")
        env.close()


def _holds_char(space: Text, c: str) -> bool:
    """Whether ``space`` accepts character ``c`` (as a string of its minimum length)."""
    return space.contains(c * max(int(space.min_length), 1))


def _why_outside(space: Any, obs: str) -> tuple[str, str]:
    """Why ``obs`` is not in ``space`` (the same text for the same fault) and where in ``obs``."""
    if isinstance(space, Text):
        if len(obs) > space.max_length:
            return f"longer than max_length {space.max_length}", f"length {len(obs)}"
        if len(obs) < space.min_length:
            return f"shorter than min_length {space.min_length}", f"length {len(obs)}"
        index = next((i for i, c in enumerate(obs) if not _holds_char(space, c)), None)
        if index is not None:
            c = obs[index]
            detail = f"character {c!r} at index {index} of {snippet(repr(obs))}"
            if frozenset(getattr(space, "character_set", ())) == frozenset(alphanumeric):
                return (
                    "a character is outside the space's charset, which is Gymnasium's default Text charset "
                    "of ASCII letters and digits only; use agentgym_turn.core.TurnText(max_length), whose charset "
                    "is all Unicode text",
                    detail,
                )
            return "a character is outside the space's charset", detail
    return f"not in {space!r}", snippet(repr(obs))


def _has_type(value: Any, expected: type | tuple[type, ...]) -> bool:
    if expected is bool:
        return isinstance(value, (bool, np.bool_))
    if expected is int:
        return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))
    if expected is float:
        return isinstance(value, Real) and not isinstance(value, (bool, np.bool_)) and math.isfinite(float(value))
    return isinstance(value, expected)


def _last_frames(exc: BaseException, n: int = 2) -> str:
    """``file:line in function`` of the innermost ``n`` frames of ``exc``'s traceback."""
    frames = traceback.extract_tb(exc.__traceback__)[-n:]
    return " <- ".join(f"{f.filename.rsplit('/', 1)[-1]}:{f.lineno} in {f.name}" for f in reversed(frames))


def _factory_for(source: EnvSource) -> tuple[Callable[[], gym.Env], str, gym.Env | None]:
    if isinstance(source, str):
        return (lambda: gym.make(source)), source, None
    if isinstance(source, gym.Env):
        spec = source.spec
        if spec is not None:
            return (lambda: gym.make(spec)), spec.id, source
        template = copy.deepcopy(source)  # before anyone touches it
        return (lambda: copy.deepcopy(template)), type(source.unwrapped).__name__, source
    if callable(source):
        return source, getattr(source, "__name__", "factory"), None
    raise TypeError(f"check_turn_env takes an env, an env id or a zero-argument factory, got {type(source).__name__}.")


def check_turn_env(
    env: EnvSource,
    *,
    seed: int = 0,
    episodes: int = 3,
    fuzz_actions: int = 32,
    max_turns: int | None = None,
    raise_on_problem: bool = True,
) -> CheckReport:
    """Check a text env against the turn contract; report every violation at once.

    Args:
        env: An env instance (fresh copies come from its spec, or from a deep copy taken
            before any check runs), a registered id, or a zero-argument factory.
        seed: First seed; episodes use ``seed, seed + 1, ...``.
        episodes: Episodes played by ``expert_action()`` (when the env has one); each must end
            with ``info["success"]``.
        fuzz_actions: Random adversarial responses stepped on top of a fixed corpus, and as many
            near-misses of ``expert_action()`` (valid syntax, bad arguments) when there is one.
        max_turns: Turn cap for expert episodes; defaults to ``spec.max_episode_steps``, else 100.
        raise_on_problem: Raise :class:`TurnContractError` listing every problem (default);
            otherwise return the report.

    Checks: Gymnasium's ``check_env`` on the unwrapped env; text spaces over printable Unicode;
    ``reset``/``step`` types, observations inside the space and the common ``info`` keys and
    types; that no response (empty, huge, unicode, surrogates, tag soup) raises; determinism of
    two fresh instances and of a re-reset with the same seed (with the global ``random`` and
    ``numpy.random`` states set differently before each run, so an env that draws from them is
    caught); a pickle round-trip mid-episode; expert success within the turn limit, with the
    expert's own steps type-checked like every other step; the same ``info`` key set on every
    reset and step; steps after the end (terminated, and truncated by the turn limit) that do not
    raise, keep the episode over and pay nothing; ``render("ansi")``. Where the env declares them
    (``TurnEnv`` does): ``exit_status`` from the vocabulary and ``reward_valid`` false exactly for faults,
    ``reward_components`` with the declared names summing to the reward, no ``env_error``,
    ``snapshot``/``restore``/``fork`` continuing exactly (RNG included), and ``state_key``s that come
    back naming states with the same future.

    Each distinct violation is reported once, with where it first happened and how many times
    it happened (:class:`Violation`).
    """
    report = _Checker(env, seed, episodes, fuzz_actions, max_turns).run()
    if raise_on_problem and not report.ok:
        raise TurnContractError(report)
    return report
