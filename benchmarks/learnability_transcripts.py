"""Why a learnability climb's start fails: its sampled episodes on training tasks, sorted by how each one ended.

    python benchmarks/learnability_transcripts.py                                   # TurnSearchQA-MCQ-v0, 200 SFT steps
    python benchmarks/learnability_transcripts.py --max-new-tokens 32 --out /tmp/mcq32.json      # another reply budget

Builds the climb of ``agentgym_turn.testing.learnability`` as the check builds it (its config, its context sized to
the demonstrations, SFT 10 steps at a time until the sampled play reaches the start level or the ceiling), then plays
the check's 64 probe tasks once more, sampling as RL would, and sorts the episodes: solved; answered, with a valid
option or with something else; cut by the turn limit; cut by the context. For each episode it also records whether the
first search asked for what the expert's first search asked for (the copy the tiny model must make), and how many
replies used the whole reply budget (sampling stops them there). Writes the counts
and a few transcripts of each kind to ``benchmarks/results/learnability_transcripts_<id>.json``.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

try:
    from benchmarks import common
except ImportError:  # run as a script: this folder is first on the path
    import common

#: Transcripts kept per kind of ending.
EXAMPLES = 3


def ending(episode: Any, options: tuple[str, ...]) -> str:
    """How a sampled episode ended: ``solved``, ``wrong option``, ``not an option`` (an answer outside ``options``),
    ``turn limit``, ``context`` or ``other``."""
    if episode.success:
        return "solved"
    if episode.truncation == "env":
        return "turn limit"
    if episode.truncation == "context":
        return "context"
    if episode.terminated:
        prediction = str(episode.infos[-1].get("prediction", "")).strip()
        return "wrong option" if prediction in options else "not an option"
    return "other"


def _search_query(text: str) -> str | None:
    from agentgym_turn.core.parsing import TagMatch, find_tagged

    found = find_tagged(text, ("search",))
    return " ".join(found.content.split()).lower() if isinstance(found, TagMatch) else None


def _expert_first_queries(env_id: str, env_kwargs: dict[str, Any], seeds: list[int]) -> list[str | None]:
    """The expert's first search query on each task (None: it answers without one)."""
    import gymnasium as gym

    env = gym.make(env_id, **env_kwargs)
    out = []
    try:
        for seed in seeds:
            env.reset(seed=seed)
            out.append(_search_query(env.unwrapped.expert_action()))
    finally:
        env.close()
    return out


def transcript(episode: Any, limit: int = 600) -> list[dict[str, str]]:
    """The episode's turns: each response and the start of the env's answer to it."""
    conv = episode.conversation
    return [
        {"response": r, "env": (conv.observations[i + 1] if i + 1 < len(conv.observations) else "")[:limit]}
        for i, r in enumerate(conv.responses)
    ]


def run(env_id: str, sft_max_steps: int | None, seed: int, max_new_tokens: int | None = None) -> dict[str, Any]:
    from agentgym_turn.testing.learnability import LearnBudget, climb_trainer, probe_seeds, sft_to_start
    from reference_trainer.recipes.runs import one_thread

    one_thread()
    budget = LearnBudget(sft_max_steps=sft_max_steps, max_new_tokens=max_new_tokens)
    with tempfile.TemporaryDirectory(prefix="transcripts-") as tmp:
        t0 = time.perf_counter()
        trainer, metric, ceiling = climb_trainer(env_id, {}, budget, seed, Path(tmp))
        cfg, probe = trainer.cfg, probe_seeds(trainer)
        try:
            levels = sft_to_start(trainer, budget, metric, ceiling)
            episodes = trainer.rollout(probe)
        finally:
            trainer.close()
        seconds = time.perf_counter() - t0
    expert = _expert_first_queries(env_id, cfg.rollout.env_kwargs, probe)
    options = ("A", "B", "C", "D")
    kinds = [ending(e, options) for e in episodes]
    first = [next((q for q in map(_search_query, e.conversation.responses) if q is not None), None) for e in episodes]
    same_search = [f is not None and f == x for f, x in zip(first, expert)]
    budget_tokens = cfg.rollout.max_new_tokens
    replies = [
        (b - a, bool(info.get("action_is_valid", True)))
        for e in episodes
        for (a, b), info in zip(e.conversation.action_spans, e.infos)
    ]
    examples: dict[str, list[Any]] = {}
    for kind, e in zip(kinds, episodes):
        if len(examples.setdefault(kind, [])) < EXAMPLES:
            examples[kind].append({"seed": e.seed, "turns": transcript(e)})
    return {
        "env": env_id,
        "sft_steps": len(levels) * budget.sft_chunk,
        "sampled_levels": levels,
        "max_context_tokens": cfg.rollout.max_context_tokens,
        "max_new_tokens": cfg.rollout.max_new_tokens,
        "tasks": len(episodes),
        "endings": dict(Counter(kinds)),
        "turns": dict(Counter(e.num_turns for e in episodes)),
        "invalid_turns": sum(not valid for _, valid in replies),
        "invalid_replies_using_the_whole_budget": sum(n >= budget_tokens and not valid for n, valid in replies),
        "valid_replies_using_the_whole_budget": sum(n >= budget_tokens and valid for n, valid in replies),
        "first_search_as_the_expert": sum(same_search),
        "searched": sum(f is not None for f in first),
        "answers": dict(Counter(str(e.infos[-1].get("prediction", "")) for e in episodes if e.terminated)),
        "seconds": round(seconds, 1),
        "examples": examples,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--id", default="TurnSearchQA-MCQ-v0", help="the registered id (default: %(default)s)")
    parser.add_argument("--sft-max-steps", type=int, default=None, help="SFT's ceiling (default: the check's)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--max-new-tokens", type=int, default=None, help="the reply budget (default: the check's)")
    parser.add_argument("--out", type=Path, default=None, help="where to write (default: benchmarks/results/...)")
    args = parser.parse_args(argv)
    result = {
        "machine": common.machine(),
        "seed": args.seed,
        **run(args.id, args.sft_max_steps, args.seed, args.max_new_tokens),
    }
    out = args.out or common.RESULTS / f"learnability_transcripts_{args.id}.json"
    common.write_json(out, result)
    keys = ("sft_steps", "max_new_tokens", "endings", "invalid_turns", "invalid_replies_using_the_whole_budget")
    print({k: result[k] for k in keys})
    print(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
