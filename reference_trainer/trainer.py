"""The loop: rollout -> advantages -> minibatch updates -> log -> checkpoint.

One :class:`Trainer` owns the policy, the optimizer, the envs and every random generator
(a ``numpy`` generator for task seeds, a ``torch.Generator`` for sampling and shuffling). Envs
are re-seeded at every episode from the numpy generator, so a checkpoint of those two
generators, the weights and the optimizer resumes a run exactly (tested on CPU).

One PPO iteration, top to bottom (:meth:`Trainer.train_iteration`):

1. :meth:`Trainer.rollout` plays ``tasks_per_iteration * group_size`` episodes
   (:func:`~reference_trainer.rollout.collect`), padded into a ``RolloutBatch``;
2. :meth:`Trainer.prepare` scores them (old log-probs, values) and calls the estimator named by
   ``--advantage`` from :data:`~reference_trainer.advantages.ESTIMATORS` (advantages, value
   targets, value mask), then whitens and weighs the advantages;
3. :meth:`Trainer.update` runs shuffled minibatch steps; each micro-batch's loss is the sum of
   the terms of :data:`~reference_trainer.losses.LOSSES` that apply (policy, entropy, value,
   KL), whose metrics combine by the reduction each carries;
4. the weight average moves (``--ema-decay``); :meth:`Trainer.fit` logs, evaluates and
   checkpoints (:mod:`reference_trainer.checkpoint`).

Storage layout of one iteration (``B`` episodes, ``L`` tokens, ``K`` turns):

* ``batch``: :class:`~reference_trainer.rollout.RolloutBatch` (ids, masks, turn ids, rewards);
* ``old_logp [B, L]``: log-probs of the sampled tokens, recomputed by a forward pass of the
  policy that sampled them (the recorded sampling log-probs are compared with it: metric
  ``rollout/logp_diff``), or with ``recompute_old_logp=False`` the recorded ones;
* ``old_values [B, L]``: ``values[b, j]``, the value of the state ending at token ``j``;
* ``advantages [B, L]`` on action tokens; ``value_targets``/``value_mask [B, L]`` at the
  positions the critic is trained on (token critic: the token before each action token;
  turn critic: the last token of each turn's state).

Under ``torchrun`` each rank plays its share of the tasks and the update is data parallel (DDP,
or FSDP with ``--parallel fsdp``); the statistics, counts and metrics above are taken over all
ranks (:mod:`reference_trainer.distributed`, ``docs/scaling.md``). One process: unchanged.
"""

from __future__ import annotations

import contextlib
import copy
import importlib
import logging
import math
import os
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Iterator

import gymnasium as gym
import numpy as np
import torch

from . import checkpoint, distributed
from .advantages import ESTIMATORS, batch_rewards, episode_weights, masked_mean, masked_whiten, truncation_bootstrap_pos
from .averaging import ema_update
from .config import Config
from .losses import LOSSES, LossInputs, Metric, clip_bias_surrogate, clipped_tokens, combine_parts, combine_steps, explained_variance, log_ratios
from .metrics import MetricsLogger
from .policy import Policy, load_policy, needs_grad_scaler, save_policy
from .tasks import demo_env_kwargs, sft_seeds
from .rollout import Episode, RolloutBatch, collect, episode_metrics, expert_episodes, make_batch, make_envs
from .tokenization import ChatFormat

log = logging.getLogger(__name__)

__all__ = ["Trainer", "Prepared", "micro_batches"]


@dataclass
class Prepared:
    """A rollout batch with everything the update needs (see the module docstring)."""

    batch: RolloutBatch
    old_logp: torch.Tensor
    old_values: torch.Tensor
    advantages: torch.Tensor
    value_targets: torch.Tensor
    value_mask: torch.Tensor
    ref_logp: torch.Tensor | None

    def select(self, index: torch.Tensor) -> "Prepared":
        b = self.batch.select(index)
        L = b.ids.shape[1]
        cut = lambda t: None if t is None else t[index][:, :L]  # noqa: E731
        return Prepared(b, cut(self.old_logp), cut(self.old_values), cut(self.advantages),
                        cut(self.value_targets), cut(self.value_mask), cut(self.ref_logp))


