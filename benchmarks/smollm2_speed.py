"""Where SmolLM2-135M-Instruct's CPU time goes in the Sokoban recipe, and what the speed options change.

On a fixed batch of the recipe's episodes (TurnSokoban-v0 expert games in its compact prompt,
SmolLM2's template), side by side and interleaved (each setting once per round, ``--rounds``):

* **update**: one forward and backward pass of the token log-probs (the policy-gradient part of
  the loss) in float32 and under bfloat16 autocast, with and without gradient checkpointing, on 1
  and 2 threads: tokens/s;
* **rollout**: greedy sampling of one turn for a batch of first prompts with the KV cache, float32
  and bfloat16: new tokens/s;
* **agreement**: the same tokens' log-probs and the token-mean loss under each setting against
  float32, and whether greedy sampling picks the same tokens: what a speed-up would change.

Writes ``benchmarks/results/smollm2_speed.json``::

    python benchmarks/smollm2_speed.py            # 3 rounds, 16 episodes
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from typing import Any

try:  # python -m benchmarks.smollm2_speed
    from benchmarks import common
except ModuleNotFoundError:  # python benchmarks/smollm2_speed.py
    import common

OUT = common.RESULTS / "smollm2_speed.json"
UPDATE = {
    "float32": dict(dtype=None, checkpointing=False),
    "bfloat16 autocast": dict(dtype="bfloat16", checkpointing=False),
    "float32 + gradient checkpointing": dict(dtype=None, checkpointing=True),
}


def run(args: argparse.Namespace) -> dict[str, Any]:
    import torch

    from reference_trainer.models import resolve_model
    from reference_trainer.policy import Policy, load_policy
    from reference_trainer.recipes import RECIPES
    from reference_trainer.rollout import expert_episodes, make_batch
    from reference_trainer.tasks import sft_seeds
    from agentgym_turn.tokens import ChatFormat

    cfg = RECIPES["sokoban_smollm2"].build(out="unused")
    loaded, tokenizer = load_policy(resolve_model(args.model))
    lm = (
        loaded.lm.eval()
    )  # eval mode: only the checkpointing policy puts its layers in training mode (in backward passes)
    fmt = ChatFormat(tokenizer)
    demos = expert_episodes(
        cfg.train.env, fmt, sft_seeds(0, cfg.train.eval_seed, args.episodes), cfg.rollout.env_kwargs
    )
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    batch = make_batch(demos, pad)
    tokens = int(batch.attention_mask.sum())
    prompts = [d.conversation.ids[: d.conversation.action_spans[0][0]] for d in demos]
    policies = {
        name: Policy(lm, compute_dtype=getattr(torch, s["dtype"]) if s["dtype"] else None) for name, s in UPDATE.items()
    }
    for name, s in UPDATE.items():
        if s["checkpointing"]:
            policies[name].enable_gradient_checkpointing()
    rows: dict[str, list[float]] = {}
    logps: dict[str, torch.Tensor] = {}
    losses: dict[str, float] = {}
    greedy: dict[str, list[list[int]]] = {}
    for rnd in range(args.rounds):
        for threads in args.threads:
            torch.set_num_threads(threads)
            for name in UPDATE:
                policy = policies[name]
                lm.zero_grad(set_to_none=True)
                t0 = time.perf_counter()
                out = policy.evaluate(
                    batch.ids, batch.attention_mask, batch.action_mask, with_values=False, with_entropy=False
                )
                loss = -(out.logp * batch.action_mask).sum() / batch.action_mask.sum()
                loss.backward()
                rows.setdefault(f"update, {name}, {threads} threads", []).append(tokens / (time.perf_counter() - t0))
                logps[name], losses[name] = out.logp.detach()[batch.action_mask.bool()], float(loss)
            for name in ("float32", "bfloat16 autocast"):
                gen = torch.Generator().manual_seed(0)
                t0 = time.perf_counter()
                ids, _ = policies[name].generate(
                    prompts,
                    max_new_tokens=args.new_tokens,
                    stop_ids=frozenset(),
                    pad_id=pad,
                    temperature=0.0,
                    generator=gen,
                )
                rows.setdefault(f"rollout, {name}, {threads} threads", []).append(
                    sum(len(x) for x in ids) / (time.perf_counter() - t0)
                )
                greedy[name] = [list(x) for x in ids]
        print(f"round {rnd + 1}/{args.rounds} done", flush=True)
    lm.zero_grad(set_to_none=True)
    ref = logps["float32"]
    agreement = {
        name: {
            "max_abs_logp_diff": float((lp - ref).abs().max()),
            "mean_abs_logp_diff": float((lp - ref).abs().mean()),
            "loss": losses[name],
            "loss_rel_diff": abs(losses[name] - losses["float32"]) / abs(losses["float32"]),
        }
        for name, lp in logps.items()
    }
    same = [a == b for a, b in zip(greedy["float32"], greedy["bfloat16 autocast"])]
    agreement["bfloat16 autocast"]["greedy_responses_equal"] = sum(same) / len(same)
    return {
        "machine": common.machine(load_average=common.load_average()),
        "model": args.model,
        "settings": {
            "episodes": len(demos),
            "tokens": tokens,
            "action_tokens": int(batch.action_mask.sum()),
            "new_tokens": args.new_tokens,
            "rounds": args.rounds,
            "threads": args.threads,
        },
        "tokens_per_s": {k: statistics.median(v) for k, v in rows.items()},
        "all": rows,
        "agreement": agreement,
    }


def markdown(result: dict[str, Any]) -> str:
    lines = ["| setting | tokens/s (median) |", "|---|---|"]
    lines += [f"| {k} | {v:.0f} |" for k, v in result["tokens_per_s"].items()]
    lines += ["", "| against float32 | mean / max abs log-prob diff (nats) | loss, relative diff |", "|---|---|---|"]
    lines += [
        f"| {k} | {v['mean_abs_logp_diff']:.2g} / {v['max_abs_logp_diff']:.2g} | {v['loss_rel_diff']:.2g} |"
        for k, v in result["agreement"].items()
        if k != "float32"
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "--model", default="smollm2-135m-instruct", help="a named model, .gguf file or checkpoint directory"
    )
    ap.add_argument("--episodes", type=int, default=16)
    ap.add_argument("--new-tokens", type=int, default=16, help="tokens sampled per prompt in the rollout timing")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--out", default=str(OUT))
    ap.add_argument("--markdown", action="store_true", help="only print the docs tables of the saved result")
    return common.run_and_report(ap.parse_args(argv), run, markdown)


if __name__ == "__main__":
    sys.exit(main())
