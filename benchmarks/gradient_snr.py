"""How much signal one batch of Sokoban episodes carries: policy-gradient agreement vs batch size.

From one SFT policy (the recipe's warm start), two *independent* batches of ``n`` episodes
(fresh levels, fresh sampling) each give a policy gradient of the Turn-PPO loss (turn GAE
with the recipe's critic, turn-level ratio at 1). Their cosine similarity estimates the
signal-to-noise ratio of one batch: with ``g = s + noise``, ``E cos ~ |s|^2 / (|s|^2 + tr Cov / n)``,
so a cosine near 0 means the batch's gradient is mostly noise. For contrast, the same is
measured on a batch drawn from 4 fixed levels (where RL learns fast).

    python benchmarks/gradient_snr.py --policy runs/learning/sft_policy     # after benchmarks/learning.py

Writes ``benchmarks/results/gradient_snr.json``.
"""

from __future__ import annotations

import argparse
import time

try:  # python -m benchmarks.gradient_snr, or imported by the tests
    from benchmarks import common
except ModuleNotFoundError:  # python benchmarks/gradient_snr.py: this folder comes first on the import path
    import common


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--policy",
        required=True,
        help="an SFT policy directory (benchmarks/learning.py writes runs/learning/sft_policy)",
    )
    ap.add_argument("--sizes", type=int, nargs="+", default=[128, 512, 1024])
    ap.add_argument("--repeats", type=int, default=2, help="independent pairs per size")
    ap.add_argument("--out", default=str(common.RESULTS / "gradient_snr.json"))
    args = ap.parse_args()

    import numpy as np
    import torch

    torch.set_num_threads(1)
    from reference_trainer.losses import policy_loss
    from reference_trainer.recipes import sokoban_tiny
    from reference_trainer.rollout import make_batch
    from reference_trainer.trainer import Trainer

    cfg = sokoban_tiny("turn-ppo", model=args.policy, sft_episodes=0, out="runs/gradient_snr", progress=False)
    trainer = Trainer(cfg)
    params = trainer.policy.actor_parameters()

    def gradient(seeds: list[int], sample_seed: int) -> torch.Tensor:
        episodes = trainer.rollout(seeds, generator=torch.Generator().manual_seed(sample_seed))
        batch = make_batch(episodes, trainer.pad_id)
        prepared = trainer.prepare(batch)
        out = trainer.policy.evaluate(
            batch.ids,
            batch.attention_mask,
            batch.action_mask,
            temperature=cfg.rollout.temperature,
            with_values=False,
            with_entropy=False,
        )  # scored as sampled: ratio 1
        loss, _ = policy_loss(
            out.logp,
            prepared.old_logp,
            prepared.advantages,
            batch.action_mask,
            batch.turn_ids,
            ratio_level="turn",
            clip_eps=0.2,
            clip_bias_correction="none",
        )
        return torch.cat([g.flatten() for g in torch.autograd.grad(loss, params)])

    def cosine(a: torch.Tensor, b: torch.Tensor) -> float:
        return float(a @ b / (a.norm() * b.norm()))

    rng = np.random.default_rng(0)
    rows = []
    t0 = time.perf_counter()
    for n in args.sizes:
        values = []
        for r in range(args.repeats):
            a = gradient(rng.integers(0, cfg.train.eval_seed, n).tolist(), 2 * r + 1)
            b = gradient(rng.integers(0, cfg.train.eval_seed, n).tolist(), 2 * r + 2)
            values.append(cosine(a, b))
        rows.append({"levels": "random", "episodes": n, "cosines": values, "mean": float(np.mean(values))})
        print(
            f"random levels, {n:5d} episodes: cosine {np.mean(values):+.3f} ({', '.join(f'{v:+.3f}' for v in values)})",
            flush=True,
        )
    fixed = [cfg.train.eval_seed + 5, cfg.train.eval_seed + 6, cfg.train.eval_seed + 10, cfg.train.eval_seed + 15]
    values = [
        cosine(
            gradient([fixed[i % 4] for i in range(128)], 2 * r + 1),
            gradient([fixed[i % 4] for i in range(128)], 2 * r + 2),
        )
        for r in range(args.repeats)
    ]
    rows.append({"levels": "4 fixed", "episodes": 128, "cosines": values, "mean": float(np.mean(values))})
    print(f"4 fixed levels,   128 episodes: cosine {np.mean(values):+.3f}", flush=True)
    trainer.close()
    common.write_json(
        args.out,
        {
            "what": "cosine similarity of Turn-PPO policy gradients from two independent batches, SFT start",
            "policy": args.policy,
            "rows": rows,
            "seconds": time.perf_counter() - t0,
            "machine": common.machine(threads=1),
        },
    )
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
