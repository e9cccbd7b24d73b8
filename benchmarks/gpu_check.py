"""A short, prepared check of the reference trainer on a GPU (see docs/trainer.md, "GPU").

Builds a Qwen2.5-0.5B-sized model (hidden 896, 24 layers, 14 heads, 2 KV heads, vocabulary
151,936) with random weights from a config (no downloads) and the tiny TurnSokoban tokenizer,
then measures, with float32 master weights and ``--dtype auto`` autocast (bfloat16 on CUDA):

1. generation: tokens per second and peak memory of ``Policy.generate`` (KV cache, sampling on
   the device, batch of prompts);
2. update: tokens per second and peak memory of a forward + backward pass of
   ``Policy.evaluate`` + PPO loss + AdamW step, four ways: ``plain`` (all log-probs at once),
   ``chunked`` (``logprob_chunk_tokens``), ``float16_scaler`` (float16 autocast with a
   ``torch.amp.GradScaler``) and ``checkpointed`` (chunked + gradient checkpointing);
3. end to end: two ST-PPO iterations on TurnSokoban-v0 (rollout, advantages, micro-batched
   update with the clipping-bias correction, chunked log-probs);

and prints one JSON object. ``--dry-run`` uses a tiny config on CPU so the script itself is tested
in the suite (``tests/reference_trainer/test_policy_gpu_path.py``, ``tests/reference_trainer/test_trainer.py``); peak memory is then
``null`` (CPU peaks: ``benchmarks/logprob_memory.py``). Run: ``bash benchmarks/gpu_check.sh``
(or ``python -m benchmarks.gpu_check`` from the repository root).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

import torch

try:  # python -m benchmarks.gpu_check, or imported by the tests
    from benchmarks import common
except ModuleNotFoundError:  # python benchmarks/gpu_check.py: this folder comes first on the import path
    import common

QWEN25_05B = dict(
    hidden_size=896,
    intermediate_size=4864,
    num_hidden_layers=24,
    num_attention_heads=14,
    num_key_value_heads=2,
    vocab_size=151_936,
    max_position_embeddings=32_768,
    rope_theta=1e6,
    rms_norm_eps=1e-6,
    tie_word_embeddings=True,
)
DRY = dict(
    hidden_size=64,
    intermediate_size=128,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    vocab_size=1024,
    max_position_embeddings=2048,
    tie_word_embeddings=True,
)


def _update_step(
    policy: Any,
    ids: torch.Tensor,
    act: torch.Tensor,
    turns: torch.Tensor,
    opt: torch.optim.Optimizer,
    scaler: torch.amp.GradScaler | None,
) -> float:
    """One forward + backward + AdamW step of a turn-level PPO loss on ``ids [B, L]``; returns the loss."""
    from reference_trainer.losses import policy_loss

    o = policy.evaluate(ids, torch.ones_like(ids), act)
    loss, _ = policy_loss(o.logp, o.logp.detach() - 0.01, torch.ones_like(o.logp), act, turns, ratio_level="turn")
    loss = loss + (o.values**2).mean()
    if scaler is None:
        loss.backward()
        opt.step()
    else:  # float16: scale the loss up so small gradients do not underflow, unscale before the step
        scaler.scale(loss).backward()
        scaler.unscale_(opt)
        torch.nn.utils.clip_grad_norm_(policy.parameters(), 1.0)
        scaler.step(opt)
        scaler.update()
    opt.zero_grad(set_to_none=True)
    return float(loss)


def _measure(fn: Callable[[], float], tokens: int, device: str, repeats: int) -> dict[str, Any]:
    """Tokens per second (best of ``repeats`` after one warm-up) and peak allocated GPU memory (``None`` on CPU)."""
    cuda = device.startswith("cuda")
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    if cuda:
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(device)
    times, values = [], []
    try:
        for _ in range(repeats + 1):
            sync()
            t0 = time.perf_counter()
            values.append(fn())
            sync()
            times.append(time.perf_counter() - t0)
    except torch.OutOfMemoryError:  # a smaller GPU: the record says which paths fit
        return {
            "tokens_per_s": None,
            "out_of_memory": True,
            "finite": True,
            "peak_memory_gib": round(torch.cuda.max_memory_allocated(device) / 2**30, 2) if cuda else None,
        }
    return {
        "tokens_per_s": round(tokens / min(times[1:]), 1),
        "peak_memory_gib": round(torch.cuda.max_memory_allocated(device) / 2**30, 2) if cuda else None,
        "finite": all(math.isfinite(v) for v in values),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dry-run", action="store_true", help="tiny config on CPU (seconds; used by the tests)")
    ap.add_argument("--device", default=None, help="default: cuda, or cpu with --dry-run")
    ap.add_argument("--out", default=None, help="also write the JSON here")
    args = ap.parse_args(argv)
    device = args.device or ("cpu" if args.dry_run else "cuda")
    if device.startswith("cuda") and not torch.cuda.is_available():
        print("No CUDA device: run with --dry-run on CPU.", file=sys.stderr)
        return 2
    torch.set_num_threads(1 if args.dry_run else torch.get_num_threads())

    import transformers
    from transformers import AutoModelForCausalLM, Qwen2Config

    import agentgym_turn  # noqa: F401
    from reference_trainer.config import preset
    from reference_trainer.policy import DTYPES, Policy, load_policy, resolve_dtype
    from reference_trainer.tiny import build_tiny
    from reference_trainer.trainer import Trainer

    transformers.utils.logging.disable_progress_bar()
    sizes = DRY if args.dry_run else QWEN25_05B
    scale = (
        dict(gen_batch=8, gen_tokens=8, train_batch=4, train_len=64, chunk=16, tasks=4, micro=2, max_new=8, repeats=1)
        if args.dry_run
        else dict(
            gen_batch=64,
            gen_tokens=128,
            train_batch=16,
            train_len=1024,
            chunk=1024,
            tasks=32,
            micro=8,
            max_new=48,
            repeats=2,
        )
    )
    cuda = device.startswith("cuda")
    dtype = resolve_dtype("auto", device, bf16_supported=cuda and torch.cuda.is_bf16_supported())
    result: dict = {
        "device": torch.cuda.get_device_name(device) if cuda else "cpu",
        **common.machine(),
        "dtype": f"{dtype} autocast (--dtype auto), float32 weights",
    }
    with tempfile.TemporaryDirectory() as tmp:
        tiny = build_tiny("TurnSokoban-v0", Path(tmp) / "tiny", env_kwargs={"prompt_style": "compact"})
        _, tokenizer = load_policy(tiny)
        config = Qwen2Config(**sizes, eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id)
        t0 = time.perf_counter()
        torch.manual_seed(0)
        with torch.device(device):
            lm = AutoModelForCausalLM.from_config(config)
        policy = Policy(lm, compute_dtype=DTYPES[dtype], vocab_limit=len(tokenizer)).to(device)
        result["params"] = sum(p.numel() for p in policy.parameters())
        result["build_s"] = round(time.perf_counter() - t0, 2)
        sync = torch.cuda.synchronize if cuda else (lambda: None)

        # 1. generation: sampling on the device, KV cache
        gen = torch.Generator().manual_seed(0)
        prompts = [torch.randint(3, len(tokenizer), (60,), generator=gen).tolist() for _ in range(scale["gen_batch"])]
        lengths: list[int] = []

        def generate() -> float:
            out, lps = policy.generate(
                prompts,
                max_new_tokens=scale["gen_tokens"],
                stop_ids=frozenset(),
                pad_id=tokenizer.pad_token_id,
                generator=gen,
            )
            lengths.append(sum(map(len, out)))
            return sum(map(sum, lps))

        result["generate"] = _measure(generate, scale["gen_batch"] * scale["gen_tokens"], device, scale["repeats"])
        result["generate_tokens_per_s"] = result["generate"]["tokens_per_s"]  # (the key earlier runs recorded)

        # 2. update: forward + backward of the PPO loss on [B, L], half of it response tokens, four ways
        B, L = scale["train_batch"], scale["train_len"]
        ids = torch.randint(3, len(tokenizer), (B, L), generator=gen).to(device)
        act = torch.zeros(B, L, dtype=torch.bool, device=device)
        act[:, L // 2 :] = True
        turns = (torch.arange(L, device=device) // 64).expand(B, L)
        opt = torch.optim.AdamW(policy.parameters(), lr=1e-6)
        paths = {
            "plain": dict(chunk=0, dtype=DTYPES[dtype]),
            "chunked": dict(chunk=scale["chunk"], dtype=DTYPES[dtype]),
            "float16_scaler": dict(chunk=scale["chunk"], dtype=torch.float16),
        }  # "checkpointed" comes last (below)
        result["update"] = {}
        for name, path in paths.items():
            policy.logprob_chunk_tokens = path["chunk"]
            policy.compute_dtype = None if path["dtype"] == torch.float32 else path["dtype"]
            scaler = torch.amp.GradScaler(device.split(":")[0]) if path["dtype"] == torch.float16 else None
            result["update"][name] = {
                "logprob_chunk_tokens": path["chunk"],
                "dtype": str(path["dtype"]).removeprefix("torch."),
                **_measure(lambda: _update_step(policy, ids, act, turns, opt, scaler), B * L, device, scale["repeats"]),
            }
            opt.zero_grad(set_to_none=True)  # (after an out-of-memory error the gradients are partial)
        result["train_tokens_per_s"] = result["update"]["plain"]["tokens_per_s"]  # (the key earlier runs recorded)
        policy.compute_dtype = None if dtype == "float32" else DTYPES[dtype]

        # 3. end to end: ST-PPO on TurnSokoban-v0, chunked log-probs
        cfg = preset(
            "st-ppo",
            device=device,
            dtype="auto",
            tasks_per_iteration=scale["tasks"],
            num_envs=scale["tasks"],
            max_new_tokens=scale["max_new"],
            max_context_tokens=2048,
            env_kwargs={"prompt_style": "compact"},
            lr=1e-6,
            minibatch_size=scale["tasks"] // 2,
            micro_batch_size=scale["micro"],
            logprob_chunk_tokens=scale["chunk"],
            env="TurnSokoban-v0",
            iterations=2,
            eval_episodes=scale["tasks"],
            out=str(Path(tmp) / "run"),
            progress=False,
        )
        trainer = Trainer(cfg, policy=policy, tokenizer=tokenizer)
        its = []
        for _ in range(2):
            sync()
            t0 = time.perf_counter()
            m = trainer.train_iteration()
            sync()
            its.append(time.perf_counter() - t0)
        trainer.close()
        result["iteration_s"] = round(its[-1], 2)
        result["iteration_metrics"] = {k: round(v, 4) for k, v in m.items() if k.startswith(("train/", "rollout/"))}

        # 2 (end). chunked + gradient checkpointing (last: it cannot be switched off again)
        policy.enable_gradient_checkpointing()
        policy.logprob_chunk_tokens = scale["chunk"]
        result["update"]["checkpointed"] = {
            "logprob_chunk_tokens": scale["chunk"],
            "dtype": dtype,
            "gradient_checkpointing": True,
            **_measure(lambda: _update_step(policy, ids, act, turns, opt, None), B * L, device, scale["repeats"]),
        }
        result["finite"] = (
            all(math.isfinite(v) for v in m.values())
            and all(torch.isfinite(p).all().item() for p in policy.parameters())
            and result["generate"]["finite"]
            and all(u["finite"] for u in result["update"].values())
        )
        if cuda:
            result["peak_memory_gib"] = round(torch.cuda.max_memory_allocated(device) / 2**30, 2)
    text = json.dumps(result, indent=1)
    print(text)
    if args.out:
        common.write_json(args.out, result)
    return 0 if result["finite"] else 1


if __name__ == "__main__":
    sys.exit(main())
