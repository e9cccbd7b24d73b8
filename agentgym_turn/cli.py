"""``agentgym-turn``: list, play, check and serve the environments.

    agentgym-turn list
    agentgym-turn play TurnSokoban-v0 --seed 3
    agentgym-turn check TurnSokoban-v0
    agentgym-turn serve retriever --generated --port 8000
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import sys
from typing import Sequence

__all__ = ["main"]

#: ``serve`` targets: module with ``main(argv) -> int`` (it parses its own arguments).
#: Only targets whose module exists are offered.
SERVERS = {
    name: module
    for name, module in {
        "webshop": "agentgym_turn.webshop.server",
        "retriever": "agentgym_turn.searchqa.server",
    }.items()
    if importlib.util.find_spec(module) is not None
}


def _parse_kwargs(pairs: Sequence[str]) -> dict:
    """``["num_products=1000", "observation_mode=text"]`` -> kwargs, numbers parsed."""
    kwargs = {}
    for pair in pairs:
        if "=" not in pair:
            raise SystemExit(f"--kwarg takes NAME=VALUE, got {pair!r}.")
        name, value = pair.split("=", 1)
        for cast in (int, float):
            try:
                kwargs[name] = cast(value)
                break
            except ValueError:
                continue
        else:
            kwargs[name] = {"true": True, "false": False, "none": None}.get(value.lower(), value)
    return kwargs


def _cmd_list(args: argparse.Namespace) -> int:
    import gymnasium as gym

    import agentgym_turn

    ids = agentgym_turn.env_ids()
    if not ids:
        print("No environments are registered yet.")
    for env_id in ids:
        spec = gym.spec(env_id)
        print(f"{env_id:32s} turns={spec.max_episode_steps}  {spec.entry_point}")
    return 0


def _cmd_play(args: argparse.Namespace) -> int:
    import gymnasium as gym

    import agentgym_turn  # noqa: F401

    env = gym.make(args.env_id, **_parse_kwargs(args.kwarg))
    print(f"Playing {args.env_id}. Type your response for each turn.")
    print("Commands: :expert (show the expert's response), :auto (let the expert play this turn), :reset, :quit\n")
    seed = args.seed
    obs, info = env.reset(seed=seed)
    total = 0.0
    print(obs)
    while True:
        try:
            line = input("\n> ")
        except EOFError:
            print()
            return 0
        command = line.strip().lower()
        if command in (":q", ":quit", ":exit"):
            return 0
        if command == ":expert":
            print(env.unwrapped.expert_action())
            continue
        if command == ":reset":
            seed += 1
            obs, info = env.reset(seed=seed)
            total = 0.0
            print(obs)
            continue
        response = env.unwrapped.expert_action() if command == ":auto" else line.replace("\\n", "\n")
        if command == ":auto":
            print(f"(expert) {response}")
        obs, reward, terminated, truncated, info = env.step(response)
        total += reward
        print(f"\n{obs}\n")
        print(f"[reward {reward:+.3f} | return {total:+.3f} | turn {info['turn']} | valid {info['action_is_valid']} | success {info['success']} | score {info['score']:.3f}]")
        if terminated or truncated:
            print("Episode over (" + ("terminated" if terminated else "turn limit") + "). Starting the next one.\n")
            seed += 1
            obs, info = env.reset(seed=seed)
            total = 0.0
            print(obs)


def _cmd_check(args: argparse.Namespace) -> int:
    import agentgym_turn  # noqa: F401
    from agentgym_turn.testing import check_turn_env

    report = check_turn_env(args.env_id, seed=args.seed, episodes=args.episodes, fuzz_actions=args.fuzz_actions, raise_on_problem=False)
    print(report.summary() if not report.ok else f"{args.env_id}: OK ({report.steps_run} fuzz steps, expert {report.expert_successes}/{report.expert_episodes})")
    return 0 if report.ok else 1


def _cmd_serve(args: argparse.Namespace) -> int:
    module = importlib.import_module(SERVERS[args.target])
    return int(module.main(args.server_args) or 0)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="agentgym-turn", description="Text-turn environments for training LLM agents.")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("list", help="list the registered env ids and their turn limits")
    p.set_defaults(func=_cmd_list)

    p = sub.add_parser("play", help="play an env in the terminal")
    p.add_argument("env_id", help="a registered id, e.g. TurnSokoban-v0")
    p.add_argument("--seed", type=int, default=0, help="seed of the first episode (default 0)")
    p.add_argument("--kwarg", action="append", default=[], metavar="NAME=VALUE", help="env argument, repeatable (e.g. --kwarg num_boxes=2)")
    p.set_defaults(func=_cmd_play)

    p = sub.add_parser("check", help="run check_turn_env on a registered id")
    p.add_argument("env_id")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--episodes", type=int, default=5, help="expert episodes that must succeed")
    p.add_argument("--fuzz-actions", type=int, default=64, help="random adversarial responses")
    p.set_defaults(func=_cmd_check)

    p = sub.add_parser("serve", help="start a server (a Search-R1 retriever); `serve TARGET --help` for its options")
    p.add_argument("target", choices=sorted(SERVERS), help="what to serve")
    p.add_argument("server_args", nargs=argparse.REMAINDER, help="the server's own options (see `serve TARGET --help`)")
    p.set_defaults(func=_cmd_serve)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return int(args.func(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
