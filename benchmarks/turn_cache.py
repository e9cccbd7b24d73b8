"""What keeping each episode's keys and values across turns saves a multi-turn rollout, beside recomputing them.

    .venv/bin/python benchmarks/turn_cache.py              # about 4 minutes
    .venv/bin/python benchmarks/turn_cache.py --quick      # a smoke run: a few short episodes, nothing written
    .venv/bin/python benchmarks/turn_cache.py --markdown   # the docs table of the saved results

For each case (a 5-turn ``TurnSokoban-v0`` rollout and a 15-turn ``TurnWebShop-v0`` rollout, with the
recipes' env settings) a tiny model of the recipe's size is built offline into a temporary folder
(random weights: sampling is what is timed, not skill). Then ``reference_trainer.rollout.collect``
plays the same episodes (same reset seeds, same sampling seed, one batch, temperature 1) with
``reuse_cache=True`` and ``reuse_cache=False``, alternating the two (``--repeats`` pairs, after one
small untimed warm-up each way) on one torch thread. Every run must give the first run's sampled
tokens (each episode's ``conversation.ids``) and its log-probs within 1e-4; the largest log-prob
difference is recorded. No episode may be cut by the context (``truncation="context"``).
Results: ``benchmarks/results/turn_cache.json`` (per-run wall and CPU seconds, medians, the ratio
no-reuse / reuse of the medians and the min-max of the per-pair ratios); ``docs/trainer.md`` quotes the table.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import gymnasium as gym
import torch

import agentgym_turn  # noqa: F401  (registers the env ids)
from reference_trainer.policy import load_policy
from reference_trainer.recipes.sokoban import SOKOBAN_ENV_KWARGS
from reference_trainer.recipes.webshop import WEBSHOP_ENV_KWARGS
from agentgym_turn.pools import SerialPool
from reference_trainer.rollout import collect
from reference_trainer.tiny import TinySpec, build_tiny
from agentgym_turn.tokens import ChatFormat

try:  # python -m benchmarks.turn_cache, or imported by the tests
    from benchmarks import common
except ModuleNotFoundError:  # python benchmarks/turn_cache.py: this folder comes first on the import path
    import common

RESULTS = common.RESULTS / "turn_cache.json"
#: Largest log-prob difference between the two ways that still counts as the same rollout.
LOGP_TOLERANCE = 1e-4


@dataclass(frozen=True)
class Case:
    """One rollout setting: the env, its turn limit, the tiny model's sizes and the sampling budget."""

    env_id: str
    turns: int  # the env's max_episode_steps
    env_kwargs: dict[str, Any]
    spec: TinySpec  # the recipe's tiny model sizes
    episodes: int
    max_new_tokens: int
    max_context_tokens: int  # large enough that no episode is cut by the context

    def model(self) -> str:
        """The tiny model in words (for the table)."""
        return f"{'GPT-2' if self.spec.arch == 'gpt2' else 'Qwen2'}, {self.spec.num_layers} layers, hidden {self.spec.hidden_size}"


#: The measured cases: the Sokoban recipe's 3-layer GPT-2 tiny, the WebShop recipe's 2-layer Qwen2 tiny (2,048-token vocabulary).
CASES: dict[str, Case] = {
    "sokoban": Case(
        "TurnSokoban-v0",
        5,
        dict(SOKOBAN_ENV_KWARGS),
        TinySpec(arch="gpt2", num_layers=3),
        episodes=64,
        max_new_tokens=32,
        max_context_tokens=1024,
    ),
    "webshop": Case(
        "TurnWebShop-v0",
        15,
        dict(WEBSHOP_ENV_KWARGS),
        TinySpec(arch="qwen2", vocab_size=2048, rope_theta=1e6, max_positions=4096),
        episodes=32,
        max_new_tokens=48,
        max_context_tokens=4096,
    ),
}


def quick(case: Case) -> Case:
    """The smoke setting of ``case``: 4 episodes of at most 8 new tokens a turn, a tokenizer from 8 episodes' text."""
    return replace(case, episodes=4, max_new_tokens=8, spec=replace(case.spec, corpus_episodes=8))


