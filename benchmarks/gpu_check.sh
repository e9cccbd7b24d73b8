#!/usr/bin/env bash
# One short prepared command for a lent GPU: a Qwen2.5-0.5B-sized random-init model in
# bfloat16 (--dtype auto); prints tokens/s and peak memory of generation and of the update
# (plain, chunked log-probs, float16 + GradScaler, gradient checkpointing), one end-to-end
# ST-PPO iteration, and writes benchmarks/results/gpu_check.json. `--dry-run` runs a tiny
# config on CPU (tests/reference_trainer/test_policy_gpu_path.py runs it).
# `--recipe NAME` runs a learning recipe on the GPU instead (e.g. sokoban_smollm2): zero-shot,
# SFT seed 0, Turn-PPO and ST-PPO with RL seeds 0 and 1, SFT continued, in bfloat16 autocast with
# the ratio's denominator recomputed (bfloat16 log-probs differ from the sampled ones) and every
# episode of an iteration in one batch; the recipe's tasks, budget and learning rates unchanged.
# Results: benchmarks/results/gpu/learning_NAME.json.
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-.venv/bin/python}"
[ -x "$PY" ] || PY=python3
if [ "${1:-}" = "--recipe" ]; then
    exec "$PY" benchmarks/learning.py --env "$2" --algo turn-ppo st-ppo --sft-seeds 0 --seeds 0 1 --jobs 1 \
        --work runs/learning_gpu --out-dir benchmarks/results/gpu \
        --set device=cuda dtype=bfloat16 recompute_old_logp=true num_envs=256 micro_batch_tokens=16384
fi
if [ "${1:-}" = "--dry-run" ]; then
    exec "$PY" -m benchmarks.gpu_check "$@"
fi
exec "$PY" -m benchmarks.gpu_check --out benchmarks/results/gpu_check.json "$@"
