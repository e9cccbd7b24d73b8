"""Advantage estimators: token GAE, turn GAE and GRPO, as pure functions over tensors.

Shapes: ``B`` episodes, ``L`` token positions, ``K`` turns. Formulas and the papers they
follow: ``docs/algorithms.md``.

:data:`ESTIMATORS` maps each ``--advantage`` name to an :class:`Estimator`: a function from a
rollout batch, the critic's values and the rewards to an :class:`Estimate` (advantages on the
action tokens, value targets and the positions the critic is trained on), and whether it
needs a critic. The trainer looks its estimator up there and knows no estimator by name.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, NamedTuple

import torch

if TYPE_CHECKING:
    from .rollout import RolloutBatch

__all__ = [
    "ESTIMATORS",
    "estimator",
    "Estimator",
    "Estimate",
    "Rewards",
    "batch_rewards",
    "episode_rows",
    "shuffled_rows",
    "per_episode",
    "bootstrap_values",
    "truncation_bootstrap_pos",
    "token_gae",
    "turn_gae",
    "grpo",
    "turns_to_tokens",
    "outcome_rewards",
    "episode_weights",
    "masked_mean",
    "masked_whiten",
]


def _masked_gae(
    rewards: torch.Tensor,
    values: torch.Tensor,
    mask: torch.Tensor,
    gamma: float,
    lam: float,
    bootstrap: torch.Tensor | None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """GAE along the last axis over the positions where ``mask`` is true.

    Masked-out positions are skipped: the next value and the running GAE are carried across
    them unchanged, and their advantage and return are 0.
    """
    rewards, values = rewards.float(), values.float()
    mask = mask.bool()
    B, T = rewards.shape
    next_value = bootstrap.float().clone() if bootstrap is not None else rewards.new_zeros(B)
    running = rewards.new_zeros(B)
    advantages = rewards.new_zeros(B, T)
    for t in range(T - 1, -1, -1):
        m = mask[:, t]
        delta = rewards[:, t] + gamma * next_value - values[:, t]
        candidate = delta + gamma * lam * running
        running = torch.where(m, candidate, running)
        next_value = torch.where(m, values[:, t], next_value)
        advantages[:, t] = torch.where(m, candidate, torch.zeros_like(candidate))
    returns = torch.where(mask, advantages + values, torch.zeros_like(advantages))
    return advantages, returns


@torch.no_grad()
def token_gae(
    rewards: torch.Tensor,
    values: torch.Tensor,
    mask: torch.Tensor,
    gamma: float = 1.0,
    lam: float = 1.0,
    bootstrap: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Token-level GAE over the action tokens ``mask [B, L]`` (observation and padding tokens skipped).

    ``rewards [B, L]``: a turn's reward on its last action token; ``values [B, L]``: ``values[b, t]`` is
    the value of the state just before token ``t``; ``bootstrap [B]``: the value after the last action
    token (0 when terminated, the critic's value of the final state when truncated; default 0).
    Returns ``(advantages, returns)``, ``[B, L]``, 0 off the mask: ``d_t = r_t + gamma V_next(t) - V_t``,
    ``A_t = d_t + gamma lam A_next(t)`` (``next(t)``: the next action token of the row), ``returns = A + V``.
    """
    return _masked_gae(rewards, values, mask, gamma, lam, bootstrap)


