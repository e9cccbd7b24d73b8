"""Sessions per core of a served env: p50/p99 step latency as concurrent sessions grow.

    python benchmarks/served_capacity.py                       # about 3 minutes; benchmarks/results/served_capacity.json
    python benchmarks/served_capacity.py --sessions 8 64 --seconds 3 --only TurnSokoban-v0

The harness, fixed: for each id, one server process (``agentgym-turn serve env ID --max-sessions 1024``)
pinned to core 0, and the clients in this process pinned to core 1 (where the machine has two cores):
one asyncio event loop, one WebSocket session per simulated rollout worker, each playing the expert's
recorded episodes (reset with the episode's seed, then its actions) back to back for ``--seconds``
seconds at each concurrency level. The latency of a step is from sending it to its answer. A session
never waits for anything but its own answer (no think time): this is the server under full load,
where a trainer's sessions would wait for the policy between turns.

"Sessions per core" is the largest concurrency measured at which the server's p99 step latency stays
under ``--slo-ms`` (100 ms by default); the steps per second at that level are reported beside it.
OpenEnv publishes 256 sessions per core for its servers (docs/serving.md compares).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import statistics
import subprocess
import sys
import time
from typing import Any


import agentgym_turn  # noqa: F401  (registers the ids)

try:  # python -m benchmarks.served_capacity, or imported by the tests
    from benchmarks import common
    from benchmarks.remote import record_episodes
except ModuleNotFoundError:  # python benchmarks/served_capacity.py: this folder comes first on the import path
    import common
    from remote import record_episodes

RESULTS = common.RESULTS / "served_capacity.json"
IDS = ("TurnSokoban-v0", "TurnWebShop-v0", "TurnSearchQA-v0")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch(
    cmd: list[str], port: int, core: int | None, what: str, env: dict[str, str] | None = None
) -> tuple[subprocess.Popen, str]:
    """Start ``cmd`` (a server that listens on ``port``) in its own process pinned to ``core``; return it and its
    ws URL once it answers. ``what`` names it in errors."""
    proc = subprocess.Popen(
        cmd,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=env,
        preexec_fn=(lambda: os.sched_setaffinity(0, {core})) if core is not None else None,
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return proc, f"ws://127.0.0.1:{port}/ws"
        except OSError:
            if proc.poll() is not None:
                raise RuntimeError(f"{what} exited ({proc.returncode}) before it answered")
            time.sleep(0.1)
    proc.kill()
    raise RuntimeError(f"{what} did not answer within 60 s")


def start_server(env_id: str, core: int | None, compression: bool = False) -> tuple[subprocess.Popen, str]:
    """``agentgym-turn serve env ID`` in its own process (pinned to ``core``); returns it and its ws URL once it answers.
    ``compression``: the server accepts the clients' offer of per-message deflate (``--ws-compression``)."""
    port = free_port()
    cmd = [sys.executable, "-m", "agentgym_turn", "serve", "env", env_id, "--port", str(port), "--max-sessions", "1024"]
    cmd += ["--ws-compression"] if compression else []
    return launch(cmd, port, core, f"the {env_id} server")


def stop(proc: subprocess.Popen) -> None:
    """Stop a server started by :func:`launch`."""
    proc.terminate()
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


async def _session(
    url: str,
    episodes: list[tuple[int, list[str]]],
    offset: int,
    stop_at: float,
    latencies: list[float],
    errors: list[str],
) -> int:
    """One session playing the episodes from ``offset`` round until ``stop_at``; step latencies go to ``latencies``,
    the code of each answer that is not an observation to ``errors``."""
    from websockets.asyncio.client import connect

    steps = 0
    async with connect(url, max_size=2**24, open_timeout=30) as ws:
        k = offset
        while time.monotonic() < stop_at:
            seed, actions = episodes[k % len(episodes)]
            k += 1
            await ws.send(json.dumps({"type": "reset", "data": {"seed": seed}}))
            frame = json.loads(await ws.recv())
            if frame.get("type") != "observation":
                errors.append(str(frame.get("data", {}).get("code")))
                continue
            for action in actions:
                t0 = time.perf_counter()
                await ws.send(json.dumps({"type": "step", "data": {"message": action}}))
                frame = json.loads(await ws.recv())
                latencies.append(time.perf_counter() - t0)
                steps += 1
                if frame.get("type") != "observation":
                    errors.append(str(frame.get("data", {}).get("code")))
                    break
                if frame["data"].get("done"):
                    break
                if time.monotonic() >= stop_at:
                    break
    return steps


