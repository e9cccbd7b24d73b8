"""The trainer's numbers do not drift: short, seeded runs reproduce a committed fixture, on any CPU.

Each case is a few iterations of one preset (with the options that change the update path:
KL penalty and its references, weight averaging, micro-batches, token budgets, outcome
rewards, recorded log-probs, critic warm-up, SFT, a separate critic) on the toy corridor, plus
the Sokoban recipe shrunk to a few small iterations. The fixture holds each case's config,
every training metric of every iteration (times left out), a digest of the tokens each rollout
sampled, the held-out evaluation with its digest, and a fingerprint of the final weights.

How it compares (the tolerance mode declared in ``tests/support/recorded.py``): torch's float kernels
round differently on another CPU, so metrics agree to a tolerance (1e-3 relative plus 1e-4;
clip fractions to 0.03; the log-prob noise only in size), never bit for bit. Sampling is where
that noise can branch: a token drawn at a near tie of the cumulative probabilities, or a greedy
choice between near-equal logits, may differ, and from there the run is another run. So each
rollout's token digest is compared first: while they agree, that iteration's metrics must
agree to the tolerance; at the first rollout that differs the comparison stops (later
iterations, the final weights and the evaluation are then not compared, and a warning says
where). Every case must still agree through its first rollout and update. On the machine that
recorded the fixture nothing branches. Each case runs on one thread (the thread count changes
reduction order), and no case may hinge on float noise: an update whose true gradient is zero
(all advantages 0 with a KL term at the reference) lets Adam turn rounding into full steps.

Regenerate (only when a change of behaviour is intended, and say why in the commit):
``python tests/reference_trainer/test_trainer_behaviour.py`` (writes ``tests/data/trainer_behaviour.json``).
"""

from __future__ import annotations

import hashlib
import json
import sys
import warnings
from pathlib import Path
from typing import Any

import pytest

if __name__ == "__main__":  # run as a script: ``support`` lives in tests/
    sys.path.insert(0, str(Path(__file__).absolute().parents[1]))
from support.paths import DATA  # noqa: E402
from support import recorded  # noqa: E402

FIXTURE = DATA / "trainer_behaviour.json"

_TOY_BASE = dict(
    tasks_per_iteration=8,
    group_size=1,
    num_envs=8,
    max_new_tokens=3,
    minibatch_size=4,
    epochs=2,
    lr=3e-3,
    iterations=3,
    eval_episodes=8,
    eval_every=0,
    progress=False,
    threads=1,
)
#: name -> (preset, overrides on top of _TOY_BASE, SFT first?)
TOY_CASES: dict[str, tuple[str, dict[str, Any]]] = {
    "ppo": ("ppo", dict(ent_coef=0.01, micro_batch_size=2)),
    "turn-ppo": (
        "turn-ppo",
        dict(kl_coef=0.05, ema_decay=0.5, kl_reference="average", loss_agg="seq-mean-token-mean", reward_scale=0.5),
    ),
    "s-ppo": ("s-ppo", dict(micro_batch_size=2, critic_warmup=1, lr_warmup_steps=2, lr=0.02)),
    "st-ppo": ("st-ppo", dict(micro_batch_tokens=40, recompute_old_logp=False, lr=0.02, value_clip=None)),
    "grpo": ("grpo", dict(tasks_per_iteration=2, group_size=4, kl_coef=0.05)),
    "turn-ppo-sft-separate-critic": (
        "turn-ppo",
        dict(
            critic="separate",
            sft_episodes=8,
            sft_steps=3,
            sft_batch_size=4,
            iterations=2,
            ema_decay=0.5,
            reward="success",
            lr=0.01,
        ),
    ),
}
#: The Sokoban recipe (reference_trainer.recipes.sokoban_tiny), shrunk: the same options, few episodes
#: (and the 2-layer model the fixture was recorded with).
SOKOBAN_CASES: dict[str, tuple[str, dict[str, Any]]] = {
    "sokoban-turn-ppo": ("turn-ppo", dict(tasks_per_iteration=16, num_envs=16)),
    "sokoban-grpo": ("grpo", dict(tasks_per_iteration=4, num_envs=16)),
}
_SOKOBAN_SMALL = dict(
    iterations=2,
    sft_episodes=32,
    sft_steps=4,
    sft_batch_size=16,
    eval_episodes=16,
    progress=False,
    tiny_layers=2,
    sft_validate_every=0,
)


