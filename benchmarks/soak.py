"""Soak: the env server and the WebShop site under churn, loopback only, bounded in time and clients.

Both servers run as separate processes with short idle timeouts; the churn, its scenarios and what it reports are
:mod:`agentgym_turn.testing.soak`'s (``validate --soak`` runs the same on one env server). Every sample reads the
servers' resident memory from ``/proc``; live sessions after the drain, client errors and server tracebacks must all
be 0.

    python benchmarks/soak.py                        # 30 minutes, 8 clients (the figures in docs/security.md)
    python benchmarks/soak.py --seconds 60 --clients 4

Results go to ``benchmarks/results/soak.json`` (``--out``).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

try:  # python -m benchmarks.soak, or imported by the tests
    from benchmarks import common
except ModuleNotFoundError:  # python benchmarks/soak.py
    import common

#: The churn (scenarios, clients, servers) is the package's: ``validate --soak`` runs the same.
from agentgym_turn.testing.soak import (  # noqa: E402,F401
    IDLE_TIMEOUT_S,
    SCENARIOS,
    ClientIdled,
    ServedProcess,
    frame,
    soak as churn,
)


def soak(seconds: float, clients: int, seed: int = 0) -> dict[str, Any]:
    """Run both servers under churn for ``seconds``; the report described in the module docstring."""
    python = [sys.executable, "-m", "agentgym_turn"]
    servers = {
        "env": ServedProcess(
            python
            + [
                "serve",
                "env",
                "TurnSokoban-v0",
                "--port",
                "0",
                "--idle-timeout",
                str(IDLE_TIMEOUT_S),
                "--max-sessions",
                "256",
            ]
        ),
        "site": ServedProcess(
            python
            + [
                "serve",
                "webshop",
                "--port",
                "0",
                "--idle-timeout",
                str(IDLE_TIMEOUT_S),
                "--max-sessions",
                "1000",
                "--num-products",
                "1000",
            ]
        ),
    }
    try:
        result = churn(servers, seconds, clients, seed)
    finally:
        for served in servers.values():
            served.stop()
    return {**result, "machine": common.machine(load_average=common.load_average())}


def markdown(result: dict[str, Any]) -> str:
    """The soak's table for ``docs/security.md``: per server, sessions, memory and what must be zero."""
    rows = [
        "| server | sessions | RSS start -> end (peak), MB | slope after warm-up, MB per 1,000 sessions | "
        "live after drain | client errors | server tracebacks |",
        "|---|---|---|---|---|---|---|",
    ]
    names = {"env": "env server (TurnSokoban-v0, /ws)", "site": "WebShop site"}
    for name, r in result["servers"].items():
        slope = "n/a" if r["slope_mb_per_1000_sessions"] is None else f"{r['slope_mb_per_1000_sessions']:+.3f}"
        rows.append(
            f"| {names.get(name, name)} | {r['sessions']:,} | {r['rss_start_mb']:.1f} -> {r['rss_end_mb']:.1f} "
            f"({r['rss_peak_mb']:.1f}) | {slope} | {r['live_sessions_after_drain']} | {r['client_errors']} | "
            f"{r['server_tracebacks']} |"
        )
    minutes = result["seconds"] / 60
    plays = ", ".join(f"{k} {v:,}" for k, v in result["scenarios"].items())
    return (
        f"{minutes:g} minutes, {result['clients']} client threads, idle timeout {result['idle_timeout_s']:g} s "
        f"(`benchmarks/results/soak.json`; scenarios played: {plays}).\n\n" + "\n".join(rows) + "\n"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=1800.0, help="how long the clients churn (default 1800)")
    parser.add_argument("--clients", type=int, default=8, help="client threads (default 8)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default=str(common.RESULTS / "soak.json"))
    parser.add_argument("--markdown", action="store_true", help="print the docs table of the saved --out and exit")
    args = parser.parse_args(argv)
    if args.markdown:
        print(markdown(json.loads(Path(args.out).read_text())), end="")
        return 0
    if not 0 < args.seconds <= 4 * 3600 or not 0 < args.clients <= 64:
        parser.error("--seconds must be in (0, 14400] and --clients in [1, 64]")
    result = soak(args.seconds, args.clients, args.seed)
    Path(args.out).write_text(json.dumps(result, indent=1) + "\n")
    for name, r in result["servers"].items():
        print(
            f"{name}: {r['sessions']} sessions, RSS {r['rss_start_mb']} -> {r['rss_end_mb']} MB, slope "
            f"{r['slope_mb_per_1000_sessions']} MB/1,000 sessions after warm-up, {r['live_sessions_after_drain']} live after "
            f"drain, {r['client_errors']} client errors, {r['server_tracebacks']} server tracebacks"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