@torch.no_grad()
def turn_gae(
    rewards: torch.Tensor,
    values: torch.Tensor,
    turn_mask: torch.Tensor,
    gamma: float = 0.99,
    lam: float = 0.9,
    bootstrap: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Turn-level GAE (Turn-PPO): one value and one advantage per turn of ``turn_mask [B, K]``.

    ``rewards [B, K]``: ``r_h``, the env reward of turn ``h``; ``values [B, K]``: ``V(s_h)``, read at the
    last token of state ``s_h``; ``bootstrap [B]``: ``V(s_{H+1})`` after the last turn (0 when terminated).
    Returns ``(advantages, returns)``, ``[B, K]``: ``delta_h = r_h + gamma V(s_{h+1}) - V(s_h)``,
    ``A_h = delta_h + gamma lam A_{h+1}``, ``G_h = A_h + V(s_h)``; zero on masked turns.
    """
    return _masked_gae(rewards, values, turn_mask, gamma, lam, bootstrap)


@torch.no_grad()
def grpo(scores: torch.Tensor, group_ids: torch.Tensor, eps: float = 1e-6, scale_by_std: bool = True) -> torch.Tensor:
    """GRPO's group-relative advantage of each rollout: ``[B]``, ``(R_i - mean_g(R)) / (std_g(R) + eps)``.

    ``scores [B]``: episode returns; ``group_ids [B]``: each rollout's task group. The standard deviation
    is the group's unbiased one (``scale_by_std=False``: Dr. GRPO's mean-centring only); 0 for a rollout
    alone in its group and for groups whose scores are all equal (nothing to compare).
    """
    scores = scores.float()
    _, inverse = torch.unique(group_ids, return_inverse=True)
    G = int(inverse.max()) + 1 if inverse.numel() else 0
    count = torch.zeros(G, dtype=scores.dtype, device=scores.device).index_add_(0, inverse, torch.ones_like(scores))
    total = torch.zeros(G, dtype=scores.dtype, device=scores.device).index_add_(0, inverse, scores)
    mean = total / count
    hi = torch.full((G,), -math.inf, dtype=scores.dtype, device=scores.device).scatter_reduce(
        0, inverse, scores, "amax"
    )
    lo = torch.full((G,), math.inf, dtype=scores.dtype, device=scores.device).scatter_reduce(0, inverse, scores, "amin")
    same = (hi == lo)[inverse]  # singletons and all-equal groups: no signal (exactly 0, no rounding noise)
    centred = torch.where(same, torch.zeros_like(scores), scores - mean[inverse])
    if not scale_by_std:
        return centred
    sq = torch.zeros(G, dtype=scores.dtype, device=scores.device).index_add_(0, inverse, centred**2)
    std = (sq / (count - 1).clamp(min=1)).sqrt()[inverse]
    return torch.where(same, torch.zeros_like(scores), centred / (std + eps))


def turns_to_tokens(per_turn: torch.Tensor, turn_ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Broadcast ``[B, K]`` per-turn values to the ``[B, L]`` tokens of each turn (0 where ``~mask``)."""
    K = per_turn.shape[1]
    idx = turn_ids.long().clamp(0, max(K - 1, 0))
    out = per_turn.gather(1, idx) if K else torch.zeros_like(turn_ids, dtype=per_turn.dtype)
    return torch.where(mask.bool() & (turn_ids >= 0) & (turn_ids < K), out, torch.zeros_like(out))


