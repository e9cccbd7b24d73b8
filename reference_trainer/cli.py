"""``python -m reference_trainer``: train, sft, eval, build-tiny, plot.

    python -m reference_trainer train --env TurnSokoban-v0 --algo turn-ppo --sft-episodes 2000
    python -m reference_trainer train --model ./my-qwen --device cuda --dtype bfloat16 --lr 1e-6
    python -m reference_trainer sft --env TurnSokoban-v0 --sft-episodes 2000 --out runs/sft
    python -m reference_trainer eval --model runs/sft/checkpoint/policy --env TurnSokoban-v0
    python -m reference_trainer train --resume runs/train/checkpoint --iterations 100
    python -m reference_trainer demo            # what `make demo` runs
    python -m reference_trainer train --recipe sokoban --model runs/sft/checkpoint/policy --sft-episodes 0
    torchrun --nproc_per_node 2 -m reference_trainer train --env TurnSokoban-v0 --algo turn-ppo   # data parallel

Under torchrun every rank runs the same command; rank 0 prints, draws the progress bars, logs and
writes checkpoints, and the other ranks write only errors (docs/scaling.md).

Every option of ``train`` comes from the dataclasses in :mod:`reference_trainer.config`.
An ``--algo`` preset sets the advantage estimator, ratio level, correction and GAE
constants; ``--recipe`` starts from a measured recipe's settings instead
(:mod:`reference_trainer.recipes`); options given explicitly override either.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import json
import sys
import typing
from typing import Any, Sequence

from .config import PRESETS, AlgoConfig, Config, ModelConfig, RolloutConfig, TinyConfig, TrainConfig
from .recipes import RECIPES, SOKOBAN_RL_ITERATIONS

_SECTIONS = (("model", ModelConfig), ("rollout", RolloutConfig), ("algo", AlgoConfig), ("train", TrainConfig))


def _kv(text: str) -> tuple[str, Any]:
    if "=" not in text:
        raise argparse.ArgumentTypeError(f"expected NAME=VALUE, got {text!r}")
    name, value = text.split("=", 1)
    try:
        return name, json.loads(value)
    except json.JSONDecodeError:
        return name, value


def _json_object(text: str) -> dict:
    """A JSON object from the command line (the dict options: ``--eval-env-kwargs '{"world_seed": 7}'``)."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as e:
        raise argparse.ArgumentTypeError(
            f"expected a JSON object such as '{{\"name\": 1}}', got {text!r} ({e.msg})"
        ) from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError(f"expected a JSON object such as '{{\"name\": 1}}', got {text!r}")
    return value


def _optional(cast):
    def parse(text: str):
        return None if text.lower() in ("none", "null") else cast(text)

    parse.__name__ = cast.__name__
    return parse


