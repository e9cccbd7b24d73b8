"""Data parallelism: two gloo ranks train like one process on the concatenated batch.

The two-rank run is started the way torchrun starts one (``MASTER_ADDR=127.0.0.1``, a free
port, ``RANK``/``WORLD_SIZE``/``LOCAL_RANK`` in the environment, ``init_method="env://"``), with
``torch.multiprocessing`` spawning the ranks. Each rank records its episodes, the gradient of
every optimizer step and its parameters after every update; one process then replays the
concatenated episodes and must compute the same gradients, metrics and parameters.
"""

from __future__ import annotations

import math
import os
import pickle
import socket
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
import torch.multiprocessing as mp  # noqa: E402

from support.paths import TESTS  # noqa: E402
from support import trainer_envs  # noqa: E402

from reference_trainer import distributed  # noqa: E402
from reference_trainer.config import preset  # noqa: E402

ITERATIONS = 2
#: One optimizer step per iteration (the whole batch is the minibatch), micro-batches packed by a token budget so
#: the ranks split their halves into different numbers of micro-batches; ST-PPO exercises the clipping-bias norm.
_CASE = dict(
    tasks_per_iteration=8,
    group_size=1,
    num_envs=4,
    max_new_tokens=3,
    minibatch_size=8,
    micro_batch_tokens=60,
    epochs=1,
    lr=0.02,
    iterations=ITERATIONS,
    eval_episodes=6,
    eval_every=0,
    progress=False,
    threads=1,
    ent_coef=0.01,
    loss_agg="seq-mean-token-mean",
    adam_eps=1e-3,
)  # Adam's first step is lr * sign(g) where |g| << eps: a large eps keeps float noise from flipping it


#: parallel mode -> the preset it trains (FSDP refuses the clipping-bias correction's extra gradient pass)
CASES = {"ddp": "st-ppo", "fsdp": "turn-ppo"}


def _config(model_dir: str, out: str, algo: str = "st-ppo", **extra):
    return preset(
        algo,
        **{
            **_CASE,
            "model": model_dir,
            "env": trainer_envs.ENV_ID,
            "out": out,
            "imports": ["support.trainer_envs"],
            **extra,
        },
    )


def _full(q: torch.Tensor) -> torch.Tensor:
    """A parameter as a whole tensor (an FSDP shard is gathered: every rank must call this)."""
    return (q.full_tensor() if hasattr(q, "full_tensor") else q).detach().clone()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _record_steps(trainer, log: list) -> None:
    """Record the gradients at every optimizer step (after DDP's all-reduce or FSDP's reduce-scatter, and the norm clip)."""

    def hook(optimizer, args, kwargs):
        log.append([None if q.grad is None else _full(q.grad) for q in trainer.policy.parameters()])

    trainer.optimizer.register_step_pre_hook(hook)


def _rank_main(rank: int, port: int, model_dir: str, root: str, parallel: str) -> None:
    os.environ.update(
        MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE="2", LOCAL_RANK=str(rank)
    )
    from reference_trainer.trainer import Trainer

    torch.set_num_threads(1)
    trainer = Trainer(_config(model_dir, str(Path(root) / "run"), CASES[parallel], parallel=parallel))
    record = {"episodes": [], "grads": [], "params": [], "metrics": [], "logger": type(trainer.logger).__name__}
    rollout = trainer.rollout

    def recording_rollout(seeds, groups=None, **kwargs):
        episodes = rollout(seeds, groups, **kwargs)
        if groups is not None:  # a training rollout (evaluations pass none)
            record["episodes"].append(episodes)
        return episodes

    trainer.rollout = recording_rollout
    _record_steps(trainer, record["grads"])
    try:
        for _ in range(ITERATIONS):
            record["metrics"].append(trainer.train_iteration())
            record["params"].append([_full(q) for q in trainer.policy.parameters()])
        trainer.save_checkpoint(Path(root) / "checkpoint")
        record["eval"] = trainer.evaluate()
        record["eval_outcomes"] = trainer.last_eval_outcomes
    finally:
        trainer.close()
    with open(Path(root) / f"rank{rank}.pkl", "wb") as f:
        pickle.dump(record, f)


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return str(trainer_envs.build_toy_tiny(tmp_path_factory.mktemp("tiny") / "model"))


