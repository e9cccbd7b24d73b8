"""The passes over a batch beside the loss: micro-batches, the no-grad scoring (old log-probs, values, the KL
reference's log-probs) and the clipping-bias norm of S-PPO/ST-PPO."""

from __future__ import annotations

from typing import Any

import torch

from . import distributed
from .losses import clip_bias_surrogate, clipped_tokens, log_ratios


def micro_batches(lengths: torch.Tensor, max_size: int | None = None, max_tokens: int = 0) -> list[torch.Tensor]:
    """Split rows ``0 .. len(lengths) - 1`` into micro-batches; returns their index tensors.

    Without ``max_tokens``: consecutive chunks of ``max_size`` rows (one chunk when ``None``).
    With it: rows sorted by length (longest first) are packed greedily while
    ``rows * longest <= max_tokens`` and ``rows <= max_size`` (a row over the budget gets a
    micro-batch of its own). Every row appears once; losses are sums divided by the minibatch's
    counts, so any split gives the same gradient.
    """
    n = len(lengths)
    size = max_size or max(n, 1)
    if not max_tokens:
        return [torch.arange(j, min(j + size, n)) for j in range(0, n, size)]
    order = torch.argsort(lengths.cpu(), descending=True, stable=True).tolist()
    chunks: list[list[int]] = []
    for i in order:  # longest first: a chunk's first row sets its padded length
        if chunks and len(chunks[-1]) < size and (len(chunks[-1]) + 1) * int(lengths[chunks[-1][0]]) <= max_tokens:
            chunks[-1].append(i)
        else:
            chunks.append([i])
    return [torch.tensor(sorted(c)) for c in chunks]


@torch.no_grad()
def score(
    policy: Any,
    batch: Any,
    *,
    temperature: float,
    max_size: int | None,
    max_tokens: int = 0,
    with_values: bool = True,
    with_logp: bool = True,
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(logp, values)``, each ``[B, L]``, of ``batch`` under ``policy`` in micro-batches (zeros where not asked)."""
    B, L = batch.ids.shape
    logp = torch.zeros(B, L, device=batch.ids.device)
    values = torch.zeros(B, L, device=batch.ids.device)
    if not (with_values or with_logp):
        return logp, values
    for index in micro_batches(batch.attention_mask.sum(1), max_size, max_tokens):
        index = index.to(batch.ids.device)
        sub = batch.select(index)
        out = policy.evaluate(
            sub.ids,
            sub.attention_mask,
            sub.action_mask,
            temperature=temperature,
            with_values=with_values,
            with_entropy=False,
            with_logp=with_logp,
        )
        n = out.logp.shape[1]
        logp[index, :n] = out.logp
        if with_values:
            values[index, :n] = out.values
    return logp, values


def clip_bias_norm(
    policy: Any,
    micro: list[Any],
    n_tok: torch.Tensor,
    algo: Any,
    *,
    temperature: float,
    scale: float = 1.0,
    ctx: Any = distributed.SINGLE,
) -> float:
    """S-PPO/ST-PPO's ``||grad C||`` (:func:`~reference_trainer.losses.clip_bias_surrogate`) over a whole minibatch
    split in micro-batches (``Prepared`` parts) and over the ranks: one extra forward and backward pass.
    ``scale``: float16's loss scale, keeping small gradients above underflow (divided out of the result)."""
    params = policy.actor_parameters()
    acc = [torch.zeros_like(q, dtype=torch.float32) for q in params]
    for p in micro:
        b = p.batch
        out = policy.evaluate(
            b.ids, b.attention_mask, b.action_mask, temperature=temperature, with_values=False, with_entropy=False
        )
        ratio = log_ratios(out.logp, p.old_logp, b.action_mask, b.turn_ids, algo.ratio_level).clamp(-20, 20).exp()
        adv = p.advantages * b.action_mask
        clipped = clipped_tokens(ratio.detach(), adv, b.action_mask, algo.clip_eps)
        if not bool(clipped.any()):
            continue
        grads = torch.autograd.grad(
            clip_bias_surrogate(out.logp, ratio, adv, clipped, n_tok) * scale, params, allow_unused=True
        )
        for s, g in zip(acc, grads):
            if g is not None:
                s += g.float()
    acc = [distributed.all_reduce_sum(s, ctx) for s in acc]  # C sums over all ranks' tokens
    return float(torch.sqrt(sum((s**2).sum() for s in acc))) / scale
