"""OpenEnv's own server beside ours: one env behind OpenEnv's ``create_app`` and behind ``agentgym-turn serve env``,
one client, one load, interleaved.

    .venv/bin/python benchmarks/openenv_server.py --openenv-python OPENENV_VENV/bin/python
    .venv/bin/python benchmarks/openenv_server.py --openenv-python ... --only TurnSokoban-v0 --sessions 64 128 --seconds 3

OpenEnv is not a dependency of this project. Install it in a separate virtual environment together with the
project's base install (the envs it serves), for example ``python -m venv /tmp/openenv &&
/tmp/openenv/bin/pip install openenv==0.10.0 -e .``, and point ``--openenv-python`` at that environment's Python.
Run by it as ``openenv_server.py serve ID --port P``, this script wraps ``gymnasium.make(ID)`` in an OpenEnv
``Environment`` (action ``{"message": str}``; observation ``text``, ``terminated``, ``truncated``, ``info``, ``reward``,
``done``: the fields our server sends, the env's ``info`` as it returns it) and serves it with OpenEnv's ``create_app``
on uvicorn with uvicorn's defaults, as OpenEnv's server template does (``uvicorn.run(app, host, port)``; that
environment has uvloop and httptools, as ours does). OpenEnv runs each session's env calls in a thread of its own.

The harness is ``benchmarks/served_capacity.py``'s: both servers pinned to core 0 (both started, one loaded at a
time), the clients pinned to core 1, one WebSocket session per simulated rollout worker playing the expert's recorded
episodes back to back with no think time. At each concurrency level each server plays ``--rounds`` rounds of
``--seconds``, the two alternating and taking turns to go first, after an unmeasured warm-up of each. A server's p50, p99 and steps/s at a level are the
medians of its rounds; its sessions per core is the largest level whose p99 stays under ``--slo-ms`` with no error
frame. The result goes to ``benchmarks/results/openenv_server.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
from typing import Any

SERVERS = ("agentgym-turn", "openenv")
#: Seconds of unmeasured play at the first level before the rounds: a server's first turns build its lazy parts.
WARM_UP_S = 2.0


def openenv_app(env_id: str, max_sessions: int) -> Any:
    """OpenEnv's FastAPI app (``create_app``) serving ``gymnasium.make(env_id)``; needs OpenEnv installed."""
    import uuid

    import gymnasium as gym
    from openenv.core.env_server.http_server import create_app
    from openenv.core.env_server.interfaces import Environment
    from openenv.core.env_server.types import Action, Observation, State

    import agentgym_turn  # noqa: F401  (registers the ids)

    ansi = "ansi" in gym.spec(env_id).kwargs.get("render_modes", ("ansi",))

    class TurnTextAction(Action):
        message: str

    class TurnTextObservation(Observation):
        text: str = ""
        terminated: bool = False
        truncated: bool = False
        info: dict[str, Any] = {}

    class TurnTextEnvironment(Environment):
        SUPPORTS_CONCURRENT_SESSIONS = True

        def __init__(self) -> None:
            super().__init__()
            self._env = gym.make(env_id, render_mode="ansi") if ansi else gym.make(env_id)
            self._state = State(episode_id=None, step_count=0)

        def reset(self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any) -> TurnTextObservation:
            text, info = self._env.reset(seed=seed)
            self._state = State(episode_id=episode_id or uuid.uuid4().hex, step_count=0)
            return TurnTextObservation(text=text, info=info)

        def step(self, action: TurnTextAction, timeout_s: float | None = None, **kwargs: Any) -> TurnTextObservation:
            text, reward, terminated, truncated, info = self._env.step(action.message)
            self._state.step_count += 1
            return TurnTextObservation(
                text=text,
                terminated=terminated,
                truncated=truncated,
                info=info,
                reward=float(reward),
                done=terminated or truncated,
            )

        @property
        def state(self) -> State:
            return self._state

        def close(self) -> None:
            self._env.close()

    return create_app(
        TurnTextEnvironment, TurnTextAction, TurnTextObservation, env_name=env_id, max_concurrent_envs=max_sessions
    )


