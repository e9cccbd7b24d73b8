"""What ``snapshot()``, ``restore()`` and ``fork(1)`` cost per registered env, beside what a step costs.

    .venv/bin/python benchmarks/snapshot.py            # about a minute
    .venv/bin/python benchmarks/snapshot.py --states 50
    .venv/bin/python benchmarks/snapshot.py --markdown   # the docs table of the saved results

For each id in ``agentgym_turn.env_ids()``: ``--states`` mid-episode states (a seeded reset, then
the expert's responses for a random number of turns); in each, the snapshot's size in bytes and the
CPU time (``process_time``, the median of ``--repeat`` calls) of ``snapshot()``, ``restore(snapshot)``,
``fork(1)`` and, for scale, one ``step`` of the expert's response on a fork (measured in the same run,
interleaved, so the ratio holds on a noisy machine). Results: ``benchmarks/results/snapshot.json``
(medians over the states per id); ``docs/turn-contract.md`` quotes the table.
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any, Callable

import gymnasium as gym
import numpy as np

import agentgym_turn

try:  # python -m benchmarks.snapshot, or imported by the tests
    from benchmarks import common
except ModuleNotFoundError:  # python benchmarks/snapshot.py: this folder comes first on the import path
    import common

RESULTS = common.RESULTS / "snapshot.json"


def _cpu(fn: Callable[[], Any], repeat: int) -> float:
    """The median CPU seconds of ``repeat`` calls of ``fn``."""
    times = []
    for _ in range(repeat):
        t0 = time.process_time()
        fn()
        times.append(time.process_time() - t0)
    return statistics.median(times)


def measure(env_id: str, states: int = 20, repeat: int = 20, seed: int = 0) -> dict[str, Any]:
    """Medians over ``states`` mid-episode states of one id (see the module docstring)."""
    env = gym.make(env_id)
    base = env.unwrapped
    rng = np.random.default_rng(seed)
    rows = []
    for k in range(states):
        env.reset(seed=seed + k)
        for _ in range(int(rng.integers(0, 3))):
            _, _, terminated, truncated, _ = env.step(base.expert_action())
            if terminated or truncated:
                env.reset(seed=seed + k)
                break
        snap = base.snapshot()
        response = base.expert_action()
        forks: list[Any] = []

        def step_a_fork() -> None:
            if not forks:
                forks.extend(base.fork(repeat))
            forks.pop().step(response)

        rows.append(
            {
                "bytes": len(snap),
                "snapshot_s": _cpu(base.snapshot, repeat),
                "restore_s": _cpu(lambda: base.restore(snap), repeat),
                "fork1_s": _cpu(lambda: base.fork(1), repeat),
                "step_s": _cpu(step_a_fork, repeat),
            }
        )
    env.close()
    out = {key: statistics.median(r[key] for r in rows) for key in rows[0]}
    out["fork1_over_step"] = out["fork1_s"] / out["step_s"] if out["step_s"] > 0 else None
    out["states"] = states
    return out


def markdown(results: dict[str, Any]) -> str:
    """The docs table (``docs/turn-contract.md``) of a results file's rows."""
    lines = [
        "| id | snapshot size | snapshot | restore | fork(1) | a step, for scale | fork(1) / step |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for env_id, r in results["ids"].items():
        lines.append(
            f"| {env_id} | {r['bytes'] / 1024:.1f} KiB | {r['snapshot_s'] * 1e6:.0f} µs | {r['restore_s'] * 1e6:.0f} µs | "
            f"{r['fork1_s'] * 1e6:.0f} µs | {r['step_s'] * 1e6:.0f} µs | {r['fork1_over_step']:.2f} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--states", type=int, default=20, help="mid-episode states per id (default 20)")
    parser.add_argument(
        "--repeat", type=int, default=20, help="calls timed per operation and state; the median counts (default 20)"
    )
    parser.add_argument("--only", nargs="*", default=None, help="measure only these ids")
    parser.add_argument("--out", default=str(RESULTS), help=f"results file (default {common.shown(RESULTS)})")
    parser.add_argument("--markdown", action="store_true", help="only print the docs table of the saved results")
    args = parser.parse_args(argv)
    if args.markdown:
        return common.print_table(args.out, markdown)
    results = {"machine": common.machine(load_average=common.load_average()), "ids": {}}
    for env_id in args.only or agentgym_turn.env_ids():
        row = measure(env_id, args.states, args.repeat)
        results["ids"][env_id] = row
        print(
            f"{env_id:24s} {row['bytes']:8.0f} B  snapshot {row['snapshot_s'] * 1e6:7.0f} us  restore {row['restore_s'] * 1e6:7.0f} us  "
            f"fork(1) {row['fork1_s'] * 1e6:7.0f} us  step {row['step_s'] * 1e6:7.0f} us  fork/step {row['fork1_over_step']:.2f}"
        )
    path = common.write_json(args.out, results)
    print(f"wrote {common.shown(path)}")
    return results


if __name__ == "__main__":
    main()
