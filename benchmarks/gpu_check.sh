#!/usr/bin/env bash
# One short prepared command for a lent GPU: a Qwen2.5-0.5B-sized random-init model in
# bfloat16 (--dtype auto); prints tokens/s and peak memory of generation and of the update
# (plain, chunked log-probs, float16 + GradScaler, gradient checkpointing), one end-to-end
# ST-PPO iteration, and writes benchmarks/results/gpu_check.json. `--dry-run` runs a tiny
# config on CPU (tests/reference_trainer/test_gpu_path.py runs it).
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-.venv/bin/python}"
[ -x "$PY" ] || PY=python3
if [ "${1:-}" = "--dry-run" ]; then
    exec "$PY" -m benchmarks.gpu_check "$@"
fi
exec "$PY" -m benchmarks.gpu_check --out benchmarks/results/gpu_check.json "$@"
