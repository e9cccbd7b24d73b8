"""Per-step CPU time of every registered env on the worst responses for its parsers.

    .venv/bin/python benchmarks/parsers.py            # a minute or two
    .venv/bin/python benchmarks/parsers.py --only TurnSearchQA-MCQ-v0

Every response parser must run in time linear in the response length. This script
sends each registered id, through ``gymnasium.make(id).step``, the inputs that make a naive
parser backtrack or rescan (``agentgym_turn.testing.linearity.WORST_RESPONSES``): the reported
``"<answer>option" + " " * 65506 + "!</answer>"``, long runs of ``<``, ``[``, ``search[``,
``click[``, nested and unclosed tags, and near-misses of each env's syntax, each at the
action-length limit (65,536 characters, still parsed). ``tests/agentgym_turn/core/test_parsing.py`` counts the
same families' work at small sizes (no clock); this script shows the seconds. Each input
is stepped in several states (after ``reset``, and after one and two of the expert's moves, where
the env parses differently: WebShop's result and item pages), and the CPU time (``process_time``)
of the one step is recorded. A step that runs past ``--budget`` seconds is stopped by SIGALRM
(Python's regex engine checks for signals) and recorded as over budget.

Each family is also timed at half the length: the full/half ratio is about 2 for linear work and
4 for quadratic (given where the half-length step takes at least 5 ms).

Results go to ``benchmarks/results/parsers.json``: per id, per input, the slowest state's
seconds, plus the slowest input per id. "Well under a second" per step is the bar.
"""

from __future__ import annotations

import argparse
import signal
import time
from pathlib import Path
from typing import Any

import gymnasium as gym

import agentgym_turn
from agentgym_turn.testing.linearity import WORST_RESPONSES, worst_response

try:  # python -m benchmarks.parsers, or imported by the tests
    from benchmarks import common
except ModuleNotFoundError:  # python benchmarks/parsers.py: this folder comes first on the import path
    import common

RESULTS = common.RESULTS / "parsers.json"
LIMIT = 65_536  # the default action-length limit: longer responses are rejected before parsing


def worst_inputs(length: int = LIMIT) -> dict[str, str]:
    """Every :data:`~agentgym_turn.testing.linearity.WORST_RESPONSES` family at ``length``
    characters, plus the reported exact string (30 characters shorter)."""
    inputs = {"reported_mcq_option_spaces": "<answer>option" + " " * 65506 + "!</answer>"}
    inputs.update({name: worst_response(name, length) for name in WORST_RESPONSES})
    return inputs


class _OverBudget(Exception):
    pass


def _on_alarm(signum: int, frame: Any) -> None:
    raise _OverBudget


def _states(env_id: str, seed: int) -> list[tuple[str, gym.Env]]:
    """Fresh envs in up to three states: after reset, after one and two expert moves."""
    out = []
    for moves in range(3):
        env = gym.make(env_id, max_episode_steps=1000)
        env.reset(seed=seed)
        alive = True
        for _ in range(moves):
            _, _, terminated, truncated, _ = env.step(env.unwrapped.expert_action())
            if terminated or truncated:
                alive = False
                break
        if alive:
            out.append((f"after {moves} expert move(s)", env))
    return out


def _slowest(env_id: str, text: str, budget: float, seed: int) -> tuple[float, str, Any]:
    """CPU seconds of one step with ``text`` in the env's slowest state (inf when stopped)."""
    worst, where, valid = 0.0, "", None
    for label, env in _states(env_id, seed):
        t0 = time.process_time()
        signal.setitimer(signal.ITIMER_REAL, budget)
        try:
            _, _, _, _, info = env.step(text)
            seconds = time.process_time() - t0
        except _OverBudget:
            seconds, info = float("inf"), {}
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
        if seconds >= worst:
            worst, where, valid = seconds, label, info.get("action_is_valid")
    return worst, where, valid


def measure(env_id: str, inputs: dict[str, str], budget: float, seed: int = 0) -> dict[str, Any]:
    """Slowest per-step CPU seconds for each input over the env's states, at the full length and,
    for the families, at half of it (a ratio near 2 is linear, near 4 quadratic)."""
    per_input: dict[str, Any] = {}
    signal.signal(signal.SIGALRM, _on_alarm)
    for name, text in inputs.items():
        worst, where, valid = _slowest(env_id, text, budget, seed)
        row: dict[str, Any] = {
            "length": len(text),
            "seconds": None if worst == float("inf") else round(worst, 6),
            "over_budget": worst == float("inf"),
            "state": where,
            "action_is_valid": valid,
        }
        if name in WORST_RESPONSES and worst != float("inf"):
            half, _, _ = _slowest(env_id, worst_response(name, len(text) // 2), budget, seed)
            row["seconds_at_half_length"] = round(half, 6)
            # below ~5 ms the clock's resolution and noise swamp the ratio
            row["ratio_full_to_half"] = round(worst / half, 2) if half >= 0.005 else None
        per_input[name] = row
        shown = f"> {budget:.0f} s (stopped)" if worst == float("inf") else f"{worst * 1000:9.2f} ms"
        ratio = row.get("ratio_full_to_half")
        print(f"  {env_id:24s} {name:30s} {shown}  {where}" + (f"  x{ratio} vs half" if ratio else ""), flush=True)
    slowest = max(per_input, key=lambda k: float("inf") if per_input[k]["over_budget"] else per_input[k]["seconds"])
    timed = [r["ratio_full_to_half"] for r in per_input.values() if r.get("ratio_full_to_half")]
    return {
        "inputs": per_input,
        "slowest_input": slowest,
        "slowest": per_input[slowest],
        "max_ratio_full_to_half": max(timed, default=None),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", action="append", default=[], metavar="ID", help="measure only this id (repeatable)")
    parser.add_argument(
        "--budget", type=float, default=20.0, help="seconds after which one step is stopped (default 20)"
    )
    parser.add_argument("--out", type=Path, default=RESULTS, help="where to write the JSON results")
    args = parser.parse_args(argv)
    ids = args.only or agentgym_turn.env_ids()
    unknown = sorted(set(ids) - set(agentgym_turn.env_ids()))
    if unknown:
        parser.error(f"--only {unknown[0]!r} is not a registered id; choose from {agentgym_turn.env_ids()}")
    inputs = worst_inputs()
    results: dict[str, Any] = {}
    for env_id in ids:
        results[env_id] = measure(env_id, inputs, args.budget)
    payload = {
        "what": "CPU seconds (time.process_time) of one gymnasium.make(id).step(response) on worst-case responses "
        "at the 65,536-character action limit and at half of it; the slowest of up to three env states per input; "
        "ratio_full_to_half near 2 is linear, near 4 quadratic (given only where the half-length step takes 5 ms or more)",
        "budget_seconds": args.budget,
        **common.machine(),
        "results": results,
    }
    if args.only:  # keep the other ids' rows when re-measuring a few
        payload["results"] = {**common.read_json(args.out, {}).get("results", {}), **results}
    common.write_json(args.out, payload, indent=2, ensure_ascii=True)
    print(f"wrote {args.out.name}")
    for env_id, r in results.items():
        s = r["slowest"]
        shown = "over budget" if s["over_budget"] else f"{s['seconds'] * 1000:.1f} ms"
        print(
            f"{env_id:24s} slowest: {r['slowest_input']} ({shown}); largest full/half ratio {r['max_ratio_full_to_half']}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
