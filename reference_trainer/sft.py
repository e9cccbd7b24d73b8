"""The SFT warm start: cross-entropy on the response tokens of expert episodes, with an optional validation plateau."""

from __future__ import annotations

import logging
import math
import time
from typing import Any, Callable

import numpy as np
import torch

from . import distributed
from .config import Config
from .rollout import Episode, expert_episodes, longest_input, make_batch
from .scoring import micro_batches
from .tasks import demo_env_kwargs, sft_seeds

log = logging.getLogger(__name__)


def fitting_demos(demos: list[Episode], max_context_tokens: int) -> tuple[list[Episode], int]:
    """The expert episodes whose every input (the whole conversation, or each sequence of a history policy) fits
    ``max_context_tokens`` (the bound rollouts
    keep), and how many were left out; none fitting is an error that says what to change."""
    keep = [d for d in demos if longest_input(d) <= max_context_tokens]
    if demos and not keep:
        longest = max(longest_input(d) for d in demos)
        raise ValueError(
            f"every SFT expert episode is longer than max_context_tokens={max_context_tokens} (the longest "
            f"has {longest} tokens): raise --max-context-tokens (within the model's positions) or use a "
            "more compact observation style of the env (--env-kwargs)."
        )
    return keep, len(demos) - len(keep)


def _state_copy(module: torch.nn.Module) -> dict[str, torch.Tensor]:
    """A detached copy of ``module``'s weights (to restore later with ``load_state_dict``)."""
    return {k: v.detach().clone() for k, v in module.state_dict().items()}


def sft_demonstrations(cfg: Config, fmt: Any, episodes: int) -> list[Episode]:
    """``episodes`` expert episodes of ``cfg``'s env on the SFT seeds (disjoint from every held-out seed), in ``fmt``'s
    tokens and ``cfg``'s history policy: every one SFT would imitate, before those too long are left out."""
    t, r = cfg.train, cfg.rollout
    return expert_episodes(
        t.env,
        fmt,
        sft_seeds(t.seed, t.eval_seed, episodes),
        demo_env_kwargs(cfg),
        r.split_system_prompt,
        history=r.history,
        reasoning=r.reasoning,
    )


def expert_demos(cfg: Config, fmt: Any, episodes: int, dist: distributed.DistContext) -> tuple[list[Episode], int]:
    """:func:`sft_demonstrations`: those that fit ``max_context_tokens``, and how many did not (logged once, by the
    main rank)."""
    r = cfg.rollout
    demos, too_long = fitting_demos(sft_demonstrations(cfg, fmt, episodes), r.max_context_tokens)
    if too_long and dist.is_main:  # every rank leaves out the same ones
        log.warning(
            "SFT: %d of %d expert episodes are longer than max_context_tokens=%d and are left out",
            too_long,
            too_long + len(demos),
            r.max_context_tokens,
        )
    return demos, too_long


#: SFT's first losses kept in its stats: a saved start records them, so a fresh checkout can check that the code still
#: makes it (:func:`reference_trainer.recipes.runs.first_sft_losses`).
FIRST_LOSSES = 20

#: A validation of the actor as it is: ``(value to maximise, [success, score])``.
Validate = Callable[[], tuple[float, list[float]]]


def validation_value(
    metrics: dict[str, float], outcomes: dict[str, list[float]], val_metric: str
) -> tuple[float, list[float]]:
    """What SFT maximises from one validation: ``val_metric`` (success or score), the other breaking ties, and the
    mean ``[success, score]`` of the outcomes (a row of the SFT's validation curve)."""
    main, other = ("success", "score") if val_metric == "success" else ("score", "success")
    return (
        float(metrics[main]) + 1e-3 * float(metrics[other]),
        [float(np.mean(outcomes["success"])), float(np.mean(outcomes["score"]))],
    )


