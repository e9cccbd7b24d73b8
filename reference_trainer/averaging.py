"""Polyak (exponential moving) averaging of weights, as a pure function.

RL's per-iteration update on a small model is mostly noise (``docs/experiments.md``): each
iteration moves the weights by signal plus a random step. An exponential moving average keeps
the signal, which accumulates, and averages the random steps out; the trainer evaluates and
saves the average when ``--ema-decay`` is set (formula: ``docs/algorithms.md``, "Weight averaging").
"""

from __future__ import annotations

import copy
from collections.abc import Sequence

import torch


def ema_update(average: Sequence[torch.Tensor], current: Sequence[torch.Tensor], decay: float) -> list[torch.Tensor]:
    """``decay * average + (1 - decay) * current``, tensor by tensor (new float32 tensors).

    ``decay`` in ``[0, 1)``: 0 returns ``current``; an average with decay ``d`` weighs the
    weights of ``k`` updates ago by ``(1 - d) d^k`` (about ``1 / (1 - d)`` updates in all).
    """
    if not 0.0 <= decay < 1.0:
        raise ValueError(f"decay must be in [0, 1), got {decay}.")
    if len(average) != len(current):
        raise ValueError(f"{len(average)} averaged tensors but {len(current)} current ones.")
    return [torch.lerp(a.float(), c.detach().float(), 1.0 - decay) for a, c in zip(average, current)]


def frozen_copy(module: torch.nn.Module) -> torch.nn.Module:
    """A copy of ``module`` without gradients (the KL reference and the weight average)."""
    copied = copy.deepcopy(module).requires_grad_(False)
    for q in copied.parameters():
        q.grad = None
    return copied


@torch.no_grad()
def ema_step(average: torch.nn.Module, current: torch.nn.Module, decay: float) -> None:
    """Move the parameters of ``average`` in place to :func:`ema_update` of them and ``current``'s."""
    averaged = list(average.parameters())
    for q, new in zip(averaged, ema_update(averaged, list(current.parameters()), decay)):
        q.copy_(new)