def _add_fields(parser: argparse.ArgumentParser, section: str, cls: type, prefix: str = "", group: Any = None) -> None:
    group = group or parser.add_argument_group(f"{section} ({cls.__doc__.strip().splitlines()[0]})")
    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        if f.name == "tiny":  # TinyConfig's fields: --tiny-hidden, ... (tiny_hidden, ... in from_preset and to_dict)
            _add_fields(parser, section, TinyConfig, "tiny_", group)
            continue
        name = prefix + f.name
        flag = "--" + name.replace("_", "-")
        help_text = f.metadata.get("help", "")
        default = f.default if f.default is not dataclasses.MISSING else f.default_factory()
        kw: dict[str, Any] = {"dest": f"{section}.{name}", "default": argparse.SUPPRESS}
        hint = hints[f.name]
        if f.name == "env_kwargs":
            group.add_argument(
                "--env-kwarg",
                action="append",
                type=_kv,
                metavar="NAME=VALUE",
                help=f"{help_text} (repeatable; values parsed as JSON when they can be)",
                **kw,
            )
            continue
        if f.name == "imports":
            group.add_argument("--import", action="append", metavar="MODULE", help=f"{help_text} (repeatable)", **kw)
            continue
        if hint is bool:
            group.add_argument(
                flag, action=argparse.BooleanOptionalAction, help=f"{help_text} (default: {default})", **kw
            )
            continue
        base = next((t for t in typing.get_args(hint) if t is not type(None)), hint)
        cast = {int: int, float: float, str: str, dict: _json_object}.get(base, str)
        if type(None) in typing.get_args(hint):
            cast = _optional(cast)
        choices = f.metadata.get("choices")
        metavar = None if choices else {int: "N", float: "X", dict: "JSON"}.get(base, "TEXT")
        suffix = "" if "default" in help_text else f" (default: {default})"
        group.add_argument(flag, type=cast, choices=choices, metavar=metavar, help=help_text + suffix, **kw)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m reference_trainer",
        description="Token-PPO, Turn-PPO, S-PPO, ST-PPO and GRPO for multi-turn text envs, token-in/token-out.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="Formulas: docs/algorithms.md. Guide: docs/trainer.md.",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    train = sub.add_parser(
        "train",
        help="SFT warm start (optional), then RL; writes metrics, curve and checkpoints",
        description="Train a policy on a registered env. An --algo preset sets the estimator; "
        "explicit options override it.",
    )
    sft = sub.add_parser("sft", help="only the SFT warm start on expert demonstrations; saves a checkpoint")
    ev = sub.add_parser("eval", help="held-out success of a checkpoint")
    for p in (train, sft, ev):
        p.add_argument(
            "--recipe",
            default=None,
            choices=sorted(RECIPES),
            help="start from a measured recipe's settings (reference_trainer.recipes: the tiny model's size, "
            "env options, batch, learning rates, SFT, evaluation) with the --algo preset; options given "
            "explicitly override them (e.g. --model DIR --sft-episodes 0 to start RL from a saved SFT policy)",
        )
        for section, cls in _SECTIONS:
            _add_fields(p, section, cls)
    demo = sub.add_parser(
        "demo",
        help="SFT start + Turn-PPO with the tiny model on CPU: TurnSokoban-v0 (about 5 minutes) or --recipe webshop",
        description="A measured recipe of reference_trainer.recipes: its SFT start (the best validated step under "
        "the suite's ceiling; Sokoban's seed-0 start ships with the package), then Turn-PPO; prints the plan and its "
        "time first, held-out success before and after with the gain's interval, and writes the curve PNG.",
    )
    demo.add_argument(
        "--recipe",
        default="sokoban",
        choices=sorted(RECIPES),
        help="which env's recipe (default: sokoban; webshop takes about 15 minutes on one thread)",
    )
    demo.add_argument("--algo", default="turn-ppo", choices=sorted(PRESETS))
    demo.add_argument(
        "--iterations",
        type=int,
        default=None,
        metavar="N",
        help=f"RL iterations (default: the recipe's budget; sokoban: {SOKOBAN_RL_ITERATIONS}, 3-5 minutes on one quiet thread)",
    )
    demo.add_argument("--seed", type=int, default=0, help="RL seed (default: 0)")
    demo.add_argument("--sft-seed", type=int, default=0, help="SFT seed of the start (default: 0, the shipped one)")
    demo.add_argument(
        "--sft", action="store_true", help="train the SFT start now even where one ships (about 6 minutes for sokoban)"
    )
    demo.add_argument("--out", default="runs/demo", help="output directory (default: runs/demo)")
    tiny = sub.add_parser("build-tiny", help="build the tiny model + tokenizer for an env into a directory")
    tiny.add_argument("--env", required=True, help="registered env id")
    tiny.add_argument("--out", required=True, help="directory to write")
    tiny.add_argument("--seed", type=int, default=0)
    tiny.add_argument("--import", dest="imports", action="append", default=[], metavar="MODULE")
    tiny.add_argument("--env-kwarg", action="append", type=_kv, default=[], metavar="NAME=VALUE")
    plot = sub.add_parser("plot", help="learning-curve PNG from a metrics.jsonl")
    plot.add_argument("metrics", help="path to metrics.jsonl")
    plot.add_argument("png", help="output PNG")
    return parser


def config_from_args(args: argparse.Namespace) -> Config:
    """A :class:`Config` from parsed arguments: preset first, explicit options on top."""
    given: dict[str, dict[str, Any]] = {s: {} for s, _ in _SECTIONS}
    for key, value in vars(args).items():
        if "." in key:
            section, name = key.split(".", 1)
            given[section][name] = dict(value) if name == "env_kwargs" else value
    resume = given["train"].get("resume")
    recipe = getattr(args, "recipe", None)
    if resume and recipe:
        raise SystemExit("--recipe and --resume: a resumed run keeps its saved settings; leave --recipe out.")
    if recipe:  # the recipe's config for the preset, then the options given on top
        fields = {name: v for section in given.values() for name, v in section.items()}
        algo = fields.pop("algo", AlgoConfig.algo)
        if algo not in PRESETS:
            raise SystemExit(f"--algo {algo!r} is not a preset; choose one of {sorted(PRESETS)}.")
        cfg = RECIPES[recipe].build(algo, **fields)
    elif resume:  # the saved run's config, with the options given now on top (no preset re-applied)
        from .checkpoint import read_meta

        try:
            base = Config.from_dict(read_meta(resume)["config"])
        except FileNotFoundError as e:
            raise SystemExit(f"--resume: {e}") from None
        cfg = base.replace(**{name: v for fields in given.values() for name, v in fields.items()})
        if cfg.algo.algo not in PRESETS:
            raise SystemExit(f"--algo {cfg.algo.algo!r} is not a preset; choose one of {sorted(PRESETS)}.")
    else:
        algo = given["algo"].pop("algo", AlgoConfig.algo)
        if algo not in PRESETS:
            raise SystemExit(f"--algo {algo!r} is not a preset; choose one of {sorted(PRESETS)}.")
        cfg = Config.from_preset(algo, **{name: v for fields in given.values() for name, v in fields.items()})
    if cfg.algo.advantage == "grpo" and cfg.rollout.group_size < 2:
        raise SystemExit("GRPO compares rollouts of the same task: set --group-size 2 or more.")
    return cfg


