"""Peak memory of the log-prob loss with and without chunking, on CPU.

For each case a fresh subprocess builds ``hidden [N, H]`` (requires grad) and an LM head
``[V, H]``, records its resident set size (RSS), runs the trainer's scoring of ``N`` sampled
tokens (:func:`reference_trainer.logprobs.selected_logprobs`, log-probs and entropies, float32)
forward and backward, and reports the peak RSS above that baseline (``ru_maxrss``): the memory
the loss itself needed, including the ``[V, H]`` weight gradient both ways. Each case runs in its
own process so one peak cannot hide another, with glibc's ``MALLOC_MMAP_THRESHOLD_`` at 128 KiB
so that every tensor buffer is mapped and unmapped on its own and RSS follows the live tensors (by
default freed chunk-sized buffers stay in the heap and RSS overstates the chunked peak). Writes ``benchmarks/results/logprob_memory.json``.

Run: ``python -m benchmarks.logprob_memory`` (default ``--sizes 4096x32768 1024x151936``: the
unchunked case at 4096 x 151,936 needs about 13 GB, more than a shared CI machine should take).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys

try:  # python -m benchmarks.logprob_memory, or imported by the tests
    from benchmarks import common
except ModuleNotFoundError:  # python benchmarks/logprob_memory.py: this folder comes first on the import path
    import common

RESULTS = common.RESULTS / "logprob_memory.json"


def _rss_mib() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize() / 2**20


def one_case(tokens: int, hidden: int, vocab: int, chunk: int) -> dict[str, float]:
    """Run in a fresh process: the loss's peak RSS above the baseline with its inputs allocated (MiB)."""
    import torch

    from reference_trainer.logprobs import selected_logprobs

    torch.set_num_threads(1)
    g = torch.Generator().manual_seed(0)
    h = torch.randn(tokens, hidden, generator=g).mul_(0.1).requires_grad_()  # in place: no second copy raises the peak
    weight = torch.randn(vocab, hidden, generator=g).mul_(0.02).requires_grad_()
    target = torch.randint(0, vocab, (tokens,), generator=g)
    small = weight.detach()[:64].clone().requires_grad_()  # warm-up (kernels, allocator) far below the measured sizes
    lp, ent = selected_logprobs(lambda x: x @ small.T, h.detach()[:8], target[:8] % 64, chunk_tokens=4)  # noqa: F821
    (lp.sum() + ent.sum()).backward()
    del small, lp, ent
    base = _rss_mib()
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024 < base + 64, "baseline is not the peak so far"
    lp, ent = selected_logprobs(lambda x: x @ weight.T, h, target, chunk_tokens=chunk)
    loss = -lp.mean() - 0.01 * ent.mean()  # a PPO-like use: log-probs and the entropy bonus
    loss.backward()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux
    return {"baseline_mib": round(base, 1), "peak_above_baseline_mib": round(peak - base, 1), "loss": float(loss)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", nargs="+", default=["4096x32768", "1024x151936"], help="scored tokens N x vocabulary V")
    ap.add_argument("--hidden", type=int, default=896, help="hidden size H (Qwen2.5-0.5B: 896)")
    ap.add_argument("--chunk", type=int, default=256, help="logprob_chunk_tokens of the chunked case")
    ap.add_argument("--out", default=str(RESULTS), help="where to write the JSON")
    ap.add_argument("--case", nargs=4, type=int, metavar=("N", "H", "V", "CHUNK"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.case:  # the child process
        print(json.dumps(one_case(*args.case)))
        return 0
    rows = []
    for size in args.sizes:
        tokens, vocab = map(int, size.lower().split("x"))
        row: dict = {
            "tokens": tokens,
            "hidden": args.hidden,
            "vocab": vocab,
            "full_logits_mib": round(tokens * vocab * 4 / 2**20, 1),
        }
        for name, chunk in (("unchunked", 0), ("chunked", args.chunk)):
            p = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "benchmarks.logprob_memory",
                    "--case",
                    str(tokens),
                    str(args.hidden),
                    str(vocab),
                    str(chunk),
                ],
                capture_output=True,
                text=True,
                cwd=common.ROOT,
                env={**os.environ, "MALLOC_MMAP_THRESHOLD_": str(128 * 1024)},
            )
            if p.returncode != 0:
                raise SystemExit(f"case V={vocab} chunk={chunk} failed:\n{p.stderr[-2000:]}")
            row[name] = {"logprob_chunk_tokens": chunk, **json.loads(p.stdout.strip().splitlines()[-1])}
            print(vocab, name, row[name], flush=True)
        row["reduction"] = round(
            row["unchunked"]["peak_above_baseline_mib"] / max(row["chunked"]["peak_above_baseline_mib"], 1e-9), 2
        )
        row["same_loss"] = abs(row["unchunked"]["loss"] - row["chunked"]["loss"]) <= 1e-5 * max(
            1.0, abs(row["unchunked"]["loss"])
        )
        rows.append(row)
    result = {
        "what": "peak RSS above baseline of the log-prob + entropy loss, forward and backward, float32 on CPU, "
        "one process per case, MALLOC_MMAP_THRESHOLD_=131072 (benchmarks/logprob_memory.py)",
        **common.machine(),
        "cases": rows,
    }
    common.write_json(args.out, result)
    print(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