def micro_batches(lengths: torch.Tensor, max_size: int | None = None, max_tokens: int = 0) -> list[torch.Tensor]:
    """Split rows ``0 .. len(lengths) - 1`` into micro-batches; returns their index tensors.

    Without ``max_tokens``: consecutive chunks of ``max_size`` rows (one chunk when ``None``).
    With it: rows sorted by length (longest first) are packed greedily while
    ``rows * longest <= max_tokens`` and ``rows <= max_size``, so short episodes are not
    padded to a long one's length (a row longer than the budget gets a micro-batch of its
    own). Every row appears exactly once; losses are sums divided by the minibatch's counts,
    so any split gives the same gradient.
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


class Trainer:
    """SFT warm start, then PPO-family or GRPO updates on a Gymnasium text env.

    Args:
        cfg: The whole configuration (see :mod:`reference_trainer.config`).
        policy, tokenizer: An already loaded policy (otherwise built from ``cfg.model``).
    """

    def __init__(self, cfg: Config, policy: Policy | None = None, tokenizer: Any = None):
        self.cfg = cfg
        a = cfg.algo
        if a.advantage not in ESTIMATORS:
            raise ValueError(f"advantage={a.advantage!r} is not an estimator; choose one of {sorted(ESTIMATORS)}.")
        #: The advantage estimator (:data:`~reference_trainer.advantages.ESTIMATORS`).
        self.estimator = ESTIMATORS[a.advantage]
        if a.kl_reference == "average" and a.kl_coef > 0 and not a.ema_decay > 0:
            raise ValueError("--kl-reference average anchors the KL penalty to the weight average: set --ema-decay "
                             "(e.g. 0.9) too, or use --kl-reference start.")
        torch.set_num_threads(max(1, cfg.train.threads))
        for module in cfg.train.imports:
            importlib.import_module(module)
        import agentgym_turn  # noqa: F401  (registers the suite's ids)

        if cfg.train.env not in gym.registry:
            raise gym.error.NameNotFound(
                f"Env {cfg.train.env!r} is not registered. `agentgym-turn list` shows the suite's ids; "
                "register your own with --import MODULE."
            )
        m = cfg.model
        #: This process's place among the data-parallel ranks (one process: rank 0 of 1), and its device.
        self.dist, device = distributed.setup(m.device, cfg.train.parallel)
        _check_divisible(cfg, self.dist.world_size)
        _check_fsdp(cfg, self.dist)
        #: The directory the weights came from (an FSDP checkpoint rebuilds a whole model from it on rank 0).
        self.model_path: Path | None = None
        if policy is None:
            path = cfg.train.resume and checkpoint.resolve(cfg.train.resume) / "policy"
            if not path:
                path = self._build_tiny() if m.model == "tiny" else Path(m.model)
            policy, tokenizer = load_policy(path, device=device, dtype=m.dtype, critic=m.critic, critic_path=m.critic_model)
            self.model_path = Path(path)
        self.policy, self.tokenizer = policy, tokenizer
        self._objective = distributed.Objective(policy, self._losses)
        #: The loss as a DDP/FSDP-wrapped module (before the optimizer: FSDP replaces the parameters); None in one process.
        self.parallel = distributed.wrap(self._objective, self.dist, device, find_unused_parameters=bool(self._unreached_parameters(0)))
        self.fmt = ChatFormat(tokenizer, cfg.rollout.system_prompt)
        self.pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
        self.device = torch.device(device)
        r = cfg.rollout
        stepping = dict(env_workers=r.env_workers, step_timeout_s=r.step_timeout_s)
        self.envs = make_envs(cfg.train.env, r.num_envs, r.env_mode, **stepping, **r.env_kwargs)
        #: The envs evaluations play: the training envs, or others when ``eval_env_kwargs`` names a held-out split/world.
        self.eval_envs = (make_envs(cfg.train.env, r.num_envs, r.env_mode, **stepping, **{**r.env_kwargs, **cfg.train.eval_env_kwargs})
                          if cfg.train.eval_env_kwargs else self.envs)
        self._val_envs: Any = None  # the validation split's envs, made at the first validation evaluation
        #: The task seeds of every RL iteration's rollouts, in order (what :mod:`reference_trainer.tasks` records).
        self.played_tasks: list[int] = []
        #: Per-episode outcomes of the latest :meth:`evaluate` (``seeds``, ``success``, ``score``, ``return``),
        #: for paired statistics between two evaluations of the same tasks.
        self.last_eval_outcomes: dict[str, list[float]] = {}
        a = cfg.algo
        self.optimizer = torch.optim.AdamW(
            [
                {"params": policy.actor_parameters(), "lr": a.lr},
                {"params": policy.critic_parameters(), "lr": a.lr * a.critic_lr_ratio},
            ],
            weight_decay=a.weight_decay,
            eps=a.adam_eps,
        )
        warm = max(0, a.lr_warmup_steps)
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(self.optimizer, lambda step: min(1.0, (step + 1) / (warm + 1)))
        policy.logprob_chunk_tokens = m.logprob_chunk_tokens
        if m.gradient_checkpointing:
            policy.enable_gradient_checkpointing()
        #: float16 autocast's loss scaler (None otherwise): losses are scaled up before backward, gradients unscaled before clipping.
        self.scaler = torch.amp.GradScaler(self.device.type) if needs_grad_scaler(policy.compute_dtype) else None
        #: Frozen float32 Polyak average of the actor (``ema_decay > 0``); evaluations play it.
        self.averaged_lm: torch.nn.Module | None = None
        #: The KL penalty's reference: a frozen copy of the actor, or ``averaged_lm`` itself.
        self.ref_lm: torch.nn.Module | None = None
        self._start_rl_from_current()
        self.np_rng = np.random.default_rng(cfg.train.seed)
        self.generator = torch.Generator().manual_seed(distributed.rank_seed(cfg.train.seed, self.dist.rank))
        self.iteration = 0
        self.sft_done = False
        self.out = Path(cfg.train.out)
        self.logger = (MetricsLogger(self.out, tensorboard=cfg.train.tensorboard, append=bool(cfg.train.resume))
                       if self.dist.is_main else distributed.QuietLogger(self.out))  # rank 0 logs the reduced metrics
        if cfg.train.resume:
            self._load_state(Path(cfg.train.resume))

    # ------------------------------------------------------------------ set-up helpers
    @property
    def demo_env_kwargs(self) -> dict[str, Any]:
        """The env options of expert play (SFT demonstrations, the tiny model's tokenizer corpus and
        pretraining): ``env_kwargs`` with ``sft_env_kwargs`` over them."""
        return demo_env_kwargs(self.cfg)

    def _build_tiny(self) -> Path:
        from .tiny import TinySpec, build_tiny

        m = self.cfg.model
        spec = TinySpec(arch=m.tiny_arch, vocab_size=m.tiny_vocab, hidden_size=m.tiny_hidden, num_layers=m.tiny_layers, num_heads=m.tiny_heads,
                        intermediate_size=4 * m.tiny_hidden, rope_theta=m.tiny_rope_theta, init_std=m.tiny_init_std)
        kwargs = self.demo_env_kwargs  # the tokenizer's corpus and the pretraining's episodes are expert play, like SFT's
        build = lambda: build_tiny(self.cfg.train.env, m.tiny_dir, seed=m.tiny_seed, spec=spec, env_kwargs=kwargs)  # noqa: E731
        if m.tiny_pretrain:
            from .pretrain import PretrainSpec, build_pretrained_tiny

            build = lambda: build_pretrained_tiny(self.cfg.train.env, kwargs, tiny=spec,  # noqa: E731
                                                  spec=PretrainSpec.from_config(m.tiny_pretrain), seed=m.tiny_seed, directory=m.tiny_dir)
        # one writer per machine (local rank 0); the other ranks wait, then find its build in the cache
        # (with a cache on a shared file system, the machines' builds are identical and published atomically)
        path = build() if self.dist.local_rank == 0 else None
        distributed.barrier(self.dist)
        return path or build()

    def _start_rl_from_current(self) -> None:
        """The KL reference and the weight average start from the actor as it is now (at start, after SFT)."""
        a = self.cfg.algo
        if a.ema_decay > 0:
            self.averaged_lm = _frozen_copy(self.policy.lm).float()
        if a.kl_coef > 0:
            self.ref_lm = self.averaged_lm if a.kl_reference == "average" else _frozen_copy(self.policy.lm)

    def _unreached_parameters(self, iteration: int) -> list[str]:
        """The parameters that no loss term of iteration ``iteration`` reaches (:meth:`_losses`): the
        actor's before the critic warm-up ends (without an entropy or KL term), the critic's without a
        critic. DDP searches for unused parameters only when there are some."""
        a = self.cfg.algo
        actor = iteration >= a.critic_warmup or a.ent_coef != 0 or a.kl_coef > 0
        return distributed.unreached_parameters(self._objective, actor=actor, critic=self.estimator.uses_critic)

    def _match_ddp_to_losses(self, fresh: bool = False) -> None:
        """Wrap DDP again when the losses start reaching other parameters (the end of a critic warm-up,
        or a resume past it), so it searches for unused parameters exactly when there are some; with
        ``fresh``, in any case (a new reducer, which has seen no backward pass yet)."""
        find = getattr(self.parallel, "find_unused_parameters", None)
        if find is None:  # FSDP or one process: nothing to match (and nothing to compute each update)
            return
        want = bool(self._unreached_parameters(self.iteration))
        if fresh or find != want:
            self.parallel = distributed.wrap(self._objective, self.dist, str(self.device), find_unused_parameters=want)

    def close(self) -> None:
        self.envs.close()
        if self.eval_envs is not self.envs:
            self.eval_envs.close()
        if self._val_envs is not None:
            self._val_envs.close()
        self.logger.close()
        distributed.shutdown()

    # ------------------------------------------------------------------ network passes
    def _forward(self, batch: RolloutBatch, *, with_values: bool = True, with_logp: bool = True) -> tuple[torch.Tensor, torch.Tensor]:
        """``(logp, values)`` for ``batch`` without gradients, in micro-batches (zeros where not asked)."""
        a = self.cfg.algo
        B, L = batch.ids.shape
        logp = torch.zeros(B, L, device=batch.ids.device)
        values = torch.zeros(B, L, device=batch.ids.device)
        if not (with_values or with_logp):
            return logp, values
        with torch.no_grad(), distributed.gathered(self.parallel):
            for index in micro_batches(batch.attention_mask.sum(1), a.micro_batch_size or a.minibatch_size, a.micro_batch_tokens):
                index = index.to(batch.ids.device)
                sub = batch.select(index)
                out = self.policy.evaluate(sub.ids, sub.attention_mask, sub.action_mask, temperature=self._temperature,
                                           with_values=with_values, with_entropy=False, with_logp=with_logp)
                n = out.logp.shape[1]
                logp[index, :n] = out.logp
                if with_values:
                    values[index, :n] = out.values
        return logp, values

    @property
    def _temperature(self) -> float:
        """The rollout's sampling temperature (greedy rollouts are scored at temperature 1)."""
        return self.cfg.rollout.temperature or 1.0

    @contextlib.contextmanager
    def _playing(self, lm: torch.nn.Module | None) -> Iterator[None]:
        """Within the block the policy's actor is ``lm`` (``None``: unchanged)."""
        saved = self.policy.lm
        try:
            if lm is not None:
                self.policy.lm = lm
            yield
        finally:
            self.policy.lm = saved

    def _ref_logp(self, batch: RolloutBatch) -> torch.Tensor:
        with self._playing(self.ref_lm):
            logp, _ = self._forward(batch, with_values=False)
        return logp

    # ------------------------------------------------------------------ one iteration
    def rollout(self, seeds: list[int], groups: list[int] | None = None, *, temperature: float | None = None,
                generator: torch.Generator | None = None, envs: Any = None) -> list[Episode]:
        """One episode per seed with the current actor (default: the rollout temperature, the training
        generator and the training envs)."""
        r = self.cfg.rollout
        with distributed.gathered(self.parallel):  # FSDP: whole weights on every rank, so ranks may play different turn counts
            return collect(
                self.policy, self.fmt, self.envs if envs is None else envs, seeds,
                generator=generator if generator is not None else self.generator,
                max_new_tokens=r.max_new_tokens, max_context_tokens=r.max_context_tokens,
                temperature=r.temperature if temperature is None else temperature, groups=groups,
                split_system_prompt=r.split_system_prompt,
            )

    def train_iteration(self) -> dict[str, float]:
        """Collect ``tasks_per_iteration * group_size`` episodes, update, return metrics."""
        r = self.cfg.rollout
        t0 = time.perf_counter()
        tasks = self.np_rng.integers(0, self.cfg.train.eval_seed, size=r.tasks_per_iteration).tolist()
        self.played_tasks += tasks
        mine = distributed.shard(range(len(tasks)), self.dist)  # every rank draws all tasks and plays its share
        seeds = [tasks[i] for i in mine for _ in range(r.group_size)]
        groups = [i for i in mine for _ in range(r.group_size)]
        episodes = self.rollout(seeds, groups)
        t1 = time.perf_counter()
        batch = make_batch(episodes, self.pad_id).to(self.device)
        prepared = self.prepare(batch)
        everyone = distributed.gather_episodes(episodes, self.dist)  # all ranks' episodes (token lists left out)
        metrics = {f"rollout/{k}": v for k, v in episode_metrics(everyone).items()}
        if r.step_timeout_s > 0:  # share of episodes whose env overran the step timeout (runs without one keep their keys)
            metrics["rollout/step_timeouts"] = sum(e.truncation == "timeout" for e in everyone) / max(len(everyone), 1)
        act = batch.action_mask
        if self.cfg.algo.recompute_old_logp:
            metrics["rollout/logp_diff"] = float(distributed.masked_mean((batch.sampled_logp - prepared.old_logp).abs(), act, self.dist))
        if self.estimator.uses_critic:
            metrics["train/explained_variance"] = distributed.explained_variance(prepared.old_values, prepared.value_targets,
                                                                                 prepared.value_mask, self.dist)
        upd = self.update(prepared)
        metrics.update({f"train/{k}": v for k, v in upd.items()})
        if self.averaged_lm is not None:  # (with --kl-reference average this moves the KL reference too)
            averaged = list(self.averaged_lm.parameters())
            with torch.no_grad():
                for q, new in zip(averaged, ema_update(averaged, list(self.policy.lm.parameters()), self.cfg.algo.ema_decay)):
                    q.copy_(new)
        self.iteration += 1
        metrics["time/rollout_s"] = t1 - t0
        metrics["time/update_s"] = time.perf_counter() - t1
        return distributed.reduce_times(metrics, self.dist)

    # ------------------------------------------------------------------ advantages
    def prepare(self, batch: RolloutBatch) -> Prepared:
        """Old log-probs and values, advantages and value targets for a rollout batch."""
        a = self.cfg.algo
        batch = replace(batch, bootstrap_pos=truncation_bootstrap_pos(batch.bootstrap_pos, a.truncation_value))
        old_logp, values = self._forward(batch, with_values=self.estimator.uses_critic, with_logp=a.recompute_old_logp)
        act = batch.action_mask
        if not a.recompute_old_logp:  # the behaviour policy's log-probs, as recorded while sampling
            old_logp = batch.sampled_logp * act
        # the negative control: a seeded permutation of the batch's episodes, drawn only when asked for
        permutation = torch.randperm(len(batch.scores), generator=self.generator).to(act.device) if a.reward == "shuffled" else None
        est = self.estimator.estimate(batch, values, batch_rewards(batch, a.reward, a.reward_scale, permutation), a)
        adv = est.advantages
        if a.normalize_advantages and self.estimator.uses_critic:
            adv = distributed.masked_whiten(adv, act, self.dist)  # global statistics over all ranks
        if a.loss_agg == "seq-mean-token-mean":
            adv = adv * distributed.episode_weights(act, self.dist)
        ref = self._ref_logp(batch) if self.ref_lm is not None else None
        return Prepared(batch, old_logp, values, adv.float(), est.value_targets, est.value_mask, ref)

    # ------------------------------------------------------------------ update
    def update(self, prepared: Prepared) -> dict[str, float]:
        """Epochs of shuffled minibatch steps on one prepared batch; returns the combined metrics."""
        a = self.cfg.algo
        B = len(prepared.batch)
        steps: list[dict[str, Metric]] = []
        self._match_ddp_to_losses()
        actor_params = self.policy.actor_parameters()
        all_params = [q for g in self.optimizer.param_groups for q in g["params"]]
        size = a.minibatch_size // self.dist.world_size  # this rank's share of each minibatch
        for _ in range(a.epochs):
            perm = torch.randperm(B, generator=self.generator)
            for lo in range(0, B, size):
                idx = perm[lo : lo + size].to(self.device)
                mbatch = prepared.select(idx)
                n_tok = distributed.all_reduce_sum(mbatch.batch.action_mask.sum().float(), self.dist).clamp(min=1)
                n_val = distributed.all_reduce_sum(mbatch.value_mask.sum().float(), self.dist).clamp(min=1)
                micro = [mbatch.select(j.to(self.device))
                         for j in micro_batches(mbatch.batch.attention_mask.sum(1), a.micro_batch_size, a.micro_batch_tokens)]
                norm = None
                if a.clip_bias_correction != "none" and (len(micro) > 1 or self.dist.enabled) and self.iteration >= a.critic_warmup:
                    norm = self._clip_bias_norm(micro, n_tok)
                self.optimizer.zero_grad(set_to_none=True)
                parts = []
                extra = distributed.extra_micro_batches(len(micro), self.parallel, self.dist)  # FSDP: forwards in lockstep
                for i, part in enumerate(micro + micro[:1] * extra):
                    with distributed.grad_sync(self.parallel, last=i == len(micro) + extra - 1):
                        loss, m = (self.parallel or self._losses)(part, n_tok, n_val, norm, actor_params)
                        if i >= len(micro):  # a padding pass: gathers and reduces like the others, adds nothing
                            loss = loss * 0.0
                        if loss.requires_grad:  # DDP averages gradients over ranks; n_tok is global, so scale to their sum
                            (loss * self.dist.world_size if self.dist.enabled else loss).backward()
                    if i < len(micro):
                        parts.append((m, part.batch.action_mask.sum().item() / n_tok.item()))
                has_grad = any(q.grad is not None for q in all_params)
                if self.scaler is not None and has_grad:
                    self.scaler.unscale_(self.optimizer)  # clip, measure and step on the true gradient
                limit = a.max_grad_norm if a.max_grad_norm and a.max_grad_norm > 0 else float("inf")
                gnorm = float(torch.nn.utils.clip_grad_norm_(all_params, limit)) if has_grad else 0.0
                if has_grad and math.isfinite(gnorm):  # a non-finite gradient skips the step
                    self.optimizer.step()
                    self.scheduler.step()
                if self.scaler is not None and has_grad:
                    self.scaler.update()  # a non-finite gradient (step skipped above) halves the scale
                steps.append({**combine_parts(parts), "grad_norm": Metric(gnorm, "minibatch")})
        return combine_steps(distributed.reduce_steps(steps, self.dist))

    def _losses(self, p: Prepared, n_tok: torch.Tensor, n_val: torch.Tensor, clip_bias_norm: float | None,
                actor_only_params) -> tuple[torch.Tensor, dict[str, Metric]]:
        """The summed loss terms of one micro-batch (``n_tok``, ``n_val``: the minibatch's counts) and their metrics."""
        a = self.cfg.algo
        b = p.batch
        out = self.policy.evaluate(b.ids, b.attention_mask, b.action_mask,
                                   temperature=self._temperature, with_values=self.estimator.uses_critic)
        x = LossInputs(out.logp, out.entropy, out.values, p.old_logp, p.old_values, p.advantages, p.value_targets, p.value_mask,
                       p.ref_logp, b.action_mask, b.turn_ids, n_tok, n_val, actor_only_params, clip_bias_norm)
        active = {"policy": self.iteration >= a.critic_warmup, "entropy": True,
                  "value": self.estimator.uses_critic, "kl": p.ref_logp is not None}
        total = out.logp.new_zeros(())
        metrics: dict[str, Metric] = {}
        for name, term in LOSSES.items():
            if active[name]:
                loss, m = term(x, a)
                if loss is not None:
                    total = total + loss
                metrics.update(m)
        return (total if self.scaler is None else self.scaler.scale(total)), metrics  # float16: scaled for backward

    def _clip_bias_norm(self, micro: list[Prepared], n_tok: torch.Tensor) -> float:
        """``||grad C||`` over a whole minibatch split in micro-batches (one extra pass)."""
        a = self.cfg.algo
        params = self.policy.actor_parameters()
        acc = [torch.zeros_like(q, dtype=torch.float32) for q in params]
        scale = 1.0 if self.scaler is None else self.scaler.get_scale()  # float16: keep small gradients above underflow
        for p in micro:
            b = p.batch
            out = self.policy.evaluate(b.ids, b.attention_mask, b.action_mask,
                                       temperature=self._temperature, with_values=False, with_entropy=False)
            ratio = log_ratios(out.logp, p.old_logp, b.action_mask, b.turn_ids, a.ratio_level).clamp(-20, 20).exp()
            adv = p.advantages * b.action_mask
            clipped = clipped_tokens(ratio.detach(), adv, b.action_mask, a.clip_eps)
            if not bool(clipped.any()):
                continue
            c = clip_bias_surrogate(out.logp, ratio, adv, clipped, n_tok) * scale
            grads = torch.autograd.grad(c, params, allow_unused=True)
            for s, g in zip(acc, grads):
                if g is not None:
                    s += g.float()
        acc = [distributed.all_reduce_sum(s, self.dist) for s in acc]  # C sums over all ranks' tokens
        return float(torch.sqrt(sum((s**2).sum() for s in acc))) / scale

    # ------------------------------------------------------------------ evaluation
    def eval_seeds(self, n: int | None = None) -> list[int]:
        n = self.cfg.train.eval_episodes if n is None else n
        return list(range(self.cfg.train.eval_seed, self.cfg.train.eval_seed + n))

    @property
    def val_envs(self) -> Any:
        """The validation split's envs (``val_env_kwargs`` over the training options), made when first used."""
        t, r = self.cfg.train, self.cfg.rollout
        if not t.val_env_kwargs or t.val_episodes <= 0:
            raise ValueError("no validation split: set --val-env-kwargs (e.g. split=validation) and --val-episodes N")
        if self._val_envs is None:
            self._val_envs = make_envs(t.env, r.num_envs, r.env_mode, env_workers=r.env_workers, step_timeout_s=r.step_timeout_s,
                                       **{**r.env_kwargs, **t.val_env_kwargs})
        return self._val_envs

    @torch.no_grad()
    def evaluate(self, n: int | None = None, *, split: str = "test", current: bool = False) -> dict[str, float]:
        """Success and return on the fixed held-out seeds, in the eval envs (does not touch the training RNGs).

        ``split="validation"`` plays the validation envs instead (``val_episodes`` by default). With
        ``ema_decay > 0`` the weight average plays, unless ``current`` (the actor as it is, e.g. during
        SFT). The per-episode outcomes are kept in :attr:`last_eval_outcomes` (same seeds in the same
        order every time, so two evaluations pair up)."""
        if split not in ("test", "validation"):
            raise ValueError(f"split must be 'test' or 'validation', got {split!r}")
        envs = self.eval_envs if split == "test" else self.val_envs
        if split == "validation" and n is None:
            n = self.cfg.train.val_episodes
        gen = torch.Generator().manual_seed(distributed.rank_seed(self.cfg.train.eval_seed, self.dist.rank))
        seeds = self.eval_seeds(n)
        with self._playing(None if current else self.averaged_lm):  # each rank plays its share of the seeds
            episodes = self.rollout(distributed.shard(seeds, self.dist), temperature=self.cfg.train.eval_temperature,
                                    generator=gen, envs=envs)
        episodes = distributed.gather_episodes(episodes, self.dist)
        self.last_eval_outcomes = {
            "seeds": [float(s) for s in seeds],
            "success": [float(e.success) for e in episodes],
            "score": [e.score for e in episodes],
            "return": [e.ret for e in episodes],
        }
        return episode_metrics(episodes)

    # ------------------------------------------------------------------ SFT
    def sft(self, episodes: int | None = None, steps: int | None = None, *, max_seconds: float | None = None) -> dict[str, Any]:
        """Supervised warm start on expert episodes (cross-entropy on the response tokens).

        With ``sft_validate_every > 0``, ``steps`` is a ceiling: every that many steps the actor is
        evaluated greedily on the validation split, the best weights so far are kept, and SFT stops
        once ``sft_patience`` evaluations in a row did not beat the best; the best weights are the
        result (the imitation's validation plateau, chosen on no test task). The stats then hold
        the validation curve (``sft/validation``: ``[step, success, score]`` rows) and ``sft/best_step``.
        ``max_seconds`` ends SFT once its optimizer steps have taken that long (a compute budget)."""
        t, a = self.cfg.train, self.cfg.algo
        episodes = t.sft_episodes if episodes is None else episodes
        steps = t.sft_steps if steps is None else steps
        seeds = sft_seeds(t.seed, t.eval_seed, episodes)
        demos = expert_episodes(t.env, self.fmt, seeds, self.demo_env_kwargs, self.cfg.rollout.split_system_prompt)
        demos, too_long = fitting_demos(demos, self.cfg.rollout.max_context_tokens)
        if too_long and self.dist.is_main:  # every rank leaves out the same ones
            log.warning("SFT: %d of %d expert episodes are longer than max_context_tokens=%d and are left out",
                        too_long, too_long + len(demos), self.cfg.rollout.max_context_tokens)
        batch = make_batch(demos, self.pad_id).to(self.device)
        params = self.policy.actor_parameters()
        opt = torch.optim.AdamW(params, lr=t.sft_lr, weight_decay=0.0)
        gen = torch.Generator().manual_seed(t.seed + 1)
        losses = []
        every = t.sft_validate_every
        validation: list[list[float]] = []
        best: tuple[float, int, dict[str, torch.Tensor] | None] = (-math.inf, 0, None)
        if every > 0:
            best = (self._validation_value(self.evaluate(split="validation", current=True)), 0, _state_copy(self.policy.lm))
            validation.append([0, *self._validation_pair()])
        bar = _progress(range(steps), "SFT", t.progress and self.dist.is_main)  # rank 0 draws the bars
        step_seconds = 0.0  # in optimizer steps only (not validation): what "the same compute" counts
        for step in bar:
            t_step = time.perf_counter()
            idx = torch.randint(len(batch), (min(t.sft_batch_size, len(batch)),), generator=gen).to(self.device)
            b = batch.select(idx)
            n_tok = b.action_mask.sum().clamp(min=1)
            opt.zero_grad(set_to_none=True)
            loss = 0.0
            for j in micro_batches(b.attention_mask.sum(1), a.micro_batch_size, a.micro_batch_tokens):
                part = b.select(j.to(self.device))
                out = self.policy.evaluate(part.ids, part.attention_mask, part.action_mask, with_values=False, with_entropy=False)
                part_loss = -(out.logp * part.action_mask).sum() / n_tok  # parts add up to the batch's token-mean
                (part_loss if self.scaler is None else self.scaler.scale(part_loss)).backward()
                loss += float(part_loss.detach())
            if self.scaler is not None:
                self.scaler.unscale_(opt)
            torch.nn.utils.clip_grad_norm_(params, 1.0)
            if self.scaler is None:
                opt.step()
            else:  # skips a non-finite step
                self.scaler.step(opt)
                self.scaler.update()
            losses.append(loss)
            step_seconds += time.perf_counter() - t_step
            if max_seconds is not None and step_seconds >= max_seconds:
                break
            if hasattr(bar, "set_postfix"):
                bar.set_postfix(loss=f"{losses[-1]:.3f}")
            if every > 0 and (step + 1) % every == 0:
                value = self._validation_value(self.evaluate(split="validation", current=True))
                validation.append([step + 1, *self._validation_pair()])
                if value > best[0]:
                    best = (value, step + 1, _state_copy(self.policy.lm))
                elif (step + 1) - best[1] >= every * t.sft_patience:
                    break
        if every > 0 and best[2] is not None:  # the validation plateau's weights
            self.policy.lm.load_state_dict(best[2])
        distributed.broadcast_module(self.policy, self.dist)  # every rank ran the same SFT; rank 0's weights are the truth
        # SFT's backward passes ran outside DDP, yet a reducer searching for unused parameters counts every parameter
        # they reached as used in its next update: with no gradient there (a critic warm-up), it would stop the run
        self._match_ddp_to_losses(fresh=True)
        if self.cfg.model.critic_model is None:  # a critic built from --model starts from the SFT weights too
            self.policy.critic_from_actor()
        self._start_rl_from_current()
        self.sft_done = True
        stats: dict[str, Any] = {"sft/loss": float(np.mean(losses[-10:])) if losses else float("nan"),
                                 "sft/episodes": float(len(demos)), "sft/steps": float(len(losses)), "sft/step_seconds": step_seconds}
        if every > 0:
            stats["sft/best_step"] = float(best[1])
            stats["sft/validation"] = validation
        if too_long:
            stats["sft/episodes_too_long"] = float(too_long)
        return stats

    def _validation_pair(self) -> tuple[float, float]:
        """Mean success and score of the latest evaluation's episodes."""
        o = self.last_eval_outcomes
        return float(np.mean(o["success"])), float(np.mean(o["score"]))

    def _validation_value(self, metrics: dict[str, float]) -> float:
        """What SFT's validation plateau maximises: ``val_metric`` (success or score), the other breaking ties."""
        main, other = ("success", "score") if self.cfg.train.val_metric == "success" else ("score", "success")
        return float(metrics[main]) + 1e-3 * float(metrics[other])

    # ------------------------------------------------------------------ the whole run
    def fit(self, start: tuple[dict[str, float], dict[str, list[float]]] | None = None) -> dict[str, Any]:
        """SFT (if asked and not resumed), then RL with periodic evaluation; returns a summary.

        ``start``: the held-out evaluation of the policy RL starts from, already measured
        (``(metrics, outcomes)`` as :meth:`evaluate` and :attr:`last_eval_outcomes` give them, e.g.
        when a saved SFT policy was evaluated right after SFT), so it is logged instead of played
        again. Evaluation draws on no training RNG, so the run is the same either way; only with
        no SFT in this run."""
        t = self.cfg.train
        summary: dict[str, Any] = {}
        if start is not None and (t.sft_episodes > 0 or len(start[1].get("score", ())) != t.eval_episodes):
            raise ValueError("fit(start=...) takes an evaluation of the starting policy on this run's held-out tasks "
                             f"({t.eval_episodes}), for a run without SFT")
        if self.iteration == 0 and not self.sft_done:
            if t.sft_episodes > 0:
                before = self.evaluate()
                self.logger.log({"iteration": 0, "phase": "eval_before_sft", **_prefix("eval", before)})
                sft = self.sft()
                self.logger.log({"iteration": 0, "phase": "sft", **sft})
                summary["before_sft"] = before
            if start is not None:
                start, self.last_eval_outcomes = dict(start[0]), {k: list(v) for k, v in start[1].items()}
            else:
                start = self.evaluate()
            self.logger.log({"iteration": 0, "phase": "eval", **_prefix("eval", start)})
            summary["start"] = start
            summary["start_outcomes"] = self.last_eval_outcomes
        bar = _progress(range(self.iteration, t.iterations), f"{self.cfg.algo.algo}", t.progress and self.dist.is_main)
        last_eval = None
        for _ in bar:
            m = self.train_iteration()
            self.logger.log({"iteration": self.iteration, "phase": "train", **m})
            last_eval = None
            if t.eval_every and self.iteration % t.eval_every == 0:
                last_eval = self.evaluate()
                self.logger.log({"iteration": self.iteration, "phase": "eval", **_prefix("eval", last_eval)})
                if t.target_success is not None and last_eval["success"] >= t.target_success:
                    summary["stopped_early"] = self.iteration
                    break
            if t.checkpoint_every and self.iteration % t.checkpoint_every == 0:
                self.save_checkpoint(self.out / "checkpoint")
            if hasattr(bar, "set_postfix"):
                bar.set_postfix(success=f"{m['rollout/success']:.2f}", clip=f"{m.get('train/clipfrac', 0):.2f}")
        if last_eval is None:
            last_eval = self.evaluate()
            self.logger.log({"iteration": self.iteration, "phase": "eval", **_prefix("eval", last_eval)})
        summary["end"] = last_eval
        summary["end_outcomes"] = self.last_eval_outcomes
        self.save_checkpoint(self.out / "checkpoint")
        if not self.dist.is_main:  # rank 0 writes the run's files
            return summary
        if self.averaged_lm is not None:  # the policy the evaluations measured
            with self._playing(self.averaged_lm):
                summary["averaged_policy"] = str(save_policy(self.policy, self.tokenizer, self.out / "averaged_policy"))
        from .plots import plot_run

        summary["plot"] = str(plot_run(self.logger.path, self.out / "curve.png", title=f"{self.cfg.algo.algo} on {t.env}"))
        return summary

    # ------------------------------------------------------------------ checkpoints
    def save_checkpoint(self, path: str | os.PathLike) -> Path:
        """Weights, optimizer, RNG states and config, saved atomically: everything :meth:`fit` needs to resume."""
        return checkpoint.save_trainer(self, path)

    def _load_state(self, path: Path) -> None:
        checkpoint.restore_trainer(self, path, _frozen_copy)


