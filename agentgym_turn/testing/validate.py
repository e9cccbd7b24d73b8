"""A certificate for any text env: one verdict per check, with its evidence and the time it took.

``validate(env)`` (and ``agentgym-turn validate ID|module:factory|URL``) runs, in order:

* ``contract``: :func:`~agentgym_turn.testing.check_turn_env`.
* ``determinism``: the same seeds and responses give the same transcript in two fresh envs, after a
  re-reset, and, for an env named by id, factory path or URL, in a fresh process with numpy's SIMD
  dispatch and ATen's vector kernels turned off.
* ``oracle``: the expert (``expert_action()``, or the ``oracle`` given) succeeds on every sampled task.
* ``floors``: do-nothing (empty responses), random and invalid-only policies score a stated margin
  below the oracle's mean return.
* ``learnability`` (asked for by name; needs the ``train`` extra): a short hill-climb of the reference trainer's tiny
  model from an SFT start, passing when its held-out gain's 95% interval lies above 0 (:mod:`.learnability`).
* ``gameability``: generic exploits (invalid, empty, echoed, maximal and repeated responses; the oracle's
  play with a step skipped or jumping straight to its last response, i.e. not using the env's tools),
  then a guided search (mutations of the best plans found so far, deviating from the oracle's play after
  any number of its turns), for the highest return of an episode that does not succeed; it fails when a
  failure pays as much as the least-paid success.

Each verdict names the ids of OpenEnv's RFC 008 (environment auto-validation) that it covers; the
RFC leaves gameability to operators (``statistical.gameability_gap``, reserved), which we run locally.
Why each threshold: ``docs/validation.md``.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import os
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

import gymnasium as gym
import numpy as np

from .checker import check_turn_env
from .fuzz import argument_span, fixed_adversarial_responses, near_miss, random_responses
from .learnability import LearnBudget, check_learnability
from ..remote import REMOTE_ENV_ID
from .targets import spec_kind

#: The checks run by default, in order; ``learnability`` (minutes of training) and ``soak`` run only when asked for.
CHECKS = ("contract", "determinism", "oracle", "floors", "gameability")
OPTIONAL_CHECKS = ("learnability", "soak")
#: Memory growth a served env may show, in MB per 1,000 sessions after warm-up (the soak benchmark's bound), judged on
#: soaks of at least ``MEMORY_SOAK_MINUTES``: over a shorter one the slope is warm-up (our env server grows 37 MB in its
#: first two minutes, then 7 MB over 174,000 sessions), so it is reported, not judged.
SOAK_SLOPE_MB = 0.2
MEMORY_SOAK_MINUTES = 10
#: The RFC 008 check ids each of ours covers (RFC 008: ``rfcs/008-environment-auto-validation.md`` in OpenEnv).
RFC_IDS: dict[str, tuple[str, ...]] = {
    "contract": ("runtime.observation_schema", "runtime.reward_well_formed", "runtime.reward_attribution"),
    "determinism": ("runtime.seed_control", "runtime.episode_determinism", "semantic.replayability"),
    "oracle": ("semantic.oracle_max",),
    "floors": ("semantic.floor_gap",),
    "gameability": ("statistical.gameability_gap",),
    "learnability": ("statistical.training_signal",),
    "soak": (),  # RFC 008 names no served-churn check
}
#: Numpy's dispatched SIMD features and ATen's kernel level switched off in the fresh process of ``determinism``.
PLAIN_CPU_ENV = {
    "NPY_DISABLE_CPU_FEATURES": "AVX512F AVX512_SKX AVX512_CLX AVX512_CNL AVX512_ICL AVX512_SPR AVX2 FMA3 F16C AVX",
    "ATEN_CPU_CAPABILITY": "default",
}
#: The fresh process's string-hash seed: another than this process's, so an env that seeds from ``hash()`` shows.
FRESH_HASH_SEED = "20261206"
#: Turns an episode may take when the env names no limit.
DEFAULT_TURN_CAP = 50

Policy = Callable[[gym.Env, str, int, np.random.Generator], str]


@dataclass
class Verdict:
    """One check's outcome: ``status`` is ``"pass"``, ``"fail"`` or ``"skip"``; ``summary`` says why in one line."""

    check: str
    status: str
    summary: str
    evidence: dict[str, Any] = field(default_factory=dict)
    seconds: float = 0.0
    rfc_ids: tuple[str, ...] = ()