def _run(
    policy: Any,
    fmt: ChatFormat,
    envs: SerialPool,
    case: Case,
    episodes: int,
    max_new_tokens: int,
    reuse: bool,
    seed: int,
) -> tuple[list, float, float]:
    """One ``collect`` of ``episodes`` episodes: (episodes, wall seconds, CPU seconds)."""
    wall, cpu = time.perf_counter(), time.process_time()
    eps = collect(
        policy,
        fmt,
        envs,
        list(range(seed, seed + episodes)),
        generator=torch.Generator().manual_seed(seed),
        max_new_tokens=max_new_tokens,
        max_context_tokens=case.max_context_tokens,
        temperature=1.0,
        reuse_cache=reuse,
    )
    return eps, time.perf_counter() - wall, time.process_time() - cpu


def _largest_logp_difference(reference: list, eps: list) -> float:
    """The largest |log-prob difference| of ``eps`` against ``reference``; raises if any episode's tokens differ."""
    worst = 0.0
    for a, b in zip(reference, eps, strict=True):
        if a.conversation.ids != b.conversation.ids or len(a.sampled_logp) != len(b.sampled_logp):
            raise AssertionError(f"episode {a.seed}: the tokens differ between the runs")
        worst = max([worst, *(abs(x - y) for x, y in zip(a.sampled_logp, b.sampled_logp))])
    return worst


def measure(case: Case, directory: str | Path, *, repeats: int = 5, seed: int = 0, log: bool = False) -> dict[str, Any]:
    """Build ``case``'s tiny model in ``directory`` and time ``repeats`` alternating pairs of rollouts (see the module docstring).

    Raises ``AssertionError`` when a run's tokens differ from the first run's or its log-probs differ by more
    than :data:`LOGP_TOLERANCE`, and ``RuntimeError`` when an episode is cut by the context.
    """
    path = build_tiny(case.env_id, Path(directory) / case.env_id, seed=seed, spec=case.spec, env_kwargs=case.env_kwargs)
    policy, tokenizer = load_policy(path)
    fmt = ChatFormat(tokenizer)
    envs = SerialPool(
        [gym.make(case.env_id, max_episode_steps=case.turns, **case.env_kwargs) for _ in range(case.episodes)]
    )
    try:
        for reuse in (True, False):  # warm-up, untimed
            _run(policy, fmt, envs, case, min(case.episodes, 2), min(case.max_new_tokens, 4), reuse, seed)
        times: dict[str, list[float]] = {"reuse_s": [], "no_reuse_s": [], "reuse_cpu_s": [], "no_reuse_cpu_s": []}
        reference, worst = None, 0.0
        for r in range(repeats):
            for reuse, side in ((True, "reuse"), (False, "no_reuse")):
                eps, wall, cpu = _run(policy, fmt, envs, case, case.episodes, case.max_new_tokens, reuse, seed)
                times[f"{side}_s"].append(wall)
                times[f"{side}_cpu_s"].append(cpu)
                if reference is None:
                    reference = eps
                else:
                    worst = max(worst, _largest_logp_difference(reference, eps))
                if log:
                    print(
                        f"  {case.env_id} repeat {r + 1}/{repeats} {'reuse   ' if reuse else 'no reuse'} {wall:7.2f} s wall {cpu:7.2f} s cpu",
                        flush=True,
                    )
    finally:
        envs.close()
    if worst > LOGP_TOLERANCE:
        raise AssertionError(
            f"{case.env_id}: log-probs differ by {worst:.2e} > {LOGP_TOLERANCE:g} between the two ways"
        )
    assert reference is not None
    cut = [e.seed for e in reference if e.truncation == "context"]
    if cut:
        raise RuntimeError(f"{case.env_id}: episodes {cut} were cut by the context; raise max_context_tokens")
    pair_ratios = [b / a for a, b in zip(times["reuse_s"], times["no_reuse_s"])]
    reuse_median, no_reuse_median = statistics.median(times["reuse_s"]), statistics.median(times["no_reuse_s"])
    endings: dict[str, int] = {}
    for e in reference:
        ending = "terminated" if e.terminated else (e.truncation or "truncated")
        endings[ending] = endings.get(ending, 0) + 1
    spec = asdict(case.spec)
    return {
        "env_id": case.env_id,
        "turn_limit": case.turns,
        "env_kwargs": case.env_kwargs,
        "model": case.model(),
        "tiny_spec": spec,
        "episodes": case.episodes,
        "max_new_tokens": case.max_new_tokens,
        "max_context_tokens": case.max_context_tokens,
        "temperature": 1.0,
        "seed": seed,
        "repeats": repeats,
        "torch_threads": torch.get_num_threads(),
        **times,
        "reuse_median_s": reuse_median,
        "no_reuse_median_s": no_reuse_median,
        "ratio": no_reuse_median / reuse_median,
        "pair_ratio_min": min(pair_ratios),
        "pair_ratio_max": max(pair_ratios),
        "mean_turns": statistics.mean(e.num_turns for e in reference),
        "mean_tokens": statistics.mean(len(e.conversation.ids) for e in reference),
        "max_tokens": max(len(e.conversation.ids) for e in reference),
        "sampled_tokens": sum(len(e.sampled_logp) for e in reference),
        "conversation_tokens": sum(len(e.conversation.ids) for e in reference),
        "endings": endings,
        "same_tokens": True,
        "max_logp_abs_diff": worst,
    }


