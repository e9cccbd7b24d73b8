"""PPO losses: token / turn / sequence importance ratios, clipping, clipping-bias correction,
value loss, KL and entropy, as pure functions over ``[B, L]`` tensors.

Every loss is a token-mean over the action tokens of the (mini)batch: a sum over action
tokens divided by ``num_tokens`` (default: the number of action tokens given), so the loss of
a minibatch split into micro-batches adds up to the minibatch's loss. Formulas and the
papers they follow: ``docs/algorithms.md``.

:data:`LOSSES` maps each loss term (policy, entropy, value, KL) to a function of a
:class:`LossInputs` and the algorithm config that returns its weighted loss and its metrics,
each a :class:`Metric` that says how it combines over micro-batches and optimizer steps
(:func:`combine_parts`, :func:`combine_steps`); the trainer adds the terms up without
knowing any metric by name.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterable, Literal, NamedTuple

import numpy as np
import torch

from .advantages import Reduce

__all__ = [
    "LOSSES",
    "LossInputs",
    "Metric",
    "combine_parts",
    "combine_steps",
    "RATIO_LEVELS",
    "CLIP_BIAS_CORRECTIONS",
    "log_ratios",
    "clipped_tokens",
    "clip_bias_surrogate",
    "clip_bias_scale",
    "policy_loss",
    "value_loss",
    "kl_penalty",
    "explained_variance",
]

RATIO_LEVELS = ("token", "turn", "sequence")
CLIP_BIAS_CORRECTIONS = ("none", "max1", "additive")
_MAX_LOG_RATIO = 20.0  # exp(20) ~ 5e8: keeps a wild ratio finite, far beyond any clip range

RatioLevel = Literal["token", "turn", "sequence"]


def _denominator(action_mask: torch.Tensor, num_tokens: float | int | torch.Tensor | None) -> torch.Tensor:
    n = action_mask.sum() if num_tokens is None else torch.as_tensor(num_tokens, device=action_mask.device)
    return n.float().clamp(min=1.0)


def log_ratios(
    logp: torch.Tensor,
    old_logp: torch.Tensor,
    action_mask: torch.Tensor,
    turn_ids: torch.Tensor,
    ratio_level: RatioLevel = "token",
) -> torch.Tensor:
    """Per-token log importance ratio at the chosen granularity, ``[B, L]`` (0 off the mask).

    * ``"token"``: ``log r_t = logp_t - old_logp_t``;
    * ``"turn"``: every token of turn ``k`` gets ``(1/|T_k|) sum_{s in T_k} log r_s``, the log
      of the turn's geometric-mean ratio ``w_k`` (ST-PPO's turn-level importance sampling);
    * ``"sequence"``: the same over all action tokens of the episode (GSPO).
    """
    mask = action_mask.bool()
    lr = torch.where(mask, logp - old_logp, torch.zeros_like(logp))
    if ratio_level == "token":
        return lr
    if ratio_level not in RATIO_LEVELS:
        raise ValueError(f"ratio_level must be one of {RATIO_LEVELS}, got {ratio_level!r}.")
    B, L = lr.shape
    if ratio_level == "turn":
        K = int(turn_ids.max().item()) + 1 if turn_ids.numel() else 1
        group = torch.arange(B, device=lr.device)[:, None] * K + turn_ids.long().clamp(min=0)
        n_groups = B * K
    else:
        group = torch.arange(B, device=lr.device)[:, None].expand(B, L)
        n_groups = B
    group = torch.where(mask, group, torch.full_like(group, n_groups))  # off-mask tokens: a dump group
    flat = group.reshape(-1)
    sums = lr.new_zeros(n_groups + 1).index_add(0, flat, lr.reshape(-1))
    counts = lr.new_zeros(n_groups + 1).index_add(0, flat, mask.reshape(-1).to(lr.dtype))
    mean = sums / counts.clamp(min=1.0)
    return torch.where(mask, mean[flat].view(B, L), torch.zeros_like(lr))


def clipped_tokens(
    ratio: torch.Tensor, advantages: torch.Tensor, action_mask: torch.Tensor, clip_eps: float
) -> torch.Tensor:
    """Where PPO's clip is active (the token contributes no gradient): ``[B, L]`` bool.

    ``A > 0 and ratio > 1 + eps``, or ``A < 0 and ratio < 1 - eps``.
    """
    return action_mask.bool() & (
        ((advantages > 0) & (ratio > 1.0 + clip_eps)) | ((advantages < 0) & (ratio < 1.0 - clip_eps))
    )


def clip_bias_surrogate(
    logp: torch.Tensor, ratio: torch.Tensor, advantages: torch.Tensor, clipped: torch.Tensor, num_tokens: torch.Tensor
) -> torch.Tensor:
    """``C = (1/N) sum_{t clipped} sg(w_t) A_t logp_t``: its gradient is the policy-gradient
    mass that clipping removed (``w_t`` the token or turn ratio, treated as a constant)."""
    weight = torch.where(clipped, ratio.detach() * advantages, torch.zeros_like(ratio))
    return (weight * logp).sum() / num_tokens


def clip_bias_scale(norm: float, mode: str = "max1", const: float = 1.0) -> float:
    """The factor applied to the policy gradient given ``norm = ||grad C||_2``.

    ``"none"``: 1. ``"max1"`` (default): ``1 / max(1, norm)``, exactly 1 when nothing is
    clipped and never above 1. ``"additive"``: ``1 / (norm + const)``.
    """
    if mode == "none":
        return 1.0
    if mode == "max1":
        return 1.0 / max(1.0, norm)
    if mode == "additive":
        return 1.0 / (norm + const)
    raise ValueError(f"clip_bias_correction must be one of {CLIP_BIAS_CORRECTIONS}, got {mode!r}.")


def grad_norm_of(scalar: torch.Tensor, params: Iterable[torch.Tensor]) -> float:
    """``||d scalar / d params||_2`` without touching ``.grad`` (0 when nothing depends on params)."""
    params = [p for p in params if p.requires_grad]
    if not scalar.requires_grad or not params:
        return 0.0
    grads = torch.autograd.grad(scalar, params, retain_graph=True, allow_unused=True)
    sq = [g.float().pow(2).sum() for g in grads if g is not None]
    return float(torch.stack(sq).sum().sqrt()) if sq else 0.0


def policy_loss(
    logp: torch.Tensor,
    old_logp: torch.Tensor,
    advantages: torch.Tensor,
    action_mask: torch.Tensor,
    turn_ids: torch.Tensor,
    *,
    ratio_level: RatioLevel = "token",
    clip_eps: float = 0.2,
    clip_bias_correction: str = "none",
    clip_bias_const: float = 1.0,
    params: Iterable[torch.Tensor] | None = None,
    clip_bias_norm: float | None = None,
    num_tokens: float | int | torch.Tensor | None = None,
) -> tuple[torch.Tensor, dict[str, float]]:
    """The clipped PPO surrogate at token, turn or sequence level, with optional correction.

    Per action token ``t`` of turn ``k``: ``l_t = -min(w A_t, clip(w, 1-eps, 1+eps) A_t)`` with
    ``w`` the token ratio ``r_t``, the turn ratio ``w_k`` or the sequence ratio (see
    :func:`log_ratios`); loss ``= sum_t l_t / N`` (token-mean).

    Clipping-bias correction (S-PPO / ST-PPO): the returned loss is ``s * loss`` with
    ``s = clip_bias_scale(||grad_theta C||_2)`` a constant (see :func:`clip_bias_surrogate`),
    so its gradient is ``s * g``. The norm is taken with respect to ``params`` (the actor's
    parameters), or given as ``clip_bias_norm`` when the caller measured it over several
    micro-batches. When no token is clipped, ``C = 0`` and the loss is plain PPO's, exactly.

    ``logp``/``old_logp``: ``[B, L]`` log-probs of the sampled tokens (new, with grad; old); ``advantages``,
    ``action_mask`` (the sampled tokens), ``turn_ids``: ``[B, L]``; ``num_tokens``: ``N`` (default: the action
    tokens here). Returns ``(loss, metrics)``: ``pg_loss``, ``clipfrac`` (tokens), ``clipfrac_turn`` (turns with
    a clipped token), ``approx_kl`` (``mean((r - 1) - log r)``), ``ratio_mean``, ``ratio_max``,
    ``clip_bias_norm``, ``clip_bias_scale``.
    """
    mask = action_mask.bool()
    N = _denominator(mask, num_tokens)
    log_w = log_ratios(logp, old_logp, mask, turn_ids, ratio_level).clamp(-_MAX_LOG_RATIO, _MAX_LOG_RATIO)
    ratio = torch.exp(log_w)
    adv = torch.where(mask, advantages.float(), torch.zeros_like(ratio))
    surr = ratio * adv
    surr_clipped = ratio.clamp(1.0 - clip_eps, 1.0 + clip_eps) * adv
    per_token = -torch.minimum(surr, surr_clipped)
    loss = torch.where(mask, per_token, torch.zeros_like(per_token)).sum() / N

    clipped = clipped_tokens(ratio.detach(), adv, mask, clip_eps)
    norm = 0.0
    scale = 1.0
    if clip_bias_correction != "none":
        if clip_bias_norm is not None:
            norm = float(clip_bias_norm)
        elif bool(clipped.any()):
            if params is None:
                raise ValueError("clip_bias_correction needs params (the actor's parameters) or clip_bias_norm.")
            norm = grad_norm_of(clip_bias_surrogate(logp, ratio, adv, clipped, N), params)
        scale = clip_bias_scale(norm, clip_bias_correction, clip_bias_const)
        if scale != 1.0:
            loss = loss * scale

    with torch.no_grad():
        token_lr = torch.where(mask, logp - old_logp, torch.zeros_like(logp)).float()
        r_tok = token_lr.clamp(-_MAX_LOG_RATIO, _MAX_LOG_RATIO).exp()
        n_local = mask.sum().clamp(min=1)
        approx_kl = (torch.where(mask, (r_tok - 1) - token_lr, torch.zeros_like(r_tok)).sum() / n_local).item()
        # a turn is clipped when any of its tokens is
        B = mask.shape[0]
        K = int(turn_ids.max().item()) + 1 if turn_ids.numel() else 1
        g = (torch.arange(B, device=mask.device)[:, None] * K + turn_ids.long().clamp(min=0))[mask]
        turns = torch.unique(g)
        clipped_turns = torch.unique(g[clipped[mask]])
        metrics = {
            "pg_loss": float(loss.detach()),
            "clipfrac": float(clipped.sum() / n_local),
            "clipfrac_turn": float(clipped_turns.numel() / max(turns.numel(), 1)),
            "approx_kl": approx_kl,
            "ratio_mean": float(torch.where(mask, ratio, torch.zeros_like(ratio)).sum() / n_local),
            "ratio_max": float(ratio[mask].max()) if bool(mask.any()) else 1.0,
            "clip_bias_norm": norm,
            "clip_bias_scale": scale,
        }
    return loss, metrics


def value_loss(
    values: torch.Tensor,
    old_values: torch.Tensor,
    returns: torch.Tensor,
    mask: torch.Tensor,
    clip: float | None = 0.5,
    num_values: float | int | torch.Tensor | None = None,
) -> tuple[torch.Tensor, dict[str, float]]:
    """``0.5 * max((V - R)^2, (clip(V, V_old - c, V_old + c) - R)^2)``, mean over ``mask``.

    ``clip=None`` drops the clipped term. Any shape; ``mask`` marks where values are trained
    (action tokens for a token critic, turn read positions for a turn critic).
    """
    mask = mask.bool()
    N = _denominator(mask, num_values)
    values = values.float()
    err = (values - returns) ** 2
    if clip is not None:
        v_clipped = old_values + (values - old_values).clamp(-clip, clip)
        err_clipped = (v_clipped - returns) ** 2
        per = torch.maximum(err, err_clipped)
        # clipped only where the clamp engaged: inside it ``old + (V - old)`` differs from V by rounding alone
        vclip = ((values - old_values).abs() > clip) & (err_clipped > err) & mask
    else:
        per = err
        vclip = torch.zeros_like(mask)
    loss = 0.5 * torch.where(mask, per, torch.zeros_like(per)).sum() / N
    n_local = mask.sum().clamp(min=1)
    return loss, {"vf_loss": float(loss.detach()), "vf_clipfrac": float(vclip.sum() / n_local)}


def kl_penalty(
    logp: torch.Tensor,
    ref_logp: torch.Tensor,
    action_mask: torch.Tensor,
    num_tokens: float | int | torch.Tensor | None = None,
) -> torch.Tensor:
    """Token-mean of the ``k3`` estimator of ``KL(pi || pi_ref)``: ``exp(d) - d - 1``, ``d = ref_logp - logp``."""
    mask = action_mask.bool()
    d = torch.where(mask, ref_logp - logp, torch.zeros_like(logp)).clamp(-_MAX_LOG_RATIO, _MAX_LOG_RATIO)
    k3 = torch.exp(d) - d - 1.0
    return torch.where(mask, k3, torch.zeros_like(k3)).sum() / _denominator(mask, num_tokens)


@torch.no_grad()
def explained_variance(
    pred: torch.Tensor, target: torch.Tensor, mask: torch.Tensor, reduce: Reduce | None = None
) -> float:
    """``1 - Var[target - pred] / Var[target]`` over ``mask`` (population variances from float64 sums, over every
    rank's positions with ``reduce``); NaN with fewer than two positions or when ``Var[target] = 0``."""
    m = mask.bool()
    y, d = target[m].double(), (target[m] - pred[m]).double()
    n, sy, syy, sd, sdd = [m.sum().double(), y.sum(), (y * y).sum(), d.sum(), (d * d).sum()]
    if reduce is not None:
        n, sy, syy, sd, sdd = reduce(n, sy, syy, sd, sdd)
    if float(n) < 2:
        return float("nan")
    var_y = syy / n - (sy / n) ** 2
    if float(var_y) <= 1e-12 * float(syy / n):  # equal targets, up to the one-pass formula's rounding
        return float("nan")
    return float(1.0 - (sdd / n - (sd / n) ** 2) / var_y)


# ---------------------------------------------------------------------- the loss terms the trainer looks up
class Metric(NamedTuple):
    """A metric of one micro-batch and how it combines (:func:`combine_parts`, :func:`combine_steps`).

    ``reduce``: ``"sum"``: already divided by the whole minibatch's count, so micro-batch parts
    add up; ``"share"``: a mean over the part's own action tokens, weighted by the part's share
    of the minibatch's action tokens; ``"max"``: the largest; ``"minibatch"``: one value per
    minibatch, the same in every part. Minibatch values are averaged over the iteration's
    optimizer steps, except ``"max"`` (the largest).
    """

    value: float
    reduce: str


@dataclass
class LossInputs:
    """One micro-batch as the loss terms see it. ``[B, L]`` tensors; ``num_tokens``/``num_values``
    are the whole minibatch's counts, so the terms of micro-batches add up to the minibatch's."""

    logp: torch.Tensor  # new log-probs of the sampled tokens (with grad)
    entropy: torch.Tensor  # policy entropy per position (with grad)
    values: torch.Tensor | None  # new values (with grad); None without a critic
    old_logp: torch.Tensor
    old_values: torch.Tensor
    advantages: torch.Tensor
    value_targets: torch.Tensor
    value_mask: torch.Tensor
    ref_logp: torch.Tensor | None  # the KL reference's log-probs; None without a KL penalty
    action_mask: torch.Tensor
    turn_ids: torch.Tensor
    num_tokens: torch.Tensor
    num_values: torch.Tensor
    actor_params: list[torch.Tensor]  # the correction's norm is taken over these
    clip_bias_norm: float | None  # measured over the whole minibatch, or None (measure here)


LossTerm = Callable[[LossInputs, Any], "tuple[torch.Tensor | None, dict[str, Metric]]"]

_POLICY_REDUCE = {
    "pg_loss": "sum",
    "clipfrac": "share",
    "clipfrac_turn": "share",
    "approx_kl": "share",
    "ratio_mean": "share",
    "ratio_max": "max",
    "clip_bias_norm": "minibatch",
    "clip_bias_scale": "minibatch",
}
#: Reported by every update, also when no policy step ran (critic warm-up): the ratio is then 1.
NEUTRAL: dict[str, Metric] = {"ratio_max": Metric(1.0, "max")}


def policy_term(x: LossInputs, algo: Any) -> tuple[torch.Tensor, dict[str, Metric]]:
    """The clipped surrogate at ``algo.ratio_level`` with ``algo.clip_bias_correction`` (:func:`policy_loss`)."""
    loss, m = policy_loss(
        x.logp,
        x.old_logp,
        x.advantages,
        x.action_mask,
        x.turn_ids,
        ratio_level=algo.ratio_level,
        clip_eps=algo.clip_eps,
        clip_bias_correction=algo.clip_bias_correction,
        clip_bias_const=algo.clip_bias_const,
        params=x.actor_params,
        clip_bias_norm=x.clip_bias_norm,
        num_tokens=x.num_tokens,
    )
    return loss, {k: Metric(v, _POLICY_REDUCE[k]) for k, v in m.items()}


def entropy_term(x: LossInputs, algo: Any) -> tuple[torch.Tensor | None, dict[str, Metric]]:
    """``-ent_coef *`` the token-mean entropy (a bonus); the entropy is reported even when ``ent_coef`` is 0."""
    ent = (x.entropy * x.action_mask).sum() / x.num_tokens
    return (-algo.ent_coef * ent if algo.ent_coef else None), {"entropy": Metric(float(ent.detach()), "sum")}


def value_term(x: LossInputs, algo: Any) -> tuple[torch.Tensor, dict[str, Metric]]:
    """``vf_coef *`` the clipped value loss at the estimator's value positions (:func:`value_loss`)."""
    vf, m = value_loss(x.values, x.old_values, x.value_targets, x.value_mask, algo.value_clip, num_values=x.num_values)
    return algo.vf_coef * vf, {"vf_loss": Metric(m["vf_loss"], "sum"), "vf_clipfrac": Metric(m["vf_clipfrac"], "share")}


def kl_term(x: LossInputs, algo: Any) -> tuple[torch.Tensor, dict[str, Metric]]:
    """``kl_coef *`` the token-mean k3 estimate of ``KL(pi || pi_ref)`` (:func:`kl_penalty`)."""
    kl = kl_penalty(x.logp, x.ref_logp, x.action_mask, x.num_tokens)
    return algo.kl_coef * kl, {"kl_ref": Metric(float(kl.detach()), "sum")}


#: The loss terms, in the order they are added. The trainer picks the ones that apply: the
#: policy after the critic warm-up, the value with a critic, the KL with a reference.
LOSSES: dict[str, LossTerm] = {"policy": policy_term, "entropy": entropy_term, "value": value_term, "kl": kl_term}


def combine_parts(parts: list[tuple[dict[str, Metric], float]]) -> dict[str, Metric]:
    """One minibatch's metrics from its micro-batches' ``(metrics, share of action tokens)``."""
    out: dict[str, Metric] = {}
    for metrics, share in parts:
        for k, m in metrics.items():
            prev = out.get(k)
            if m.reduce == "sum":
                value = (prev.value if prev else 0.0) + m.value
            elif m.reduce == "share":
                value = (prev.value if prev else 0.0) + m.value * share
            elif m.reduce == "max":
                value = max(prev.value if prev else m.value, m.value)
            elif m.reduce == "minibatch":
                value = m.value
            else:
                raise ValueError(f"metric {k!r}: unknown reduction {m.reduce!r}.")
            out[k] = Metric(value, m.reduce)
    return out


def combine_steps(steps: list[dict[str, Metric]]) -> dict[str, float]:
    """An iteration's metrics from its optimizer steps: the mean over the steps that report each
    metric (``"max"`` metrics: the largest), plus :data:`NEUTRAL` for metrics no step reported."""
    keys = sorted({k for s in steps for k in s} | set(NEUTRAL))
    out = {}
    for k in keys:
        values = [s[k].value for s in steps if k in s]
        if not values:
            out[k] = NEUTRAL[k].value
        elif next(s[k] for s in steps if k in s).reduce == "max":
            out[k] = float(max(values))
        else:
            out[k] = float(np.mean(values))
    return out