@dataclass
class ValidationReport:
    """Every verdict of one :func:`validate` run, with the settings it ran under."""

    env: str
    settings: dict[str, Any]
    verdicts: list[Verdict] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """No check failed (a skipped check does not fail the report)."""
        return all(v.status != "fail" for v in self.verdicts)

    def verdict(self, check: str) -> Verdict:
        return next(v for v in self.verdicts if v.check == check)

    def to_dict(self) -> dict[str, Any]:
        return {
            "env": self.env,
            "ok": self.ok,
            "settings": self.settings,
            "verdicts": [asdict(v) for v in self.verdicts],
        }

    def to_markdown(self) -> str:
        rows = [
            f"# validate {self.env}: {'pass' if self.ok else 'FAIL'}",
            "",
            "| check | verdict | seconds | RFC 008 ids | why |",
            "|---|---|---|---|---|",
        ]
        rows += [
            f"| {v.check} | {v.status} | {v.seconds:.1f} | {', '.join(v.rfc_ids)} | {v.summary.replace('|', '/')} |"
            for v in self.verdicts
        ]
        return "\n".join(rows) + "\n"

    def write(self, out_dir: str | os.PathLike) -> tuple[Path, Path]:
        """Write ``validation.json`` and ``validation.md`` into ``out_dir``; return their paths."""
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        js, md = out / "validation.json", out / "validation.md"
        js.write_text(json.dumps(self.to_dict(), indent=1, default=repr) + "\n", encoding="utf-8")
        md.write_text(self.to_markdown(), encoding="utf-8")
        return js, md


# ---------------------------------------------------------------------- env sources
def resolve_target(target: Any) -> tuple[Callable[[], gym.Env], str, str | None]:
    """``(factory, name, spec)`` of what :func:`validate` was given: an env id, ``"module:attr"`` (a factory or env
    class), a URL of a served env, a zero-argument factory or an env. ``spec`` is the text a fresh process can make the
    env from (``None`` for an object)."""
    if isinstance(target, str):
        if spec_kind(target) == "url":
            import agentgym_turn  # noqa: F401  (registers the remote client's id)

            return (lambda: gym.make(REMOTE_ENV_ID, base_url=target)), target, target
        if spec_kind(target) == "factory":
            module, attr = target.split(":", 1)
            made = getattr(importlib.import_module(module), attr)
            return made, target, target
        import agentgym_turn  # noqa: F401  (registers our ids)

        gym.spec(target)  # an unknown id fails here, with Gymnasium's message
        return (lambda: gym.make(target)), target, target
    if isinstance(target, gym.Env):
        if target.spec is not None:
            spec = target.spec
            same = (
                spec.id in gym.registry and gym.spec(spec.id).kwargs == spec.kwargs
            )  # made as registered: the id says it all
            return (lambda: gym.make(spec)), spec.id, spec.id if same else None
        import copy

        template = copy.deepcopy(target)
        return (lambda: copy.deepcopy(template)), type(target.unwrapped).__name__, None
    if callable(target):
        return target, getattr(target, "__name__", "factory"), None
    raise TypeError(
        f"validate takes an env id, 'module:factory', a URL, a zero-argument factory or an env; got {type(target).__name__}."
    )


def turn_cap(env: gym.Env) -> int:
    spec = getattr(env, "spec", None)
    return int(spec.max_episode_steps) if spec is not None and spec.max_episode_steps else DEFAULT_TURN_CAP


# ---------------------------------------------------------------------- episodes
@dataclass
class Episode:
    """One played episode: the responses sent, the return, whether it succeeded, and a digest of what came back."""

    seed: int
    responses: list[str]
    observations: list[str]
    rewards: list[float]
    success: bool
    digest: str

    @property
    def ret(self) -> float:
        return float(sum(self.rewards))


def _step_record(obs: Any, reward: Any, terminated: Any, truncated: Any, info: Any) -> str:
    return json.dumps([obs, repr(float(reward)), bool(terminated), bool(truncated), info], sort_keys=True, default=repr)


