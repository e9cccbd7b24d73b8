"""GRPO on a real chat model: the reference trainer against TRL's ``GRPOTrainer``, interleaved in one process.

Both train SmolLM2-135M-Instruct (or ``--model``) with GRPO on the SmolLM2 Sokoban recipe's env
(``reference_trainer.recipes.sokoban_smollm2``: compact prompt, training levels, 5 turns, 32 new
tokens a turn, temperature 1), with the same episodes per step (``--tasks`` levels x ``--group``
rollouts), one optimizer step per batch in micro-batches of ``--micro-batch`` episodes, float32, the
same torch threads. TRL plays the env through
the project's token-exact ``rollout_func`` (:func:`agentgym_turn.integrations.trl.token_rollout`,
which samples each turn with ``generate`` over the whole conversation); the reference trainer
keeps each episode's KV cache across turns. The steps alternate: a TRL callback runs one
reference-trainer iteration after each TRL step, so both see the same machine load.

Per side: episodes per hour, rollout tokens/s (sampled tokens over rollout seconds) and update
tokens/s (every token of the batch's sequences over the update's seconds), each a median over the
timed steps (the first step of each side is a warm-up and not counted), and the ratio
reference / TRL of each. Writes ``benchmarks/results/trl_throughput.json``::

    python benchmarks/trl_throughput.py                    # 4 timed steps each, 4 levels x 8 rollouts
    python benchmarks/trl_throughput.py --steps 2 --model DIR
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from typing import Any

os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")

try:  # python -m benchmarks.trl_throughput, or imported by the tests
    from benchmarks import common
except ModuleNotFoundError:  # python benchmarks/trl_throughput.py
    import common

OUT = common.RESULTS / "trl_throughput.json"


def _reference(model: str, args: argparse.Namespace, out: str):
    """The reference trainer's GRPO on the recipe's env, one optimizer step per batch of ``tasks x group`` episodes."""
    from reference_trainer.recipes import RECIPES
    from reference_trainer.trainer import Trainer

    cfg = RECIPES["sokoban_smollm2"].build(
        "grpo",
        model=model,
        sft_episodes=0,
        iterations=args.steps + 1,
        eval_episodes=1,
        tasks_per_iteration=args.tasks,
        group_size=args.group,
        num_envs=args.tasks * args.group,
        minibatch_size=args.tasks * args.group,
        micro_batch_size=args.micro_batch,
        micro_batch_tokens=0,
        lr=args.lr,
        threads=args.threads,
        seed=args.seed,
        out=out,
        progress=False,
    )
    return Trainer(cfg), cfg


def _row(seconds_rollout: float, seconds_update: float, episodes: int, sampled: int, tokens: int) -> dict[str, float]:
    return {
        "rollout_s": seconds_rollout,
        "update_s": seconds_update,
        "episodes": episodes,
        "sampled_tokens": sampled,
        "tokens": tokens,
        "episodes_per_hour": 3600 * episodes / (seconds_rollout + seconds_update),
        "rollout_tokens_per_s": sampled / seconds_rollout,
        "update_tokens_per_s": tokens / seconds_update,
    }


def run(args: argparse.Namespace) -> dict[str, Any]:
    import torch
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    from agentgym_turn.integrations.trl import env_return_reward, token_rollout
    from reference_trainer.models import resolve_model
    from reference_trainer.policy import load_tokenizer

    torch.set_num_threads(args.threads)
    model_dir = resolve_model(args.model)
    work = tempfile.mkdtemp(prefix="trl-throughput-")
    ref, cfg = _reference(str(model_dir), args, os.path.join(work, "reference"))
    r = cfg.rollout
    rollout = token_rollout(
        cfg.train.env,
        max_turns=5,
        max_new_tokens=r.max_new_tokens,
        temperature=r.temperature,
        split_system_prompt=False,
        max_length=r.max_context_tokens,
        **r.env_kwargs,
    )
    timed_rollout: list[tuple[float, int, int, int]] = []  # seconds, episodes, sampled tokens, all tokens

    def rollout_func(prompts, trainer):
        t0 = time.perf_counter()
        out = rollout(prompts, trainer)
        tokens = sum(len(p) + len(c) for p, c in zip(out["prompt_ids"], out["completion_ids"]))
        timed_rollout.append((time.perf_counter() - t0, len(out["prompt_ids"]), sum(map(sum, out["env_mask"])), tokens))
        return out

    steps = args.steps + 1  # the first of each side is a warm-up
    if (args.tasks * args.group) % args.micro_batch:
        raise SystemExit(
            f"--micro-batch ({args.micro_batch}) must divide --tasks x --group ({args.tasks * args.group})."
        )
    per_step = args.tasks * args.group
    # training levels: seeds the recipe's RL draws from (the "train" split of the env options), as the reference's
    dataset = Dataset.from_dict({"prompt": [str(s) for s in range(steps * args.tasks)]})
    config = GRPOConfig(
        output_dir=os.path.join(work, "trl"),
        max_steps=steps,
        per_device_train_batch_size=args.micro_batch,
        gradient_accumulation_steps=per_step // args.micro_batch,  # one generation and one optimizer step per batch
        num_generations=args.group,
        max_completion_length=r.max_context_tokens,
        learning_rate=args.lr,
        temperature=r.temperature,
        beta=0.0,
        num_iterations=1,
        logging_steps=1,
        save_strategy="no",
        report_to="none",
        use_cpu=True,
        bf16=False,
        seed=args.seed,
        shuffle_dataset=False,
        dataloader_num_workers=0,
        gradient_checkpointing=False,
        disable_tqdm=True,
    )
    tokenizer = load_tokenizer(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    rows: dict[str, list[dict[str, float]]] = {"reference": [], "trl": []}

    class Interleave(TrainerCallback):
        """Times each TRL step, then runs one reference iteration before TRL's next."""

        def on_step_begin(self, *a, **k):
            self.t0 = time.perf_counter()

        def on_step_end(self, *a, **k):
            seconds = time.perf_counter() - self.t0
            rollout_s, episodes, sampled, tokens = timed_rollout[-1]
            rows["trl"].append(_row(rollout_s, seconds - rollout_s, episodes, sampled, tokens))
            m = ref.train_iteration()
            n = int(m["rollout/episodes"])
            sampled = round(
                m["rollout/response_tokens"] * m["rollout/turns"] * n
            )  # per turn x turns per episode x episodes
            rows["reference"].append(
                _row(m["time/rollout_s"], m["time/update_s"], n, sampled, round(m["rollout/tokens"] * n))
            )
            print(
                f"step {len(rows['trl'])}/{steps}: TRL {rows['trl'][-1]['episodes_per_hour']:.0f} episodes/h, "
                f"reference {rows['reference'][-1]['episodes_per_hour']:.0f} episodes/h",
                flush=True,
            )

    trainer = GRPOTrainer(
        model=model,
        args=config,
        train_dataset=dataset,
        processing_class=tokenizer,
        reward_funcs=[env_return_reward],
        rollout_func=rollout_func,
        callbacks=[Interleave()],
    )
    trainer.train()
    ref.close()
    keys = ("episodes_per_hour", "rollout_tokens_per_s", "update_tokens_per_s")
    median = {side: {k: statistics.median(row[k] for row in rs[1:]) for k in keys} for side, rs in rows.items()}
    return {
        "machine": common.machine(threads=args.threads, load_average=common.load_average()),
        "settings": {
            "model": args.model,
            "recipe": "reference_trainer.recipes.sokoban_smollm2",
            "env": cfg.train.env,
            "env_kwargs": r.env_kwargs,
            "tasks_per_step": args.tasks,
            "group": args.group,
            "timed_steps": args.steps,
            "micro_batch": args.micro_batch,
            "max_new_tokens": r.max_new_tokens,
            "max_turns": 5,
            "temperature": r.temperature,
            "lr": args.lr,
            "dtype": "float32",
            "trl": common.installed_version("trl"),
        },
        "steps": rows,
        "median": median,
        "ratio_reference_over_trl": {k: median["reference"][k] / median["trl"][k] for k in keys},
    }