def sft(
    policy: Any,
    optimizer: torch.optim.Optimizer,
    demos: list[Episode],
    cfg: Config,
    *,
    parallel: Any,
    dist: distributed.DistContext,
    pad_id: int,
    steps: int,
    validate: Validate | None = None,
    max_seconds: float | None = None,
    progress: Any = None,
    left_out: int = 0,
    generator: torch.Generator | None = None,
) -> dict[str, Any]:
    """Train ``policy``'s actor on ``demos`` (cross-entropy on their response tokens) for at most ``steps`` steps of
    ``optimizer``; returns the stats.

    With ``validate`` and ``sft_validate_every > 0`` the actor is validated every that many steps, the best weights
    are kept, and SFT stops after ``sft_patience`` validations without a new best (stats: ``sft/validation`` rows
    ``[step, success, score]``, ``sft/best_step``). ``max_seconds`` ends SFT once its optimizer steps have taken that
    long (a compute budget). ``parallel`` runs the backward passes and steps (every rank runs the same SFT);
    ``progress(range)`` draws a bar; ``left_out`` (expert episodes too long to train on) goes into the stats;
    ``generator`` draws the batches (default: seeded from the config's seed), so a continued SFT draws new ones."""
    t, a = cfg.train, cfg.algo
    device = policy.actor_parameters()[0].device
    batch = make_batch(demos, pad_id).to(device)
    gen = generator if generator is not None else torch.Generator().manual_seed(t.seed + 1)
    losses: list[float] = []
    every = t.sft_validate_every if validate is not None else 0
    validation: list[list[float]] = []
    best: tuple[float, int, dict[str, torch.Tensor] | None] = (-math.inf, 0, None)
    if every > 0:
        value, pair = validate()
        best = (value, 0, _state_copy(policy.lm))
        validation.append([0, *pair])
    bar = progress(range(steps)) if progress else range(steps)
    step_seconds = 0.0  # in optimizer steps only (not validation): what "the same compute" counts
    for step in bar:
        t_step = time.perf_counter()
        b = batch.select(torch.randint(len(batch), (min(t.sft_batch_size, len(batch)),), generator=gen).to(device))
        n_tok = b.action_mask.sum().clamp(min=1)
        optimizer.zero_grad(set_to_none=True)
        loss = 0.0
        for j in micro_batches(b.attention_mask.sum(1), a.micro_batch_size, a.micro_batch_tokens):
            part = b.select(j.to(device))
            out = policy.evaluate(
                part.ids, part.attention_mask, part.action_mask, with_values=False, with_entropy=False
            )
            part_loss = -(out.logp * part.action_mask).sum() / n_tok  # parts add up to the batch's token-mean
            parallel.backward(part_loss, replicated=True)  # every rank runs the same SFT, outside DDP
            loss += float(part_loss.detach())
        parallel.step(optimizer, max_grad_norm=1.0, skip_nonfinite=False)
        losses.append(loss)
        step_seconds += time.perf_counter() - t_step
        if max_seconds is not None and step_seconds >= max_seconds:
            break
        if hasattr(bar, "set_postfix"):
            bar.set_postfix(loss=f"{losses[-1]:.3f}")
        if every > 0 and (step + 1) % every == 0:
            value, pair = validate()
            validation.append([step + 1, *pair])
            if value > best[0]:
                best = (value, step + 1, _state_copy(policy.lm))
            elif (step + 1) - best[1] >= every * t.sft_patience:
                break
    if every > 0 and best[2] is not None:  # the validation plateau's weights
        policy.lm.load_state_dict(best[2])
    distributed.broadcast_module(policy, dist)  # every rank ran the same SFT; rank 0's weights are the truth
    stats: dict[str, Any] = {
        "sft/loss": float(np.mean(losses[-10:])) if losses else float("nan"),
        "sft/episodes": float(len(demos)),
        "sft/steps": float(len(losses)),
        "sft/first_losses": losses[:FIRST_LOSSES],
        "sft/step_seconds": step_seconds,
    }
    if every > 0:
        stats["sft/best_step"] = float(best[1])
        stats["sft/validation"] = validation
    if left_out:
        stats["sft/episodes_too_long"] = float(left_out)
    return stats