@pytest.fixture(scope="module", params=sorted(CASES))
def two_ranks(request, model_dir, tmp_path_factory):
    """``(parallel, root, records)`` of a two-rank gloo run with DDP, then with FSDP (see :func:`_rank_main`)."""
    root = tmp_path_factory.mktemp(request.param)
    mp.spawn(_rank_main, args=(_free_port(), model_dir, str(root), request.param), nprocs=2, join=True)
    records = []
    for rank in range(2):
        with open(root / f"rank{rank}.pkl", "rb") as f:
            records.append(pickle.load(f))
    return request.param, root, records


def _close(a: torch.Tensor | None, b: torch.Tensor | None, what: str, atol: float = 1e-6) -> None:
    assert (a is None) == (b is None), f"{what}: one gradient is None"
    if a is not None:
        assert torch.allclose(a, b, rtol=1e-4, atol=atol), f"{what}: max difference {float((a - b).abs().max()):.3g}"


def test_two_ranks_hold_identical_parameters_after_every_update(two_ranks):
    _, _, (r0, r1) = two_ranks
    assert len(r0["params"]) == len(r1["params"]) == ITERATIONS
    for it, (p0, p1) in enumerate(zip(r0["params"], r1["params"])):
        for j, (a, b) in enumerate(zip(p0, p1)):
            assert torch.equal(a, b), f"iteration {it + 1}, parameter {j}: the ranks differ"


def test_the_ranks_play_disjoint_halves_of_the_single_process_tasks(two_ranks, model_dir, tmp_path):
    from reference_trainer.trainer import Trainer

    parallel, _, (r0, r1) = two_ranks
    single = Trainer(_config(model_dir, str(tmp_path / "single"), CASES[parallel]))
    try:
        for it in range(ITERATIONS):
            tasks = single.np_rng.integers(
                0, single.cfg.train.eval_seed, size=single.cfg.rollout.tasks_per_iteration
            ).tolist()
            got = [e.seed for e in r0["episodes"][it]] + [e.seed for e in r1["episodes"][it]]
            assert got == tasks
            assert len(r0["episodes"][it]) == len(r1["episodes"][it]) == 4
    finally:
        single.close()


def test_two_ranks_compute_the_loss_and_gradients_of_one_process_on_the_concatenated_batch(
    two_ranks, model_dir, tmp_path
):
    """One process replays both ranks' episodes (rank 0's first): the same gradients, metrics and parameters."""
    from reference_trainer.trainer import Trainer

    parallel, _, (r0, r1) = two_ranks
    single = Trainer(_config(model_dir, str(tmp_path / "single"), CASES[parallel]))
    assert not single.dist.enabled
    queue = [r0["episodes"][it] + r1["episodes"][it] for it in range(ITERATIONS)]
    single.rollout = lambda seeds, groups=None, **kw: queue.pop(0)
    grads: list = []
    _record_steps(single, grads)
    try:
        for it in range(ITERATIONS):
            m = single.train_iteration()
            got = r0["metrics"][it]
            for key in (
                "train/pg_loss",
                "train/vf_loss",
                "train/entropy",
                "train/clipfrac",
                "train/approx_kl",
                "train/grad_norm",
                *(["train/clip_bias_norm"] if CASES[parallel] == "st-ppo" else []),
                "train/explained_variance",
                "rollout/success",
                "rollout/return",
                "rollout/tokens",
                "rollout/episodes",
                "rollout/logp_diff",
            ):
                assert key in m, key
                assert math.isclose(m[key], got[key], rel_tol=1e-4, abs_tol=1e-6) or (
                    math.isnan(m[key]) and math.isnan(got[key])
                ), f"iteration {it + 1}, {key}: one process {m[key]!r}, two ranks {got[key]!r}"
            assert {k: v for k, v in r0["metrics"][it].items() if not k.startswith("time/")} == {
                k: v for k, v in r1["metrics"][it].items() if not k.startswith("time/")
            }, "the ranks report different metrics"
            for j, (a, b) in enumerate(zip(grads[it], r0["grads"][it])):
                _close(a, b, f"iteration {it + 1}, gradient of parameter {j}")
            for j, (a, b) in enumerate(zip(single.policy.parameters(), r0["params"][it])):
                _close(a.detach(), b, f"iteration {it + 1}, parameter {j}", atol=1e-5)
    finally:
        single.close()