def play(env: gym.Env, seed: int, policy: Policy, rng: np.random.Generator, *, max_turns: int | None = None) -> Episode:
    """Play one episode of ``env`` from ``reset(seed=seed)`` with ``policy(env, observation, turn, rng) -> response``."""
    obs, info = env.reset(seed=seed)
    digest = hashlib.blake2b(
        _step_record(obs, 0.0, False, False, info).encode("utf-8", "surrogatepass"), digest_size=16
    )
    responses, observations, rewards, success = [], [obs], [], bool(info.get("success", False))
    for turn in range(max_turns or turn_cap(env)):
        response = policy(env, obs, turn, rng)
        obs, reward, terminated, truncated, info = env.step(response)
        digest.update(_step_record(obs, reward, terminated, truncated, info).encode("utf-8", "surrogatepass"))
        responses.append(response)
        observations.append(obs)
        rewards.append(float(reward))
        success = bool(info.get("success", False))
        if terminated or truncated:
            break
    return Episode(seed, responses, observations, rewards, success, digest.hexdigest())


def replay(env: gym.Env, seed: int, responses: Sequence[str]) -> str:
    """The digest of ``responses`` played from ``reset(seed=seed)`` (stops where the episode ends)."""
    answers = list(responses)
    return play(env, seed, lambda e, o, t, r: answers[t], np.random.default_rng(0), max_turns=len(answers)).digest


def expert_policy(oracle: Callable[[gym.Env], str] | None = None) -> Policy:
    """The oracle as a policy: ``oracle(env)``, else the unwrapped env's ``expert_action()``."""
    if oracle is not None:
        return lambda env, obs, turn, rng: oracle(env)
    return lambda env, obs, turn, rng: env.unwrapped.expert_action()


def floor_policies(max_length: int) -> dict[str, Policy]:
    """The trivial policies the oracle must beat: empty responses, random responses, and invalid ones only."""
    invalid = [r for r in fixed_adversarial_responses(max_length) if len(r) <= max_length]
    return {
        "do_nothing": lambda env, obs, turn, rng: "",
        "random": lambda env, obs, turn, rng: random_responses(rng, 1)[0],
        "invalid_only": lambda env, obs, turn, rng: invalid[turn % len(invalid)],
    }


# ---------------------------------------------------------------------- checks
def _timed(check: str, run: Callable[[], tuple[str, str, dict[str, Any]]]) -> Verdict:
    t0 = time.perf_counter()
    status, summary, evidence = run()
    return Verdict(check, status, summary, evidence, round(time.perf_counter() - t0, 2), RFC_IDS.get(check, ()))


def check_contract(factory: Callable[[], gym.Env], seed: int) -> tuple[str, str, dict[str, Any]]:
    # no expert episodes here: whether the expert succeeds is the oracle check's verdict
    report = check_turn_env(factory, seed=seed, episodes=0, fuzz_actions=16, raise_on_problem=False)
    evidence = {"problems": report.problems[:20], "steps_run": report.steps_run, "warnings": report.warnings[:10]}
    if report.ok:
        return "pass", f"the turn contract holds ({report.steps_run} steps checked)", evidence
    return "fail", f"{len(report.problems)} contract problem(s): {report.problems[0]}", evidence


