"""Resumable checkpoints: saved atomically, loaded without running code.

A checkpoint named ``PATH`` is a symbolic link to a sibling directory
``<name>.it<iteration>.<random>`` that holds:

* ``policy/``: the weights and tokenizer (:func:`~reference_trainer.policy.save_policy`), which
  ``--model PATH/policy`` loads;
* ``state.pt``: tensors and plain containers only (optimizer, scheduler, torch RNG states, the
  KL reference and the weight average), read with ``torch.load(weights_only=True)``, so a
  crafted file is refused instead of run;
* ``trainer_state.json``: iteration, SFT flag, numpy RNG state, config. It is written last,
  so a directory without it is an unfinished save.

Saving writes a fresh directory, flushes every file and directory to disk (fsync), then
points ``PATH`` at it by renaming a new link over the old one, which POSIX makes atomic. A
kill at any moment leaves ``PATH`` on the previous checkpoint or on the new one, both whole;
the next save deletes what an interrupted one left behind. A ``PATH`` that is a plain
directory (written by an older version) is moved aside once; if a kill lands in that short
gap, :func:`resolve` falls back to the newest complete sibling.

Under torchrun (:mod:`reference_trainer.distributed`) only rank 0 writes, after gathering every
rank's sampling generator (and, under FSDP, the whole model and optimizer state), and the
other ranks wait until the checkpoint is whole. The files have the same layout at every world
size, so a checkpoint resumes under DDP, FSDP or in one process.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable

import numpy as np
import torch

from . import distributed, models, policy
from .averaging import frozen_copy
from .config import Config
from .policy import safe_torch_load

STATE_FILE = "trainer_state.json"
TENSORS_FILE = "state.pt"


def _versions_pattern(name: str) -> re.Pattern[str]:
    """Sibling entries a save of ``name`` creates: version dirs, moved-aside old dirs, link temps, the old ``.tmp``."""
    n = re.escape(name)
    return re.compile(rf"(?:{n}\.it\d+\.[A-Za-z0-9_]+|{n}\.legacy\.[0-9a-f]+|\.{n}\.link\.[0-9a-f]+|{n}\.tmp)")


def _fsync_tree(root: Path) -> None:
    """Flush every file, then every directory (deepest first), of ``root`` to disk."""
    dirs = []
    for top, _, files in os.walk(root):
        dirs.append(top)
        for f in files:
            fd = os.open(os.path.join(top, f), os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
    for d in reversed(dirs):
        _fsync_dir(Path(d))


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def save(path: str | os.PathLike, write: Callable[[Path], None], meta: dict[str, Any], *, iteration: int = 0) -> Path:
    """Write a checkpoint at ``path`` atomically; returns ``path``.

    Args:
        path: The checkpoint's name (a symbolic link after the first save).
        write: Fills a fresh, empty directory with the checkpoint's files.
        meta: JSON-able state, written last to ``trainer_state.json`` (the completeness mark).
        iteration: Only names the version directory.
    """
    path = Path(path)
    parent = path.parent
    parent.mkdir(parents=True, exist_ok=True)
    version = Path(tempfile.mkdtemp(prefix=f"{path.name}.it{iteration:06d}.", dir=parent))
    version.chmod(0o755)  # mkdtemp makes it private; a checkpoint is an ordinary output directory
    try:
        write(version)
        (version / STATE_FILE).write_text(json.dumps(meta, indent=1, default=str))
        _fsync_tree(version)
    except BaseException:  # a failed save (disk full, Ctrl-C) leaves the previous checkpoint as it was
        shutil.rmtree(version, ignore_errors=True)
        raise
    link = parent / f".{path.name}.link.{secrets.token_hex(6)}"
    os.symlink(version.name, link)  # relative: the run directory can be moved or copied whole
    _fsync_dir(parent)  # the new version's entry is on disk before anything points at it
    if path.is_dir() and not path.is_symlink():  # an older layout: move it aside (see the module docstring)
        os.rename(path, parent / f"{path.name}.legacy.{secrets.token_hex(6)}")
    os.replace(link, path)
    _fsync_dir(parent)
    _remove_leftovers(path, keep=version.name)
    return path


def _remove_leftovers(path: Path, keep: str) -> None:
    pattern = _versions_pattern(path.name)
    for entry in path.parent.iterdir():
        if entry.name == keep or not pattern.fullmatch(entry.name):
            continue
        if entry.is_symlink() or entry.is_file():
            entry.unlink(missing_ok=True)
        else:
            shutil.rmtree(entry, ignore_errors=True)


def resolve(path: str | os.PathLike) -> Path:
    """The directory of the whole checkpoint ``path`` names.

    ``path`` itself when it holds ``trainer_state.json``; otherwise (a save of the old layout
    killed mid-way) the complete sibling version with the highest iteration.
    """
    path = Path(path)
    if (path / STATE_FILE).is_file():
        return path
    pattern = _versions_pattern(path.name)
    complete = []
    if path.parent.is_dir():
        for entry in path.parent.iterdir():
            if pattern.fullmatch(entry.name) and entry.is_dir() and (entry / STATE_FILE).is_file():
                try:
                    complete.append(
                        (int(json.loads((entry / STATE_FILE).read_text())["iteration"]), entry.stat().st_mtime, entry)
                    )
                except (ValueError, KeyError, TypeError):
                    continue
    if not complete:
        raise FileNotFoundError(
            f"{path}: no checkpoint there (no {STATE_FILE}). Pass a directory written by a run's "
            "checkpoint (e.g. runs/train/checkpoint)."
        )
    return max(complete)[2]


def read_meta(path: str | os.PathLike, *, whole: bool = False) -> dict[str, Any]:
    """``trainer_state.json`` of the checkpoint ``path`` (iteration, and for a whole trainer state to resume from,
    ``whole=True``: sft_done, numpy_rng, config), checked: a file this trainer did not write (a negative
    iteration, a missing key) is a ValueError naming it."""
    file = resolve(path) / STATE_FILE
    try:
        meta = json.loads(file.read_text(encoding="utf-8"))
    except (ValueError, RecursionError, UnicodeDecodeError) as e:
        raise ValueError(f"{file}: not a trainer state written by this trainer ({type(e).__name__}).") from None
    problems = []
    if not isinstance(meta, dict):
        problems.append("it is not a JSON object")
    else:
        it = meta.get("iteration")
        if isinstance(it, bool) or not isinstance(it, int) or it < 0:
            problems.append(f"iteration must be a whole number >= 0, got {it!r}")
        if whole and not isinstance(meta.get("sft_done"), bool):
            problems.append(f"sft_done must be true or false, got {meta.get('sft_done')!r}")
        if whole and not isinstance(meta.get("numpy_rng"), dict):
            problems.append("numpy_rng is missing")
    if problems:
        raise ValueError(
            f"{file}: not a trainer state written by this trainer: {'; '.join(problems)}. Resume from a "
            "checkpoint directory a run wrote (e.g. runs/train/checkpoint)."
        )
    return meta


def load_tensors(path: str | os.PathLike) -> dict[str, Any]:
    """``state.pt`` of the checkpoint ``path``, unpickled with ``weights_only=True``: tensors and plain containers only."""
    return safe_torch_load(resolve(path) / TENSORS_FILE)


# ---------------------------------------------------------------------- the trainer's state
@dataclass
class TrainerState:
    """What a run resumes from: the policy and its optimizer, schedule and loss scale, the sampling RNGs, the KL
    reference and weight average, the iteration and whether SFT ran, and the config. :func:`restore_trainer` loads
    tensors into the objects in place and returns the state with the plain fields replaced."""

    cfg: Config
    policy: Any
    tokenizer: Any
    optimizer: torch.optim.Optimizer
    scheduler: Any
    generator: torch.Generator
    np_rng: np.random.Generator
    parallel: Any
    dist: distributed.DistContext
    iteration: int = 0
    sft_done: bool = False
    ref_lm: torch.nn.Module | None = None
    averaged_lm: torch.nn.Module | None = None
    #: The directory the weights came from (an FSDP save rebuilds the whole model from it).
    model_path: Path | None = None


def save_trainer(run: TrainerState, path: str | os.PathLike) -> Path:
    """Weights, optimizer, scheduler, RNG states, KL reference, weight average and config of ``run``.

    Under torchrun every rank calls this: rank 0 writes (the weights and optimizer state are the same
    on every DDP rank), each rank's sampling generator is kept (``rank_generators``), and all ranks
    wait until the checkpoint is whole.
    """
    ctx = run.dist
    ref, avg = run.ref_lm, run.averaged_lm
    scaler = run.parallel.scaler
    generators = distributed.gather_objects(run.generator.get_state(), ctx)
    full = run.parallel.full_state(run.optimizer)  # FSDP: gathered on rank 0

    def write(directory: Path) -> None:
        if full is None:
            policy.save_policy(run.policy, run.tokenizer, directory / "policy")
            optimizer = run.optimizer.state_dict()
        else:
            policy.save_policy(_whole_policy(run, full[0]), run.tokenizer, directory / "policy")
            optimizer = _indexed_optimizer_state(full[1])
        state = {
            "optimizer": optimizer,
            "scheduler": run.scheduler.state_dict(),
            "torch_generator": run.generator.get_state(),
            "torch_global": torch.get_rng_state(),
            "ref_lm": ref.state_dict() if ref is not None and ref is not avg else None,  # (None: it is the average)
            "averaged_lm": avg.state_dict() if avg is not None else None,
            "grad_scaler": scaler.state_dict() if scaler is not None else None,  # float16
        }
        if ctx.enabled:  # rank r resumes with its own generator when the world size is the same
            state["rank_generators"] = generators
        torch.save(state, directory / TENSORS_FILE)

    meta = {
        "iteration": run.iteration,
        "sft_done": run.sft_done,
        "numpy_rng": run.np_rng.bit_generator.state,
        "config": run.cfg.to_dict(),
    }
    if ctx.enabled:
        meta["world_size"] = ctx.world_size
    path = Path(path)
    if ctx.is_main:
        save(path, write, meta, iteration=run.iteration)
    distributed.barrier(ctx)  # nobody reads or resumes from a half-written checkpoint
    return path


def _whole_policy(run: TrainerState, model_state: dict[str, Any]) -> Any:
    """An unsharded CPU copy of an FSDP run's policy holding ``model_state`` (names of the wrapped objective)."""
    if run.model_path is None:
        raise ValueError(
            "an FSDP checkpoint rebuilds the whole model from the directory it was loaded from: build the "
            "Trainer from cfg.model.model (not from a policy object) to save under --parallel fsdp."
        )
    m = run.cfg.model
    critic_path = m.critic_model and models.model_directory(m.critic_model)
    whole, _ = policy.load_policy(run.model_path, device="cpu", dtype=m.dtype, critic=m.critic, critic_path=critic_path)
    whole.load_state_dict({k.removeprefix("policy."): v for k, v in model_state.items()})
    return whole


