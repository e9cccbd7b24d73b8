"""Data parallelism on ``torch.distributed``: DDP by default, PyTorch's FSDP with ``--parallel fsdp``.

Launch with ``torchrun --nproc_per_node N -m reference_trainer train ...``: torchrun sets
``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``, ``MASTER_ADDR`` and ``MASTER_PORT``, and
:func:`setup` initialises the process group from them (gloo on CPU, NCCL on CUDA, where rank
``r`` uses ``cuda:LOCAL_RANK``). Without those variables (or with ``WORLD_SIZE=1``) nothing is
initialised and the trainer runs exactly as a single process.

What each rank does (see ``docs/scaling.md``):

* every rank draws the same task seeds from the same numpy generator and plays its contiguous
  share of them (:func:`shard_bounds`; a GRPO group stays on one rank), sampling with its own
  torch generator (:func:`rank_seed`);
* advantage whitening and the loss's token counts use statistics summed over all ranks (each
  statistic is written once, in :mod:`~reference_trainer.advantages` or :mod:`~reference_trainer.losses`,
  and takes the reducer :func:`sums`), so the loss of each minibatch is the single-process loss of
  the concatenated batch;
* gradients are averaged by DDP (or reduce-scattered by FSDP) once per optimizer step, after
  the last micro-batch of each rank (:mod:`reference_trainer.parallel`);
* metrics are reduced before rank 0 logs them (:func:`gather_episodes`, :func:`reduce_steps`).

The functions here take a :class:`DistContext` and are plain pass-throughs when it is a single
process, so world size 1 computes exactly what the single-process trainer computes.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

import numpy as np
import torch
from torch import nn

#: ``--parallel`` choices: DDP replicates the model on every rank; FSDP shards parameters, gradients and optimizer state.
PARALLEL_MODES = ("ddp", "fsdp")


@dataclass(frozen=True)
class DistContext:
    """Where this process stands: its ``rank`` among ``world_size`` processes, ``local_rank`` on its node."""

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    parallel: str = "ddp"

    @property
    def enabled(self) -> bool:
        """More than one process: collectives run."""
        return self.world_size > 1

    @property
    def is_main(self) -> bool:
        """Rank 0: the process that logs, plots and writes checkpoints."""
        return self.rank == 0


#: The single-process context.
SINGLE = DistContext()
#: Whether :func:`setup` created the process group (then :func:`shutdown` destroys it; one made by the caller is left alone).
_OWN_GROUP = [False]


def context_from_env(env: Mapping[str, str] | None = None, parallel: str = "ddp") -> DistContext:
    """The context torchrun's variables describe (``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``); :data:`SINGLE` without them."""
    env = os.environ if env is None else env
    if parallel not in PARALLEL_MODES:
        raise ValueError(f"parallel={parallel!r}: choose one of {PARALLEL_MODES} (--parallel).")
    world = int(env.get("WORLD_SIZE", "1"))
    if world <= 1:
        return dataclasses.replace(SINGLE, parallel=parallel)
    if "RANK" not in env:
        raise ValueError(
            f"WORLD_SIZE={world} but RANK is not set: launch with torchrun (it sets both), or set RANK too."
        )
    rank = int(env["RANK"])
    if not 0 <= rank < world:
        raise ValueError(f"RANK={rank} is outside 0 .. WORLD_SIZE-1 = {world - 1}.")
    return DistContext(rank, world, int(env.get("LOCAL_RANK", rank)), parallel)


def device_for_rank(device: str, ctx: DistContext) -> str:
    """``cuda`` becomes ``cuda:LOCAL_RANK`` (one GPU per process); any other device is kept."""
    return f"cuda:{ctx.local_rank}" if ctx.enabled and device == "cuda" else device