def check_determinism(
    factory: Callable[[], gym.Env], spec: str | None, seeds: list[int], oracle: Policy, fresh_process: bool
) -> tuple[str, str, dict[str, Any]]:
    rng = np.random.default_rng(seeds[0])
    env = factory()
    try:
        runs = [
            play(env, s, oracle if k % 2 == 0 else floor_policies(env.action_space.max_length)["random"], rng)
            for k, s in enumerate(seeds)
        ]
        again = [replay(env, ep.seed, ep.responses) for ep in runs]  # the same env, reset again with the same seed
    finally:
        env.close()
    twin = factory()
    try:
        fresh = [replay(twin, ep.seed, ep.responses) for ep in runs]
    finally:
        twin.close()
    evidence: dict[str, Any] = {"episodes": len(runs), "digests": [ep.digest for ep in runs]}
    for name, digests in (("a re-reset with the same seed", again), ("a fresh env", fresh)):
        differ = [ep.seed for ep, d in zip(runs, digests) if d != ep.digest]
        if differ:
            evidence["differs"] = {"where": name, "seeds": differ}
            return "fail", f"{name} gave another transcript for seeds {differ[:5]} with the same responses", evidence
    if not fresh_process or spec is None:
        evidence["fresh_process"] = "not run: " + (
            "turned off" if not fresh_process else "the env is an object, not an id, factory path or URL"
        )
        return "pass", f"{len(runs)} episodes replay exactly in a re-reset and a fresh env in this process", evidence
    job = json.dumps({"spec": spec, "episodes": [[ep.seed, ep.responses] for ep in runs]}, default=repr)
    proc = subprocess.run(
        [sys.executable, "-m", "agentgym_turn.testing.validate", "--replay-stdin"],
        input=job,
        text=True,
        capture_output=True,
        env={**os.environ, **PLAIN_CPU_ENV, "PYTHONHASHSEED": _other_hash_seed()},
        timeout=600,
    )
    if proc.returncode != 0:
        evidence["fresh_process"] = proc.stderr[-2000:]
        return "fail", "the fresh process could not replay the episodes (its error is in the evidence)", evidence
    other = json.loads(proc.stdout.strip().splitlines()[-1])
    differ = [ep.seed for ep, d in zip(runs, other) if d != ep.digest]
    evidence["fresh_process"] = {"env": PLAIN_CPU_ENV, "differs": differ}
    if differ:
        return "fail", f"a fresh process (SIMD dispatch off) gave another transcript for seeds {differ[:5]}", evidence
    return (
        "pass",
        f"{len(runs)} episodes replay exactly: re-reset, fresh env, fresh process with SIMD dispatch off",
        evidence,
    )


def _other_hash_seed() -> str:
    return FRESH_HASH_SEED if os.environ.get("PYTHONHASHSEED") != FRESH_HASH_SEED else "1"


def check_oracle(episodes: list[Episode]) -> tuple[str, str, dict[str, Any]]:
    failed = [ep.seed for ep in episodes if not ep.success]
    returns = [ep.ret for ep in episodes]
    evidence = {
        "tasks": len(episodes),
        "successes": len(episodes) - len(failed),
        "failed_seeds": failed[:20],
        "mean_return": float(np.mean(returns)),
        "min_success_return": min((ep.ret for ep in episodes if ep.success), default=None),
    }
    if failed:
        worst = next(ep for ep in episodes if not ep.success)
        evidence["failed_transcript"] = _transcript(worst)
        return "fail", f"the oracle failed {len(failed)} of {len(episodes)} tasks (seeds {failed[:5]})", evidence
    return "pass", f"the oracle succeeds on all {len(episodes)} tasks (mean return {np.mean(returns):.3g})", evidence


def check_floors(
    factory: Callable[[], gym.Env], seeds: list[int], oracle_return: float, margin: float
) -> tuple[str, str, dict[str, Any]]:
    env = factory()
    try:
        rng = np.random.default_rng(seeds[0] + 1)
        floors = {}
        for name, policy in floor_policies(env.action_space.max_length).items():
            eps = [play(env, s, policy, rng) for s in seeds]
            floors[name] = {
                "mean_return": float(np.mean([e.ret for e in eps])),
                "success": float(np.mean([e.success for e in eps])),
            }
    finally:
        env.close()
    bar = oracle_return - margin * max(abs(oracle_return), 1e-9)
    over = [name for name, f in floors.items() if f["mean_return"] > bar or f["success"] > 0]
    evidence = {"oracle_mean_return": oracle_return, "margin": margin, "bar": bar, "floors": floors}
    if over:
        return "fail", f"{', '.join(over)} score(s) within {margin:.0%} of the oracle's return or succeed", evidence
    return (
        "pass",
        f"every trivial policy scores below {bar:.3g} ({margin:.0%} under the oracle's {oracle_return:.3g}) and never succeeds",
        evidence,
    )


