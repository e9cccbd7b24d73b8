"""Log-probabilities (and entropies) of chosen tokens, optionally computed a chunk of tokens at a time.

Shapes: ``N`` selected tokens, ``H`` hidden size, ``V`` vocabulary. Scoring ``N`` tokens the
plain way materialises ``[N, V]`` float32 logits, their log-softmax and its exp (about 2.5 GB
each at ``N = 4096``, ``V = 151,936``), and autograd keeps them until the backward pass.
:func:`selected_logprobs` with ``chunk_tokens > 0`` computes the same numbers ``chunk_tokens``
rows at a time; under autograd each chunk is checkpointed (its logits are recomputed in the
backward pass), so at most one chunk's ``[chunk, V]`` tensors live at once, forward or backward.
"""

from __future__ import annotations

from typing import Callable

import torch
from torch.utils.checkpoint import checkpoint

#: ``[n, H] -> [n, V]`` float32 logits of the distribution tokens are scored under (temperature,
#: softcap and vocabulary mask already applied).
LogitsFn = Callable[[torch.Tensor], torch.Tensor]


def _rows(
    logits_fn: LogitsFn, hidden: torch.Tensor, target: torch.Tensor, with_entropy: bool
) -> tuple[torch.Tensor, ...]:
    """``(logp [n], entropy [n])`` (or ``(logp,)``) of ``target [n]`` under ``softmax(logits_fn(hidden [n, H]))``."""
    logprobs = torch.log_softmax(logits_fn(hidden), dim=-1)  # [n, V]
    lp = logprobs.gather(-1, target[:, None]).squeeze(-1)
    if not with_entropy:
        return (lp,)
    # finite logits only: a -inf logit (masked vocabulary) gives p * logp = nan
    p = logprobs.exp()
    ent = -(p * logprobs.masked_fill(p == 0, 0.0)).sum(-1)
    return lp, ent


def selected_logprobs(
    logits_fn: LogitsFn, hidden: torch.Tensor, target: torch.Tensor, *, chunk_tokens: int = 0, with_entropy: bool = True
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Log-probability and entropy of each chosen token, in float32.

    Args:
        logits_fn: ``[n, H] -> [n, V]`` float32 logits (see :data:`LogitsFn`).
        hidden: ``[N, H]`` the hidden state before each chosen token.
        target: ``[N]`` the chosen token ids.
        chunk_tokens: ``0`` scores all ``N`` rows at once; ``c > 0`` scores ``c`` rows at a time and,
            when gradients are on, recomputes each chunk's logits in the backward pass instead of
            keeping them (peak extra memory ``O(c * V)`` instead of ``O(N * V)``). Both give the
            same values and gradients up to float rounding of the matrix products (tested to 1e-6).
        with_entropy: Also return the entropy of each row's distribution (nats), else ``None``.

    Returns:
        ``(logp [N], entropy [N] or None)``.
    """
    if chunk_tokens < 0:
        raise ValueError(f"chunk_tokens (--logprob-chunk-tokens) must be >= 0 (0: no chunking), got {chunk_tokens}.")
    n = hidden.shape[0]
    if chunk_tokens == 0 or n <= chunk_tokens:
        out = _rows(logits_fn, hidden, target, with_entropy)
        return out[0], (out[1] if with_entropy else None)
    # the recompute only pays off when a backward pass will need the chunk's tensors
    recompute = torch.is_grad_enabled()
    lps, ents = [], []
    for lo in range(0, n, chunk_tokens):
        h, t = hidden[lo : lo + chunk_tokens], target[lo : lo + chunk_tokens]
        if recompute:
            out = checkpoint(_rows, logits_fn, h, t, with_entropy, use_reentrant=False)
        else:
            out = _rows(logits_fn, h, t, with_entropy)
        lps.append(out[0])
        if with_entropy:
            ents.append(out[1])
    return torch.cat(lps), (torch.cat(ents) if with_entropy else None)
