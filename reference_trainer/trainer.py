"""The loop: rollout -> advantages -> minibatch updates -> log -> checkpoint.

One :class:`Trainer` owns the policy, the optimizer, the envs and every random generator (a
``numpy`` generator for task seeds, a ``torch.Generator`` for sampling and shuffling), so a
checkpoint of those, the weights and the optimizer resumes a run exactly.

One PPO iteration, top to bottom (:meth:`Trainer.train_iteration`):

1. :meth:`Trainer.rollout` plays ``tasks_per_iteration * group_size`` episodes, padded into a
   :class:`~reference_trainer.rollout.RolloutBatch` (episodes a fault ended are masked out of every loss);
2. :meth:`Trainer.prepare` scores them (old log-probs, values) and calls the estimator of
   :func:`~reference_trainer.advantages.estimator` named by ``--advantage``;
3. :meth:`Trainer.update`: for each epoch, for each minibatch: forward, the loss terms of
   :data:`~reference_trainer.losses.LOSSES` that apply, backward, step;
4. the weight average moves (``--ema-decay``); :meth:`Trainer.fit` logs, evaluates and checkpoints.

Data parallelism and float16 loss scaling sit behind :class:`~reference_trainer.parallel.Parallel`,
so the update reads the same in one process and under ``torchrun`` (``docs/scaling.md``).
"""

from __future__ import annotations

import importlib
import time
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from agentgym_turn import pools

from . import checkpoint, distributed, models, tiny
from .advantages import (
    batch_rewards,
    episode_weights,
    estimator,
    masked_mean,
    masked_whiten,
    shuffled_rows,
    truncation_bootstrap_pos,
)
from .averaging import ema_step, frozen_copy
from .config import Config
from .evaluation import Evaluator, playing
from .losses import LOSSES, LossInputs, Metric, combine_parts, combine_steps, explained_variance
from .metrics import MetricsLogger, progress_bar
from .parallel import Parallel, check_divisible, check_fsdp
from .policy import Policy, load_policy, save_policy
from .rollout import Episode, RolloutBatch, collect, episode_metrics, is_windowed, make_batch
from .scoring import clip_bias_norm, micro_batches, score
from .sft import expert_demos, fitting_demos, sft, validation_value
from .tasks import demo_env_kwargs
from agentgym_turn.tokens import ChatFormat

__all__ = ["Trainer", "Prepared", "micro_batches", "fitting_demos"]


@dataclass
class Prepared:
    """A rollout batch with what the update needs, each ``[B, L]``: old log-probs and values, advantages
    (on action tokens), value targets and mask (where the critic is trained), the KL reference's log-probs."""

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
        return Prepared(
            b,
            cut(self.old_logp),
            cut(self.old_values),
            cut(self.advantages),
            cut(self.value_targets),
            cut(self.value_mask),
            cut(self.ref_logp),
        )