def markdown(result: dict[str, Any]) -> str:
    m, ratio = result["median"], result["ratio_reference_over_trl"]
    return "\n".join(
        [
            "| median of timed steps | reference trainer | TRL GRPOTrainer + token_rollout | reference / TRL |",
            "|---|---|---|---|",
            *[
                f"| {label} | {m['reference'][k]:.1f} | {m['trl'][k]:.1f} | {ratio[k]:.2f} |"
                for label, k in (
                    ("episodes per hour", "episodes_per_hour"),
                    ("rollout tokens/s (sampled)", "rollout_tokens_per_s"),
                    ("update tokens/s (whole sequences)", "update_tokens_per_s"),
                )
            ],
        ]
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "--model", default="smollm2-135m-instruct", help="a named model, .gguf file or checkpoint directory"
    )
    ap.add_argument("--steps", type=int, default=4, help="timed steps per side (after one warm-up step each)")
    ap.add_argument("--tasks", type=int, default=4, help="levels per step")
    ap.add_argument("--group", type=int, default=8, help="rollouts per level (GRPO's group)")
    ap.add_argument(
        "--micro-batch", type=int, default=4, help="episodes per forward/backward on both sides (gradient accumulation)"
    )
    ap.add_argument("--lr", type=float, default=1e-5)
    ap.add_argument("--threads", type=int, default=min(2, os.cpu_count() or 1))
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=str(OUT))
    ap.add_argument("--markdown", action="store_true", help="only print the docs table of the saved result")
    return common.run_and_report(ap.parse_args(argv), run, markdown)


if __name__ == "__main__":
    sys.exit(main())
