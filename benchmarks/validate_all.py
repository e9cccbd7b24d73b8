"""``validate`` on every registered id, with a long search for reward without success: the certificate table.

    python benchmarks/validate_all.py                          # 10,000 searched episodes per id (the browser env: 60)
    python benchmarks/validate_all.py --ids TurnSokoban-v0 --search-episodes 2000
    python benchmarks/validate_all.py --markdown               # the docs table of the saved results

The remote client (``agentgym_turn/Remote-v0``) is validated through a served TurnSokoban-v0 (``agentgym-turn serve env``
started here on a free loopback port). Results: ``benchmarks/results/validation.json``; the table in ``docs/validation.md``.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

try:
    from benchmarks import common
except ImportError:  # run as a script: this folder is first on the path
    import common

#: Searched episodes per id; a Chromium turn costs ~100x a text turn, so the browser env gets fewer tasks and episodes
#: (its pages and rewards are the text env's, certified above; said in the docs).
SEARCH_EPISODES = 10_000
BROWSER = {"tasks": 4, "search_episodes": 60}
REMOTE_ID = "agentgym_turn/Remote-v0"


def _ids() -> list[str]:
    import gymnasium as gym

    import agentgym_turn  # noqa: F401

    return [env_id for env_id in gym.registry if env_id.startswith("Turn") or env_id == REMOTE_ID]


def run(args: argparse.Namespace) -> dict:
    from tqdm.auto import tqdm

    from agentgym_turn.testing.validate import validate

    rows = []
    for env_id in tqdm(args.ids or _ids(), desc="validate"):
        settings = (
            dict(BROWSER) if "Browser" in env_id else {"tasks": args.tasks, "search_episodes": args.search_episodes}
        )
        t0 = time.perf_counter()
        if env_id == REMOTE_ID:
            from agentgym_turn.remote.server import EnvServer

            server = EnvServer("TurnSokoban-v0", expert=True, rate_limit=None).start()
            try:
                report = validate(server.base_url, **settings)
            finally:
                server.stop()
            name = f"{REMOTE_ID} (serving TurnSokoban-v0)"
        else:
            report = validate(env_id, **settings)
            name = env_id
        rows.append(
            {
                "env": name,
                "ok": report.ok,
                "seconds": round(time.perf_counter() - t0, 1),
                **settings,
                "verdicts": report.to_dict()["verdicts"],
            }
        )
    return {"tasks": args.tasks, "machine": common.machine(), "envs": rows}


def markdown(result: dict) -> str:
    out = [
        "| env | contract | determinism | oracle | floors | gameability: best failing return / least-paid success "
        "(episodes searched) | seconds |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in result["envs"]:
        v = {x["check"]: x for x in row["verdicts"]}
        g = v["gameability"]["evidence"]
        best = "none failed" if g.get("best_failure_return") is None else f"{g['best_failure_return']:.3g}"
        gam = (
            f"{v['gameability']['status']}: {best} / {g.get('threshold', float('nan')):.3g} ({g.get('episodes', 0):,})"
        )
        out.append(
            f"| {row['env']} | {v['contract']['status']} | {v['determinism']['status']} | {v['oracle']['status']} | "
            f"{v['floors']['status']} | {gam} | {row['seconds']:.0f} |"
        )
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ids", nargs="+", help="registered ids (default: every one)")
    ap.add_argument("--tasks", type=int, default=16, help="tasks the oracle and each trivial policy play")
    ap.add_argument("--search-episodes", type=int, default=SEARCH_EPISODES)
    ap.add_argument("--out", type=Path, default=common.RESULTS / "validation.json")
    ap.add_argument("--markdown", action="store_true", help="only print the table of the saved results")
    return common.run_and_report(ap.parse_args(argv), run, markdown)


if __name__ == "__main__":
    sys.exit(main())