def markdown(results: dict[str, Any]) -> str:
    """The docs table (``docs/trainer.md``) of a results file's cases."""
    lines = [
        "| rollout | tiny model | episodes | turns / episode | tokens / episode | keys and values kept | recomputed each turn | "
        "recomputed / kept (pairs) | same tokens | max log-prob difference |",
        "|---|---|---:|---:|---:|---:|---:|---:|---|---:|",
    ]
    for r in results["cases"].values():
        lines.append(
            f"| {r['env_id']}, {r['turn_limit']} turns, {r['max_new_tokens']} new tokens | {r['model']} | {r['episodes']} | "
            f"{r['mean_turns']:.1f} | {r['mean_tokens']:.0f} | {r['reuse_median_s']:.2f} s | {r['no_reuse_median_s']:.2f} s | "
            f"{r['ratio']:.2f}x ({r['pair_ratio_min']:.2f}-{r['pair_ratio_max']:.2f}) | "
            f"{'yes' if r['same_tokens'] else 'no'} ({r['sampled_tokens']:,} sampled) | {r['max_logp_abs_diff']:.1e} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--repeats", type=int, default=5, help="alternating pairs of runs per case (default 5)")
    parser.add_argument("--only", nargs="*", choices=sorted(CASES), default=None, help="measure only these cases")
    parser.add_argument(
        "--quick", action="store_true", help="smoke setting: 4 episodes, 8 new tokens, 1 pair; writes only with --out"
    )
    parser.add_argument(
        "--out", default=None, help=f"results file (default {common.shown(RESULTS)}; none with --quick)"
    )
    parser.add_argument("--markdown", action="store_true", help="only print the docs table of the saved results")
    args = parser.parse_args(argv)
    out = args.out or (None if args.quick else RESULTS)
    if args.markdown:
        return common.print_table(out or RESULTS, markdown)
    torch.set_num_threads(1)
    results: dict[str, Any] = {
        "machine": common.machine(load_average=common.load_average(), torch_threads=1),
        "cases": {},
    }
    with tempfile.TemporaryDirectory(prefix="turn_cache_") as tmp:
        for name in args.only or CASES:
            case = quick(CASES[name]) if args.quick else CASES[name]
            row = measure(case, tmp, repeats=1 if args.quick else args.repeats, log=True)
            results["cases"][name] = row
            print(
                f"{row['env_id']:16s} reuse {row['reuse_median_s']:6.2f} s  no reuse {row['no_reuse_median_s']:6.2f} s  "
                f"ratio {row['ratio']:.2f} ({row['pair_ratio_min']:.2f}-{row['pair_ratio_max']:.2f})  turns {row['mean_turns']:.1f}  "
                f"tokens {row['mean_tokens']:.0f}  max |dlogp| {row['max_logp_abs_diff']:.1e}",
                flush=True,
            )
    results["machine"]["load_average_after"] = common.load_average()
    if out is not None:
        print(f"wrote {common.shown(common.write_json(out, results))}")
    return results


if __name__ == "__main__":
    main()
