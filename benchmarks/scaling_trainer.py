"""Trainer step time at world size 1 and 2 on CPU (torch.distributed, gloo), the same global batch.

Each world size runs the Sokoban recipe (:func:`reference_trainer.recipes.sokoban.sokoban_tiny`,
tiny model, no SFT) shrunk to ``--tasks`` episodes an iteration: one warm-up iteration, then
``--iterations`` timed ones. The ranks are started the way ``torchrun`` starts them
(``MASTER_ADDR``/``MASTER_PORT``/``RANK``/``WORLD_SIZE`` in the environment), one torch thread
each, and every rank plays ``tasks / world_size`` episodes. The trainer reports the slowest
rank's rollout and update seconds (``time/rollout_s``, ``time/update_s``); this script keeps
their medians, and the machine's load average next to them (the speed-up cannot exceed the
idle cores).

    python benchmarks/scaling_trainer.py                 # writes benchmarks/results/scaling_trainer.json
    python benchmarks/scaling_trainer.py --world-sizes 1 2 4 --tasks 32

``measure(world_sizes)`` is what ``benchmarks/scaling.py`` calls.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Sequence

try:  # python -m benchmarks.scaling_trainer, or imported by the tests
    from benchmarks import common
except ModuleNotFoundError:  # python benchmarks/scaling_trainer.py: this folder comes first on the import path
    import common

RESULT = common.RESULTS / "scaling_trainer.json"


def _config(model_dir: str, out: str, tasks: int, iterations: int):
    from reference_trainer.recipes.sokoban import sokoban_tiny

    cfg = sokoban_tiny(
        "turn-ppo",
        sft_episodes=0,
        iterations=iterations,
        out=out,
        model=model_dir,
        progress=False,
        eval_every=0,
        eval_episodes=0,
        threads=1,
    )
    cfg.rollout.tasks_per_iteration = tasks
    cfg.rollout.num_envs = tasks
    cfg.algo.minibatch_size = tasks // 2  # two optimizer steps an iteration
    return cfg


def _rank(rank: int, world: int, port: int, model_dir: str, work: str, tasks: int, iterations: int) -> None:
    os.environ.update(
        MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE=str(world), LOCAL_RANK=str(rank)
    )
    import torch

    from reference_trainer.trainer import Trainer

    torch.set_num_threads(1)
    trainer = Trainer(_config(model_dir, str(Path(work) / f"run{world}"), tasks, iterations + 1))
    try:
        steps = []
        for _ in range(iterations + 1):  # the first one warms up
            t0 = time.perf_counter()
            m = trainer.train_iteration()
            steps.append(
                {
                    "step_s": time.perf_counter() - t0,
                    "rollout_s": m["time/rollout_s"],
                    "update_s": m["time/update_s"],
                    "episodes": m["rollout/episodes"],
                    "tokens": m["rollout/tokens"],
                }
            )
    finally:
        trainer.close()
    if rank == 0:
        with Path(work, f"world{world}.jsonl").open("a") as f:  # one line per round
            f.write(json.dumps(steps[1:]) + "\n")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def measure(
    world_sizes: Sequence[int] = (1, 2), *, tasks: int = 32, iterations: int = 3, rounds: int = 2
) -> dict[str, Any]:
    """Median trainer step, rollout and update seconds per world size (CPU, gloo, one thread per rank).

    The world sizes take turns (``rounds`` times each, alternating), so a load that comes and goes
    on a shared machine hits them alike. Returns ``{"world_sizes": {"1": {...}, "2": {...}},
    "settings": {...}, "machine": {...}}``; each world size holds ``step_s``, ``rollout_s``,
    ``update_s`` (medians over ``rounds * iterations`` timed iterations), ``speedup`` (world size
    1's step time over this one's, when measured), the load averages before its runs and the
    per-iteration records.
    """
    import torch.multiprocessing as mp

    import agentgym_turn  # noqa: F401  (registers TurnSokoban-v0 for the tiny model's corpus)
    from reference_trainer.tiny import build_tiny, spec_of

    for w in world_sizes:
        if tasks % (2 * w):
            raise ValueError(
                f"tasks={tasks} must be a multiple of 2 * world size {w} (two minibatches split over the ranks)."
            )
    out: dict[str, Any] = {"world_sizes": {}}
    with tempfile.TemporaryDirectory(prefix="scaling_trainer.") as work:
        from reference_trainer.recipes.sokoban import SOKOBAN_ENV_KWARGS, SOKOBAN_ENV

        cfg = _config("tiny", work, tasks, iterations)
        m = cfg.model
        model_dir = str(
            build_tiny(
                SOKOBAN_ENV,
                Path(work) / "model",
                seed=m.tiny.seed,
                spec=spec_of(m.tiny),
                env_kwargs=dict(SOKOBAN_ENV_KWARGS),
            )
        )
        loads: dict[int, list[float]] = {w: [] for w in world_sizes}
        for _ in range(rounds):
            for w in world_sizes:
                loads[w].append(os.getloadavg()[0])
                mp.spawn(_rank, args=(w, _free_port(), model_dir, work, tasks, iterations), nprocs=w, join=True)
        for w in world_sizes:
            lines = Path(work, f"world{w}.jsonl").read_text().splitlines()
            steps = [s for line in lines for s in json.loads(line)]
            out["world_sizes"][str(w)] = {
                **{k: statistics.median(s[k] for s in steps) for k in ("step_s", "rollout_s", "update_s")},
                "load_average_before": loads[w],
                "iterations": steps,
            }
    base = out["world_sizes"].get("1")
    for rec in out["world_sizes"].values():
        if base:
            rec["speedup"] = base["step_s"] / rec["step_s"]
    out["settings"] = {
        "env": "TurnSokoban-v0",
        "recipe": "sokoban_tiny turn-ppo, no SFT",
        "tasks_per_iteration": tasks,
        "minibatch_size": tasks // 2,
        "timed_iterations": iterations,
        "rounds": rounds,
        "backend": "gloo",
        "threads_per_rank": 1,
        "parallel": "ddp",
    }
    out["machine"] = common.machine(load_average_after=os.getloadavg()[0])
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--world-sizes", type=int, nargs="+", default=[1, 2], metavar="N")
    parser.add_argument("--tasks", type=int, default=32, help="episodes an iteration, over all ranks (default 32)")
    parser.add_argument("--iterations", type=int, default=3, help="timed iterations after one warm-up (default 3)")
    parser.add_argument("--rounds", type=int, default=2, help="times each world size runs, alternating (default 2)")
    parser.add_argument(
        "--out", type=Path, default=RESULT, help="result JSON (default benchmarks/results/scaling_trainer.json)"
    )
    args = parser.parse_args(argv)
    result = measure(args.world_sizes, tasks=args.tasks, iterations=args.iterations, rounds=args.rounds)
    common.write_json(args.out, result)
    for w, rec in result["world_sizes"].items():
        print(
            f"world size {w}: step {rec['step_s']:.2f} s (rollout {rec['rollout_s']:.2f} s, update {rec['update_s']:.2f} s)"
            f"  speed-up {rec.get('speedup', float('nan')):.2f}x  load {max(rec['load_average_before']):.1f}"
        )
    print(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