def _summary_line(name: str, m: dict[str, float]) -> str:
    score = f"  score {m['score']:.3f}" if "score" in m else ""
    return (
        f"{name:>12s}: success {m['success']:.1%}{score}  return {m['return']:+.3f}  turns {m['turns']:.2f}  "
        f"({int(m['episodes'])} episodes)"
    )


def _no_weight_bars() -> None:
    """No progress bars of transformers' weight loading and saving: the trainer draws its own (SFT, RL),
    and a checkpoint saved during RL would break a bar of its own into the RL bar."""
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()


def _gain_line(summary: dict[str, Any]) -> str | None:
    """RL's held-out success gain with its paired 95% interval (the same tasks before and after), or
    ``None`` when the run does not have both evaluations (e.g. resumed past the start)."""
    from .stats import paired_ci

    before, after = (summary.get(k, {}).get("success") for k in ("start_outcomes", "end_outcomes"))
    if not before or not after or len(before) != len(after):
        return None
    return f"{'RL gain':>12s}: success {paired_ci(before, after).points()} (paired 95% interval, {len(before)} held-out tasks)"


#: The ``train`` extra's modules each command imports (``plot`` draws only; ``eval``/``sft`` save no curve).
_NEEDS = {
    "plot": ("matplotlib",),
    "eval": ("torch", "transformers", "tokenizers"),
    "sft": ("torch", "transformers", "tokenizers"),
    "build-tiny": ("torch", "transformers", "tokenizers"),
}
_TRAIN_STACK = ("torch", "transformers", "tokenizers", "matplotlib")


def _check_train_extra(command: str) -> None:
    """Exit with what to install when a module of the ``train`` extra is missing (not a bare ModuleNotFoundError)."""
    for module in _NEEDS.get(command, _TRAIN_STACK):
        try:
            importlib.import_module(module)
        except ImportError as e:
            raise SystemExit(
                f"python -m reference_trainer {command} needs the trainer's dependencies (the `train` extra), and "
                f"{module!r} cannot be imported ({e}). Install PyTorch first, the CPU build the project tests with: "
                f"pip install torch==2.13.0 (a bare `pip install torch` may pull a multi-GB CUDA build), then: "
                f'pip install "agentgym-turn[train]" (from a checkout: pip install -e ".[train]").'
            ) from None


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    _check_train_extra(args.command)
    if args.command == "plot":
        from .plots import plot_run

        print(plot_run(args.metrics, args.png))
        return 0
    if args.command == "build-tiny":
        for module in args.imports:
            importlib.import_module(module)
        import agentgym_turn  # noqa: F401

        from .tiny import build_tiny

        print(build_tiny(args.env, args.out, seed=args.seed, env_kwargs=dict(args.env_kwarg)))
        return 0

    from . import distributed
    from .memory import keep_freed_memory

    if not distributed.context_from_env().is_main:  # under torchrun: before anything loads and draws its progress bar
        distributed.quiet_console()
    _no_weight_bars()
    keep_freed_memory()  # this process trains or plays a model until it exits
    sft_meta: dict[str, Any] | None = None
    if args.command == "demo":
        from . import demo

        print(demo.plan(args), flush=True)
        policy_dir, sft_meta = demo.start(args)
        cfg = demo.demo_config(args, policy_dir)
    else:
        cfg = config_from_args(args)
    from .trainer import Trainer

    from .model_files import ModelFileError

    try:
        trainer = Trainer(cfg)
    except ModelFileError as e:  # a bad file of the model directory: one line naming it, no traceback
        print(f"error: {e}", file=sys.stderr)
        return 2
    say = (
        print if trainer.dist.is_main else (lambda *a, **k: None)
    )  # under torchrun every rank runs this; rank 0 prints
    try:
        if args.command == "eval":
            say(_summary_line("held-out", trainer.evaluate()))
            return 0
        if args.command == "sft":
            before = trainer.evaluate()
            say(_summary_line("before SFT", before))
            sft = trainer.sft()
            after = trainer.evaluate()
            say(_summary_line("after SFT", after))
            trainer.logger.log({"iteration": 0, "phase": "sft", **sft})
            path = trainer.save_checkpoint(trainer.out / "checkpoint")
            say(f"checkpoint: {path}  (train from it with --model {path / 'policy'})")
            return 0
        summary = trainer.fit()
        if not trainer.dist.is_main:
            return 0
        if sft_meta is not None:
            from .demo import sft_lines

            print("\n".join(sft_lines(sft_meta)))
        for key, name in (("before_sft", "before SFT"), ("start", "start of RL"), ("end", "end of RL")):
            if key in summary:
                print(_summary_line(name, summary[key]))
        gain = _gain_line(summary)
        if gain:
            print(gain)
        print(f"metrics: {trainer.logger.path}\ncurve:   {summary['plot']}\ncheckpoint: {trainer.out / 'checkpoint'}")
        if "averaged_policy" in summary:
            print(f"averaged policy (what the evaluations played): {summary['averaged_policy']}")
        return 0
    finally:
        trainer.close()


if __name__ == "__main__":
    sys.exit(main())