def toy_config(name: str, model_dir: str, out: str):
    from support import trainer_envs
    from reference_trainer.config import preset

    algo, extra = TOY_CASES[name]
    return preset(algo, **{**_TOY_BASE, **extra, "model": model_dir, "env": trainer_envs.ENV_ID, "out": out})


def sokoban_config(name: str, tiny_dir: str, out: str):
    from reference_trainer.recipes import sokoban_tiny

    algo, extra = SOKOBAN_CASES[name]
    cfg = sokoban_tiny(algo, out=out, **_SOKOBAN_SMALL)
    cfg.model.tiny.dir = tiny_dir
    for name, value in extra.items():
        setattr(cfg.rollout, name, value)
    return cfg


def _comparable(config: dict[str, Any]) -> dict[str, Any]:
    """The config without the paths that differ between runs."""
    c = json.loads(json.dumps(config, default=str))
    if c["model"]["model"] != "tiny":  # a temporary model directory
        c["model"]["model"] = "<built>"
    c["model"].pop("tiny_dir", None)
    c["train"].pop("out", None)
    return c


def _digest(episodes) -> str:
    """A short digest of the token ids every episode of one rollout holds, in order."""
    h = hashlib.sha256()
    for e in episodes:
        h.update(json.dumps(e.conversation.ids).encode())
    return h.hexdigest()[:16]


def run_case(cfg) -> dict[str, Any]:
    """Train ``cfg`` (SFT first when it asks for one); returns config, metrics, token digests,
    evaluation, weight fingerprint."""
    from reference_trainer.trainer import Trainer

    trainer = Trainer(cfg)
    digests: dict[str, list[str]] = {"train": [], "eval": []}
    play = trainer.rollout

    def recording(*args, **kwargs):
        episodes = play(*args, **kwargs)
        digests["eval" if kwargs.get("envs") is not None else "train"].append(_digest(episodes))
        return episodes

    trainer.rollout = recording
    try:
        record: dict[str, Any] = {"config": _comparable(cfg.to_dict())}
        if cfg.train.sft_episodes > 0:
            record["sft"] = {k: v for k, v in trainer.sft().items() if k != "sft/step_seconds"}  # a time, not behaviour
        record["iterations"] = [
            {k: v for k, v in trainer.train_iteration().items() if not k.startswith("time/")}
            for _ in range(cfg.train.iterations)
        ]
        record["eval"] = trainer.evaluate()
        assert len(digests["eval"]) == 1, digests
        record["rollout_digests"], (record["eval_digest"],) = digests["train"], digests["eval"]
        params = [p.detach().double() for p in trainer.policy.parameters()]
        record["weights"] = {
            "sum": float(sum(p.sum() for p in params)),
            "abs_sum": float(sum(p.abs().sum() for p in params)),
            "sq_sum": float(sum((p * p).sum() for p in params)),
        }
    finally:
        trainer.close()
    return record


def record_all(root: Path) -> dict[str, Any]:
    import torch

    from support import trainer_envs

    torch.set_num_threads(1)
    toy_model = str(trainer_envs.build_toy_tiny(root / "toy_model"))
    cases = {name: run_case(toy_config(name, toy_model, str(root / name))) for name in TOY_CASES}
    cases.update(
        {name: run_case(sokoban_config(name, str(root / "sokoban_tiny"), str(root / name))) for name in SOKOBAN_CASES}
    )
    return cases


TOLERANCE = recorded.mode("trainer_behaviour.json")


def _close(a: Any, b: Any, where: str, problems: list[str], name: str = "") -> None:
    """Append to ``problems`` where ``b`` differs from ``a``: floats by the tolerance of metric ``name``, the rest exactly."""
    if isinstance(a, dict) and isinstance(b, dict):
        if set(a) != set(b):
            problems.append(f"{where}: keys differ: missing {sorted(set(a) - set(b))}, new {sorted(set(b) - set(a))}")
        for k in sorted(set(a) & set(b)):
            _close(a[k], b[k], f"{where}.{k}", problems, k)
    elif isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for i, (x, y) in enumerate(zip(a, b)):
            _close(x, y, f"{where}[{i}]", problems, name)
    elif isinstance(a, float) or isinstance(b, float):
        if a is None or b is None or not TOLERANCE.for_name(name).close(float(a), float(b)):
            problems.append(f"{where}: expected {a!r}, got {b!r}")
    elif a != b:
        problems.append(f"{where}: expected {a!r}, got {b!r}")


