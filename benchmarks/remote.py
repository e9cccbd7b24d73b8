"""Cost of playing a served env: in-process steps/s vs. ``agentgym_turn/Remote-v0`` over ``/ws``.

The server runs in its own process (``agentgym-turn serve env ID --port 0``), as it would for
trainer workers; the clients are threads of this process, one session each. The same episodes
(the expert's actions, recorded in process first) are replayed in process, through one client,
and through C concurrent clients; only ``reset`` and ``step`` are timed.

    python benchmarks/remote.py                      # writes benchmarks/results/remote.json
    python benchmarks/remote.py --episodes 20 --clients 4
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import threading
import time
from typing import Any

import gymnasium as gym

import agentgym_turn  # noqa: F401  (registers the ids)

try:  # python -m benchmarks.remote, or imported by the tests
    from benchmarks import common
except ModuleNotFoundError:  # python benchmarks/remote.py: this folder comes first on the import path
    import common


def record_episodes(env_id: str, seeds: list[int]) -> list[tuple[int, list[str]]]:
    """The expert's actions of each seed's episode, played in process."""
    env = gym.make(env_id)
    episodes = []
    for seed in seeds:
        env.reset(seed=seed)
        actions = []
        for _ in range(64):
            action = env.unwrapped.expert_action()
            actions.append(action)
            _, _, terminated, truncated, _ = env.step(action)
            if terminated or truncated:
                break
        episodes.append((seed, actions))
    env.close()
    return episodes


def replay(env: Any, episodes: list[tuple[int, list[str]]], latencies: list[float] | None = None) -> int:
    """Replay the episodes; return the number of env calls (resets + steps)."""
    calls = 0
    for seed, actions in episodes:
        t = time.perf_counter()
        env.reset(seed=seed)
        if latencies is not None:
            latencies.append(time.perf_counter() - t)
        for action in actions:
            t = time.perf_counter()
            env.step(action)
            if latencies is not None:
                latencies.append(time.perf_counter() - t)
        calls += 1 + len(actions)
    return calls


def start_server(env_id: str, clients: int) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "agentgym_turn",
            "serve",
            "env",
            env_id,
            "--port",
            "0",
            "--max-sessions",
            str(clients + 1),
        ],
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stderr is not None
    for line in proc.stderr:
        if line.startswith("Serving"):
            return proc, line.split(" at ", 1)[1].split()[0]
    raise SystemExit(f"the server for {env_id} did not start (exit {proc.wait()})")


def measure(env_id: str, episodes: int, clients: int) -> dict[str, Any]:
    recorded = record_episodes(env_id, list(range(episodes)))
    local = gym.make(env_id)
    replay(local, recorded[:2])  # warm caches (catalog, level generator)
    t = time.perf_counter()
    calls = replay(local, recorded)
    local_s = time.perf_counter() - t

    proc, url = start_server(env_id, clients)
    try:
        remote = gym.make("agentgym_turn/Remote-v0", base_url=url, env_id=env_id)
        replay(remote, recorded[:2])
        latencies: list[float] = []
        t = time.perf_counter()
        replay(remote, recorded, latencies)
        one_s = time.perf_counter() - t
        remote.close()

        sessions = [gym.make("agentgym_turn/Remote-v0", base_url=url, env_id=env_id) for _ in range(clients)]
        for env in sessions:
            env.reset(seed=0)  # open every session before the clock starts
        start = threading.Barrier(clients + 1)
        threads = [threading.Thread(target=lambda env=env: (start.wait(), replay(env, recorded))) for env in sessions]
        for thread in threads:
            thread.start()
        start.wait()
        t = time.perf_counter()
        for thread in threads:
            thread.join()
        many_s = time.perf_counter() - t
        for env in sessions:
            env.close()
    finally:
        proc.terminate()
        proc.wait(timeout=60)
    latencies.sort()
    return {
        "episodes": episodes,
        "calls_per_pass": calls,
        "local_calls_per_s": round(calls / local_s, 1),
        "remote_1_client_calls_per_s": round(calls / one_s, 1),
        "remote_1_client_p50_ms": round(1000 * statistics.median(latencies), 3),
        "remote_1_client_p99_ms": round(1000 * latencies[int(0.99 * (len(latencies) - 1))], 3),
        f"remote_{clients}_clients_calls_per_s": round(clients * calls / many_s, 1),
        "remote_1_client_over_local_time": round(one_s / local_s, 2),
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--env-ids", nargs="+", default=["TurnSokoban-v0", "TurnWebShop-v0"])
    p.add_argument("--episodes", type=int, default=40)
    p.add_argument("--clients", type=int, default=16)
    p.add_argument("--out", default=str(common.RESULTS / "remote.json"))
    args = p.parse_args(argv)
    report: dict[str, Any] = {
        **common.machine(),
        "note": "server in its own process, clients as threads of the benchmark process, same machine; only reset/step timed",
        "clients": args.clients,
        "envs": {},
    }
    for env_id in args.env_ids:
        report["envs"][env_id] = measure(env_id, args.episodes, args.clients)
        print(env_id, json.dumps(report["envs"][env_id]), flush=True)
    common.write_json(args.out, report)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
