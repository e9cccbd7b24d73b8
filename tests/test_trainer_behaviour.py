"""The trainer's numbers do not drift: short, seeded runs reproduce a committed fixture.

Each case is a few iterations of one preset (with the options that change the update path:
KL penalty and its references, weight averaging, micro-batches, token budgets, outcome
rewards, recorded log-probs, critic warm-up, SFT, a separate critic) on the toy corridor, plus
the Sokoban recipe shrunk to a few small iterations. The fixture holds each case's config,
every training metric of every iteration (times left out), the held-out evaluation and a
fingerprint of the final weights. A refactoring of the trainer must reproduce them to 1e-6.

Regenerate (only when a change of behaviour is intended, and say why in the commit):
``python tests/test_trainer_behaviour.py`` (writes ``tests/data/trainer_behaviour.json``).
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import Any

import pytest

TESTS = Path(__file__).parent
FIXTURE = TESTS / "data" / "trainer_behaviour.json"
if str(TESTS) not in sys.path:  # run as a script
    sys.path.insert(0, str(TESTS))

_TOY_BASE = dict(tasks_per_iteration=8, group_size=1, num_envs=8, max_new_tokens=3, minibatch_size=4, epochs=2, lr=3e-3,
                 iterations=3, eval_episodes=8, eval_every=0, progress=False, threads=1)
#: name -> (preset, overrides on top of _TOY_BASE, SFT first?)
TOY_CASES: dict[str, tuple[str, dict[str, Any]]] = {
    "ppo": ("ppo", dict(ent_coef=0.01, micro_batch_size=2)),
    "turn-ppo": ("turn-ppo", dict(kl_coef=0.05, ema_decay=0.5, kl_reference="average", loss_agg="seq-mean-token-mean",
                                  reward_scale=0.5)),
    "s-ppo": ("s-ppo", dict(micro_batch_size=2, critic_warmup=1, lr_warmup_steps=2, lr=0.02)),
    "st-ppo": ("st-ppo", dict(micro_batch_tokens=40, recompute_old_logp=False, lr=0.02, value_clip=None)),
    "grpo": ("grpo", dict(tasks_per_iteration=2, group_size=4, kl_coef=0.05)),
    "turn-ppo-sft-separate-critic": ("turn-ppo", dict(critic="separate", sft_episodes=8, sft_steps=3, sft_batch_size=4,
                                                      iterations=2, ema_decay=0.5, kl_coef=0.05, reward="success",
                                                      lr=0.01)),
}
#: The Sokoban recipe (reference_trainer.recipes.sokoban_tiny), shrunk: the same options, few episodes
#: (and the 2-layer model the fixture was recorded with).
SOKOBAN_CASES: dict[str, tuple[str, dict[str, Any]]] = {
    "sokoban-turn-ppo": ("turn-ppo", dict(tasks_per_iteration=16, num_envs=16)),
    "sokoban-grpo": ("grpo", dict(tasks_per_iteration=4, num_envs=16)),
}
_SOKOBAN_SMALL = dict(iterations=2, sft_episodes=32, sft_steps=4, sft_batch_size=16, eval_episodes=16, progress=False,
                      tiny_layers=2)


def toy_config(name: str, model_dir: str, out: str):
    import trainer_envs
    from reference_trainer.config import preset

    algo, extra = TOY_CASES[name]
    return preset(algo, **{**_TOY_BASE, **extra, "model": model_dir, "env": trainer_envs.ENV_ID, "out": out})


def sokoban_config(name: str, tiny_dir: str, out: str):
    from reference_trainer.recipes import sokoban_tiny

    algo, extra = SOKOBAN_CASES[name]
    cfg = sokoban_tiny(algo, out=out, **_SOKOBAN_SMALL)
    cfg.model.tiny_dir = tiny_dir
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


def run_case(cfg) -> dict[str, Any]:
    """Train ``cfg`` (SFT first when it asks for one); returns config, metrics, evaluation, weight fingerprint."""
    import torch

    from reference_trainer.trainer import Trainer

    trainer = Trainer(cfg)
    try:
        record: dict[str, Any] = {"config": _comparable(cfg.to_dict())}
        if cfg.train.sft_episodes > 0:
            record["sft"] = trainer.sft()
        record["iterations"] = [{k: v for k, v in trainer.train_iteration().items() if not k.startswith("time/")}
                                for _ in range(cfg.train.iterations)]
        record["eval"] = trainer.evaluate()
        params = [p.detach().double() for p in trainer.policy.parameters()]
        record["weights"] = {"sum": float(sum(p.sum() for p in params)), "abs_sum": float(sum(p.abs().sum() for p in params)),
                             "sq_sum": float(sum((p * p).sum() for p in params))}
    finally:
        trainer.close()
    return record


def record_all(root: Path) -> dict[str, Any]:
    import torch

    import trainer_envs

    torch.set_num_threads(1)
    toy_model = str(trainer_envs.build_toy_tiny(root / "toy_model"))
    cases = {name: run_case(toy_config(name, toy_model, str(root / name))) for name in TOY_CASES}
    cases.update({name: run_case(sokoban_config(name, str(root / "sokoban_tiny"), str(root / name))) for name in SOKOBAN_CASES})
    return cases


def _close(a: Any, b: Any, where: str, problems: list[str]) -> None:
    if isinstance(a, dict) and isinstance(b, dict):
        if set(a) != set(b):
            problems.append(f"{where}: keys differ: missing {sorted(set(a) - set(b))}, new {sorted(set(b) - set(a))}")
        for k in sorted(set(a) & set(b)):
            _close(a[k], b[k], f"{where}.{k}", problems)
    elif isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for i, (x, y) in enumerate(zip(a, b)):
            _close(x, y, f"{where}[{i}]", problems)
    elif isinstance(a, float) or isinstance(b, float):
        if a is None or b is None or not (math.isclose(a, b, rel_tol=1e-6, abs_tol=1e-6) or (math.isnan(a) and math.isnan(b))):
            problems.append(f"{where}: expected {a!r}, got {b!r}")
    elif a != b:
        problems.append(f"{where}: expected {a!r}, got {b!r}")


def _drop_new_fields_at_their_defaults(expected: dict[str, Any], got: dict[str, Any]) -> None:
    """A config field added after the fixture was recorded compares equal when it holds its default
    (the pinned metrics still show whether that default changed behaviour); any other value fails."""
    from dataclasses import MISSING, fields

    from reference_trainer.config import _SECTIONS

    for section, cls in _SECTIONS.items():
        defaults = {f.name: (f.default_factory() if f.default_factory is not MISSING else f.default) for f in fields(cls)}
        for key in set(got.get(section, {})) - set(expected.get(section, {})):
            if key in defaults and json.loads(json.dumps(defaults[key], default=str)) == got[section][key]:
                del got[section][key]


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    return record_all(tmp_path_factory.mktemp("behaviour"))


@pytest.mark.parametrize("name", [*TOY_CASES, *SOKOBAN_CASES])
def test_short_seeded_runs_reproduce_the_committed_metrics(recorded, name):
    expected = json.loads(FIXTURE.read_text())[name]
    got = json.loads(json.dumps(recorded[name]))  # the fixture's own JSON round trip (NaN stays NaN)
    _drop_new_fields_at_their_defaults(expected["config"], got["config"])
    problems: list[str] = []
    _close(expected, got, name, problems)
    assert not problems, "\n".join(problems[:20])


if __name__ == "__main__":
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        data = record_all(Path(d))
    FIXTURE.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    print(f"wrote {FIXTURE}")
