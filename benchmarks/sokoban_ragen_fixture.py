"""Regenerate ``tests/data/sokoban_ragen.json``: RAGEN's own parsing and prompt code run on our inputs.

    python benchmarks/sokoban_ragen_fixture.py PATH/TO/RAGEN        # a checkout of github.com/RAGEN-AI/RAGEN

RAGEN's modules import torch, verl, transformers and hydra at the top, so this script does not
import them: it reads RAGEN's source files, takes the functions it needs out of them with
``ast`` and runs them unchanged, with small stand-ins for the objects they receive:

* ``ContextManager._parse_response`` (``ragen/llm_agent/ctx_manager.py``): the response parser,
  with the ``SimpleSokoban`` settings of ``config/base.yaml`` (``enable_think``, ``action_sep``,
  ``max_actions_per_turn``);
* ``EnvStateManager._extract_map_valid_actions`` (``ragen/llm_agent/es_manager.py``) with the
  ``action_lookup`` of ``SokobanEnvConfig`` (``ragen/env/sokoban/config.py``), and the condition
  under which ``EnvStateManager.step`` adds ``format_penalty`` (the ``if`` statement that does
  so, evaluated as written);
* ``ContextManager._init_prefix_lookup`` and ``ContextManager.get_lm_inputs``: the messages
  RAGEN sends to the model, for episodes played in our env (``prompt_style="ragen"``), with
  the rewards summed as ``EnvStateManager.step`` sums gym-sokoban's per-move rewards.

The responses are drawn from a fixed seed, so the output is the same on every run. Nothing
of RAGEN's is committed: only what its code returns on our inputs.
"""

from __future__ import annotations

import argparse
import ast
import json
import random
import re
import sys
import textwrap
from dataclasses import asdict
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import numpy as np

try:  # python -m benchmarks.sokoban_ragen_fixture, or imported by the tests
    from benchmarks import common
except ModuleNotFoundError:  # python benchmarks/sokoban_ragen_fixture.py: this folder comes first on the import path
    import common

ROOT = common.ROOT
OUT = ROOT / "tests" / "data" / "sokoban_ragen.json"
SEED = 20251201
N_RESPONSES = 400


class Cfg(dict):
    """A dict with attribute access, standing in for Hydra's DictConfig."""

    def __getattr__(self, name: str) -> Any:
        try:
            value = self[name]
        except KeyError:
            raise AttributeError(name) from None
        return Cfg(value) if isinstance(value, dict) and not isinstance(value, Cfg) else value


def _function(path: Path, cls: str, name: str) -> ast.FunctionDef:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and node.name == cls:
            for item in node.body:
                if isinstance(item, ast.FunctionDef) and item.name == name:
                    return item
    raise SystemExit(f"{path}: no {cls}.{name}; RAGEN's code has changed, update this script.")


def _compile(path: Path, cls: str, name: str, namespace: dict) -> Any:
    src = textwrap.dedent(ast.get_source_segment(path.read_text(encoding="utf-8"), _function(path, cls, name)))
    exec(compile(src, f"{path}:{cls}.{name}", "exec"), namespace)
    return namespace[name]


def _penalty_condition(path: Path) -> Any:
    """The test of the ``if`` in ``EnvStateManager.step`` whose body adds ``format_penalty``."""
    step = _function(path, "EnvStateManager", "step")
    for node in ast.walk(step):
        if isinstance(node, ast.If) and "format_penalty" in ast.unparse(node.body[0]):
            expr = ast.unparse(node.test)
            return expr, compile(expr, f"{path}:EnvStateManager.step", "eval")
    raise SystemExit(f"{path}: the format_penalty condition was not found; update this script.")


def _sokoban_config(ragen: Path) -> Any:
    namespace: dict = {}
    exec(compile((ragen / "ragen/env/sokoban/config.py").read_text(encoding="utf-8"), "config.py", "exec"), namespace)
    return namespace["SokobanEnvConfig"]


# ---------------------------------------------------------------------- responses

MOVES = ["Up", "Down", "Left", "Right"]
NOT_MOVES = ["Jump", "up.", "U p", "Upp", "wait", "1", "Up Left", "→", "Rightt", "left!"]
SEPS = ["||", " || ", "||\n", " | ", ",", "|| ||", " ||| "]
SPACES = ["", " ", "  ", "\n", "\t", "\u00a0", "\u2028", " \n "]
SPECIAL = ["<think>", "</think>", "<answer>", "</answer>", "<|im_start|>", "<|im_end|>"]


def _word(rng: random.Random) -> str:
    if rng.random() < 0.8:
        m = rng.choice(MOVES)
        return rng.choice([m, m.lower(), m.upper(), m.swapcase(), f" {m} "])
    return rng.choice(NOT_MOVES)


