"""Data parallelism and the float16 loss scale behind one object, so the update reads the same everywhere.

:class:`Parallel` is what :meth:`~reference_trainer.trainer.Trainer.update` talks to:
``forward`` (the loss, through DDP or FSDP when there are several ranks), ``accumulate`` (the
micro-batches of one optimizer step, gradients communicated after the last; FSDP's lockstep
padding passes), ``backward`` (float16: the scaled loss; several ranks: DDP averages, so the
loss is scaled to their sum), ``step`` (unscale, clip, skip a non-finite step) and ``gathered``
(FSDP: whole weights for rollouts and scoring). In one process every one of them is the plain
PyTorch call. Autocast itself is the policy's (:meth:`~reference_trainer.policy.Policy.evaluate`).
Launch, sharding and collectives: :mod:`reference_trainer.distributed`; ``docs/scaling.md``.
"""

from __future__ import annotations

import contextlib
import inspect
import math
from typing import Any, Callable, Iterator

import torch
from torch import nn

from . import distributed
from .distributed import DistContext


class Objective(nn.Module):
    """``loss_fn(*args)`` as the ``forward`` of a module that owns ``policy``, so DDP/FSDP can wrap it
    (DDP's search for unused parameters then starts from exactly what is differentiated)."""

    def __init__(self, policy: nn.Module, loss_fn: Any):
        super().__init__()
        self.policy = policy
        self._loss_fn = loss_fn

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        return self._loss_fn(*args, **kwargs)


def check_divisible(cfg: Any, world_size: int) -> None:
    """Every rank must run the same number of optimizer steps: tasks and minibatches split evenly over the ranks."""
    if world_size == 1:
        return
    for section, name in (("rollout", "tasks_per_iteration"), ("algo", "minibatch_size")):
        value = getattr(getattr(cfg, section), name)
        if value % world_size:
            raise ValueError(
                f"--{name.replace('_', '-')} {value} does not split over {world_size} ranks (WORLD_SIZE): "
                f"make it a multiple of {world_size} (it counts over all ranks together)."
            )


def check_fsdp(cfg: Any, ctx: DistContext) -> None:
    """The options FSDP does not support yet, refused before anything is built."""
    if not (ctx.enabled and ctx.parallel == "fsdp"):
        return
    a, t = cfg.algo, cfg.train
    unsupported = {
        "--kl-coef": a.kl_coef > 0,
        "--ema-decay": a.ema_decay > 0,
        "--clip-bias-correction": a.clip_bias_correction != "none",
        "--sft-episodes": t.sft_episodes > 0,
    }
    named = [name for name, on in unsupported.items() if on]
    if named:
        raise ValueError(
            f"--parallel fsdp does not support {', '.join(named)} yet (frozen copies and per-parameter "
            "gradient passes of a sharded model): use --parallel ddp, or run the SFT warm start first "
            "(python -m reference_trainer sft) and pass its policy with --model."
        )


def unreached_parameters(objective: Objective, *, actor: bool, critic: bool) -> list[str]:
    """Names of the trainable parameters of ``objective.policy`` that a loss reading the actor's
    log-probs (``actor``) and/or the values (``critic``) never reaches: DDP must not wait for them.

    The actor is the whole LM; the critic is the value head and the trunk it reads (the actor's
    when shared, else the separate critic model).
    """
    policy = objective.policy
    reached: set[int] = set()
    if actor:
        reached |= {id(q) for q in policy.lm.parameters()}
    if critic:
        trunk = policy.critic_trunk if policy.critic_trunk is not None else policy.actor_trunk
        reached |= {id(q) for q in [*policy.value_head.parameters(), *trunk.parameters()]}
    return [name for name, q in objective.named_parameters() if q.requires_grad and id(q) not in reached]