def setup(device: str, parallel: str = "ddp") -> tuple[DistContext, str]:
    """Initialise the process group from torchrun's variables (once); returns the context and this rank's device.

    gloo serves CPU devices, NCCL CUDA devices. A single process (no ``WORLD_SIZE`` or ``WORLD_SIZE=1``)
    initialises nothing.
    """
    ctx = context_from_env(parallel=parallel)
    if not ctx.enabled:
        return ctx, device
    import torch.distributed as dist

    device = device_for_rank(device, ctx)
    if not dist.is_initialized():
        if device.startswith("cuda"):
            torch.cuda.set_device(torch.device(device))
        dist.init_process_group("nccl" if device.startswith("cuda") else "gloo", init_method="env://")
        _OWN_GROUP[0] = True
    if dist.get_world_size() != ctx.world_size or dist.get_rank() != ctx.rank:
        raise RuntimeError(
            f"the process group (rank {dist.get_rank()} of {dist.get_world_size()}) disagrees with "
            f"RANK={ctx.rank}, WORLD_SIZE={ctx.world_size}: initialise it from the same variables."
        )
    return ctx, device


def shutdown() -> None:
    """Destroy the process group if :func:`setup` created it (after the last collective of a run)."""
    if _OWN_GROUP[0]:
        import torch.distributed as dist

        if dist.is_initialized():
            dist.destroy_process_group()
        _OWN_GROUP[0] = False


def quiet_console() -> None:
    """Keep this process off the console except for errors: for the ranks other than 0 under torchrun, which
    would repeat what rank 0 shows. Silences transformers' and huggingface_hub's progress bars, log records
    below ERROR and Python warnings; errors and tracebacks still reach stderr."""
    import logging
    import warnings

    warnings.simplefilter("ignore")
    logging.disable(logging.WARNING)
    try:
        from transformers.utils import logging as hf_logging
    except ImportError:
        return
    hf_logging.disable_progress_bar()  # huggingface_hub's too


class QuietLogger:
    """The metrics logger of ranks other than 0: same interface, writes nothing (rank 0 logs the reduced metrics)."""

    def __init__(self, out: Any):
        from pathlib import Path

        self.out = Path(out)
        self.path = self.out / "metrics.jsonl"

    def log(self, record: dict[str, Any]) -> None:
        pass

    def close(self) -> None:
        pass


# ---------------------------------------------------------------------- sharding
def shard_bounds(n: int, rank: int, world_size: int) -> tuple[int, int]:
    """``[lo, hi)`` of rank ``rank``'s contiguous share of ``n`` items (the first ``n % world_size`` shares get one more)."""
    base, extra = divmod(n, world_size)
    lo = rank * base + min(rank, extra)
    return lo, lo + base + (1 if rank < extra else 0)


def shard(items: Sequence[Any], ctx: DistContext) -> list[Any]:
    """This rank's contiguous share of ``items``; concatenated in rank order the shares are ``items``."""
    lo, hi = shard_bounds(len(items), ctx.rank, ctx.world_size)
    return list(items[lo:hi])


def rank_seed(seed: int, rank: int) -> int:
    """The sampling seed of ``rank``: ``seed`` itself on rank 0 (so one process is unchanged), independent streams elsewhere."""
    if rank == 0:
        return int(seed)
    return int(np.random.SeedSequence([int(seed), int(rank)]).generate_state(1, np.uint64)[0] >> np.uint64(1))


# ---------------------------------------------------------------------- collectives (pass-throughs for one process)
def _all_reduce(x: torch.Tensor, ctx: DistContext, op: str) -> torch.Tensor:
    """``x`` reduced elementwise over ranks with ``op`` (``"SUM"``, ``"MAX"``): a new tensor; ``x`` itself for one process."""
    if not ctx.enabled:
        return x
    import torch.distributed as dist

    out = x.detach().clone()
    dist.all_reduce(out, op=getattr(dist.ReduceOp, op))
    return out


def all_reduce_sum(x: torch.Tensor, ctx: DistContext) -> torch.Tensor:
    """The elementwise sum of ``x`` over ranks (a new tensor; ``x`` itself for one process)."""
    return _all_reduce(x, ctx, "SUM")


def all_reduce_max(x: torch.Tensor, ctx: DistContext) -> torch.Tensor:
    """The elementwise maximum of ``x`` over ranks."""
    return _all_reduce(x, ctx, "MAX")