def test_a_checkpoint_saved_at_world_size_2_resumes_at_world_size_1_with_identical_metrics(
    two_ranks, model_dir, tmp_path
):
    from reference_trainer.checkpoint import read_meta
    from reference_trainer.trainer import Trainer

    parallel, root, (r0, _) = two_ranks
    meta = read_meta(root / "checkpoint")
    assert meta["world_size"] == 2 and meta["iteration"] == ITERATIONS
    resumed = Trainer(_config(model_dir, str(tmp_path / "resumed"), CASES[parallel], resume=str(root / "checkpoint")))
    try:
        assert resumed.iteration == ITERATIONS and not resumed.dist.enabled
        for j, (a, b) in enumerate(zip(resumed.policy.parameters(), r0["params"][-1])):
            assert torch.equal(a.detach(), b), f"parameter {j} changed through the checkpoint"
        assert resumed.evaluate() == r0["eval"]  # the sharded, gathered evaluation equals one process's
        assert resumed.last_eval_outcomes == r0["eval_outcomes"]
        resumed.train_iteration()  # and training continues at world size 1
    finally:
        resumed.close()


def test_rank_0_alone_logs(two_ranks):
    _, _, (r0, r1) = two_ranks
    assert (r0["logger"], r1["logger"]) == ("MetricsLogger", "QuietLogger")


# ---------------------------------------------------------------------- the console under torchrun
def _torchrun_train(root: Path, args: list[str]) -> dict[str, str]:
    """``torchrun --standalone --nproc_per_node 2 -m reference_trainer train ARGS`` with each rank's stdout
    and stderr redirected to files (torchrun's ``--log-dir``/``--redirects``); returns their texts by
    name (``rank0/stdout``, ...) and the launcher's own output (``launcher``)."""
    import subprocess

    logs = root / "logs"
    env = {
        **os.environ,
        "OMP_NUM_THREADS": "1",  # (torchrun warns when it has to set it)
        "PYTHONPATH": os.pathsep.join([str(TESTS), str(TESTS.parent), os.environ.get("PYTHONPATH", "")]),
        "PYTHONWARNINGS": "default",
    }  # every Python warning shows, once
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc_per_node",
        "2",
        "--log-dir",
        str(logs),
        "--redirects",
        "3",
        "-m",
        "reference_trainer",
        "train",
        *args,
    ]
    done = subprocess.run(cmd, env=env, cwd=root, capture_output=True, text=True, timeout=600)
    out = {"launcher": done.stdout + done.stderr}
    assert done.returncode == 0, out["launcher"]
    for path in logs.rglob("*.log"):  # <log-dir>/<run id>/attempt_0/<local rank>/{stdout,stderr}.log
        out[f"rank{path.parent.name}/{path.stem}"] = path.read_text(errors="replace")
    assert {"rank0/stdout", "rank0/stderr", "rank1/stdout", "rank1/stderr"} <= set(out), sorted(out)
    return out


def test_under_torchrun_rank_0_alone_writes_the_console_and_ddp_does_not_warn(tmp_path):
    """Two ranks run the CLI the way docs/scaling.md does: building the tiny model, an SFT warm start
    and two RL iterations with progress bars, the first a critic warm-up (the actor's parameters get
    no gradient: DDP must find them unused) and the second an update of every parameter (DDP must not
    look for unused ones, or it warns). Rank 0 draws the bars and prints the summary; rank 1 writes nothing."""
    args = [
        "--env",
        trainer_envs.ENV_ID,
        "--import",
        "support.trainer_envs",
        "--algo",
        "turn-ppo",
        "--model",
        "tiny",
        "--tiny-dir",
        str(tmp_path / "tiny"),
        "--critic",
        "separate",
        "--critic-warmup",
        "1",
        "--iterations",
        "2",
        "--tasks-per-iteration",
        "4",
        "--minibatch-size",
        "4",
        "--num-envs",
        "2",
        "--max-new-tokens",
        "3",
        "--sft-episodes",
        "4",
        "--sft-steps",
        "2",
        "--sft-batch-size",
        "2",
        "--eval-episodes",
        "2",
        "--eval-every",
        "0",
        "--out",
        str(tmp_path / "run"),
    ]
    out = _torchrun_train(tmp_path, args)
    for name, text in out.items():
        assert "find_unused_parameters" not in text, f"{name}: DDP warned\n{text}"
        # (the launcher's own output is left out: under PYTHONWARNINGS=default it reports the log files of --redirects
        # that torch's launcher leaves open, a ResourceWarning of the test's harness, not of the run)
        assert name == "launcher" or "Warning" not in text, f"{name} warned:\n{text}"
    assert "end of RL" in out["rank0/stdout"] and "metrics:" in out["rank0/stdout"]
    assert "SFT:" in out["rank0/stderr"] and "turn-ppo:" in out["rank0/stderr"], "rank 0 draws the SFT and RL bars"
    assert out["rank1/stdout"] == "" and out["rank1/stderr"] == "", (
        f"rank 1 wrote to the console:\n{out['rank1/stderr']}"
    )
    assert out["rank0/stderr"].count("turn-ppo: 100%") == 1


