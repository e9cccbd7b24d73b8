"""Does asking pay in the shopping dialog? Expert assistant vs an assistant that never asks.

On the first ``--goals`` test goals (goal indices 0..N-1) of ``TurnWebShopDialog-v0`` (the
assistant against the scripted customer), each policy plays one episode per goal:

* ``expert``: asks for every goal fact it lacks (product, attributes, options, price), then shops
  with TurnWebShop's oracle; with the customer at ``terseness="full"`` and ``"terse"``;
* ``never_asks``: searches the category of the opening request, opens the first result and buys
  it (``silent_assistant_action``); the category word alone often finds nothing;
* ``never_asks/lucky_guess``: a stronger assistant that never asks: it buys a product of the
  request's category drawn at random (seeded by the goal index) with no option chosen, navigating
  to it without error (an upper bound on what the category alone is worth without asking).

Per policy: the success rate (WebShop's ``R == 1``), the mean purchase score, the mean return
(score minus 0.01 per message, with format penalties), the mean messages and turns.

    python benchmarks/webshop_dialog.py --out benchmarks/results/webshop_dialog.json
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import gymnasium as gym
import numpy as np

import agentgym_turn  # noqa: F401 - registers the ids
from agentgym_turn.multiagent.assistant_env import silent_assistant_action

try:  # python -m benchmarks.webshop_dialog, or imported by the tests
    from benchmarks import common
except ModuleNotFoundError:  # python benchmarks/webshop_dialog.py: this folder comes first on the import path
    import common


def _expert(env) -> str:
    return env.unwrapped.expert_action()


_IN_CATEGORY: dict[str, list[int]] = {}


def lucky_guess(env) -> str:
    """Never asks: buys a random product of the request's category (seeded by the goal index)."""
    dialog = env.unwrapped.dialog
    shop = dialog.shop.shop
    category = dialog.facts.category
    if category not in _IN_CATEGORY:
        _IN_CATEGORY[category] = [i for i in range(shop.num_products) if shop.product(i).category.lower() == category]
    candidates = _IN_CATEGORY[category]
    target = shop.product(candidates[int(np.random.default_rng(dialog.goal.index).integers(len(candidates)))])
    info = dialog.infos["assistant"]
    if info["page"] == "search":
        return f"search[{target.title}]"
    if info["page"] == "results":
        name = target.asin.lower()
        return f"click[{name}]" if name in info["shop_actions"] else silent_assistant_action(env)
    return silent_assistant_action(env)


def measure(policy, goals: int, terseness: str) -> dict:
    """Play ``policy`` once on each of the first ``goals`` test goals; summary statistics."""
    env = gym.make("TurnWebShopDialog-v0", goal_split="test", terseness=terseness, max_episode_steps=30)
    rows = []
    for g in range(goals):
        env.reset(seed=g, options={"goal_index": g})
        total, turns, info = 0.0, 0, {}
        while True:
            _, reward, terminated, truncated, info = env.step(policy(env))
            total, turns = total + reward, turns + 1
            if terminated or truncated:
                break
        rows.append((info["success"], info["score"], total, info["messages"], turns))
    success, score, ret, messages, turns = (np.array(c, dtype=float) for c in zip(*rows))
    return {
        "success_rate": round(float(success.mean()), 4),
        "mean_score": round(float(score.mean()), 4),
        "mean_return": round(float(ret.mean()), 4),
        "mean_messages": round(float(messages.mean()), 3),
        "mean_turns": round(float(turns.mean()), 3),
        "max_turns": int(turns.max()),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--goals", type=int, default=300, help="test goals 0..N-1 (default 300)")
    parser.add_argument("--out", type=Path, default=None, help="write the results JSON here")
    args = parser.parse_args()
    results = {
        "benchmark": "webshop_dialog",
        "env_id": "TurnWebShopDialog-v0",
        "goals": args.goals,
        "goal_split": "test",
        "message_cost": 0.01,
        "policies": {
            "expert/full": measure(_expert, args.goals, "full"),
            "expert/terse": measure(_expert, args.goals, "terse"),
            "never_asks/full": measure(silent_assistant_action, args.goals, "full"),
            "never_asks/lucky_guess": measure(lucky_guess, args.goals, "full"),
        },
    }
    print(json.dumps(results, indent=1))
    if args.out:
        common.write_json(args.out, results)


if __name__ == "__main__":
    main()