def _answer_body(rng: random.Random) -> str:
    k = rng.choice([0, 1, 1, 2, 3, 5, 6, 8])
    sep = rng.choice(SEPS) if rng.random() < 0.3 else " || "
    body = sep.join(_word(rng) for _ in range(k))
    if rng.random() < 0.15:
        body = rng.choice(SPECIAL) + body
    if rng.random() < 0.1:
        body += rng.choice(SPECIAL)
    return rng.choice(SPACES) + body + rng.choice(SPACES)


def _response(rng: random.Random) -> str:
    think_open, think_close = rng.choice(
        [("<think>", "</think>")] * 6 + [("<THINK>", "</THINK>"), ("<think >", "</think>"), ("", ""), ("<think>", "")]
    )
    ans_open, ans_close = rng.choice(
        [("<answer>", "</answer>")] * 6
        + [("<ANSWER>", "</ANSWER>"), ("<answer>", ""), ("", "</answer>"), ("< answer>", "</answer>")]
    )
    thought = rng.choice(
        ["", "I push the box right.", "<answer>Up</answer>", "first Down</think>then", "  \n", "Left || Left"]
    )
    parts = [
        rng.choice(["", "", "Sure. ", "<think>draft</think> "]),
        think_open,
        thought,
        think_close,
        rng.choice(SPACES + ["x", "\n\n", " ok "]),
        ans_open,
        _answer_body(rng),
        ans_close,
    ]
    if rng.random() < 0.2:
        parts.append(
            rng.choice(["<answer>Down</answer>", " trailing", "<think>again</think><answer>Left</answer>", "</answer>"])
        )
    return "".join(parts)


# ---------------------------------------------------------------------- episodes in our env