# ---------------------------------------------------------------------- pure parts
def test_shards_are_contiguous_cover_every_item_once_and_differ_in_size_by_at_most_one():
    for n in range(0, 20):
        for world in range(1, 6):
            bounds = [distributed.shard_bounds(n, r, world) for r in range(world)]
            assert bounds[0][0] == 0 and bounds[-1][1] == n
            assert all(a[1] == b[0] for a, b in zip(bounds, bounds[1:]))
            sizes = [hi - lo for lo, hi in bounds]
            assert max(sizes) - min(sizes) <= 1


def test_the_context_comes_from_torchruns_variables_and_is_single_without_them():
    assert distributed.context_from_env({}) == distributed.SINGLE
    assert not distributed.context_from_env({"WORLD_SIZE": "1", "RANK": "0"}).enabled
    ctx = distributed.context_from_env({"WORLD_SIZE": "4", "RANK": "3", "LOCAL_RANK": "1"}, parallel="fsdp")
    assert (ctx.rank, ctx.world_size, ctx.local_rank, ctx.parallel, ctx.is_main) == (3, 4, 1, "fsdp", False)
    assert distributed.device_for_rank("cuda", ctx) == "cuda:1" and distributed.device_for_rank("cpu", ctx) == "cpu"
    with pytest.raises(ValueError, match="RANK"):
        distributed.context_from_env({"WORLD_SIZE": "2"})
    with pytest.raises(ValueError, match="--parallel"):
        distributed.context_from_env({}, parallel="zero")


def test_rank_0_keeps_the_run_seed_and_other_ranks_get_other_streams():
    assert distributed.rank_seed(7, 0) == 7
    seeds = {distributed.rank_seed(7, r) for r in range(8)}
    assert len(seeds) == 8 and distributed.rank_seed(7, 3) == distributed.rank_seed(7, 3)


def test_tasks_that_do_not_split_over_the_ranks_are_refused_with_the_option_to_change(model_dir, tmp_path, monkeypatch):
    from reference_trainer.parallel import check_divisible as _check_divisible

    _check_divisible(_config(model_dir, str(tmp_path)), 1)
    with pytest.raises(ValueError, match="--tasks-per-iteration 8 does not split over 3 ranks"):
        _check_divisible(_config(model_dir, str(tmp_path)), 3)
    with pytest.raises(ValueError, match="--minibatch-size 6"):
        _check_divisible(_config(model_dir, str(tmp_path), minibatch_size=6), 4)


def test_fsdp_refuses_the_options_it_cannot_shard_and_names_them(model_dir, tmp_path):
    from reference_trainer.parallel import check_fsdp as _check_fsdp

    fsdp = distributed.DistContext(0, 2, 0, "fsdp")
    _check_fsdp(_config(model_dir, str(tmp_path), "turn-ppo"), fsdp)
    _check_fsdp(_config(model_dir, str(tmp_path), "st-ppo", kl_coef=0.1), distributed.DistContext(0, 2, 0, "ddp"))
    with pytest.raises(
        ValueError, match="--parallel fsdp does not support --kl-coef, --ema-decay, --clip-bias-correction"
    ):
        _check_fsdp(_config(model_dir, str(tmp_path), "st-ppo", kl_coef=0.1, ema_decay=0.5), fsdp)
    with pytest.raises(ValueError, match="--sft-episodes"):
        _check_fsdp(_config(model_dir, str(tmp_path), "turn-ppo", sft_episodes=4), fsdp)
