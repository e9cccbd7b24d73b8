"""All five presets side by side on TurnSokoban-v0 with the tiny model on CPU.

One SFT warm start (seeded, fixed step count) is trained once and saved; every preset then
runs the same number of RL iterations from it, on the same seeds, one thread per process,
``--jobs`` processes at a time. Held-out success (greedy, 200 fixed levels) is measured every
``--eval-every`` iterations; clip fractions come from every update.

    python benchmarks/learning.py                      # all presets, seeds 0 1 2
    python benchmarks/learning.py --presets turn-ppo --seeds 0 --iterations 10   # quick look

Writes ``benchmarks/results/learning.json`` and ``benchmarks/results/learning.png``.
Settings: :mod:`reference_trainer.recipes`.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import platform
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
from reference_trainer.recipes import SOKOBAN_RL_ITERATIONS  # noqa: E402  (no torch import)

PRESETS = ["ppo", "turn-ppo", "s-ppo", "st-ppo", "grpo"]


def _sft(out: Path, seed: int) -> tuple[Path, dict]:
    """Build the tiny model, SFT it once, save the policy; reused when one from the same recipe is there."""
    from reference_trainer.policy import save_policy
    from reference_trainer.recipes import sokoban_tiny
    from reference_trainer.trainer import Trainer

    policy_dir = out / "sft_policy"
    meta_file = out / "sft.json"
    cfg = sokoban_tiny(seed=seed, out=str(out / "sft_run"), progress=False)
    recipe = {k: v for k, v in cfg.to_dict().items() if k != "algo"}  # what the SFT policy depends on
    if (policy_dir / "config.json").exists() and meta_file.exists():
        meta = json.loads(meta_file.read_text())
        if meta.get("recipe") == json.loads(json.dumps(recipe)):
            return policy_dir, meta
    trainer = Trainer(cfg)
    try:
        t0 = time.perf_counter()
        before = trainer.evaluate()
        stats = trainer.sft()
        after = trainer.evaluate()
        save_policy(trainer.policy, trainer.tokenizer, policy_dir)
    finally:
        trainer.close()
    meta = {"before": before["success"], "after": after["success"], "seconds": time.perf_counter() - t0,
            "steps": cfg.train.sft_steps, "batch_size": cfg.train.sft_batch_size, "episodes": cfg.train.sft_episodes,
            "loss": stats["sft/loss"], "recipe": recipe}
    meta_file.write_text(json.dumps(meta, indent=1))
    return policy_dir, meta


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--presets", nargs="+", default=PRESETS, choices=PRESETS)
    ap.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    ap.add_argument("--iterations", type=int, default=SOKOBAN_RL_ITERATIONS,
                    help=f"RL iterations per run (default: {SOKOBAN_RL_ITERATIONS}, under 3 minutes of Turn-PPO on one thread)")
    ap.add_argument("--eval-every", type=int, default=6)
    ap.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1), help="processes at a time")
    ap.add_argument("--sft-seed", type=int, default=0)
    ap.add_argument("--work", default="runs/learning", help="where the SFT policy and run folders go")
    ap.add_argument("--out", default=str(HERE / "results" / "learning.json"))
    args = ap.parse_args(argv)

    import torch

    from reference_trainer.recipes import rl_from

    torch.set_num_threads(1)
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    print("SFT warm start ...", flush=True)
    policy_dir, sft = _sft(work, args.sft_seed)
    print(f"SFT: held-out success {sft['before']:.1%} -> {sft['after']:.1%} ({sft['seconds']:.0f} s)", flush=True)

    jobs = [("sokoban", a, s, str(policy_dir), args.iterations, args.eval_every, str(work)) for a in args.presets for s in args.seeds]
    runs = []
    ctx = mp.get_context("spawn")
    with ctx.Pool(args.jobs, maxtasksperchild=1) as pool:
        for r in pool.imap_unordered(rl_from, jobs):
            runs.append(r)
            print(f"{r['algo']:>9s} seed {r['seed']}: {r['start']:.1%} -> {r['end']:.1%} "
                  f"(best {max(r['eval_success']):.1%}, {r['rl_seconds']:.0f} s of RL, {r['seconds']:.0f} s in all)", flush=True)
    runs.sort(key=lambda r: (PRESETS.index(r["algo"]), r["seed"]))

    summary = {}
    for algo in args.presets:
        rs = [r for r in runs if r["algo"] == algo]
        gains = [r["end"] - r["start"] for r in rs]
        summary[algo] = {
            "mean_start": sum(r["start"] for r in rs) / len(rs),
            "mean_end": sum(r["end"] for r in rs) / len(rs),
            "mean_gain_points": 100 * sum(gains) / len(gains),
            "min_gain_points": 100 * min(gains),
            "mean_best_gain_points": 100 * sum(max(r["eval_success"]) - r["start"] for r in rs) / len(rs),
            "mean_rl_seconds": sum(r["rl_seconds"] for r in rs) / len(rs),
            "mean_clipfrac": sum(sum(r["clipfrac"]) / max(len(r["clipfrac"]), 1) for r in rs) / len(rs),
            "mean_seconds": sum(r["seconds"] for r in rs) / len(rs),
        }
    result = {
        "what": "held-out greedy success on 200 TurnSokoban-v0 levels (6x6, 1 box), tiny model, same SFT start, same seeds",
        "machine": {"python": sys.version.split()[0], "platform": platform.platform(), "cpus": os.cpu_count(),
                    "torch": torch.__version__, "threads_per_run": 1, "jobs": args.jobs},
        "settings": {"iterations": args.iterations, "eval_every": args.eval_every, "seeds": args.seeds,
                     "recipe": "reference_trainer.recipes.sokoban_tiny"},
        "sft": sft, "summary": summary, "runs": runs,
    }
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1))

    from reference_trainer.plots import plot_comparison

    curves = {}
    for algo in args.presets:
        rs = [r for r in runs if r["algo"] == algo]
        n = min(len(r["eval_success"]) for r in rs)
        m = min(len(r["clipfrac"]) for r in rs)
        curves[algo] = {
            "x": rs[0]["eval_iterations"][:n],
            "success": [sum(r["eval_success"][i] for r in rs) / len(rs) for i in range(n)],
            "clip_x": list(range(1, m + 1)),
            "clipfrac": [sum(r["clipfrac"][i] for r in rs) / len(rs) for i in range(m)],
        }
    png = plot_comparison(curves, out.with_suffix(".png"),
                          title=f"TurnSokoban-v0, tiny model, SFT start {sft['after']:.0%}, mean of seeds {args.seeds}")
    for algo, s in summary.items():
        print(f"{algo:>9s}: {s['mean_start']:.1%} -> {s['mean_end']:.1%} (mean gain {s['mean_gain_points']:+.1f} points, "
              f"worst {s['min_gain_points']:+.1f}, best on the way {s['mean_best_gain_points']:+.1f}), "
              f"{s['mean_rl_seconds']:.0f} s of RL, clip fraction {s['mean_clipfrac']:.3f}")
    print(f"wrote {out} and {png}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