def compare(expected: dict[str, Any], got: dict[str, Any], name: str) -> tuple[list[str], str | None]:
    """``(problems, branched)``: what differs beyond the tolerance, and where the sampled tokens
    first differ (``None`` when they never do). Nothing after a branch is compared."""
    problems: list[str] = []
    _close(expected["config"], got["config"], f"{name}.config", problems)
    if "sft" in expected or "sft" in got:
        _close(expected.get("sft"), got.get("sft"), f"{name}.sft", problems)
    if len(expected["iterations"]) != len(got["iterations"]):
        return problems + [f"{name}: {len(got['iterations'])} iterations, expected {len(expected['iterations'])}"], None
    for i, (e, g) in enumerate(zip(expected["iterations"], got["iterations"])):
        if expected["rollout_digests"][i] != got["rollout_digests"][i]:
            return problems, f"the rollout of iteration {i + 1}"
        _close(e, g, f"{name}.iterations[{i}]", problems)
    _close(expected["weights"], got["weights"], f"{name}.weights", problems)
    if expected["eval_digest"] != got["eval_digest"]:
        return problems, "the evaluation"
    _close(expected["eval"], got["eval"], f"{name}.eval", problems)
    return problems, None


def _drop_new_fields_at_their_defaults(expected: dict[str, Any], got: dict[str, Any]) -> None:
    """A config field added after the fixture was recorded compares equal when it holds its default
    (the pinned metrics still show whether that default changed behaviour); any other value fails."""
    from dataclasses import MISSING, fields

    from reference_trainer.config import _SECTIONS

    for section, cls in _SECTIONS.items():
        defaults = {
            f.name: (f.default_factory() if f.default_factory is not MISSING else f.default) for f in fields(cls)
        }
        for key in set(got.get(section, {})) - set(expected.get(section, {})):
            if key in defaults and json.loads(json.dumps(defaults[key], default=str)) == got[section][key]:
                del got[section][key]


@pytest.fixture(scope="module")
def recorded_runs(tmp_path_factory):
    return record_all(tmp_path_factory.mktemp("behaviour"))


@pytest.mark.parametrize("name", [*TOY_CASES, *SOKOBAN_CASES])
def test_short_seeded_runs_reproduce_the_committed_metrics(recorded_runs, name):
    expected = json.loads(FIXTURE.read_text())[name]
    got = json.loads(json.dumps(recorded_runs[name]))  # the fixture's own JSON round trip (NaN stays NaN)
    _drop_new_fields_at_their_defaults(expected["config"], got["config"])
    problems, branched = compare(expected, got, name)
    assert not problems, "\n".join(problems[:20])
    assert branched != "the rollout of iteration 1", (
        f"{name}: the first rollout sampled other tokens than the fixture's"
    )
    if branched:
        warnings.warn(f"{name}: sampling branched at {branched} (float rounding of this CPU); compared up to there")


def test_compare__stops_at_the_first_rollout_that_sampled_other_tokens():
    it = {"train/pg_loss": 1.0, "train/clipfrac": 0.1, "rollout/turns": 2.0}
    run = {
        "config": {"a": 1},
        "iterations": [dict(it), dict(it)],
        "rollout_digests": ["x", "y"],
        "weights": {"sum": 5.0},
        "eval": {"success": 0.5},
        "eval_digest": "e",
    }
    same = json.loads(json.dumps(run))
    assert compare(run, same, "c") == ([], None)
    noisy = json.loads(json.dumps(run))
    noisy["iterations"][0].update({"train/pg_loss": 1.0005, "train/clipfrac": 0.12})  # within 1e-3 relative and 0.03
    assert compare(run, noisy, "c") == ([], None)
    drifted = json.loads(json.dumps(run))
    drifted["iterations"][1]["train/pg_loss"] = 1.01
    assert compare(run, drifted, "c")[0] == ["c.iterations[1].train/pg_loss: expected 1.0, got 1.01"]
    branched = json.loads(json.dumps(drifted))
    branched["rollout_digests"][1], branched["weights"]["sum"], branched["eval"]["success"] = "z", 9.0, 0.0
    assert compare(run, branched, "c") == ([], "the rollout of iteration 2")  # nothing after the branch is compared
    greedy = json.loads(json.dumps(run))
    greedy["eval_digest"], greedy["eval"]["success"] = "f", 0.0
    assert compare(run, greedy, "c") == ([], "the evaluation")
    counted = json.loads(json.dumps(run))
    counted["config"]["a"] = 2
    assert compare(run, counted, "c")[0] == ["c.config.a: expected 1, got 2"]


if __name__ == "__main__":
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        data = record_all(Path(d))
    FIXTURE.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    print(f"wrote {FIXTURE}")
