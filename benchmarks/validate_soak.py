"""``validate --soak``: each env family's id served (``agentgym-turn serve env ID``) under churn for ten minutes.

    python benchmarks/validate_soak.py                     # 10 minutes for each id, one after another
    python benchmarks/validate_soak.py --minutes 2 --ids TurnSokoban-v0
    python benchmarks/validate_soak.py --markdown          # the docs table of the saved results

The churn is ``agentgym_turn/testing/soak.py``'s (whole episodes, sessions dropped mid-episode, silent sessions,
half-open requests, stateless resets); a soak of ten minutes or more is long enough for the memory bound (0.2 MB per
1,000 sessions after warm-up) to be judged. Results: ``benchmarks/results/validation_soak.json``; the table in
``docs/validation.md``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

try:
    from benchmarks import common
except ImportError:  # run as a script: this folder is first on the path
    import common

#: One id of each env family.
SERVED_IDS = ("TurnSokoban-v0", "TurnWebShop-v0", "TurnSearchQA-v0")


def run(args: argparse.Namespace) -> dict:
    from tqdm.auto import tqdm

    from agentgym_turn.testing.validate import validate

    rows = []
    for env_id in tqdm(args.ids, desc="soak"):
        report = validate(env_id, checks=[], soak_minutes=args.minutes, soak_clients=args.clients)
        v = report.verdict("soak")
        rows.append(
            {"env": env_id, "status": v.status, "summary": v.summary, "seconds": v.seconds, "evidence": v.evidence}
        )
    return {"minutes": args.minutes, "clients": args.clients, "machine": common.machine(), "envs": rows}


def markdown(result: dict) -> str:
    out = [
        "| env served | verdict | sessions | live after the drain | client errors | server tracebacks "
        "| memory, MB per 1,000 sessions after warm-up (bound 0.2) | minutes |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for row in result["envs"]:
        e = row["evidence"]
        slope = e.get("slope_mb_per_1000_sessions")
        memory = "n/a" if slope is None else f"{slope:+.3f}" + ("" if e.get("memory_judged") else " (not judged)")
        out.append(
            f"| {row['env']} | {row['status']} | {e.get('sessions', 0):,} | {e.get('live_sessions_after_drain')} | "
            f"{e.get('client_errors')} | {e.get('server_tracebacks')} | {memory} | {result['minutes']:g} |"
        )
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ids", nargs="+", default=list(SERVED_IDS), help="registered ids to serve and churn")
    ap.add_argument("--minutes", type=float, default=10.0, help="churn per id")
    ap.add_argument("--clients", type=int, default=4, help="client threads")
    ap.add_argument("--out", type=Path, default=common.RESULTS / "validation_soak.json")
    ap.add_argument("--markdown", action="store_true", help="only print the table of the saved results")
    return common.run_and_report(ap.parse_args(argv), run, markdown)


if __name__ == "__main__":
    sys.exit(main())