def _cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` so far (Linux ``/proc``)."""
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def measure_level(
    url: str, episodes: list[tuple[int, list[str]]], sessions: int, seconds: float, server_pid: int
) -> dict[str, Any]:
    """``sessions`` sessions playing ``episodes`` against the server at ``url`` (process ``server_pid``) for
    ``seconds``: steps, steps/s, step latency quantiles (ms), and the share of its core each side kept busy."""
    latencies: list[float] = []
    errors: list[str] = []
    t0, server0, client0 = time.monotonic(), _cpu_seconds(server_pid), time.process_time()
    stop_at = t0 + seconds
    steps = await asyncio.gather(*(_session(url, episodes, i, stop_at, latencies, errors) for i in range(sessions)))
    wall = time.monotonic() - t0
    server_busy, client_busy = (_cpu_seconds(server_pid) - server0) / wall, (time.process_time() - client0) / wall
    latencies.sort()
    q = lambda p: latencies[min(len(latencies) - 1, int(p * len(latencies)))] * 1e3 if latencies else float("nan")  # noqa: E731
    return {
        "sessions": sessions,
        "steps": sum(steps),
        "steps_per_s": sum(steps) / wall,
        "p50_ms": q(0.50),
        "p99_ms": q(0.99),
        "mean_ms": statistics.fmean(latencies) * 1e3 if latencies else float("nan"),
        "errors": len(errors),  # answers that were error frames (a level with any is not within the SLO)
        # the share of its core each side kept busy: the side near 1.0 is the one that limits the level
        "server_cpu": server_busy,
        "client_cpu": client_busy,
    }


def measure(
    env_id: str, levels: list[int], seconds: float, slo_ms: float, pin: bool, compression: bool = False
) -> dict[str, Any]:
    """Every concurrency level of one id against one pinned server process."""
    episodes = record_episodes(env_id, list(range(32)))  # the expert's episodes, played in process
    cores = sorted(os.sched_getaffinity(0))
    two = pin and len(cores) >= 2
    proc, url = start_server(env_id, cores[0] if two else None, compression)
    saved = os.sched_getaffinity(0)
    try:
        if two:
            os.sched_setaffinity(0, {cores[1]})
        rows = [asyncio.run(measure_level(url, episodes, n, seconds, proc.pid)) for n in levels]
    finally:
        os.sched_setaffinity(0, saved)
        stop(proc)
    within = [r for r in rows if r["p99_ms"] <= slo_ms and not r["errors"]]
    best = max(within, key=lambda r: r["sessions"]) if within else None
    return {
        "levels": rows,
        "server_core": cores[0] if two else None,
        "client_core": cores[1] if two else None,
        "sessions_per_core": best["sessions"] if best else 0,
        "steps_per_s_there": best["steps_per_s"] if best else 0.0,
    }


def markdown(results: dict[str, Any]) -> str:
    """The docs table of a results file."""
    lines = [
        "| id | sessions per core (p99 < {slo:.0f} ms) | steps/s there | sessions: p50 / p99 ms (server core busy, client core busy) |".format(
            slo=results["slo_ms"]
        ),
        "|---|---:|---:|---|",
    ]
    for env_id, r in results["ids"].items():
        levels = "; ".join(
            f"{row['sessions']}: {row['p50_ms']:.1f} / {row['p99_ms']:.1f} ({row['server_cpu']:.0%}, {row['client_cpu']:.0%})"
            for row in r["levels"]
        )
        lines.append(f"| {env_id} | {r['sessions_per_core']} | {r['steps_per_s_there']:,.0f} | {levels} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--sessions",
        type=int,
        nargs="+",
        default=[8, 32, 64, 128, 256],
        help="concurrency levels (default 8 32 64 128 256)",
    )
    parser.add_argument("--seconds", type=float, default=5.0, help="seconds of play per level (default 5)")
    parser.add_argument(
        "--slo-ms", type=float, default=100.0, help="the p99 step latency a level must stay under (default 100)"
    )
    parser.add_argument("--only", nargs="*", default=None, help="measure only these ids")
    parser.add_argument("--no-pin", action="store_true", help="do not pin the server and the clients to separate cores")
    parser.add_argument(
        "--ws-compression",
        action="store_true",
        help="serve with --ws-compression (the clients offer per-message deflate; by default the server declines)",
    )
    parser.add_argument("--out", default=str(RESULTS), help=f"results file (default {common.shown(RESULTS)})")
    parser.add_argument("--markdown", action="store_true", help="only print the docs table of the saved results")
    args = parser.parse_args(argv)
    if args.markdown:
        return common.print_table(args.out, markdown)
    results: dict[str, Any] = {
        "machine": common.machine(load_average=common.load_average()),
        "slo_ms": args.slo_ms,
        "seconds": args.seconds,
        "ws_compression": args.ws_compression,
        "ids": {},
    }
    for env_id in args.only or IDS:
        results["ids"][env_id] = measure(
            env_id, sorted(args.sessions), args.seconds, args.slo_ms, not args.no_pin, args.ws_compression
        )
        r = results["ids"][env_id]
        print(
            f"{env_id}: {r['sessions_per_core']} sessions per core under {args.slo_ms:.0f} ms p99 "
            f"({r['steps_per_s_there']:,.0f} steps/s); "
            + "; ".join(
                f"{x['sessions']}: p50 {x['p50_ms']:.1f} p99 {x['p99_ms']:.1f} ms, server {x['server_cpu']:.0%} client {x['client_cpu']:.0%}"
                for x in r["levels"]
            )
        )
    path = common.write_json(args.out, results)
    print(f"wrote {common.shown(path)}")
    return results


if __name__ == "__main__":
    main()