# ---------------------------------------------------------------------- helpers
def fitting_demos(demos: list[Episode], max_context_tokens: int) -> tuple[list[Episode], int]:
    """The expert episodes whose whole conversation fits ``max_context_tokens`` (the bound rollouts
    keep, and at most the model's positions), and how many were left out; none fitting is an error
    that says what to change."""
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


def _frozen_copy(lm: torch.nn.Module) -> torch.nn.Module:
    """A copy of ``lm`` without gradients (for the KL reference and the weight average)."""
    copied = copy.deepcopy(lm).requires_grad_(False)
    for q in copied.parameters():
        q.grad = None
    return copied


def _check_divisible(cfg: Config, world_size: int) -> None:
    """Every rank must run the same number of optimizer steps: tasks and minibatches split evenly over the ranks."""
    if world_size == 1:
        return
    for section, name in (("rollout", "tasks_per_iteration"), ("algo", "minibatch_size")):
        value = getattr(getattr(cfg, section), name)
        if value % world_size:
            raise ValueError(f"--{name.replace('_', '-')} {value} does not split over {world_size} ranks (WORLD_SIZE): "
                             f"make it a multiple of {world_size} (it counts over all ranks together).")


def _check_fsdp(cfg: Config, ctx: distributed.DistContext) -> None:
    """The options FSDP does not support yet, refused before anything is built."""
    if not (ctx.enabled and ctx.parallel == "fsdp"):
        return
    a, t = cfg.algo, cfg.train
    unsupported = {"--kl-coef": a.kl_coef > 0, "--ema-decay": a.ema_decay > 0, "--clip-bias-correction": a.clip_bias_correction != "none",
                   "--sft-episodes": t.sft_episodes > 0}
    named = [name for name, on in unsupported.items() if on]
    if named:
        raise ValueError(f"--parallel fsdp does not support {', '.join(named)} yet (frozen copies and per-parameter "
                         "gradient passes of a sharded model): use --parallel ddp, or run the SFT warm start first "
                         "(python -m reference_trainer sft) and pass its policy with --model.")


def _prefix(p: str, d: dict[str, float]) -> dict[str, float]:
    return {f"{p}/{k}": v for k, v in d.items()}


def _progress(it: range, desc: str, enabled: bool) -> Iterator[int] | Any:
    if not enabled:
        return it
    from tqdm.auto import tqdm

    return tqdm(it, desc=desc, dynamic_ncols=True, leave=False)
