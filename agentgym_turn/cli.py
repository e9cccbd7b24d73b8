"""``agentgym-turn``: list, play, check and serve the environments.

    agentgym-turn list
    agentgym-turn play TurnSokoban-v0 --seed 3
    agentgym-turn check TurnSokoban-v0
    agentgym-turn serve retriever --generated --port 8000
    agentgym-turn serve webshop --port 3000
    agentgym-turn serve env TurnSokoban-v0 --port 8000
    agentgym-turn record TurnSokoban-v0 --episodes 10 --out episodes.jsonl
    agentgym-turn replay episodes.jsonl
    agentgym-turn rescore episodes.jsonl
    agentgym-turn view episodes.jsonl --out episodes.html
    agentgym-turn eval TurnSokoban-v0 --model smollm2-135m-instruct --protocol ragen-sokoban
    agentgym-turn eval TurnWebShop-v0 --endpoint http://127.0.0.1:8000 --sampling sampled

A missing optional extra (``TurnWebShopBrowser-v0`` without Selenium, say) is one line on stderr
naming it, exit status 2, as other user mistakes are.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import os
import sys
from pathlib import Path
from typing import Any, Sequence

from .extras import MissingExtraError
from .core.args import CliError, parse_kwargs
from .registration import all_env_ids, env_needs, resolve_env_id

#: ``serve`` targets: what each serves, and its module with ``main(argv) -> int`` (it parses its own
#: arguments). Only targets whose module exists are offered.
_SERVER_TARGETS = {
    "retriever": ("a Search-R1 /retrieve retriever", "agentgym_turn.searchqa.server"),
    "webshop": ("the WebShop site", "agentgym_turn.webshop.server"),
    "env": ("any env id over OpenEnv's protocol", "agentgym_turn.remote.server"),
}
SERVERS = {
    name: module for name, (_, module) in _SERVER_TARGETS.items() if importlib.util.find_spec(module) is not None
}


def _cmd_list(args: argparse.Namespace) -> int:
    """A table of every id the package registers: turn limit (``-``: none of its own), what it
    needs beyond the base install (``-``: nothing), entry point."""
    import gymnasium as gym

    import agentgym_turn  # noqa: F401  (registers the ids)

    ids = all_env_ids()
    if not ids:
        print("No environments are registered yet.")
        return 0
    rows = [("id", "turns", "needs", "entry point")]
    for env_id in ids:
        spec = gym.spec(env_id)
        turns = str(spec.max_episode_steps) if spec.max_episode_steps else "-"
        rows.append((env_id, turns, env_needs(env_id), str(spec.entry_point)))
    widths = [max(len(row[k]) for row in rows) for k in range(3)]
    for row in rows:
        print("  ".join(cell.ljust(width) for cell, width in zip(row, widths)) + "  " + row[3])
    return 0


PLAY_COMMANDS = {
    ":help": "show these commands (costs no turn)",
    ":expert": "show the response the expert would give now",
    ":auto": "let the expert play this turn",
    ":render": "show the current state",
    ":reset": "start the next episode (seed + 1)",
    ":quit": "leave (also :q, :exit, Ctrl-D)",
}
_QUIT = (":q", ":quit", ":exit")


def _play_help() -> str:
    lines = [f"  {name:8s} {what}" for name, what in PLAY_COMMANDS.items()]
    lines.append("  Anything else is your response for this turn; write \\n for a line break, and start")
    lines.append("  it with '::' to send a response that begins with ':' (one ':' is dropped).")
    return "Commands (never sent to the env):\n" + "\n".join(lines)


def _enable_line_editing() -> None:
    """Arrow keys, Ctrl-R and in-session history for ``input()`` where readline exists."""
    if sys.stdin.isatty():
        try:
            import readline  # noqa: F401  (importing it is what enables editing in input())
        except ImportError:  # Windows without pyreadline: plain input still works
            pass


def _turn_limit(env: Any) -> int | None:
    """The registered (or overridden) ``max_episode_steps`` of a ``gymnasium.make`` env."""
    spec = getattr(env, "spec", None)
    return getattr(spec, "max_episode_steps", None)


def _turn_label(turn: int, limit: int | None) -> str:
    """``"Turn 3/5"``: ``turn`` is 1-based; without a limit just ``"Turn 3"``."""
    return f"Turn {turn}/{limit}" if limit else f"Turn {turn}"


def _cmd_play(args: argparse.Namespace) -> int:
    import gymnasium as gym

    env_id = resolve_env_id(args.env_id)
    kwargs = parse_kwargs(args.kwarg)
    user_kwargs = bool(kwargs)
    kwargs.setdefault("render_mode", "ansi")
    try:
        env = gym.make(env_id, **kwargs)
    except (TypeError, ValueError) as e:
        if not user_kwargs:
            raise
        raise CliError(f"{env_id} refused the --kwarg values: {e}") from e
    limit = _turn_limit(env)
    _enable_line_editing()
    print(f"Playing {env_id} ({limit} turns an episode). Type your response for each turn; :help for commands.\n")
    seed = args.seed
    obs, info = env.reset(seed=seed)
    total = 0.0
    print(obs)
    while True:
        label = _turn_label(int(info["turn"]) + 1, limit)
        try:
            line = input(f"\n{label}> ")
        except EOFError:
            print()
            return 0
        command = line.strip().lower()
        if command.startswith(":") and not line.lstrip().startswith("::"):
            if command in _QUIT:
                return 0
            if command == ":help":
                print(_play_help())
            elif command == ":expert":
                print(env.unwrapped.expert_action())
            elif command == ":render":
                frame = env.render()
                print(
                    frame
                    if isinstance(frame, str)
                    else f"render_mode={env.render_mode!r} does not draw text; play with the default render_mode=ansi."
                )
            elif command == ":reset":
                seed += 1
                obs, info = env.reset(seed=seed)
                total = 0.0
                print(f"New episode (seed {seed}).\n\n{obs}")
            elif command == ":auto":
                response = env.unwrapped.expert_action()
                print(f"(expert) {response}")
            else:
                print(f"Unknown command {line.strip()!r}; nothing was sent. Type :help for the commands.")
            if command != ":auto":
                continue
        else:
            response = line.lstrip()[1:] if line.lstrip().startswith("::") else line
            response = response.replace("\\n", "\n")
        obs, reward, terminated, truncated, info = env.step(response)
        total += reward
        print(f"\n{obs}\n")
        print(
            f"[{_turn_label(int(info['turn']), limit)} | reward {reward:+.3f} | return {total:+.3f} | "
            f"valid {info['action_is_valid']} | success {info['success']} | score {info['score']:.3f}]"
        )
        if terminated or truncated:
            why = "task over" if terminated else f"turn limit of {limit} reached"
            seed += 1
            print(f"Episode over ({why}). Starting the next one (seed {seed}).\n")
            obs, info = env.reset(seed=seed)
            total = 0.0
            print(obs)


def _cmd_check(args: argparse.Namespace) -> int:
    from agentgym_turn.testing import check_turn_env

    env_id = resolve_env_id(args.env_id)
    report = check_turn_env(
        env_id, seed=args.seed, episodes=args.episodes, fuzz_actions=args.fuzz_actions, raise_on_problem=False
    )
    print(
        report.summary()
        if not report.ok
        else f"{env_id}: OK ({report.steps_run} fuzz steps, expert {report.expert_successes}/{report.expert_episodes})"
    )
    return 0 if report.ok else 1


def _cmd_validate(args: argparse.Namespace) -> int:
    import importlib

    from agentgym_turn.testing.learnability import LearnBudget
    from agentgym_turn.testing.validate import validate

    from agentgym_turn.testing.targets import spec_kind

    target = args.target if spec_kind(args.target) != "id" else resolve_env_id(args.target)
    oracle = None
    if args.oracle:
        module, _, attr = args.oracle.partition(":")
        oracle = getattr(importlib.import_module(module), attr)
    report = validate(
        target,
        seed=args.seed,
        tasks=args.tasks,
        margin=args.margin,
        search_episodes=args.search_episodes,
        oracle=oracle,
        checks=args.checks,
        fresh_process=not args.no_fresh_process,
        soak_minutes=args.soak,
        soak_clients=args.soak_clients,
        soak_idle_timeout=args.soak_idle_timeout,
        learn_budget=LearnBudget(
            iterations=args.learn_iterations, start_level=args.learn_start_level, eval_tasks=args.learn_tasks
        )
        if args.learn
        else None,
    )
    js, md = report.write(args.out)
    print(report.to_markdown() + f"\nwrote {js} and {md}")
    return 0 if report.ok else 1


def _record_file(path: str) -> str:
    """``path`` if it is a file; else :class:`CliError` saying how to write one."""
    if not os.path.isfile(path):
        raise CliError(f"no record file {path!r}; write one with `agentgym-turn record ID --episodes N --out {path}`.")
    return path


def _env_kwargs(text: str | None) -> dict:
    """``--env-kwargs``: a JSON object of ``gymnasium.make`` keywords (``{}`` when not given)."""
    import json

    try:
        kwargs = json.loads(text) if text else {}
    except json.JSONDecodeError as e:
        raise CliError(
            f"--env-kwargs takes a JSON object, e.g. '{{\"num_boxes\": 2}}'; {text!r} is not JSON ({e.msg})."
        ) from e
    if not isinstance(kwargs, dict):
        raise CliError(f"--env-kwargs takes a JSON object, e.g. '{{\"num_boxes\": 2}}', got {text!r}.")
    return kwargs


def _try_make(env_id: str, kwargs: dict, *, given: bool) -> None:
    """Make and close the env once, before any file is written: keywords the user ``given`` that the env refuses are
    one line, not a traceback."""
    import gymnasium as gym

    try:
        gym.make(env_id, **kwargs).close()
    except (TypeError, ValueError) as e:
        if not given:
            raise
        raise CliError(f"{env_id} refused the --env-kwargs values: {e}") from e


def _cmd_record(args: argparse.Namespace) -> int:
    from .recording import read_records, record_episodes

    env_id = resolve_env_id(args.env_id)
    if args.episodes < 1:
        raise CliError(f"--episodes must be at least 1, got {args.episodes}.")
    kwargs = _env_kwargs(args.env_kwargs)
    _try_make(env_id, kwargs, given=bool(kwargs))
    turns = record_episodes(
        env_id,
        args.episodes,
        args.out,
        policy=args.policy,
        seed=args.seed,
        env_kwargs=kwargs,
        observations=not args.no_observations,
    )
    records = list(read_records(args.out))
    wins = sum(1 for r in records if r.get("success"))
    print(
        f"wrote {len(records)} episodes of {env_id} ({turns} turns, {wins} successes, {args.policy} policy) to {args.out}"
    )
    return 0


def _cmd_check_records(args: argparse.Namespace) -> int:
    """``replay`` (exit 1 when an episode does not replay exactly) or ``rescore`` (a report, exit 0) a record file."""
    from . import recording

    try:
        report = getattr(recording, args.command)(_record_file(args.file), allow_external=args.allow_external)
    except recording.RecordFormatError as e:
        raise CliError(str(e)) from e
    print(report.summary())
    return 0 if args.command == "rescore" or report.ok else 1


def _cmd_view(args: argparse.Namespace) -> int:
    from .recording import RecordFormatError
    from .view import write_view

    try:
        out = write_view(_record_file(args.file), args.out)
    except RecordFormatError as e:
        raise CliError(str(e)) from e
    print(f"wrote {out}; open it in a browser")
    return 0


def _eval_player(args: argparse.Namespace) -> Any:
    """The player of ``eval``: a local model (the ``train`` extra; torch loads only here) or an endpoint."""
    from .evaluation import EndpointPlayer

    if args.endpoint:
        return EndpointPlayer(
            args.endpoint,
            model=args.model_name,
            api_key_env=args.api_key_env,
            concurrency=args.concurrency,
            timeout_s=args.timeout_s,
            retries=args.retries,
        )
    from .extras import require

    require("train", "agentgym-turn eval --model")
    from reference_trainer.model_files import ModelFileError
    from reference_trainer.players import LocalPlayer

    try:
        return LocalPlayer(args.model, device=args.device, dtype=args.dtype, seed=args.seed)
    except (FileNotFoundError, ModelFileError) as e:
        raise CliError(str(e)) from e


def _cmd_eval(args: argparse.Namespace) -> int:
    import json

    from .evaluation import EvalSettingsError, build_card, card_markdown, evaluate, protocol_for

    if args.card:
        card = build_card(args.card)
        (Path(args.card) / "card.json").write_text(json.dumps(card, indent=1) + "\n", encoding="utf-8")
        (Path(args.card) / "card.md").write_text(card_markdown(card), encoding="utf-8")
        print(card_markdown(card))
        return 0
    if not args.env_id:
        raise CliError("name an env id (agentgym-turn list shows them), or --card DIR to rebuild a card.")
    if bool(args.model) == bool(args.endpoint):
        raise CliError(
            "give exactly one of --model NAME|DIR|GGUF (a local model) or --endpoint URL (an OpenAI-compatible server)."
        )
    env_id = resolve_env_id(args.env_id)
    kwargs = _env_kwargs(args.env_kwargs)
    try:
        protocol = protocol_for(
            args.protocol, env_id, episodes=args.episodes, env_kwargs=kwargs, max_new_tokens=args.max_new_tokens
        )
    except ValueError as e:
        raise CliError(str(e)) from e
    _try_make(env_id, protocol.make_kwargs(), given=bool(kwargs))
    out = args.out or os.path.join("runs", "eval", f"{env_id}-{protocol.name}-{args.sampling}")
    player = _eval_player(args)
    try:
        card = evaluate(
            player,
            protocol,
            out,
            sampling=args.sampling,
            batch_size=args.batch_size,
            resume=args.resume,
            floors=not args.no_floors,
            progress=not args.quiet,
        )
    except EvalSettingsError as e:
        raise CliError(str(e)) from e
    finally:
        close = getattr(player, "close", None)
        if callable(close):
            close()
    print(card_markdown(card))
    print(f"wrote {out}/records.jsonl, card.json and card.md")
    return 0


def _cmd_serve(args: argparse.Namespace) -> int:
    module = importlib.import_module(SERVERS[args.target])
    return int(module.main(args.server_args) or 0)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="agentgym-turn", description="Text-turn environments for training LLM agents."
    )
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser(
        "list", help="list every registered env id: its turn limit and what it needs beyond the base install"
    )
    p.set_defaults(func=_cmd_list)

    p = sub.add_parser("play", help="play an env in the terminal")
    p.add_argument("env_id", help="a registered id, e.g. TurnSokoban-v0")
    p.add_argument("--seed", type=int, default=0, help="seed of the first episode (default 0)")
    p.add_argument(
        "--kwarg",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="env argument, repeatable (e.g. --kwarg num_boxes=2)",
    )
    p.set_defaults(func=_cmd_play)

    p = sub.add_parser("check", help="run check_turn_env on a registered id")
    p.add_argument("env_id")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--episodes", type=int, default=5, help="expert episodes that must succeed")
    p.add_argument("--fuzz-actions", type=int, default=64, help="random adversarial responses")
    p.set_defaults(func=_cmd_check)

    from agentgym_turn.testing.learnability import LearnBudget
    from agentgym_turn.testing.validate import CHECKS, OPTIONAL_CHECKS

    p = sub.add_parser(
        "validate",
        help="certify an env: contract, determinism, oracle, floors and a search for reward without "
        "success; writes validation.json and validation.md (see docs/validation.md)",
    )
    p.add_argument(
        "target", help="a registered id, module:factory, or the URL of a served env (agentgym-turn serve env)"
    )
    p.add_argument("--seed", type=int, default=0, help="first task seed")
    p.add_argument("--tasks", type=int, default=8, help="tasks the oracle and each trivial policy play")
    p.add_argument(
        "--margin", type=float, default=0.1, help="share of the oracle's return trivial policies must stay below"
    )
    p.add_argument("--search-episodes", type=int, default=200, help="episodes of the search for reward without success")
    p.add_argument("--checks", nargs="+", default=list(CHECKS), choices=(*CHECKS, *OPTIONAL_CHECKS))
    p.add_argument(
        "--oracle", metavar="MODULE:FUNCTION", help="oracle(env) -> response, instead of the env's expert_action()"
    )
    p.add_argument("--no-fresh-process", action="store_true", help="check determinism in this process only")
    p.add_argument(
        "--soak",
        type=float,
        default=0.0,
        metavar="MINUTES",
        help="also churn the env served (an id: started here; a URL: that loopback server) for MINUTES",
    )
    p.add_argument("--soak-clients", type=int, default=4, help="client threads of the soak")
    p.add_argument("--soak-idle-timeout", type=float, default=4.0, help="the served env's idle timeout in seconds")
    p.add_argument(
        "--learn",
        action="store_true",
        help="also run the learnability hill-climb: the tiny model from a short SFT start, then Turn-PPO "
        "(minutes; needs the train extra)",
    )
    p.add_argument(
        "--learn-iterations",
        type=int,
        default=None,
        help="RL iterations of --learn (default: the env's recipe, else 50)",
    )
    p.add_argument(
        "--learn-start-level",
        type=float,
        default=LearnBudget.start_level,
        help="--learn's SFT stops once sampled play on training tasks reaches this much of the metric",
    )
    p.add_argument(
        "--learn-tasks", type=int, default=None, help="held-out tasks of --learn (default: the recipe's, else 128)"
    )
    p.add_argument("--out", default="validation", help="folder for validation.json and validation.md")
    p.set_defaults(func=_cmd_validate)

    p = sub.add_parser(
        "record",
        help="play episodes with the expert or a random policy and write them as JSON lines (see docs/recording.md)",
    )
    p.add_argument("env_id", help="a registered id, e.g. TurnSokoban-v0")
    p.add_argument("--episodes", type=int, required=True, help="how many episodes to record (seeds SEED, SEED+1, ...)")
    p.add_argument("--out", required=True, metavar="FILE", help="the JSONL file to write (replaced if it exists)")
    p.add_argument(
        "--policy",
        choices=("expert", "random", "uninformed"),
        default="expert",
        help="expert: the env's expert_action(); random: available actions, expert turns and garbage; uninformed: "
        "random without the expert's turns (default expert)",
    )
    p.add_argument("--seed", type=int, default=0, help="seed of the first episode and of the random policy (default 0)")
    p.add_argument(
        "--env-kwargs",
        metavar="JSON",
        default=None,
        help="gymnasium.make keywords as a JSON object, e.g. '{\"num_boxes\": 2}'",
    )
    p.add_argument(
        "--no-observations",
        action="store_true",
        help="keep only the observations' hashes (smaller files; the viewer shows no text)",
    )
    p.set_defaults(func=_cmd_record)

    external = (
        "let records whose env arguments name files or servers (a data path, a retriever or env server URL) "
        "read or call them; only for files you trust"
    )
    p = sub.add_parser(
        "replay", help="play a record file's actions again and report each episode's first difference (exit 1 if any)"
    )
    p.add_argument("file", help="a JSONL file written by `agentgym-turn record` or RecordEpisode")
    p.add_argument("--allow-external", action="store_true", help=external)
    p.set_defaults(func=_cmd_check_records)

    p = sub.add_parser(
        "rescore", help="recompute a record file's rewards with today's code and print the turns that changed"
    )
    p.add_argument("file", help="a JSONL file written by `agentgym-turn record` or RecordEpisode")
    p.add_argument("--allow-external", action="store_true", help=external)
    p.set_defaults(func=_cmd_check_records)

    p = sub.add_parser("view", help="write a record file as one static HTML page to read in a browser")
    p.add_argument("file", help="a JSONL file written by `agentgym-turn record` or RecordEpisode")
    p.add_argument("--out", required=True, metavar="PAGE.html", help="the HTML file to write")
    p.set_defaults(func=_cmd_view)

    p = sub.add_parser(
        "eval",
        help="score a model (local or an OpenAI-compatible endpoint) on an id's fixed test tasks under a "
        "protocol; writes replayable records and a metric card (docs/eval.md)",
        description="Score a model on fixed, content-disjoint test tasks. Writes OUT/records.jsonl (replay them with "
        "`agentgym-turn replay`), the expert and random floors on the same tasks, and OUT/card.json + card.md.",
    )
    p.add_argument("env_id", nargs="?", help="a registered id, e.g. TurnSokoban-v0")
    who = p.add_mutually_exclusive_group()
    who.add_argument(
        "--model",
        metavar="NAME|DIR|GGUF",
        help="a local model: smollm2-135m-instruct, a .gguf file or a Hugging Face checkpoint directory",
    )
    who.add_argument(
        "--endpoint",
        metavar="URL",
        help="an OpenAI-compatible server (vLLM, SGLang, llama.cpp), e.g. http://127.0.0.1:8000",
    )
    from .evaluation.protocols import SAMPLINGS, protocol_names

    p.add_argument(
        "--protocol", default="default", choices=protocol_names(), help="the evaluation protocol (default: default)"
    )
    p.add_argument(
        "--sampling",
        default="greedy",
        choices=SAMPLINGS,
        help="greedy, or the protocol's temperature and top-p (default greedy)",
    )
    p.add_argument(
        "--episodes",
        type=int,
        default=None,
        metavar="N",
        help="test tasks (default: the protocol's; fewer is a smaller, other card)",
    )
    p.add_argument(
        "--max-new-tokens",
        type=int,
        default=None,
        metavar="N",
        help="longest response a turn (default: the protocol's)",
    )
    p.add_argument(
        "--env-kwargs",
        metavar="JSON",
        default=None,
        help='gymnasium.make keywords over the protocol\'s, e.g. \'{"data_path": "data"}\'',
    )
    p.add_argument(
        "--out", metavar="DIR", default=None, help="output directory (default runs/eval/ID-PROTOCOL-SAMPLING)"
    )
    p.add_argument(
        "--resume",
        action="store_true",
        help="keep the finished episodes in --out and play the rest (infra errors again)",
    )
    p.add_argument(
        "--batch-size",
        type=int,
        default=16,
        metavar="N",
        help="episodes played together, one batched request per turn (default 16)",
    )
    p.add_argument("--no-floors", action="store_true", help="skip the expert and random floors on the same tasks")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.add_argument("--card", metavar="DIR", default=None, help="only rebuild DIR's card from its record files")
    local = p.add_argument_group("local model (--model; the train extra)")
    local.add_argument("--device", default="cpu", help="cpu, cuda, ... (default cpu)")
    local.add_argument(
        "--dtype",
        default="float32",
        choices=("float32", "bfloat16", "float16", "auto"),
        help="compute dtype (default float32)",
    )
    local.add_argument("--seed", type=int, default=0, help="seed of the sampling generator (default 0)")
    remote = p.add_argument_group("endpoint (--endpoint)")
    remote.add_argument("--model-name", default="default", help='the request\'s "model" field (default: default)')
    remote.add_argument(
        "--api-key-env",
        metavar="VAR",
        default=None,
        help="environment variable holding the API key (sent as a bearer token)",
    )
    remote.add_argument("--concurrency", type=int, default=4, metavar="N", help="requests in flight (default 4)")
    remote.add_argument(
        "--timeout-s", type=float, default=120.0, metavar="S", help="seconds one request may take (default 120)"
    )
    remote.add_argument(
        "--retries",
        type=int,
        default=3,
        metavar="N",
        help="further tries of a failed request before the episode "
        "ends as infra_error (backoff 1, 2, 4, ... s; default 3)",
    )
    p.set_defaults(func=_cmd_eval)

    offered = [(name, _SERVER_TARGETS[name][0]) for name in SERVERS]
    p = sub.add_parser(
        "serve",
        help="start a server: "
        + "; ".join(f"{name}: {what}" for name, what in offered)
        + ". `serve TARGET --help` for its options",
    )
    p.add_argument(
        "target",
        choices=sorted(SERVERS),
        help="what to serve: " + ", ".join(f"{name} ({what})" for name, what in offered),
    )
    p.add_argument("server_args", nargs=argparse.REMAINDER, help="the server's own options (see `serve TARGET --help`)")
    p.set_defaults(func=_cmd_serve)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; user mistakes print one line on stderr and return 2."""
    args = build_parser().parse_args(argv)
    try:
        status = int(args.func(args) or 0)
        sys.stdout.flush()  # a closed pipe must surface here, inside the handler, not at exit
        return status
    except (CliError, MissingExtraError) as e:
        print(f"agentgym-turn {args.command}: {e}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        # `agentgym-turn list | head`: the reader left; stop quietly. Point stdout at devnull so
        # the interpreter's final flush does not raise again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except KeyboardInterrupt:
        print(file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