def gather_objects(obj: Any, ctx: DistContext) -> list[Any]:
    """Every rank's ``obj`` (picklable), in rank order, on every rank."""
    if not ctx.enabled:
        return [obj]
    import torch.distributed as dist

    out: list[Any] = [None] * ctx.world_size
    dist.all_gather_object(out, obj)
    return out


def barrier(ctx: DistContext) -> None:
    """Wait until every rank gets here."""
    if ctx.enabled:
        import torch.distributed as dist

        dist.barrier()


# ---------------------------------------------------------------------- global statistics
def sums(ctx: DistContext) -> Callable[..., list[torch.Tensor]] | None:
    """The reducer the statistics of :mod:`~reference_trainer.advantages` and :mod:`~reference_trainer.losses` take
    (``reduce=``): float64 sums of scalar tensors over every rank, in one all-reduce; ``None`` for one process, whose
    statistics are then its own batch's, computed exactly as without any rank."""
    if not ctx.enabled:
        return None

    def reduce(*values: torch.Tensor) -> list[torch.Tensor]:
        stacked = all_reduce_sum(torch.stack([v.detach().double().reshape(()) for v in values]), ctx)
        return list(stacked.unbind())

    return reduce


# ---------------------------------------------------------------------- metrics
class _Spans:
    """What :func:`~reference_trainer.rollout.episode_metrics` reads of a conversation: its length and action spans."""

    def __init__(self, length: int, action_spans: list[tuple[int, int]]):
        self.length, self.action_spans = length, action_spans

    def __len__(self) -> int:
        return self.length


def gather_episodes(episodes: list[Any], ctx: DistContext) -> list[Any]:
    """All ranks' episodes in rank order, without their token lists (enough for ``episode_metrics``).

    For one process: ``episodes`` unchanged.
    """
    if not ctx.enabled:
        return episodes
    slim = [
        dataclasses.replace(
            e,
            conversation=_Spans(len(e.conversation), list(e.conversation.action_spans)),
            sampled_logp=[],
            tokens=None,
        )
        for e in episodes
    ]
    return [e for part in gather_objects(slim, ctx) for e in part]


def reduce_steps(steps: list[dict[str, Any]], ctx: DistContext) -> list[dict[str, Any]]:
    """Each optimizer step's :class:`~reference_trainer.losses.Metric` dict combined over ranks.

    ``sum`` and ``share`` metrics are already divided by the global counts, so they add up; ``max``
    takes the largest; ``minibatch`` values (the same on every rank) are averaged.
    """
    if not ctx.enabled:
        return steps
    from .losses import Metric

    per_rank = gather_objects(steps, ctx)
    if len({len(s) for s in per_rank}) != 1:
        raise RuntimeError(f"ranks ran different numbers of optimizer steps: {[len(s) for s in per_rank]}.")
    out = []
    for parts in zip(*per_rank):
        step: dict[str, Metric] = {}
        for key in sorted({k for p in parts for k in p}):
            got = [p[key] for p in parts if key in p]
            values, kind = [m.value for m in got], got[0].reduce
            value = {"sum": sum, "share": sum, "max": max}.get(kind, lambda v: float(np.mean(v)))(values)
            step[key] = Metric(float(value), kind)
        out.append(step)
    return out


def reduce_times(metrics: dict[str, float], ctx: DistContext) -> dict[str, float]:
    """``time/*`` metrics: the slowest rank's (the step waits for it)."""
    if not ctx.enabled:
        return metrics
    keys = sorted(k for k in metrics if k.startswith("time/"))
    worst = all_reduce_max(torch.tensor([metrics[k] for k in keys], dtype=torch.float64), ctx)
    return {**metrics, **{k: float(v) for k, v in zip(keys, worst)}}


# ---------------------------------------------------------------------- weights
def broadcast_module(module: nn.Module, ctx: DistContext) -> None:
    """Copy rank 0's parameters and buffers of ``module`` to every rank (e.g. after a replicated SFT)."""
    if not ctx.enabled:
        return
    import torch.distributed as dist

    with torch.no_grad():
        for t in list(module.parameters()) + list(module.buffers()):
            if not hasattr(t, "to_local"):  # (an FSDP shard is rank-specific by design)
                dist.broadcast(t.data, src=0)
