"""An env's turn-step rate at another commit against this checkout, alternated in rounds.

    .venv/bin/python benchmarks/step_ab.py c2f7674                  # TurnSokoban-v0, 6 rounds
    .venv/bin/python benchmarks/step_ab.py HEAD~3 --env TurnWebShop-v0 --steps 1000

Extracts ``agentgym_turn/`` of ``REV`` (``git archive``) into a temporary folder and runs each side
in a fresh interpreter of this venv, alternating the order every round, so both see the same load.
A side plays ``--steps`` turns and times ``step`` alone (resets are not timed): Sokoban ids send
one move a turn (``Up``, ``Down``, ``Left``, ``Right`` in turn, where ``benchmarks/sokoban.py``'s
one-move rows draw moves at random), other ids the expert's action, chosen outside the timed region. The ratio of a
round is this checkout's rate over REV's; the median of the rounds is reported with their min
and max. Results: ``benchmarks/results/step_ab.json`` (``--out``).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

try:  # python -m benchmarks.step_ab, or imported by the tests
    from benchmarks import common
except ModuleNotFoundError:  # python benchmarks/step_ab.py: this folder comes first on the import path
    import common

RESULTS = common.RESULTS / "step_ab.json"

#: Run in a fresh interpreter: argv = [package root, env id, steps]; prints turn-steps per second.
_SIDE = r"""
import json, sys, time
sys.path.insert(0, sys.argv[1])
import gymnasium as gym, agentgym_turn
env_id, steps = sys.argv[2], int(sys.argv[3])
env = gym.make(env_id)
moves = ["<answer>Up</answer>", "<answer>Down</answer>", "<answer>Left</answer>", "<answer>Right</answer>"]
one_move = env_id.startswith("TurnSokoban")
seed, spent = 0, 0.0
env.reset(seed=seed)
for n in range(steps):
    response = moves[n % 4] if one_move else env.unwrapped.expert_action()
    start = time.perf_counter()
    _, _, terminated, truncated, _ = env.step(response)
    spent += time.perf_counter() - start
    if terminated or truncated:
        seed += 1
        env.reset(seed=seed % 50)
print(json.dumps({"package": agentgym_turn.__file__, "steps_per_s": steps / spent}))
"""


def extract(rev: str, into: Path) -> Path:
    """``agentgym_turn/`` of ``rev`` under ``into``; returns the folder to put on the import path."""
    archive = into / "src.tar"
    with archive.open("wb") as out:
        subprocess.run(["git", "-C", str(common.ROOT), "archive", rev, "agentgym_turn"], stdout=out, check=True)
    with tarfile.open(archive) as tar:
        tar.extractall(into / "src", filter="data")
    return into / "src"


def rate(root: Path, env_id: str, steps: int) -> float:
    """Turn-steps per second of ``env_id`` from the package under ``root``, in a fresh interpreter."""
    out = subprocess.run(
        [sys.executable, "-c", _SIDE, str(root), env_id, str(steps)], check=True, capture_output=True, text=True
    )
    answer = json.loads(out.stdout.strip().splitlines()[-1])
    if not Path(answer["package"]).resolve().is_relative_to(root.resolve()):
        raise RuntimeError(f"the side meant to run {root} imported {answer['package']}")
    return float(answer["steps_per_s"])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("rev", help="the commit to compare with this checkout (any git revision)")
    parser.add_argument("--env", default="TurnSokoban-v0", help="env id (default TurnSokoban-v0)")
    parser.add_argument("--rounds", type=int, default=6, help="rounds, each running both sides once (default 6)")
    parser.add_argument("--steps", type=int, default=3000, help="turns each side plays a round (default 3000)")
    parser.add_argument(
        "--out", type=Path, default=RESULTS, help="results JSON (default benchmarks/results/step_ab.json)"
    )
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="step_ab_") as tmp:
        sides = {"this checkout": common.ROOT, args.rev: extract(args.rev, Path(tmp))}
        rounds = []
        for r in range(args.rounds):
            order = list(sides) if r % 2 == 0 else list(reversed(sides))
            got = {name: rate(sides[name], args.env, args.steps) for name in order}
            got["ratio"] = got["this checkout"] / got[args.rev]
            rounds.append(got)
            print(
                f"round {r + 1}: this checkout {got['this checkout']:,.0f}/s, {args.rev} {got[args.rev]:,.0f}/s, "
                f"ratio {got['ratio']:.2f}",
                flush=True,
            )
    ratios = [r["ratio"] for r in rounds]
    summary = {
        "script": "benchmarks/step_ab.py",
        "env_id": args.env,
        "rev": args.rev,
        "steps": args.steps,
        "machine": common.machine(),
        "this_checkout_steps_per_s_median": statistics.median(r["this checkout"] for r in rounds),
        "rev_steps_per_s_median": statistics.median(r[args.rev] for r in rounds),
        "ratio_median": statistics.median(ratios),
        "ratio_min": min(ratios),
        "ratio_max": max(ratios),
        "rounds": rounds,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(summary, indent=1) + "\n", encoding="utf-8")
    print(
        f"{args.env}: this checkout / {args.rev} = {summary['ratio_median']:.2f} "
        f"(rounds {summary['ratio_min']:.2f}-{summary['ratio_max']:.2f}); wrote {args.out}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