def _episodes(n: int, rng: random.Random) -> list[dict]:
    """Episodes played in ``TurnSokoban-v0`` (ragen style) by expert and random responses."""
    import gymnasium as gym

    common.import_package(ROOT / "agentgym_turn")  # registers the ids, installed or not
    from agentgym_turn.sokoban.board import apply_move, mask_of
    from agentgym_turn.sokoban.constants import MOVE_BY_NAME
    from agentgym_turn.sokoban.render import grid_rows

    def grid(u) -> str:  # the state text of a ragen-style env: its grid, cells unseparated
        return "\n".join(grid_rows(u.board, mask_of(u.boxes), u.player, u.symbols, "", crop_border=not u.show_border))

    gym_floats = {-1: -0.1, 9: -0.1 + 1, 109: -0.1 + 1 + 10, -11: -0.1 + -1}  # _calc_reward's sums
    episodes = []
    for seed in range(n):
        env = gym.make("TurnSokoban-v0", prompt_style="ragen", terminate_on_deadlock=False)
        u = env.unwrapped
        env.reset(seed=seed)
        turns = []
        done = False
        while not done:
            response = u.expert_action() if rng.random() < 0.5 else _response(rng)
            state = grid(u)
            before = (mask_of(u.boxes), u.player)
            _, _, terminated, truncated, info = env.step(response)
            # The per-move rewards, summed as EnvStateManager.step's _execute_actions does.
            acc: float | int = 0
            boxes, player = before
            for name in info["executed_moves"]:
                res = apply_move(u.board, boxes, player, MOVE_BY_NAME[name.lower()])
                boxes, player = res.boxes, res.player
                acc += gym_floats[res.reward_tenths]
            turns.append({"state": state, "response": response, "reward": acc, "played": len(info["executed_moves"])})
            done = terminated or truncated
        turns.append({"state": grid(u)})
        episodes.append({"seed": seed, "turns": turns})
    return episodes


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("ragen", type=Path, help="path to a checkout of github.com/RAGEN-AI/RAGEN")
    args = parser.parse_args(argv)
    ragen: Path = args.ragen
    ctx_py = ragen / "ragen/llm_agent/ctx_manager.py"
    es_py = ragen / "ragen/llm_agent/es_manager.py"
    import yaml

    base = yaml.safe_load((ragen / "config/base.yaml").read_text(encoding="utf-8"))
    envs = yaml.safe_load((ragen / "config/envs.yaml").read_text(encoding="utf-8"))
    proxy = base["agent_proxy"]
    simple = envs["custom_envs"]["SimpleSokoban"]
    SokobanEnvConfig = _sokoban_config(ragen)
    action_lookup = SokobanEnvConfig().action_lookup

    ns: dict = {
        "re": re,
        "List": List,
        "Dict": Dict,
        "Any": Any,
        "Optional": Optional,
        "Tuple": Tuple,
        "np": np,
        "asdict": asdict,
        "REGISTERED_ENV_CONFIGS": {"sokoban": SokobanEnvConfig},
    }
    parse_response = _compile(ctx_py, "ContextManager", "_parse_response", ns)
    init_prefix = _compile(ctx_py, "ContextManager", "_init_prefix_lookup", ns)
    extract = _compile(es_py, "EnvStateManager", "_extract_map_valid_actions", ns)
    penalty_expr, penalty_code = _penalty_condition(es_py)

    class DataProto:  # stand-ins for what get_lm_inputs builds after the messages
        def __init__(self) -> None:
            self.batch = None
            self.non_tensor_batch = {}
            self.meta_info = {}

    class Ids:
        def cumsum(self, dim: int) -> "Ids":
            return self

        def __sub__(self, other: Any) -> "Ids":
            return self

        def clamp(self, min: int) -> "Ids":  # noqa: A002
            return self

        def __getitem__(self, key: Any) -> "Ids":
            return self

        shape = (1,)

    class Tokenizer:
        def apply_chat_template(self, messages: list, add_generation_prompt: bool, tokenize: bool) -> str:
            return json.dumps(messages)

        def __call__(self, texts: list, **kwargs: Any) -> Any:
            return Cfg(input_ids=Ids(), attention_mask=Ids())

    ns.update(DataProto=DataProto, TensorDict=lambda d, batch_size: d, torch=None)
    get_lm_inputs = _compile(ctx_py, "ContextManager", "get_lm_inputs", ns)

    config = Cfg(
        agent_proxy=Cfg(proxy),
        custom_envs={"SimpleSokoban": Cfg(simple)},
        actor_rollout_ref=Cfg(rollout=Cfg(response_length=base["actor_rollout_ref"]["rollout"]["response_length"])),
        enable_response_mask=True,
    )
    manager = Cfg(
        config=config,
        action_sep=proxy["action_sep"],
        special_token_list=["<think>", "</think>", "<answer>", "</answer>", "<|im_start|>", "<|im_end|>"],
        es_cfg=Cfg(env_configs=Cfg(tags=["SimpleSokoban"], n_groups=[1]), group_size=1),
        tokenizer=Tokenizer(),
        _check_env_installed=lambda env_type: None,
    )
    init_prefix(manager)
    entry = {"env": Cfg(config=Cfg(action_lookup=action_lookup))}

    rng = random.Random(SEED)
    responses = [_response(rng) for _ in range(N_RESPONSES)]
    cases = []
    for response in responses:
        llm_response, actions = parse_response(manager, response)
        valid = extract(None, entry, actions)
        penalized = bool(eval(penalty_code, {}, {"valid_actions": valid, "env_input": {"actions": actions}}))
        cases.append(
            {
                "response": response,
                "llm_response": llm_response,
                "actions": actions,
                "valid_actions": [action_lookup[a] for a in valid],
                "penalized": penalized,
            }
        )

    # Prompts: RAGEN's messages for episodes of our env, turn by turn.
    episodes = _episodes(6, random.Random(SEED + 1))
    max_per_traj = simple["max_actions_per_traj"]
    for ep in episodes:
        used = 0
        history = []
        for k, turn in enumerate(ep["turns"]):
            item = {"state": turn["state"], "actions_left": max_per_traj - used}
            if "response" in turn:
                llm_response, _ = parse_response(manager, turn["response"])
                used += turn["played"]  # status.num_actions += len(executed_actions)
                item.update(llm_response=llm_response, reward=turn["reward"])
            history.append(item)
        messages = []
        for k in range(1, len(history) + 1):
            shown = [dict(h) for h in history[:k]]
            shown[-1] = {"state": shown[-1]["state"], "actions_left": shown[-1]["actions_left"]}
            out = get_lm_inputs(manager, [{"env_id": 0, "group_id": 0, "history": shown}], False)
            msgs = list(out.non_tensor_batch["messages_list"][0])
            messages.append(msgs[-1]["content"])
        ep["user_messages"] = messages
        ep["system_message"] = msgs[0]["content"]
    result = {
        "source": "github.com/RAGEN-AI/RAGEN: ContextManager._parse_response, ContextManager._init_prefix_lookup, "
        "ContextManager.get_lm_inputs, EnvStateManager._extract_map_valid_actions, EnvStateManager.step",
        "penalty_condition": penalty_expr,
        "settings": {
            "enable_think": proxy["enable_think"],
            "action_sep": proxy["action_sep"],
            "max_actions_per_turn": proxy["max_actions_per_turn"],
            "format_penalty": base["es_manager"]["format_penalty"],
            "max_actions_per_traj": max_per_traj,
            "max_tokens": simple["max_tokens"],
        },
        "prefix": manager.prefix_lookup[0],
        "cases": cases,
        "episodes": episodes,
    }
    OUT.write_text(json.dumps(result, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"wrote {OUT.relative_to(ROOT)}: {len(cases)} responses, {len(episodes)} episodes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