def wrap(objective: Objective, ctx: DistContext, device: str, find_unused_parameters: bool = False) -> nn.Module | None:
    """The objective wrapped for data parallelism (``None`` for one process).

    DDP: buffers are not broadcast at each forward (ranks run different numbers of forwards; an
    LM's buffers are constants); ``find_unused_parameters`` only when a loss leaves some
    parameters without a gradient. FSDP (``fully_shard``): each transformer block is its own unit.
    """
    if not ctx.enabled:
        return None
    if ctx.parallel == "ddp":
        from torch.nn.parallel import DistributedDataParallel

        ids = [torch.device(device).index] if device.startswith("cuda") else None
        # newer PyTorch names the switch forward_sync_buffers (broadcast_buffers is deprecated there)
        no_sync = (
            {"forward_sync_buffers": False}
            if "forward_sync_buffers" in inspect.signature(DistributedDataParallel).parameters
            else {"broadcast_buffers": False}
        )
        return DistributedDataParallel(
            objective, device_ids=ids, find_unused_parameters=find_unused_parameters, **no_sync
        )
    from torch.distributed.fsdp import fully_shard

    for module in list(objective.modules()):
        if isinstance(module, nn.ModuleList):  # a model's transformer blocks: one shard unit each
            for block in module:
                fully_shard(block)
    fully_shard(objective)
    # rollouts call the blocks without the root's forward: initialise the root's state now, or each block would make itself a root
    objective._get_fsdp_state()._lazy_init()
    return objective