class Trainer:
    """SFT warm start, then PPO-family or GRPO updates on a Gymnasium text env.

    Args:
        cfg: The whole configuration (see :mod:`reference_trainer.config`).
        policy, tokenizer: An already loaded policy (otherwise built from ``cfg.model``).
    """

    def __init__(self, cfg: Config, policy: Policy | None = None, tokenizer: Any = None):
        self.cfg = cfg
        m, r, a, t = cfg.model, cfg.rollout, cfg.algo, cfg.train
        self.estimator = estimator(a.advantage, windowed=is_windowed(r.history, r.reasoning))
        if a.kl_reference == "average" and a.kl_coef > 0 and not a.ema_decay > 0:
            raise ValueError(
                "--kl-reference average anchors the KL penalty to the weight average: set --ema-decay "
                "(e.g. 0.9) too, or use --kl-reference start."
            )
        torch.set_num_threads(max(1, t.threads))
        for module in t.imports:
            importlib.import_module(module)
        import agentgym_turn  # noqa: F401  (registers the suite's ids)

        if t.env not in gym.registry:
            raise gym.error.NameNotFound(
                f"Env {t.env!r} is not registered (`agentgym-turn list` shows ours; --import MODULE yours)."
            )
        #: This process's place among the data-parallel ranks (one process: rank 0 of 1), and its device.
        self.dist, device = distributed.setup(m.device, t.parallel)
        self.sums = distributed.sums(self.dist)  # the statistics' reducer over ranks (None: one process)
        check_divisible(cfg, self.dist.world_size)
        check_fsdp(cfg, self.dist)
        #: The directory the weights came from (an FSDP checkpoint rebuilds a whole model from it on rank 0).
        self.model_path: Path | None = None
        if policy is None:
            path = t.resume and checkpoint.resolve(t.resume) / "policy"
            path = path or (self._build_tiny() if m.model == "tiny" else models.model_directory(m.model))
            critic_path = m.critic_model and models.model_directory(m.critic_model)
            policy, tokenizer = load_policy(
                path, device=device, dtype=m.dtype, critic=m.critic, critic_path=critic_path
            )
            self.model_path = Path(path)
        self.policy, self.tokenizer = policy, tokenizer
        policy.logprob_chunk_tokens = m.logprob_chunk_tokens
        #: DDP/FSDP and the float16 loss scale (before the optimizer: FSDP replaces the parameters).
        self.parallel = Parallel(policy, self._losses, self.dist, device, **self._reaches(0))
        self.fmt = ChatFormat(tokenizer, r.system_prompt)
        self.pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
        self.device = torch.device(device)

        def envs(over: dict[str, Any]) -> Any:
            kwargs = {**r.env_kwargs, **over}
            return pools.make(
                t.env, r.num_envs, r.env_mode, workers=r.env_workers, step_timeout_s=r.step_timeout_s, **kwargs
            )

        self.envs = envs({})
        #: Held-out evaluation; its test envs are the training envs unless ``eval_env_kwargs`` names a held-out split.
        self.evaluator = Evaluator(
            cfg,
            lambda *args, **kw: self.rollout(*args, **kw),
            self.dist,
            envs,
            test_envs=None if t.eval_env_kwargs else self.envs,
        )
        #: The task seeds of every RL iteration's rollouts, in order (what :mod:`reference_trainer.tasks` records).
        self.played_tasks: list[int] = []
        #: Per-episode outcomes of the latest :meth:`evaluate` (``seeds``, ``success``, ``score``, ``return``).
        self.last_eval_outcomes: dict[str, list[float]] = {}
        self.optimizer = torch.optim.AdamW(
            [
                {"params": policy.actor_parameters(), "lr": a.lr},
                {"params": policy.critic_parameters(), "lr": a.lr * a.critic_lr_ratio},
            ],
            weight_decay=a.weight_decay,
            eps=a.adam_eps,
        )
        warm = max(0, a.lr_warmup_steps)
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(
            self.optimizer, lambda step: min(1.0, (step + 1) / (warm + 1))
        )
        if m.gradient_checkpointing:
            policy.enable_gradient_checkpointing()
        #: The frozen float32 Polyak average of the actor that evaluations play (``ema_decay > 0``), and the KL
        #: penalty's reference (a frozen copy of the actor, or ``averaged_lm`` itself).
        self.averaged_lm: torch.nn.Module | None = None
        self.ref_lm: torch.nn.Module | None = None
        self._start_rl_from_current()
        self.np_rng = np.random.default_rng(t.seed)
        self.generator = torch.Generator().manual_seed(distributed.rank_seed(t.seed, self.dist.rank))
        self.iteration, self.sft_done, self.out = 0, False, Path(t.out)
        #: ``(episodes, demos, too long, optimizer, batch generator)`` of the SFT so far: a second :meth:`sft` continues it.
        self.sft_session: tuple | None = None
        self.logger = (
            MetricsLogger(self.out, tensorboard=t.tensorboard, append=bool(t.resume))
            if self.dist.is_main
            else distributed.QuietLogger(self.out)
        )  # rank 0 logs the reduced metrics
        if t.resume:
            restored = checkpoint.restore_trainer(self.state(), Path(t.resume))
            self.iteration, self.sft_done, self.ref_lm = restored.iteration, restored.sft_done, restored.ref_lm

    @property
    def scaler(self) -> torch.amp.GradScaler | None:
        """float16's loss scaler (None otherwise)."""
        return self.parallel.scaler

    def state(self) -> checkpoint.TrainerState:
        """What a checkpoint saves and a resume restores (the objects themselves, not copies)."""
        return checkpoint.TrainerState(**{f.name: getattr(self, f.name) for f in fields(checkpoint.TrainerState)})

    def _build_tiny(self) -> Path:
        build = lambda: tiny.build(self.cfg.model.tiny, self.cfg.train.env, demo_env_kwargs(self.cfg))  # noqa: E731
        # one writer per machine; the others wait, then find it cached
        path = build() if self.dist.local_rank == 0 else None
        distributed.barrier(self.dist)
        return path or build()

    def _start_rl_from_current(self) -> None:
        """The KL reference and the weight average start from the actor as it is now (at start, after SFT)."""
        a = self.cfg.algo
        if a.ema_decay > 0:
            self.averaged_lm = frozen_copy(self.policy.lm).float()
        if a.kl_coef > 0:
            self.ref_lm = self.averaged_lm if a.kl_reference == "average" else frozen_copy(self.policy.lm)

    def _reaches(self, iteration: int) -> dict[str, bool]:
        """Whether the loss terms of ``iteration`` reach the actor (not during a critic warm-up without an entropy
        or KL term) and the critic (only with one): DDP must not wait for gradients of the parameters they miss."""
        return {
            "actor": iteration >= (a := self.cfg.algo).critic_warmup or a.ent_coef != 0 or a.kl_coef > 0,
            "critic": self.estimator.uses_critic,
        }

    def close(self) -> None:
        self.evaluator.close(keep=self.envs)
        self.envs.close()
        self.logger.close()
        distributed.shutdown()

    # ------------------------------------------------------------------ one iteration
    def rollout(
        self,
        seeds: list[int],
        groups: list[int] | None = None,
        *,
        temperature: float | None = None,
        generator: torch.Generator | None = None,
        envs: Any = None,
    ) -> list[Episode]:
        """One episode per seed with the current actor (default: the rollout temperature, the training
        generator and the training envs)."""
        r = self.cfg.rollout
        with self.parallel.gathered():  # FSDP: whole weights on every rank, so ranks may play different turn counts
            return collect(
                self.policy,
                self.fmt,
                self.envs if envs is None else envs,
                seeds,
                generator=generator if generator is not None else self.generator,
                max_new_tokens=r.max_new_tokens,
                max_context_tokens=r.max_context_tokens,
                temperature=r.temperature if temperature is None else temperature,
                groups=groups,
                split_system_prompt=r.split_system_prompt,
                history=r.history,
                reasoning=r.reasoning,
            )

    def train_iteration(self) -> dict[str, float]:
        """Collect ``tasks_per_iteration * group_size`` episodes, update, return metrics."""
        r = self.cfg.rollout
        t0 = time.perf_counter()
        tasks = self.np_rng.integers(0, self.cfg.train.eval_seed, size=r.tasks_per_iteration).tolist()
        self.played_tasks += tasks
        mine = distributed.shard(range(len(tasks)), self.dist)  # every rank draws all tasks and plays its share
        episodes = self.rollout(
            [tasks[i] for i in mine for _ in range(r.group_size)], [i for i in mine for _ in range(r.group_size)]
        )
        t1 = time.perf_counter()
        batch = make_batch(episodes, self.pad_id, min_group=self.estimator.min_group).to(
            self.device
        )  # faulted rows: no loss
        prepared = self.prepare(batch)
        everyone = distributed.gather_episodes(episodes, self.dist)  # all ranks' episodes (token lists left out)
        metrics = {f"rollout/{k}": v for k, v in episode_metrics(everyone).items()}
        rows = [batch.attention_mask.sum().float(), torch.tensor(float(len(batch)), device=batch.ids.device)]
        # every rank's rows and tokens: what the update runs through
        metrics["rollout/train_tokens"], metrics["rollout/train_rows"] = map(
            float, self.sums(*rows) if self.sums else rows
        )
        if r.step_timeout_s > 0:  # share of episodes whose env overran the step timeout
            metrics["rollout/step_timeouts"] = sum(e.truncation == "timeout" for e in everyone) / max(len(everyone), 1)
        if self.cfg.algo.recompute_old_logp:
            diff = (batch.sampled_logp - prepared.old_logp).abs()
            metrics["rollout/logp_diff"] = float(masked_mean(diff, batch.action_mask, self.sums))
        if self.estimator.uses_critic:
            p = prepared
            metrics["train/explained_variance"] = explained_variance(
                p.old_values, p.value_targets, p.value_mask, self.sums
            )
        metrics.update({f"train/{k}": v for k, v in self.update(prepared).items()})
        if self.averaged_lm is not None:  # (with --kl-reference average this moves the KL reference too)
            ema_step(self.averaged_lm, self.policy.lm, self.cfg.algo.ema_decay)
        self.iteration += 1
        metrics["time/rollout_s"] = t1 - t0
        metrics["time/update_s"] = time.perf_counter() - t1
        return distributed.reduce_times(metrics, self.dist)

    def _forward(
        self, batch: RolloutBatch, *, with_values: bool = True, with_logp: bool = True
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``(logp, values)`` of ``batch`` without gradients (:func:`~reference_trainer.scoring.score`)."""
        a = self.cfg.algo
        with self.parallel.gathered():
            return score(
                self.policy,
                batch,
                temperature=self._temperature,
                max_size=a.micro_batch_size or a.minibatch_size,
                max_tokens=a.micro_batch_tokens,
                with_values=with_values,
                with_logp=with_logp,
            )

    @property
    def _temperature(self) -> float:
        """The rollout's sampling temperature (greedy rollouts are scored at temperature 1)."""
        return self.cfg.rollout.temperature or 1.0

    def prepare(self, batch: RolloutBatch) -> Prepared:
        """Old log-probs and values, advantages and value targets for a rollout batch."""
        a = self.cfg.algo
        batch = replace(batch, bootstrap_pos=truncation_bootstrap_pos(batch.bootstrap_pos, a.truncation_value))
        old_logp, values = self._forward(batch, with_values=self.estimator.uses_critic, with_logp=a.recompute_old_logp)
        act = batch.action_mask
        if not a.recompute_old_logp:  # the behaviour policy's log-probs, as recorded while sampling
            old_logp = batch.sampled_logp * act
        # the negative control: a seeded permutation of the batch's episodes, drawn only when asked for
        permutation = shuffled_rows(batch.episode_index, self.generator) if a.reward == "shuffled" else None
        est = self.estimator.estimate(batch, values, batch_rewards(batch, a.reward, a.reward_scale, permutation), a)
        adv = est.advantages
        if a.normalize_advantages and self.estimator.uses_critic:
            adv = masked_whiten(adv, act, reduce=self.sums)  # global statistics over all ranks
        if a.loss_agg == "seq-mean-token-mean":
            adv = adv * episode_weights(act, self.sums)
        ref = None
        if self.ref_lm is not None:
            with playing(self.policy, self.ref_lm):
                ref, _ = self._forward(batch, with_values=False)
        return Prepared(batch, old_logp, values, adv.float(), est.value_targets, est.value_mask, ref)

    def update(self, prepared: Prepared) -> dict[str, float]:
        """Epochs of shuffled minibatch steps on one prepared batch; returns the combined metrics."""
        a, par = self.cfg.algo, self.parallel
        par.match(**self._reaches(self.iteration))
        actor_params = self.policy.actor_parameters()
        size = a.minibatch_size // self.dist.world_size  # this rank's share of each minibatch
        steps: list[dict[str, Metric]] = []
        for _ in range(a.epochs):
            perm = torch.randperm(len(prepared.batch), generator=self.generator)
            for lo in range(0, len(perm), size):
                mb = prepared.select(perm[lo : lo + size].to(self.device))
                n_tok, n_val = (
                    par.count(mb.batch.action_mask),
                    par.count(mb.value_mask),
                )  # over all ranks: losses divide by them
                micro = [
                    mb.select(j.to(self.device))
                    for j in micro_batches(mb.batch.attention_mask.sum(1), a.micro_batch_size, a.micro_batch_tokens)
                ]
                norm = self._clip_bias_norm(micro, n_tok) if self._needs_clip_bias_norm(len(micro)) else None
                self.optimizer.zero_grad(set_to_none=True)
                parts = []
                for part, real in par.accumulate(micro):  # gradients communicated after the last micro-batch
                    loss, m = par.forward(part, n_tok, n_val, norm, actor_params)
                    par.backward(loss if real else loss * 0.0)  # FSDP's padding passes add nothing
                    if real:
                        parts.append((m, part.batch.action_mask.sum().item() / n_tok.item()))
                grad_norm = par.step(self.optimizer, self.scheduler, a.max_grad_norm)
                steps.append({**combine_parts(parts), "grad_norm": Metric(grad_norm, "minibatch")})
        return combine_steps(distributed.reduce_steps(steps, self.dist))

    def _losses(
        self,
        p: Prepared,
        n_tok: torch.Tensor,
        n_val: torch.Tensor,
        norm: float | None,
        actor_params: list[torch.Tensor],
    ) -> tuple[torch.Tensor, dict[str, Metric]]:
        """The summed loss terms of one micro-batch and their metrics (``n_tok``, ``n_val``: the minibatch's counts;
        ``norm``: its clipping-bias norm, or None to measure it here)."""
        a, b = self.cfg.algo, p.batch
        out = self.policy.evaluate(
            b.ids,
            b.attention_mask,
            b.action_mask,
            temperature=self._temperature,
            with_values=self.estimator.uses_critic,
        )
        x = LossInputs(
            out.logp,
            out.entropy,
            out.values,
            p.old_logp,
            p.old_values,
            p.advantages,
            p.value_targets,
            p.value_mask,
            p.ref_logp,
            b.action_mask,
            b.turn_ids,
            n_tok,
            n_val,
            actor_params,
            norm,
        )
        active = {
            "policy": self.iteration >= a.critic_warmup,
            "entropy": True,
            "value": self.estimator.uses_critic,
            "kl": p.ref_logp is not None,
        }
        total = out.logp.new_zeros(())
        metrics: dict[str, Metric] = {}
        for name, term in LOSSES.items():
            if active[name]:
                loss, m = term(x, a)
                if loss is not None:
                    total = total + loss
                metrics.update(m)
        return total, metrics

    def _needs_clip_bias_norm(self, n_micro: int) -> bool:
        """S-PPO/ST-PPO's ``||grad C||`` is measured over the whole minibatch when it is split (micro-batches, ranks)."""
        a = self.cfg.algo
        return (
            a.clip_bias_correction != "none"
            and (n_micro > 1 or self.dist.enabled)
            and self.iteration >= a.critic_warmup
        )

    def _clip_bias_norm(self, micro: list[Prepared], n_tok: torch.Tensor) -> float:
        """``||grad C||`` over a whole minibatch split in micro-batches (:func:`~reference_trainer.scoring.clip_bias_norm`)."""
        scale = 1.0 if self.scaler is None else self.scaler.get_scale()  # float16: keep small gradients above underflow
        return clip_bias_norm(
            self.policy, micro, n_tok, self.cfg.algo, temperature=self._temperature, scale=scale, ctx=self.dist
        )

    def evaluate(self, n: int | None = None, *, split: str = "test", current: bool = False) -> dict[str, float]:
        """Success and return on ``n`` fixed held-out seeds of ``split`` (``"test"``, ``"validation"``), played by the
        weight average if any unless ``current``; per-episode outcomes go to :attr:`last_eval_outcomes`."""
        metrics, self.last_eval_outcomes = self.evaluator.evaluate(
            self.policy, None if current else self.averaged_lm, n, split=split
        )
        return metrics

    # ------------------------------------------------------------------ SFT and the whole run
    def sft(
        self, episodes: int | None = None, steps: int | None = None, *, max_seconds: float | None = None
    ) -> dict[str, Any]:
        """Supervised warm start on expert episodes, to the validation plateau with ``sft_validate_every > 0``, for at
        most ``max_seconds`` of optimizer steps (:func:`reference_trainer.sft.sft`); then RL's anchors restart from it."""
        t, n = self.cfg.train, self.cfg.train.sft_episodes if episodes is None else episodes
        if self.sft_session is None or self.sft_session[0] != n:  # a next call on as many episodes continues this SFT
            adam = torch.optim.AdamW(self.policy.actor_parameters(), lr=t.sft_lr, weight_decay=0.0)
            self.sft_session = (
                n,
                *expert_demos(self.cfg, self.fmt, n, self.dist),
                adam,
                torch.Generator().manual_seed(t.seed + 1),
            )
        _, demos, too_long, optimizer, generator = self.sft_session

        def validate() -> tuple[float, list[float]]:
            return validation_value(
                self.evaluate(split="validation", current=True), self.last_eval_outcomes, t.val_metric
            )

        stats = sft(
            self.policy,
            optimizer,
            demos,
            self.cfg,
            parallel=self.parallel,
            dist=self.dist,
            pad_id=self.pad_id,
            steps=t.sft_steps if steps is None else steps,
            validate=validate if t.sft_validate_every > 0 else None,
            max_seconds=max_seconds,
            progress=lambda it: progress_bar(it, "SFT", t.progress and self.dist.is_main),
            left_out=too_long,
            generator=generator,
        )
        # SFT's backward passes ran outside DDP, yet a reducer searching for unused parameters counts every parameter
        # they reached as used in its next update: with no gradient there (a critic warm-up), it would stop the run
        self.parallel.match(**self._reaches(self.iteration), fresh=True)
        if self.cfg.model.critic_model is None:  # a critic built from --model starts from the SFT weights too
            self.policy.critic_from_actor()
        self._start_rl_from_current()
        self.sft_done = True
        return stats

    def fit(self, start: tuple[dict[str, float], dict[str, list[float]]] | None = None) -> dict[str, Any]:
        """SFT (if asked and not resumed), then RL with periodic evaluation; returns a summary.

        ``start``: the held-out evaluation of the starting policy, already measured (``(metrics, outcomes)``
        as :meth:`evaluate` and :attr:`last_eval_outcomes` give them), logged instead of played again; only
        for a run without SFT (evaluation draws on no training RNG, so the run is the same either way)."""
        t = self.cfg.train
        summary: dict[str, Any] = {}
        if start is not None and (t.sft_episodes > 0 or len(start[1].get("score", ())) != t.eval_episodes):
            raise ValueError(
                "fit(start=...) takes an evaluation of the starting policy on this run's held-out tasks "
                f"({t.eval_episodes}), for a run without SFT"
            )
        if self.iteration == 0 and not self.sft_done:
            if t.sft_episodes > 0:
                summary["before_sft"] = self._log_eval(self.evaluate(), 0, "eval_before_sft")
                self.logger.log({"iteration": 0, "phase": "sft", **self.sft()})
            if start is not None:
                start, self.last_eval_outcomes = dict(start[0]), {k: list(v) for k, v in start[1].items()}
            summary["start"] = self._log_eval(start if start is not None else self.evaluate(), 0)
            summary["start_outcomes"] = self.last_eval_outcomes
        bar = progress_bar(
            range(self.iteration, t.iterations), f"{self.cfg.algo.algo}", t.progress and self.dist.is_main
        )
        last_eval = None
        for _ in bar:
            m = self.train_iteration()
            self.logger.log({"iteration": self.iteration, "phase": "train", **m})
            last_eval = None
            if t.eval_every and self.iteration % t.eval_every == 0:
                last_eval = self._log_eval(self.evaluate(), self.iteration)
                if t.target_success is not None and last_eval["success"] >= t.target_success:
                    summary["stopped_early"] = self.iteration
                    break
            if t.checkpoint_every and self.iteration % t.checkpoint_every == 0:
                self.save_checkpoint(self.out / "checkpoint")
            if hasattr(bar, "set_postfix"):
                bar.set_postfix(success=f"{m['rollout/success']:.2f}", clip=f"{m.get('train/clipfrac', 0):.2f}")
        summary["end"] = last_eval if last_eval is not None else self._log_eval(self.evaluate(), self.iteration)
        summary["end_outcomes"] = self.last_eval_outcomes
        self.save_checkpoint(self.out / "checkpoint")
        if not self.dist.is_main:  # rank 0 writes the run's files
            return summary
        if self.averaged_lm is not None:  # the policy the evaluations measured
            with playing(self.policy, self.averaged_lm):
                summary["averaged_policy"] = str(save_policy(self.policy, self.tokenizer, self.out / "averaged_policy"))
        from .plots import plot_run

        summary["plot"] = str(
            plot_run(self.logger.path, self.out / "curve.png", title=f"{self.cfg.algo.algo} on {t.env}")
        )
        return summary

    def _log_eval(self, metrics: dict[str, float], iteration: int, phase: str = "eval") -> dict[str, float]:
        self.logger.log({"iteration": iteration, "phase": phase, **{f"eval/{k}": v for k, v in metrics.items()}})
        return metrics

    def save_checkpoint(self, path: Any) -> Path:
        """Weights, optimizer, RNG states and config, saved atomically: everything :meth:`fit` needs to resume."""
        return checkpoint.save_trainer(self.state(), path)
