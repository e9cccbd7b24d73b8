"""OpenEnv's own client against our served env: does ``GenericEnvClient`` play it, turn for turn?

Run it with the Python of a separate virtual environment that has OpenEnv installed
(``pip install openenv``; OpenEnv is not a dependency of this project), and point it at this
project's Python::

    OPENENV_VENV/bin/python benchmarks/openenv_client.py --agentgym-python .venv/bin/python

It starts ``agentgym-turn serve env ID --port 0 --expert`` (the oracles on: ``info`` is compared whole)
with the project's Python, plays episodes with
OpenEnv's ``GenericEnvClient`` (the expert's actions and a few invalid ones, over ``/ws``), and
compares every observation, reward, ``done`` and ``info`` with the same episodes played in process
by the project's Python. It also runs OpenEnv's runtime validator
(``openenv.cli._validation.validate_running_environment``, what ``openenv validate --url`` runs)
and checks that a full server refuses OpenEnv's client with ``CAPACITY_REACHED``. The result goes to
``benchmarks/results/openenv_client.json``.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from typing import Any

try:  # python -m benchmarks.openenv_client, or imported by the tests
    from benchmarks import common
except ModuleNotFoundError:  # python benchmarks/openenv_client.py: this folder comes first on the import path
    import common

INVALID = ["", "I would rather not.", "<answer>unclosed", "é\x00🙂 <search>"]

# Played in process by the project's Python: the local transcript of each seed, with its actions.
_LOCAL = r"""
import json, sys
import gymnasium as gym, agentgym_turn
env_id, seeds, invalid = sys.argv[1], json.loads(sys.argv[2]), json.loads(sys.argv[3])
env = gym.make(env_id)
episodes = []
for seed in seeds:
    text, info = env.reset(seed=seed)
    turns = [{"action": None, "text": text, "reward": None, "terminated": False, "truncated": False, "info": info}]
    for turn in range(40):
        action = env.unwrapped.expert_action() if turn % 2 else invalid[(turn // 2) % len(invalid)]
        text, reward, terminated, truncated, info = env.step(action)
        turns.append({"action": action, "text": text, "reward": reward, "terminated": terminated, "truncated": truncated, "info": info})
        if terminated or truncated:
            break
    episodes.append({"seed": seed, "turns": turns})
print(json.dumps(episodes))
"""


def start_server(python: str, env_id: str, max_sessions: int) -> tuple[subprocess.Popen, str]:
    """Start ``agentgym-turn serve env`` and return the process and its base URL."""
    proc = subprocess.Popen(
        [
            python,
            "-m",
            "agentgym_turn",
            "serve",
            "env",
            env_id,
            "--port",
            "0",
            "--max-sessions",
            str(max_sessions),
            "--expert",
        ],
        stderr=subprocess.PIPE,
        text=True,
        cwd=common.ROOT,
    )
    assert proc.stderr is not None
    for line in proc.stderr:
        if line.startswith("Serving"):
            return proc, line.split(" at ", 1)[1].split()[0]
    proc.wait(timeout=30)
    raise SystemExit(f"the server did not start (exit {proc.returncode})")


def play_with_openenv(url: str, local: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], Any]:
    """Replay the local episodes' actions through OpenEnv's GenericEnvClient; one row per mismatch."""
    from openenv.core.generic_client import GenericEnvClient

    mismatches: list[dict[str, Any]] = []
    with GenericEnvClient(base_url=url).sync() as client:
        for episode in local:
            for i, turn in enumerate(episode["turns"]):
                if turn["action"] is None:
                    result = client.reset(seed=episode["seed"])
                else:
                    result = client.step({"message": turn["action"]})
                obs = result.observation
                got = {
                    "text": obs.get("text"),
                    "reward": result.reward,
                    "terminated": obs.get("terminated"),
                    "truncated": obs.get("truncated"),
                    "info": obs.get("info"),
                }
                want = {key: turn[key] for key in got}
                if got != want or result.done != (turn["terminated"] or turn["truncated"]):
                    mismatches.append({"seed": episode["seed"], "turn": i, "got": got, "want": want})
        state = client.state()
    return mismatches, state


def capacity_refusal(url: str) -> str:
    """Open one more OpenEnv session than the server allows (it was started with one); return the error."""
    from openenv.core.generic_client import GenericEnvClient

    with GenericEnvClient(base_url=url).sync() as first:
        first.reset(seed=0)
        second = GenericEnvClient(base_url=url).sync()
        try:
            second.reset(seed=1)
            return "no error"
        except Exception as err:  # OpenEnv raises RuntimeError("Server error: ... (code: CAPACITY_REACHED)")
            return f"{type(err).__name__}: {err}"
        finally:
            try:
                second.close()
            except Exception:
                pass


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument(
        "--agentgym-python", required=True, help="the project's Python (its virtual environment's bin/python)"
    )
    p.add_argument("--env-ids", nargs="+", default=["TurnSokoban-v0", "TurnWebShop-v0", "TurnSearchQA-v0"])
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--out", default=str(common.RESULTS / "openenv_client.json"))
    args = p.parse_args(argv)

    import openenv  # noqa: F401  (fails here, early, outside an OpenEnv environment)

    from openenv.cli._validation import validate_running_environment

    report: dict[str, Any] = {
        "openenv": common.installed_version("openenv"),
        "openenv_core": common.installed_version("openenv-core"),
        **common.machine(),
        "envs": {},
    }
    for env_id in args.env_ids:
        local = json.loads(
            subprocess.run(
                [args.agentgym_python, "-c", _LOCAL, env_id, json.dumps(args.seeds), json.dumps(INVALID)],
                capture_output=True,
                text=True,
                check=True,
                cwd=common.ROOT,
            ).stdout
        )
        proc, url = start_server(args.agentgym_python, env_id, max_sessions=4)
        try:
            mismatches, state = play_with_openenv(url, local)
            validation = validate_running_environment(url)
        finally:
            proc.terminate()
            proc.wait(timeout=60)
        turns = sum(len(e["turns"]) for e in local)
        report["envs"][env_id] = {
            "episodes": len(local),
            "turns": turns,
            "mismatches": len(mismatches),
            "first_mismatches": mismatches[:3],
            "final_state_keys": sorted(state),
            "openenv_validate": {
                "passed": validation.get("passed"),
                "criteria": {c["id"]: c["passed"] for c in validation.get("criteria", [])},
            },
        }
        print(
            f"{env_id}: {turns} turns, {len(mismatches)} mismatches; openenv validate passed={validation.get('passed')}",
            flush=True,
        )
    proc, url = start_server(args.agentgym_python, args.env_ids[0], max_sessions=1)
    try:
        report["capacity_refusal"] = capacity_refusal(url)
    finally:
        proc.terminate()
        proc.wait(timeout=60)
    print(f"capacity: {report['capacity_refusal']}")
    common.write_json(args.out, report, ensure_ascii=False)
    print(f"wrote {args.out}")
    return 0 if all(e["mismatches"] == 0 for e in report["envs"].values()) else 1


if __name__ == "__main__":
    sys.exit(main())