def outcome_rewards(
    outcome: torch.Tensor, turn_mask: torch.Tensor, action_mask: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """One reward per episode, ``outcome[b]``, on its last turn: ``([B, K] turn rewards, [B, L] token rewards)``.

    The token reward sits on the episode's last action token (where token GAE expects a
    turn's reward). Used by ``reward="success"``: every other turn gets 0, so neither the
    env's per-move costs nor its format penalty can make failing fast look better than
    failing slowly.
    """
    B, K = turn_mask.shape
    rows = torch.arange(B, device=turn_mask.device)
    turn_r = torch.zeros(turn_mask.shape, dtype=torch.float32, device=turn_mask.device)
    has_turn = turn_mask.any(1)
    last_turn = (turn_mask.long() * torch.arange(1, K + 1, device=turn_mask.device)).argmax(1)
    turn_r[rows, last_turn] = torch.where(has_turn, outcome.float(), torch.zeros_like(turn_r[:, 0]))
    L = action_mask.shape[1]
    token_r = torch.zeros(action_mask.shape, dtype=torch.float32, device=action_mask.device)
    has_tok = action_mask.any(1)
    last_tok = (action_mask.long() * torch.arange(1, L + 1, device=action_mask.device)).argmax(1)
    token_r[rows, last_tok] = torch.where(has_tok, outcome.float(), torch.zeros_like(token_r[:, 0]))
    return turn_r, token_r


#: Sums scalar tensors over data-parallel ranks (:func:`reference_trainer.distributed.sums`): the statistics below take
#: one to be computed over every rank's batch together; ``None`` is this process's batch alone.
Reduce = Callable[..., list[torch.Tensor]]


def episode_weights(action_mask: torch.Tensor, reduce: Reduce | None = None) -> torch.Tensor:
    """``[B, 1]`` weights ``mean_b(n_b) / n_b`` (``n_b`` action tokens of episode ``b``; 0 without any).

    Multiplying the advantages by them turns a token-mean loss into a sequence mean of token
    means (verl's ``seq-mean-token-mean``): every episode weighs the same, however long. The
    weights are positive, so PPO's clipping decisions do not change.
    """
    n = action_mask.float().sum(1, keepdim=True)
    has = n > 0
    total, count = n[has].sum(), has.sum()
    if reduce is not None:
        total, count = reduce(total, count)
    mean = (total / count).to(n.dtype) if float(count) > 0 else n.new_ones(())
    return torch.where(has, mean / n.clamp(min=1), torch.zeros_like(n))


def masked_mean(x: torch.Tensor, mask: torch.Tensor, reduce: Reduce | None = None) -> torch.Tensor:
    """Mean of ``x`` over ``mask`` (0 for an empty mask, never NaN)."""
    m = mask.to(x.dtype)
    total, count = (x * m).sum(), m.sum()
    if reduce is not None:
        total, count = reduce(total, count)
    return (total / count.clamp(min=1)).to(x.dtype)


@torch.no_grad()
def masked_whiten(x: torch.Tensor, mask: torch.Tensor, eps: float = 1e-8, reduce: Reduce | None = None) -> torch.Tensor:
    """``(x - mean) / (std + eps)`` over ``mask`` (population std; 0 outside the mask and when all values are equal)."""
    mean = masked_mean(x, mask, reduce)
    var = masked_mean((x - mean) ** 2, mask, reduce)
    out = (x - mean) / (var.sqrt() + eps)
    return torch.where(mask.bool(), out, torch.zeros_like(out))


# ---------------------------------------------------------------------- the estimators the trainer looks up
class Rewards(NamedTuple):
    """The rewards an estimator reads: ``turn [B, K]``, ``token [B, L]`` (a turn's reward on its last
    action token), ``episode [B]`` (GRPO's score)."""

    turn: torch.Tensor
    token: torch.Tensor
    episode: torch.Tensor


class Estimate(NamedTuple):
    """An estimator's output, each ``[B, L]``: advantages (0 off the action tokens), value targets
    and the bool mask of the positions the critic is trained on (all false without a critic)."""

    advantages: torch.Tensor
    value_targets: torch.Tensor
    value_mask: torch.Tensor


def batch_rewards(
    batch: "RolloutBatch", reward: str = "env", scale: float = 1.0, permutation: torch.Tensor | None = None
) -> Rewards:
    """The env's per-turn rewards (``reward="env"``), 1/0 success on the last turn (``"success"``), or
    the negative control ``"shuffled"``: episode ``b`` is paid episode ``permutation[b]``'s score on
    its last turn, so the reward no longer depends on what the policy did (``permutation``: ``[B]``).

    Turn and token rewards are multiplied by ``scale`` (the critic's target scale); the
    episode score is not (GRPO normalises it within each group).
    """
    if reward == "success":
        episode = batch.success.float()
        turn, token = outcome_rewards(episode * batch.ends_episode, batch.turn_mask, batch.action_mask)
    elif reward == "env":
        turn, token, episode = batch.turn_rewards, batch.token_rewards, batch.scores
    elif reward == "shuffled":
        if permutation is None:
            raise ValueError(
                "reward='shuffled' needs the permutation of the batch's episodes whose scores each one is paid "
                "(shuffled_rows)."
            )
        episode = batch.scores.float()[permutation]
        turn, token = outcome_rewards(episode * batch.ends_episode, batch.turn_mask, batch.action_mask)
    else:
        raise ValueError(f"reward must be 'env', 'success' or 'shuffled', got {reward!r}.")
    return Rewards(turn * scale, token * scale, episode)


def episode_rows(episode_index: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``(first [E], inverse [B])``: the first row of each of the ``E`` episodes a batch's rows belong to, and each
    row's episode (0..E-1), for rows ``episode_index [B]`` (one row per episode: both ``arange(B)``)."""
    _, inverse = torch.unique(episode_index, return_inverse=True)
    E = int(inverse.max()) + 1 if inverse.numel() else 0
    rows = torch.arange(len(inverse), device=inverse.device)
    first = torch.full((E,), len(inverse), dtype=torch.long, device=inverse.device).scatter_reduce(
        0, inverse, rows, "amin"
    )
    return first, inverse


def shuffled_rows(episode_index: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """``[B]``: for each row, a row of the episode whose score it is paid under ``reward="shuffled"``: a seeded
    permutation of the batch's episodes (not of its rows, so an episode of several sequences counts once)."""
    first, inverse = episode_rows(episode_index)
    permutation = torch.randperm(len(first), generator=generator).to(episode_index.device)
    return first[permutation][inverse]


def per_episode(per_turn: torch.Tensor, turn_mask: torch.Tensor, inverse: torch.Tensor, episodes: int) -> torch.Tensor:
    """``[E, K]``: each episode's per-turn values gathered from its rows (turn ``k`` of an episode is trained in one
    row, where ``turn_mask`` is set; 0 on turns no row trains)."""
    out = per_turn.new_zeros((episodes, per_turn.shape[1]))
    return out.index_add_(0, inverse, torch.where(turn_mask, per_turn, torch.zeros_like(per_turn)))


def truncation_bootstrap_pos(bootstrap_pos: torch.Tensor, truncation_value: str) -> torch.Tensor:
    """``[B]`` bootstrap positions under ``--truncation-value``: unchanged for ``"bootstrap"``; all -1 for
    ``"zero"`` (a truncated episode's value after its last turn is 0, as a terminated one's)."""
    if truncation_value == "bootstrap":
        return bootstrap_pos
    if truncation_value == "zero":
        return torch.full_like(bootstrap_pos, -1)
    raise ValueError(f"truncation_value must be 'bootstrap' or 'zero', got {truncation_value!r}.")


def bootstrap_values(values: torch.Tensor, bootstrap_pos: torch.Tensor) -> torch.Tensor:
    """``[B]``: the value at ``bootstrap_pos`` (the final state of a truncated episode), 0 where it is -1."""
    B = values.shape[0]
    return torch.where(
        bootstrap_pos >= 0,
        values.gather(1, bootstrap_pos.clamp(min=0)[:, None]).squeeze(1),
        torch.zeros(B, device=values.device),
    )


def token_gae_estimate(batch: "RolloutBatch", values: torch.Tensor, rewards: Rewards, algo: Any) -> Estimate:
    """Token GAE; the critic is trained at the token before each action token (the state it is sampled in)."""
    if len(episode_rows(batch.episode_index)[0]) != len(batch.episode_index):
        raise ValueError(
            "Token GAE runs along one token sequence; an episode trained in several (a history window, "
            "'compact', stripped reasoning) needs a turn-level or episode-level estimator: --advantage turn_gae "
            "(turn-ppo, st-ppo) or grpo."
        )
    act = batch.action_mask
    values_tok = torch.nn.functional.pad(values[:, :-1], (1, 0))  # V of the state before token t
    adv, ret = token_gae(
        rewards.token, values_tok, act, algo.gamma, algo.lam, bootstrap_values(values, batch.bootstrap_pos)
    )
    value_targets, value_mask = torch.zeros_like(values), torch.zeros_like(act)
    value_targets[:, :-1] = ret[:, 1:]
    value_mask[:, :-1] = act[:, 1:]
    return Estimate(adv, value_targets, value_mask)


def turn_gae_estimate(batch: "RolloutBatch", values: torch.Tensor, rewards: Rewards, algo: Any) -> Estimate:
    """Turn GAE; every token of turn ``k`` gets ``A_k``, the critic is trained at each turn's read position.

    When an episode is trained in several rows (a history policy), ``V(s_k)`` is read in the row that trains turn
    ``k`` and GAE runs over the episode's turns across its rows: the window boundary changes what the critic reads,
    not the recursion."""
    act = batch.action_mask
    turn_values = values.gather(1, batch.value_pos)  # [B, K] V(s_k)
    boot = bootstrap_values(values, batch.bootstrap_pos)
    first, inverse = episode_rows(batch.episode_index)
    if len(first) == len(inverse):  # one row per episode
        adv_turn, ret_turn = turn_gae(rewards.turn, turn_values, batch.turn_mask, algo.gamma, algo.lam, boot)
    else:
        E, mask = len(first), batch.turn_mask
        episode_mask = per_episode(mask.float(), mask, inverse, E) > 0
        adv_e, ret_e = turn_gae(
            per_episode(rewards.turn.float(), mask, inverse, E),
            per_episode(turn_values.float(), mask, inverse, E),
            episode_mask,
            algo.gamma,
            algo.lam,
            boot.new_zeros(E).index_add_(0, inverse, boot),  # only the row holding the final state has one
        )
        adv_turn, ret_turn = adv_e[inverse] * mask, ret_e[inverse] * mask
    adv = turns_to_tokens(adv_turn, batch.turn_ids, act)
    value_targets, value_mask = torch.zeros_like(values), torch.zeros_like(act)
    pos = batch.value_pos[batch.turn_mask]
    rows = torch.arange(values.shape[0], device=values.device)[:, None].expand_as(batch.value_pos)[batch.turn_mask]
    value_targets[rows, pos] = ret_turn[batch.turn_mask]
    value_mask[rows, pos] = True
    return Estimate(adv, value_targets, value_mask)


def grpo_estimate(batch: "RolloutBatch", values: torch.Tensor, rewards: Rewards, algo: Any) -> Estimate:
    """GRPO: each rollout's group-normalised score on all its action tokens (of every row it is trained in, its
    group's statistics taken over episodes, not rows); no critic."""
    act = batch.action_mask
    first, inverse = episode_rows(batch.episode_index)
    per = grpo(rewards.episode[first], batch.group_ids[first], algo.grpo_eps, algo.grpo_scale_by_std)
    adv = per[inverse][:, None] * act
    return Estimate(adv, torch.zeros_like(values), torch.zeros_like(act))


@dataclass(frozen=True)
class Estimator:
    """``estimate(batch, values [B, L], rewards, algo) -> Estimate``; ``uses_critic``: it reads values
    (so the trainer computes them, trains the critic and whitens the advantages when asked); ``min_group``:
    the valid members a group that lost some to faults needs to be trained on (``rollout.loss_rows``)."""

    estimate: Callable[["RolloutBatch", torch.Tensor, Rewards, Any], Estimate]
    uses_critic: bool
    min_group: int = 1


ESTIMATORS: dict[str, Estimator] = {
    "token_gae": Estimator(token_gae_estimate, uses_critic=True),
    "turn_gae": Estimator(turn_gae_estimate, uses_critic=True),
    "grpo": Estimator(grpo_estimate, uses_critic=False, min_group=2),  # a baseline needs two rollouts
}


def estimator(name: str, *, windowed: bool = False) -> Estimator:
    """The estimator ``--advantage name`` names; ``windowed``: responses train in the sequences they were sampled in
    (a history window or stripped reasoning), where token GAE, which runs along one sequence, does not apply."""
    if name not in ESTIMATORS:
        raise ValueError(f"advantage={name!r} is not an estimator; choose one of {sorted(ESTIMATORS)}.")
    if name == "token_gae" and windowed:
        raise ValueError(
            "--history-window/--reasoning strip train each response in the sequence it was sampled in, and "
            "token GAE runs along one sequence: use a turn-level preset (turn-ppo, st-ppo) or grpo."
        )
    return ESTIMATORS[name]