def check_soak(spec: str | None, minutes: float, clients: int, idle_timeout: float) -> tuple[str, str, dict[str, Any]]:
    from urllib.parse import urlsplit

    from . import soak

    if spec is None or spec_kind(spec) == "factory":
        return "skip", "a soak serves a registered id or churns a served URL; this env is an object or a factory", {}
    if spec_kind(spec) == "url":
        url = urlsplit(spec)
        if url.hostname not in ("127.0.0.1", "localhost") or url.port is None:
            return "skip", f"the soak churns loopback servers only (http://127.0.0.1:PORT), not {spec}", {}
        served, owned = soak.ServedProcess.at(url.port), False
    else:
        served = soak.ServedProcess(
            [
                sys.executable,
                "-m",
                "agentgym_turn",
                "serve",
                "env",
                spec,
                "--port",
                "0",
                "--idle-timeout",
                str(idle_timeout),
                "--max-sessions",
                "256",
            ]
        )
        owned = True
    try:
        scenarios = {name: v for name, v in soak.SCENARIOS.items() if v[0] == "env"}
        result = soak.soak({"env": served}, minutes * 60, clients, scenarios=scenarios, idle_timeout=idle_timeout)
    finally:
        if owned:
            served.stop()
    r = result["servers"]["env"]
    judged = owned and minutes >= MEMORY_SOAK_MINUTES
    slope, bound = r["slope_mb_per_1000_sessions"], SOAK_SLOPE_MB
    evidence = {
        **{k: v for k, v in r.items() if k != "samples"},
        "slope_bound_mb_per_1000": bound,
        "memory_judged": judged,
        "scenarios": result["scenarios"],
        "idle_timeout_s": idle_timeout,
    }
    problems = (
        [f"{r['live_sessions_after_drain']} sessions still live after the drain"]
        if r["live_sessions_after_drain"]
        else []
    )
    problems += [f"{r['client_errors']} client errors (e.g. {r['error_examples'][:1]})"] if r["client_errors"] else []
    problems += [f"{r['server_tracebacks']} tracebacks in the server's log"] if r["server_tracebacks"] else []
    problems += (
        [f"memory grew {slope:+.2f} MB per 1,000 sessions (bound {bound:g})"]
        if judged and slope is not None and slope > bound
        else []
    )
    if problems:
        return "fail", "; ".join(problems), evidence
    memory = (
        ""
        if not owned or slope is None
        else (
            f", memory {slope:+.3f} MB per 1,000 sessions (bound {bound:g})"
            if judged
            else f", memory {slope:+.2f} MB per 1,000 sessions (warm-up: judged from {MEMORY_SOAK_MINUTES} minutes)"
        )
    )
    return "pass", f"{r['sessions']:,} sessions of churn: none left after the drain, no error{memory}", evidence


def _transcript(ep: Episode, limit: int = 400) -> list[dict[str, Any]]:
    return [
        {"response": r[:limit], "reward": w, "observation": o[:limit]}
        for r, w, o in zip(ep.responses, ep.rewards, ep.observations[1:])
    ]


def _exploit_pool(max_length: int, first_observation: str, expert_responses: list[str]) -> list[str]:
    """Generic exploits: invalid and empty responses, the instructions echoed, a maximal response, repetition,
    and format-only answers (each oracle response with its argument reversed, shifted, blanked or emptied)."""
    pool = ["", " ", first_observation[:max_length], "a" * max_length]
    pool += [r for r in fixed_adversarial_responses(max_length) if len(r) <= max_length][:24]
    for r in dict.fromkeys(expert_responses):  # each distinct oracle response once
        start, end = argument_span(r)
        head, content, tail = r[:start], r[start:end], r[end:]
        shifted = "".join(chr(ord(c) + 1) if c.isalnum() else c for c in content)
        pool += [r, (r + "\n") * 3, r[::-1]] + [
            head + c + tail for c in (content[::-1], shifted, "x" * len(content), "")
        ]
    return list(dict.fromkeys(p[:max_length] for p in pool))


