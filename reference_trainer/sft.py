"""The SFT warm start: cross-entropy on the response tokens of expert episodes, with an optional validation plateau."""

from __future__ import annotations

import logging
import math
import time
from typing import Any

import numpy as np
import torch

from . import distributed
from .rollout import Episode, expert_episodes, make_batch
from .scoring import micro_batches
from .tasks import demo_env_kwargs, sft_seeds

log = logging.getLogger(__name__)

__all__ = ["fitting_demos", "sft"]


def fitting_demos(demos: list[Episode], max_context_tokens: int) -> tuple[list[Episode], int]:
    """The expert episodes whose whole conversation fits ``max_context_tokens`` (the bound rollouts
    keep), and how many were left out; none fitting is an error that says what to change."""
    keep = [d for d in demos if len(d.conversation) <= max_context_tokens]
    if demos and not keep:
        longest = max(len(d.conversation) for d in demos)
        raise ValueError(f"every SFT expert episode is longer than max_context_tokens={max_context_tokens} (the longest "
                         f"has {longest} tokens): raise --max-context-tokens (within the model's positions) or use a "
                         "more compact observation style of the env (--env-kwargs).")
    return keep, len(demos) - len(keep)


def _state_copy(module: torch.nn.Module) -> dict[str, torch.Tensor]:
    """A detached copy of ``module``'s weights (to restore later with ``load_state_dict``)."""
    return {k: v.detach().clone() for k, v in module.state_dict().items()}


def _validate(trainer: Any) -> tuple[float, list[float]]:
    """Evaluate the actor as it is on the validation split: ``(value to maximise, [success, score])``.
    The value is ``val_metric`` (success or score), the other breaking ties."""
    metrics = trainer.evaluate(split="validation", current=True)
    main, other = ("success", "score") if trainer.cfg.train.val_metric == "success" else ("score", "success")
    o = trainer.last_eval_outcomes
    return float(metrics[main]) + 1e-3 * float(metrics[other]), [float(np.mean(o["success"])), float(np.mean(o["score"]))]


def sft(trainer: Any, episodes: int, steps: int, max_seconds: float | None = None, progress: Any = None) -> dict[str, Any]:
    """Train ``trainer``'s actor on ``episodes`` expert episodes for at most ``steps`` steps; returns the stats.

    With ``sft_validate_every > 0`` the actor is evaluated greedily on the validation split every that
    many steps, the best weights are kept, and SFT stops after ``sft_patience`` evaluations without a new
    best (stats: ``sft/validation`` rows ``[step, success, score]``, ``sft/best_step``). ``max_seconds``
    ends SFT once its optimizer steps have taken that long (a compute budget). ``progress(range)`` draws a bar."""
    t, a = trainer.cfg.train, trainer.cfg.algo
    demos = expert_episodes(t.env, trainer.fmt, sft_seeds(t.seed, t.eval_seed, episodes), demo_env_kwargs(trainer.cfg),
                            trainer.cfg.rollout.split_system_prompt)
    demos, too_long = fitting_demos(demos, trainer.cfg.rollout.max_context_tokens)
    if too_long and trainer.dist.is_main:  # every rank leaves out the same ones
        log.warning("SFT: %d of %d expert episodes are longer than max_context_tokens=%d and are left out",
                    too_long, too_long + len(demos), trainer.cfg.rollout.max_context_tokens)
    batch = make_batch(demos, trainer.pad_id).to(trainer.device)
    policy, par = trainer.policy, trainer.parallel
    opt = torch.optim.AdamW(policy.actor_parameters(), lr=t.sft_lr, weight_decay=0.0)
    gen = torch.Generator().manual_seed(t.seed + 1)
    losses: list[float] = []
    every = t.sft_validate_every
    validation: list[list[float]] = []
    best: tuple[float, int, dict[str, torch.Tensor] | None] = (-math.inf, 0, None)
    if every > 0:
        value, pair = _validate(trainer)
        best = (value, 0, _state_copy(policy.lm))
        validation.append([0, *pair])
    bar = progress(range(steps)) if progress else range(steps)
    step_seconds = 0.0  # in optimizer steps only (not validation): what "the same compute" counts
    for step in bar:
        t_step = time.perf_counter()
        b = batch.select(torch.randint(len(batch), (min(t.sft_batch_size, len(batch)),), generator=gen).to(trainer.device))
        n_tok = b.action_mask.sum().clamp(min=1)
        opt.zero_grad(set_to_none=True)
        loss = 0.0
        for j in micro_batches(b.attention_mask.sum(1), a.micro_batch_size, a.micro_batch_tokens):
            part = b.select(j.to(trainer.device))
            out = policy.evaluate(part.ids, part.attention_mask, part.action_mask, with_values=False, with_entropy=False)
            part_loss = -(out.logp * part.action_mask).sum() / n_tok  # parts add up to the batch's token-mean
            par.backward(part_loss, replicated=True)  # every rank runs the same SFT, outside DDP
            loss += float(part_loss.detach())
        par.step(opt, max_grad_norm=1.0, skip_nonfinite=False)
        losses.append(loss)
        step_seconds += time.perf_counter() - t_step
        if max_seconds is not None and step_seconds >= max_seconds:
            break
        if hasattr(bar, "set_postfix"):
            bar.set_postfix(loss=f"{losses[-1]:.3f}")
        if every > 0 and (step + 1) % every == 0:
            value, pair = _validate(trainer)
            validation.append([step + 1, *pair])
            if value > best[0]:
                best = (value, step + 1, _state_copy(policy.lm))
            elif (step + 1) - best[1] >= every * t.sft_patience:
                break
    if every > 0 and best[2] is not None:  # the validation plateau's weights
        policy.lm.load_state_dict(best[2])
    distributed.broadcast_module(policy, trainer.dist)  # every rank ran the same SFT; rank 0's weights are the truth
    stats: dict[str, Any] = {"sft/loss": float(np.mean(losses[-10:])) if losses else float("nan"),
                             "sft/episodes": float(len(demos)), "sft/steps": float(len(losses)), "sft/step_seconds": step_seconds}
    if every > 0:
        stats["sft/best_step"] = float(best[1])
        stats["sft/validation"] = validation
    if too_long:
        stats["sft/episodes_too_long"] = float(too_long)
    return stats