def _indexed_optimizer_state(by_name: dict[str, Any]) -> dict[str, Any]:
    """A gathered optimizer state keyed by parameter name, keyed by position instead (``Optimizer.state_dict``'s
    layout), so DDP, FSDP and one process load the same file at any world size."""
    order = [name for g in by_name["param_groups"] for name in g["params"]]
    index = {name: i for i, name in enumerate(order)}
    return {
        "state": {index[name]: s for name, s in by_name["state"].items()},
        "param_groups": [{**g, "params": [index[n] for n in g["params"]]} for g in by_name["param_groups"]],
    }


def restore_trainer(run: TrainerState, path: str | os.PathLike) -> TrainerState:
    """Load the state saved by :func:`save_trainer` into ``run``'s optimizer, scheduler, loss scale, generators and
    frozen models (its policy was loaded from ``path/policy``); returns ``run`` with the iteration, the SFT flag and
    the KL reference replaced."""
    meta, state = read_meta(path, whole=True), load_tensors(path)
    run.parallel.load_optimizer_state(run.optimizer, state["optimizer"])
    run.scheduler.load_state_dict(state["scheduler"])
    scaler = run.parallel.scaler
    if state.get("grad_scaler") and scaler is not None:  # a float16 run resumes at its loss scale
        scaler.load_state_dict(state["grad_scaler"])
    ranks, ctx = state.get("rank_generators"), run.dist
    if ranks is not None and len(ranks) == ctx.world_size:
        run.generator.set_state(ranks[ctx.rank])
    elif ctx.rank == 0:
        run.generator.set_state(state["torch_generator"])
    else:  # another world size: rank 0 continues rank 0's stream, the others start fresh streams for this iteration
        run.generator.manual_seed(distributed.rank_seed(run.cfg.train.seed + int(meta["iteration"]), ctx.rank))
    torch.set_rng_state(state["torch_global"])
    if state.get("averaged_lm") is not None and run.averaged_lm is not None:
        run.averaged_lm.load_state_dict(state["averaged_lm"])  # (the KL reference too, when it is the average)
    ref_lm = run.ref_lm
    if state.get("ref_lm") is not None:
        if ref_lm is None:
            ref_lm = frozen_copy(run.policy.lm)
        ref_lm.load_state_dict(state["ref_lm"])
    run.np_rng.bit_generator.state = meta["numpy_rng"]
    return replace(run, iteration=int(meta["iteration"]), sft_done=bool(meta["sft_done"]), ref_lm=ref_lm)