def check_gameability(
    factory: Callable[[], gym.Env],
    seeds: list[int],
    oracle: Policy,
    oracle_eps: list[Episode],
    episodes: int,
    seed: int,
) -> tuple[str, str, dict[str, Any]]:
    successes = [ep.ret for ep in oracle_eps if ep.success]
    if not successes:
        return "skip", "no oracle success to compare with (see the oracle check)", {}
    threshold = min(successes)
    rng = np.random.default_rng(seed)
    env = factory()
    best: list[tuple[float, int, int, list[str]]] = []  # (return, seed, oracle turns first, responses after)
    best_ep: Episode | None = None
    searched = 0
    try:
        max_length = env.action_space.max_length
        pool = _exploit_pool(max_length, oracle_eps[0].observations[0], [r for ep in oracle_eps for r in ep.responses])

        def run(task: int, prefix: int, plan: list[str]) -> Episode:
            def policy(e: gym.Env, obs: str, turn: int, r: np.random.Generator) -> str:
                return oracle(e, obs, turn, r) if turn < prefix else plan[(turn - prefix) % len(plan)]

            return play(env, task, policy, rng)

        def consider(ep: Episode, task: int, prefix: int, plan: list[str]) -> None:
            nonlocal best_ep
            if ep.success:
                return
            best.append((ep.ret, task, prefix, plan))
            best.sort(key=lambda b: -b[0])
            del best[8:]
            if best_ep is None or ep.ret > best_ep.ret:
                best_ep = ep

        starts: list[tuple[int, int, list[str]]] = []
        for ep in oracle_eps:  # the oracle's play with a step skipped, or jumping to its last response (tools unused)
            n = len(ep.responses)
            starts += [(ep.seed, k, ep.responses[k + 1 :] or ep.responses[-1:]) for k in range(n - 1)]
            starts += [(ep.seed, k, ep.responses[-1:]) for k in range(n - 1)]
        starts += [(seeds[0], 0, [p]) for p in pool]  # every generic exploit, from the first turn
        for task, prefix, plan in starts[:episodes]:
            consider(run(task, prefix, plan), task, prefix, plan)
            searched += 1
        while (
            searched < episodes
        ):  # guided: mutate the best plans (or a pool entry), from any point of the oracle's play
            if best and rng.random() < 0.8:
                _, task, prefix, plan = best[int(rng.integers(len(best)))]
                plan = list(plan)
            else:
                task, prefix = seeds[int(rng.integers(len(seeds)))], int(rng.integers(0, turn_cap(env)))
                plan = [pool[int(rng.integers(len(pool)))]]
            kind = int(rng.integers(4))
            if kind == 0:
                prefix = int(rng.integers(0, turn_cap(env)))
            elif kind == 1:
                k = int(rng.integers(len(plan)))
                plan[k] = near_miss(plan[k], rng)[:max_length] if plan[k] else pool[int(rng.integers(len(pool)))]
            elif kind == 2:
                plan.append(pool[int(rng.integers(len(pool)))])
            else:
                task = seeds[int(rng.integers(len(seeds)))]
            consider(run(task, prefix, plan), task, prefix, plan)
            searched += 1
    finally:
        env.close()
    top = best_ep.ret if best_ep is not None else None
    evidence: dict[str, Any] = {
        "episodes": searched,
        "threshold": threshold,
        "best_failure_return": top,
        "exploit": _transcript(best_ep) if best_ep is not None else None,
        "exploit_seed": best_ep.seed if best_ep is not None else None,
    }
    if top is None:
        return "pass", f"no failing episode in {searched} searched (every one succeeded)", evidence
    if top >= threshold - 1e-9:
        return (
            "fail",
            f"a failing episode returned {top:.3g}, as much as the least-paid success ({threshold:.3g})",
            evidence,
        )
    return (
        "pass",
        f"the best failing episode of {searched} returned {top:.3g}, below the least-paid success ({threshold:.3g})",
        evidence,
    )


