"""``validate``'s learnability check on every registered id: does the tiny model's short hill-climb gain on held-out tasks?

    python benchmarks/learnability.py                            # every id, the check's default budget
    python benchmarks/learnability.py --ids TurnSokoban-v0 --iterations 20
    python benchmarks/learnability.py --ids TurnSearchQA-MCQ-v0 --sft-max-steps 600 --out /tmp/mcq600.json
    python benchmarks/learnability.py --ids TurnSokoban-8x8-v0 --merge   # rerun some ids, keep the other rows
    python benchmarks/learnability.py --markdown                 # the docs table of the saved results

Each id runs ``agentgym_turn.testing.learnability.check_learnability`` (one thread): SFT from the expert until sampled
play on training tasks succeeds half the time, then Turn-PPO, held-out tasks before and after. The remote client is
run through a served TurnSokoban-v0; the browser env is left out (its turns cost ~100x a text turn and its pages and
rewards are TurnWebShop-v0's, run here). Results: ``benchmarks/results/learnability.json``; the table in
``docs/validation.md``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

try:
    from benchmarks import common
    from benchmarks.validate_all import REMOTE_ID, _ids
except ImportError:  # run as a script: this folder is first on the path
    import common
    from validate_all import REMOTE_ID, _ids


def _one(job: tuple[str, int, dict]) -> dict:
    """One id's check in this process (a pool's worker); an exception is that id's row (``status: "error"``), so one
    id's failure does not end the others'."""
    try:
        return _check(job)
    except Exception as e:  # noqa: BLE001 - reported in the id's row
        return {"env": job[0], "status": "error", "summary": f"{type(e).__name__}: {e}", "evidence": {}}


def _check(job: tuple[str, int, dict]) -> dict:
    """One id's check in this process (a pool's worker): ``{"env", "status", "summary", "evidence"}``."""
    from agentgym_turn.testing.learnability import LearnBudget, check_learnability

    env_id, seed, over = job
    budget = LearnBudget(**over)
    if env_id != REMOTE_ID:
        return dict(
            zip(
                ("env", "status", "summary", "evidence"),
                (env_id, *check_learnability(env_id, seed=seed, budget=budget)),
            )
        )
    from agentgym_turn.remote.server import EnvServer
    from reference_trainer.recipes.sokoban import SOKOBAN_ENV_KWARGS

    # served as the Sokoban recipe plays it, so the climb takes the recipe (each phase's split a reset option); the
    # trainer holds its rollout envs, the held-out envs and the SFT probe's at once: more than the default cap
    as_played = {k: v for k, v in SOKOBAN_ENV_KWARGS.items() if k != "split"}
    server = EnvServer("TurnSokoban-v0", env_kwargs=as_played, expert=True, rate_limit=None, max_sessions=1024).start()
    try:
        verdict = check_learnability(server.base_url, seed=seed, budget=budget)
    finally:
        server.stop()
    name = f"{REMOTE_ID} (serving TurnSokoban-v0 as its recipe plays it)"
    return dict(zip(("env", "status", "summary", "evidence"), (name, *verdict)))


def run(args: argparse.Namespace) -> dict:
    """Every id's check, two at a time; the result file is rewritten as each id ends (in the order they end), so an
    interrupted run keeps the ids it finished."""
    import multiprocessing as mp

    from tqdm.auto import tqdm

    over = {k: v for k, v in (("iterations", args.iterations), ("sft_max_steps", args.sft_max_steps)) if v is not None}
    jobs = [(i, args.seed, over) for i in (args.ids or _ids()) if "Browser" not in i]
    result = {"seed": args.seed, "workers": args.workers, "machine": common.machine(), "envs": []}
    saved = common.read_json(args.out) if args.merge and args.out.exists() else None
    if saved is not None and saved["seed"] != args.seed:
        raise SystemExit(f"--merge: {args.out} holds seed {saved['seed']}, not {args.seed}")
    kept = saved["envs"] if saved is not None else []  # --merge: the saved rows of the ids not run now stay
    with mp.get_context("spawn").Pool(args.workers, maxtasksperchild=1) as pool:
        for row in tqdm(pool.imap_unordered(_one, jobs), total=len(jobs), desc="learnability"):
            result["envs"].append(row)
            common.write_json(args.out, {**result, "envs": merged(kept, result["envs"])})
    result["envs"] = merged(kept, result["envs"])
    return result


def _row_id(row: dict) -> str:
    """The id a result row is about (the remote client's row names the id it serves after it)."""
    return row["env"].split(" ")[0]


def merged(saved: list[dict], new: list[dict], order: list[str] | None = None) -> list[dict]:
    """``new``'s rows and those of ``saved`` about other ids, in ``order`` (the registry's; ids not in it last)."""
    order = order if order is not None else [i for i in _ids() if "Browser" not in i]
    ran = {_row_id(row) for row in new}
    rows = [row for row in saved if _row_id(row) not in ran] + new
    return sorted(rows, key=lambda row: order.index(_row_id(row)) if _row_id(row) in order else len(order))


def markdown(result: dict) -> str:
    out = [
        "| env | verdict | metric | SFT steps | held-out start | after RL | gain, points (95% interval) | tasks | seconds |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for row in result["envs"]:
        e = row["evidence"]
        if not e:
            out.append(f"| {row['env']} | {row['status']}: {row['summary']} | | | | | | | |")
            continue
        g = e["gain"]
        out.append(
            f"| {row['env']} | {row['status']} | {e['metric']} | {e['sft_steps']} | {e['start']:.3f} | {e['end']:.3f} | "
            f"{100 * g['mean']:+.1f} ({100 * g['low']:+.1f} to {100 * g['high']:+.1f}) | {g['n']} | {e['seconds']:.0f} |"
        )
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ids", nargs="+", help="registered ids (default: every one but the browser env)")
    ap.add_argument("--iterations", type=int, help="RL iterations (default: the check's own)")
    ap.add_argument("--sft-max-steps", type=int, help="SFT's ceiling (default: the check's own); with --out elsewhere")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--workers", type=int, default=2, help="ids checked at once, each on one thread in its own process")
    ap.add_argument("--out", type=Path, default=common.RESULTS / "learnability.json")
    ap.add_argument("--merge", action="store_true", help="keep the saved rows of the ids not run now (same seed)")
    ap.add_argument("--markdown", action="store_true", help="only print the table of the saved results")
    return common.run_and_report(ap.parse_args(argv), run, markdown)


if __name__ == "__main__":
    sys.exit(main())