def serve_openenv(argv: list[str]) -> int:
    """``openenv_server.py serve ID --port P``: OpenEnv's server of ``ID`` on 127.0.0.1 until terminated."""
    import uvicorn

    p = argparse.ArgumentParser(prog="openenv_server.py serve")
    p.add_argument("env_id")
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--max-sessions", type=int, default=1024)
    args = p.parse_args(argv)
    uvicorn.run(openenv_app(args.env_id, args.max_sessions), host="127.0.0.1", port=args.port, log_level="warning")
    return 0


def _median_row(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    """One level of one server: the medians of its rounds (and every round's p99)."""
    med = lambda key: statistics.median(r[key] for r in rounds)  # noqa: E731
    return {
        "sessions": rounds[0]["sessions"],
        "p50_ms": med("p50_ms"),
        "p99_ms": med("p99_ms"),
        "steps_per_s": med("steps_per_s"),
        "server_cpu": med("server_cpu"),
        "client_cpu": med("client_cpu"),
        "errors": sum(r["errors"] for r in rounds),
        "round_p99_ms": [r["p99_ms"] for r in rounds],
    }


def summarise(levels: dict[str, list[list[dict[str, Any]]]], slo_ms: float) -> dict[str, Any]:
    """Per server: its median rows and sessions per core; and ours / OpenEnv's steps/s at each level."""
    out: dict[str, Any] = {}
    for name in SERVERS:
        rows = [_median_row(rounds) for rounds in levels[name]]
        within = [r for r in rows if r["p99_ms"] <= slo_ms and not r["errors"]]
        out[name] = {"levels": rows, "sessions_per_core": max((r["sessions"] for r in within), default=0)}
    out["steps_per_s_ratio"] = [
        a["steps_per_s"] / b["steps_per_s"] if b["steps_per_s"] else None
        for a, b in zip(out[SERVERS[0]]["levels"], out[SERVERS[1]]["levels"])
    ]
    return out


def measure(
    env_id: str, openenv_python: str, levels: list[int], seconds: float, rounds: int, slo_ms: float
) -> dict[str, Any]:
    """Both servers of ``env_id``, every level, ``rounds`` alternating rounds each."""
    from benchmarks import served_capacity as sc
    from benchmarks.remote import record_episodes

    episodes = record_episodes(env_id, list(range(32)))
    cores = sorted(os.sched_getaffinity(0))
    server_core, client_core = (cores[0], cores[1]) if len(cores) >= 2 else (None, None)
    port = sc.free_port()
    env = {**os.environ, "PYTHONPATH": str(sc.common.ROOT)}
    started = {"agentgym-turn": sc.start_server(env_id, server_core)}
    try:
        started["openenv"] = sc.launch(
            [openenv_python, __file__, "serve", env_id, "--port", str(port)],
            port,
            server_core,
            f"OpenEnv's {env_id} server",
            env=env,
        )
        saved = os.sched_getaffinity(0)
        if client_core is not None:
            os.sched_setaffinity(0, {client_core})
        try:
            for name in SERVERS:  # unmeasured: each server's first sessions build what it builds lazily
                proc, url = started[name]
                asyncio.run(sc.measure_level(url, episodes, levels[0], WARM_UP_S, proc.pid))
            played: dict[str, list[list[dict[str, Any]]]] = {name: [] for name in SERVERS}
            for n in levels:
                for name in SERVERS:
                    played[name].append([])
                for r in range(rounds):
                    for name in SERVERS if r % 2 == 0 else SERVERS[::-1]:
                        proc, url = started[name]
                        row = asyncio.run(sc.measure_level(url, episodes, n, seconds, proc.pid))
                        played[name][-1].append(row)
                        print(
                            f"  {env_id} {n} sessions, round {r + 1}, {name}: p50 {row['p50_ms']:.1f} "
                            f"p99 {row['p99_ms']:.1f} ms, {row['steps_per_s']:,.0f} steps/s, "
                            f"server {row['server_cpu']:.0%}, errors {row['errors']}",
                            flush=True,
                        )
        finally:
            os.sched_setaffinity(0, saved)
    finally:
        for proc, _ in started.values():
            sc.stop(proc)
    return {"server_core": server_core, "client_core": client_core, **summarise(played, slo_ms)}


def markdown(results: dict[str, Any]) -> str:
    """The docs table of a results file."""
    slo = results["slo_ms"]
    lines = [
        f"| id | server | sessions per core (p99 < {slo:.0f} ms) | sessions: p50 / p99 ms, steps/s (server core busy) |",
        "|---|---|---:|---|",
    ]
    for env_id, r in results["ids"].items():
        for name, label in (("agentgym-turn", "ours"), ("openenv", "OpenEnv's `create_app`")):
            cells = "; ".join(
                f"{row['sessions']}: {row['p50_ms']:.1f} / {row['p99_ms']:.1f}, {row['steps_per_s']:,.0f} ({row['server_cpu']:.0%})"
                for row in r[name]["levels"]
            )
            lines.append(f"| {env_id} | {label} | {r[name]['sessions_per_core']} | {cells} |")
        ratios = "; ".join(
            f"{row['sessions']}: {x:.2f}x" for row, x in zip(r["agentgym-turn"]["levels"], r["steps_per_s_ratio"]) if x
        )
        lines.append(f"| {env_id} | ours / OpenEnv's steps/s | | {ratios} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> dict[str, Any] | int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["serve"]:
        here = os.path.dirname(os.path.abspath(__file__))
        sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != here]  # no script here shadows a module
        return serve_openenv(argv[1:])
    from benchmarks import common, served_capacity

    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--openenv-python", help="the Python of a virtual environment with OpenEnv and this project")
    parser.add_argument("--only", nargs="*", default=None, help="measure only these ids")
    parser.add_argument("--sessions", type=int, nargs="+", default=[8, 32, 64, 128, 256], help="concurrency levels")
    parser.add_argument("--seconds", type=float, default=3.0, help="seconds of play per round (default 3)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds per server and level, alternating (default 3)")
    parser.add_argument("--slo-ms", type=float, default=100.0, help="the p99 a level must stay under (default 100)")
    parser.add_argument("--out", default=str(common.RESULTS / "openenv_server.json"))
    parser.add_argument("--markdown", action="store_true", help="only print the docs table of the saved results")
    args = parser.parse_args(argv)
    if args.markdown:
        return common.print_table(args.out, markdown)
    if not args.openenv_python:
        parser.error("--openenv-python is required (the Python of a virtual environment with OpenEnv installed)")
    openenv_version = subprocess.run(
        [args.openenv_python, "-c", "import importlib.metadata as m; print(m.version('openenv'))"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    results: dict[str, Any] = {
        "machine": common.machine(load_average=common.load_average()),
        "openenv": openenv_version,
        "slo_ms": args.slo_ms,
        "seconds": args.seconds,
        "rounds": args.rounds,
        "ids": {},
    }
    for env_id in args.only or served_capacity.IDS:
        print(f"{env_id}:", flush=True)
        results["ids"][env_id] = r = measure(
            env_id, args.openenv_python, sorted(args.sessions), args.seconds, args.rounds, args.slo_ms
        )
        print(
            f"{env_id}: sessions per core, ours {r['agentgym-turn']['sessions_per_core']}, OpenEnv's "
            f"{r['openenv']['sessions_per_core']}; steps/s ours / OpenEnv's "
            + ", ".join(f"{x:.2f}" for x in r["steps_per_s_ratio"] if x),
            flush=True,
        )
    path = common.write_json(args.out, results)
    print(markdown(results))
    print(f"wrote {common.shown(path)}")
    return results


if __name__ == "__main__":
    if __package__ in (None, ""):  # python benchmarks/openenv_server.py: import the benchmarks package from the root
        sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    result = main()
    sys.exit(result if isinstance(result, int) else 0)