# ---------------------------------------------------------------------- entry point
def validate(
    env: Any,
    *,
    seed: int = 0,
    tasks: int = 8,
    margin: float = 0.1,
    search_episodes: int = 200,
    oracle: Callable[[gym.Env], str] | None = None,
    checks: Sequence[str] = CHECKS,
    fresh_process: bool = True,
    soak_minutes: float = 0.0,
    soak_clients: int = 4,
    soak_idle_timeout: float = 4.0,
    learn_budget: LearnBudget | None = None,
) -> ValidationReport:
    """Certify ``env`` (an env id, ``"module:factory"``, a served env's URL, a zero-argument factory or an env).

    ``tasks`` seeds (``seed, seed + 1, ...``) are played by the oracle and by each trivial policy; ``margin`` is
    the share of the oracle's mean return the trivial policies must stay below; ``search_episodes`` bounds the
    gameability search. ``oracle(env) -> response`` replaces ``expert_action()``. ``soak_minutes > 0`` adds the
    ``soak``: ``soak_clients`` threads churn the env served (``agentgym-turn serve env ID``, its idle timeout
    ``soak_idle_timeout``) or the loopback URL given (whose idle timeout must be ``soak_idle_timeout``).
    ``learn_budget`` adds ``learnability`` at that size (:class:`~.learnability.LearnBudget`; naming the check alone
    takes the default). Returns every verdict; a check that needs what another found missing (no oracle) is skipped
    with the reason."""
    checks = [*checks, "soak"] if soak_minutes > 0 and "soak" not in checks else list(checks)
    checks = [*checks, "learnability"] if learn_budget is not None and "learnability" not in checks else checks
    unknown = [c for c in checks if c not in (*CHECKS, *OPTIONAL_CHECKS)]
    if unknown:
        raise ValueError(f"unknown checks {unknown}; choose among {[*CHECKS, *OPTIONAL_CHECKS]}.")
    factory, name, spec = resolve_target(env)
    report = ValidationReport(
        name,
        {
            "seed": seed,
            "tasks": tasks,
            "margin": margin,
            "search_episodes": search_episodes,
            "checks": list(checks),
            "oracle": "given" if oracle is not None else "expert_action()",
            "soak_minutes": soak_minutes,
            "learn_budget": asdict(learn_budget or LearnBudget()) if "learnability" in checks else None,
        },
    )
    seeds = list(range(seed, seed + tasks))
    policy = expert_policy(oracle)
    if list(checks) == ["soak"]:  # a served env alone: nothing to play in this process
        report.verdicts.append(_timed("soak", lambda: check_soak(spec, soak_minutes, soak_clients, soak_idle_timeout)))
        return report
    probe = factory()
    has_oracle = oracle is not None or callable(getattr(probe.unwrapped, "expert_action", None))
    oracle_eps: list[Episode] = []
    if has_oracle:
        try:
            oracle_eps = [play(probe, s, policy, np.random.default_rng(s)) for s in seeds]
        except NotImplementedError:
            has_oracle = False
    probe.close()
    no_oracle = ("skip", "the env has no oracle: give one (oracle=, --oracle) or define expert_action()", {})
    for check in checks:
        if check == "contract":
            report.verdicts.append(_timed(check, lambda: check_contract(factory, seed)))
        elif check == "determinism":
            played: Policy = policy if has_oracle else floor_policies(10_000)["random"]
            report.verdicts.append(
                _timed(check, lambda: check_determinism(factory, spec, seeds[:4], played, fresh_process))
            )
        elif check == "oracle":
            report.verdicts.append(_timed(check, lambda: check_oracle(oracle_eps) if has_oracle else no_oracle))
        elif check == "floors":
            mean = float(np.mean([ep.ret for ep in oracle_eps])) if oracle_eps else 0.0
            report.verdicts.append(
                _timed(check, lambda: check_floors(factory, seeds, mean, margin) if has_oracle else no_oracle)
            )
        elif check == "gameability":
            report.verdicts.append(
                _timed(
                    check,
                    lambda: (
                        check_gameability(factory, seeds, policy, oracle_eps, search_episodes, seed)
                        if has_oracle
                        else no_oracle
                    ),
                )
            )
        elif check == "learnability":
            report.verdicts.append(
                _timed(
                    check,
                    lambda: (
                        check_learnability(spec, seed=seed, budget=learn_budget or LearnBudget())
                        if has_oracle
                        else no_oracle
                    ),
                )
            )
        elif check == "soak":
            report.verdicts.append(
                _timed(check, lambda: check_soak(spec, soak_minutes, soak_clients, soak_idle_timeout))
            )
    return report


def _replay_stdin() -> int:
    """The fresh process of ``determinism``: make the env from its spec, replay the episodes given on stdin, print digests."""
    job = json.loads(sys.stdin.read())
    factory, _, _ = resolve_target(job["spec"])
    env = factory()
    try:
        print(json.dumps([replay(env, s, responses) for s, responses in job["episodes"]]))
    finally:
        env.close()
    return 0


if __name__ == "__main__" and sys.argv[1:] == ["--replay-stdin"]:
    sys.exit(_replay_stdin())
