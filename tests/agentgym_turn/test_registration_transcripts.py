"""Fixed-seed transcripts of every registered env, replayed and compared with a committed fixture.

The fixture (``tests/data/transcripts.json``) pins observations, rewards, ``terminated``,
``truncated`` and ``info`` of several seeded episodes per id, with expert turns mixed with invalid
and random turns, so a refactoring that changes any behaviour fails here. After an intended change
of behaviour, regenerate it with ``python tests/agentgym_turn/test_registration_transcripts.py --regenerate`` and say why in
the commit; a newly registered id is recorded with ``--add-missing``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

import agentgym_turn

if __name__ == "__main__":  # run as a script: ``support`` lives in tests/
    sys.path.insert(0, str(Path(__file__).absolute().parents[1]))
from support.paths import DATA  # noqa: E402

FIXTURE = DATA / "transcripts.json"
IDS = agentgym_turn.env_ids()
SEEDS = (0, 1, 7)
#: Non-default settings worth pinning too: ``(env id, gymnasium.make kwargs)``; the shipped level
#: file is named relative to the package so the fixture holds no machine path.
VARIANTS: tuple[tuple[str, dict[str, Any]], ...] = (
    ("TurnSokoban-v0", {"prompt_style": "ragen"}),
    ("TurnSokoban-v0", {"prompt_style": "compact", "show_border": False, "levels": "builtin:handmade.txt"}),
    ("TurnWebShop-v0", {"observation_mode": "text_rich", "num_prev_actions": 2}),
    ("TurnSearchQA-v0", {"protocol": "strict"}),
)
#: Responses that are invalid in every env (wrong tags, empty, non-ASCII noise, a non-string).
INVALID = ("", "no tags at all", "<answer></answer>", "click[", "\u00e9\u2028\U0001f600 <search", 12345)
#: Responses that are valid in some env and wrong or invalid in the others.
RANDOM = (
    "<answer>Up || Left</answer>",
    "<answer>Down</answer>",
    "<think>try</think><answer>Right || Right || Up || Down || Left || Up</answer>",
    "search[red cotton shirt]",
    "click[back to search]",
    "click[next >]",
    "click[buy now]",
    "<search>capital city</search>",
    "<answer>A</answer>",
    "<answer>unknown</answer>",
)


def _plain(value: Any) -> Any:
    """``value`` as JSON data: numpy scalars and arrays, tuples and sets become Python lists and numbers."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in sorted(value.items(), key=lambda kv: str(kv[0]))}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, (set, frozenset)):
        return sorted(_plain(v) for v in value)
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    return value


def _make(env_id: str, kwargs: dict[str, Any]) -> gym.Env:
    kwargs = dict(kwargs)
    if str(kwargs.get("levels", "")).startswith("builtin:"):
        from agentgym_turn.sokoban import builtin_levels_path

        kwargs["levels"] = str(builtin_levels_path() / kwargs["levels"].removeprefix("builtin:"))
    return gym.make(env_id, **kwargs)


def record_episode(env_id: str, seed: int, kwargs: dict[str, Any] | None = None) -> dict[str, Any]:
    """One episode of ``env_id`` made with ``kwargs`` and reset with ``seed``: each turn's response,
    then what the env returned."""
    kwargs = dict(kwargs or {})
    env = _make(env_id, kwargs)
    choice = np.random.default_rng(1000 + seed)
    observation, info = env.reset(seed=seed)
    turns: list[dict[str, Any]] = []
    done = False
    # One step after the episode ended pins the "episode is over" turn too.
    while len(turns) < 40:
        draw = choice.random()
        if draw < 0.6:
            response: Any = env.unwrapped.expert_action()
        elif draw < 0.8:
            response = INVALID[int(choice.integers(len(INVALID)))]
        else:
            response = RANDOM[int(choice.integers(len(RANDOM)))]
        obs, reward, terminated, truncated, step_info = env.step(response)
        turns.append(
            {
                "response": response,
                "observation": obs,
                "reward": float(reward),
                "terminated": bool(terminated),
                "truncated": bool(truncated),
                "info": _plain(step_info),
            }
        )
        if done:
            break
        done = terminated or truncated
    env.close()
    return {
        "env_id": env_id,
        "kwargs": kwargs,
        "seed": seed,
        "observation": observation,
        "info": _plain(info),
        "turns": turns,
    }


def record_all() -> list[dict[str, Any]]:
    cases = [(env_id, {}) for env_id in IDS] + list(VARIANTS)
    return [record_episode(env_id, seed, kwargs) for env_id, kwargs in cases for seed in SEEDS]


def _dump(episodes: list[dict[str, Any]]) -> str:
    return json.dumps(episodes, ensure_ascii=False, separators=(",", ":"), sort_keys=True) + "\n"


def _fixture() -> list[dict[str, Any]]:
    return json.loads(FIXTURE.read_text(encoding="utf-8"))


def test_fixture__covers_every_registered_id_with_several_seeds():
    recorded = {(e["env_id"], json.dumps(e["kwargs"], sort_keys=True), e["seed"]) for e in _fixture()}
    cases = [(env_id, {}) for env_id in IDS] + list(VARIANTS)
    assert recorded == {(env_id, json.dumps(kw, sort_keys=True), seed) for env_id, kw in cases for seed in SEEDS}
    for episode in _fixture():
        kinds = {type(t["response"]).__name__ for t in episode["turns"]}
        assert episode["turns"], episode["env_id"]
        assert "str" in kinds


@pytest.mark.parametrize("env_id", IDS)
def test_transcript__replays_byte_for_byte(env_id):
    for expected in (e for e in _fixture() if e["env_id"] == env_id):
        case = (env_id, expected["kwargs"], expected["seed"])
        actual = json.loads(_dump([record_episode(env_id, expected["seed"], expected["kwargs"])]))[0]
        assert actual["observation"] == expected["observation"], case
        assert actual["info"] == expected["info"], case
        for i, (got, want) in enumerate(zip(actual["turns"], expected["turns"])):
            assert got == want, f"{case} turn {i + 1} differs"
        assert len(actual["turns"]) == len(expected["turns"]), case
        assert _dump([actual]) == _dump([expected])


if __name__ == "__main__":
    if sys.argv[1:] == ["--regenerate"]:  # after an intended change of behaviour
        FIXTURE.write_text(_dump(record_all()), encoding="utf-8")
    elif sys.argv[1:] == ["--add-missing"]:  # a newly registered id: record it, keep every other episode as it is
        episodes = _fixture()
        have = {(e["env_id"], json.dumps(e["kwargs"], sort_keys=True), e["seed"]) for e in episodes}
        cases = [(env_id, {}) for env_id in IDS] + list(VARIANTS)
        episodes += [
            record_episode(env_id, seed, kw)
            for env_id, kw in cases
            for seed in SEEDS
            if (env_id, json.dumps(kw, sort_keys=True), seed) not in have
        ]
        FIXTURE.write_text(_dump(episodes), encoding="utf-8")
    else:
        sys.exit(
            "usage: python tests/agentgym_turn/test_registration_transcripts.py --regenerate | --add-missing   (rewrites tests/data/transcripts.json)"
        )
    print(f"wrote {FIXTURE.name}: {FIXTURE.stat().st_size:,} bytes")