class Parallel:
    """The loss of ``policy`` (``loss_fn``) as DDP/FSDP and float16 need it; pass-throughs in one process.

    Args:
        policy: The :class:`~reference_trainer.policy.Policy` (its ``compute_dtype`` float16 adds a GradScaler).
        loss_fn: ``loss_fn(*args) -> (loss, metrics)``, the unscaled loss of one micro-batch.
        ctx, device: This rank's place and device.
        actor, critic: Whether the first update's losses reach the actor and the critic (:meth:`match`).
    """

    def __init__(
        self,
        policy: Any,
        loss_fn: Callable[..., tuple[torch.Tensor, Any]],
        ctx: DistContext,
        device: str,
        *,
        actor: bool = True,
        critic: bool = True,
    ):
        from .policy import needs_grad_scaler

        self.ctx, self.device = ctx, str(device)
        self.objective = Objective(policy, loss_fn)
        #: The objective wrapped by DDP or FSDP (before the optimizer: FSDP replaces the parameters); None in one process.
        self.module = wrap(self.objective, ctx, self.device, find_unused_parameters=self._finds(actor, critic))
        #: float16 autocast's loss scaler (None otherwise).
        self.scaler = (
            torch.amp.GradScaler(torch.device(device).type) if needs_grad_scaler(policy.compute_dtype) else None
        )

    def _finds(self, actor: bool, critic: bool) -> bool:
        """Whether DDP must search for unused parameters: a loss reaching only the ``actor``/``critic`` leaves some."""
        return bool(unreached_parameters(self.objective, actor=actor, critic=critic))

    def match(self, *, actor: bool, critic: bool, fresh: bool = False) -> None:
        """DDP: wrap again when the losses start or stop reaching parts of the model (the end of a critic
        warm-up), so it searches for unused parameters exactly when there are some; with ``fresh`` in any
        case (a new reducer, after backward passes outside DDP). FSDP and one process: nothing."""
        find = getattr(self.module, "find_unused_parameters", None)
        if find is None:
            return
        want = self._finds(actor, critic)
        if fresh or find != want:
            self.module = wrap(self.objective, self.ctx, self.device, find_unused_parameters=want)

    @property
    def _fsdp(self) -> list[nn.Module]:
        """The FSDP units (none under DDP or in one process)."""
        if self.module is None or hasattr(self.module, "no_sync"):
            return []
        from torch.distributed.fsdp import FSDPModule

        return [m for m in self.module.modules() if isinstance(m, FSDPModule)]

    def count(self, mask: torch.Tensor) -> torch.Tensor:
        """How many entries of ``mask`` are set on all ranks together (at least 1): the losses' denominators."""
        return distributed.all_reduce_sum(mask.sum().float(), self.ctx).clamp(min=1)

    @contextlib.contextmanager
    def gathered(self) -> Iterator[None]:
        """The context of rollouts and no-grad scoring. FSDP: the whole model's parameters gathered on every rank,
        so ranks may run different numbers of forwards inside it (every rank enters and leaves together)."""
        units = self._fsdp
        for unit in units:
            unit.set_reshard_after_forward(False, recurse=False)
            unit.unshard()
        try:
            yield
        finally:
            for unit in units:
                unit.reshard()
                unit.set_reshard_after_forward(
                    unit is not self.module, recurse=False
                )  # FSDP's defaults: the root keeps its gather

    def forward(self, *args: Any) -> tuple[torch.Tensor, Any]:
        """``loss_fn(*args)``, through the wrapped module when there is one."""
        return (self.module or self.objective)(*args)

    def accumulate(self, micro: list[Any]) -> Iterator[tuple[Any, bool]]:
        """``(micro_batch, real)`` for each micro-batch of one optimizer step; gradients are communicated only
        after the last (DDP's ``no_sync``, FSDP's gradient sync off before it). FSDP adds padding passes
        (``real`` false: they gather like the others and must add nothing) so every rank runs as many
        forwards (collectives) as the busiest."""
        extra = int(distributed.all_reduce_max(torch.tensor(len(micro)), self.ctx)) - len(micro) if self._fsdp else 0
        passes = micro + micro[:1] * extra
        for i, part in enumerate(passes):
            if self.module is None or i == len(passes) - 1:
                yield part, i < len(micro)
            elif hasattr(self.module, "no_sync"):  # DDP
                with self.module.no_sync():
                    yield part, i < len(micro)
            else:  # FSDP: gradients accumulate unsharded until the last micro-batch
                self.module.set_requires_gradient_sync(False)
                try:
                    yield part, i < len(micro)
                finally:
                    self.module.set_requires_gradient_sync(True)

    def backward(self, loss: torch.Tensor, *, replicated: bool = False) -> None:
        """Backward of ``loss`` (float16: scaled). Several ranks: DDP averages gradients while the loss's counts
        are global, so the loss is scaled to their sum, unless every rank computes the same loss (``replicated``)."""
        if not loss.requires_grad:
            return
        if self.scaler is not None:
            loss = self.scaler.scale(loss)
        if self.ctx.enabled and not replicated:
            loss = loss * self.ctx.world_size
        loss.backward()

    def step(
        self,
        optimizer: torch.optim.Optimizer,
        scheduler: Any = None,
        max_grad_norm: float | None = None,
        *,
        skip_nonfinite: bool = True,
    ) -> float:
        """Clip the optimizer's (unscaled) gradient to ``max_grad_norm`` and step; returns its norm (0 without
        any gradient, then no step). A non-finite gradient skips the step (float16: always, and the loss scale
        halves; else unless ``skip_nonfinite`` is off)."""
        params = [q for g in optimizer.param_groups for q in g["params"]]
        if not any(q.grad is not None for q in params):
            return 0.0
        if self.scaler is not None:
            self.scaler.unscale_(optimizer)  # clip, measure and step on the true gradient
        limit = max_grad_norm if max_grad_norm and max_grad_norm > 0 else float("inf")
        norm = float(torch.nn.utils.clip_grad_norm_(params, limit))
        if math.isfinite(norm) or not (skip_nonfinite or self.scaler is not None):
            optimizer.step()
            if scheduler is not None:
                scheduler.step()
        if self.scaler is not None:
            self.scaler.update()
        return norm

    def full_state(self, optimizer: torch.optim.Optimizer) -> tuple[dict[str, Any], dict[str, Any]] | None:
        """FSDP: the whole model's and optimizer's state gathered on rank 0 (CPU tensors, keyed by parameter name;
        empty on other ranks); every rank calls it. ``None`` under DDP and in one process."""
        if not self._fsdp:
            return None
        from torch.distributed.checkpoint.state_dict import (
            StateDictOptions,
            get_model_state_dict,
            get_optimizer_state_dict,
        )

        options = StateDictOptions(full_state_dict=True, cpu_offload=True)
        return get_model_state_dict(self.module, options=options), get_optimizer_state_dict(
            self.module, optimizer, options=options
        )

    def load_optimizer_state(self, optimizer: torch.optim.Optimizer, state: dict[str, Any]) -> None:
        """Load an optimizer state saved with parameter indices (any world size); FSDP: into the sharded optimizer."""
        if not self._fsdp:
            optimizer.load_state_dict(state)
            return
        from torch.distributed.checkpoint.state_dict import StateDictOptions, set_optimizer_state_dict

        names = {id(q): name for name, q in self.module.named_parameters()}
        order = [names[id(q)] for g in optimizer.param_groups for q in g["params"]]
        by_name = {
            "state": {order[int(i)]: s for i, s in state["state"].items()},
            "param_groups": [{**g, "params": [order[int(i)] for i in g["params"]]} for g in state["param_groups"]],
        }
        set_optimizer_state_dict(self.module, optimizer, by_name, options=StateDictOptions(full_state_dict=True))
