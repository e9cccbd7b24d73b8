"""TurnSokoban vs gym-sokoban 0.0.6 (and RAGEN's text step), measured side by side in one run.

    .venv/bin/python benchmarks/sokoban.py            # about 12 minutes, most of it gym-sokoban 10x10
    .venv/bin/python benchmarks/sokoban.py --quick    # about 4 minutes: fewer samples, a 60 s peer budget
    .venv/bin/python benchmarks/sokoban.py --no-solver    # about 9 minutes: all but the solver entry (kept from the last run)
    .venv/bin/python benchmarks/sokoban.py --solver-only  # about 2 minutes: the solver measurements below
    .venv/bin/python benchmarks/sokoban.py --markdown     # the docs tables of the saved results

gym-sokoban 0.0.6 needs ``gym==0.26`` and ``numpy<2``, which conflict with this project's
environment, so the script creates (once, cached) an isolated virtual environment in
``benchmarks/.peer-venv`` and runs the peer there, in a subprocess kept alive for the whole run
and driven over a pipe. The two sides alternate in rounds (a batch of the peer's samples, then
a batch of ours, the order swapped every other round), so both halves of a round see the same
machine load; every ratio is the median of the per-round ratios, reported with their min and
max, a distribution-free 95% interval for that median and the per-round numbers (``"rounds"``),
plus the pooled ratio of all samples.

What is measured:

* **Level generation** for 6x6/1 box, 8x8/2 boxes, 10x10/4 boxes. Ours: ``generate_level``
  with the registered variants' settings (every level's plan is replayed to the solved
  state outside the timed region; the certified fraction is reported). gym-sokoban:
  ``room_utils.generate_room`` as ``SokobanEnv.reset`` calls it, retried on its
  ``RuntimeError``/``RuntimeWarning`` like ``reset`` does, seeded through the global
  ``random``/``numpy.random`` (the only seeding it has). Its 10x10 levels take seconds to
  minutes, so its sample count is bounded by a time budget and each sample by a cap; a
  capped sample counts at the cap (so the median is, if anything, flattering to it); there a
  round is one peer sample and a batch of ours. A round's ratio is the peer's median over its
  batch divided by ours (certified).
* **Steps.** gym-sokoban's ``SokobanEnv.step`` (it renders an RGB frame every step), its
  game logic alone (``_push``/``_calc_reward``/``_check_if_done``), and RAGEN's text step
  reproduced faithfully (RAGEN is not on PyPI): ``SokobanEnv.step`` as RAGEN calls it
  (rendering and discarding the RGB frame), then RAGEN's grid-to-text with its symbols,
  the effectiveness check and the info dict; one move per step. Ours:
  ``gymnasium.make(id).step(response)`` (wrappers included), one response per turn, with
  one move or ``max_actions_per_turn`` moves, in both prompt styles. Resets are not timed; every
  timed batch, on either side, follows ``STEP_WARMUP`` untimed steps of the same case.
  A round's ratio is our rate in that round over RAGEN's text step (6x6) in that round.
* **Level quality**: the peer's levels are checked by our solver (solvable? shortest plan?).
* **Solver** (also alone with ``--solver-only``, stored under ``"solver"``): how many of the
  1,000 ``TurnSokoban-10x10-v0`` levels of seeds 0-999 are certified optimal, the push states
  expanded per level, the time to make an env on a 10-box user level for two budgets, and
  the CPU time of one step on 65,536-character worst-case responses.

Results go to ``benchmarks/results/sokoban.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

try:  # python -m benchmarks.sokoban, or imported by the tests
    from benchmarks import common
except ModuleNotFoundError:  # python benchmarks/sokoban.py: this folder comes first on the import path
    import common

RESULTS = common.RESULTS / "sokoban.json"
PEER_VENV = common.BENCHMARKS / ".peer-venv"
#: Untimed steps before each timed batch of steps, on both sides: the first case timed after the other side's
#: batch otherwise pays for the cold caches alone.
STEP_WARMUP = 50
PEER_PACKAGES = ["gym==0.26.2", "gym-sokoban==0.0.6", "numpy<2"]
VARIANTS = {
    # id: (dim, boxes)
    "TurnSokoban-v0": ((6, 6), 1),
    "TurnSokoban-8x8-v0": ((8, 8), 2),
    "TurnSokoban-10x10-v0": ((10, 10), 4),
}
PEER_NAMES = {"6x6/1": "TurnSokoban-v0", "8x8/2": "TurnSokoban-8x8-v0", "10x10/4": "TurnSokoban-10x10-v0"}

# The peer's side: a loop that answers one JSON command per stdin line with one JSON line.
PEER_SCRIPT = r"""
import json, random, signal, sys, time, warnings
warnings.filterwarnings("ignore")
import numpy as np
from gym_sokoban.envs.room_utils import generate_room
from gym_sokoban.envs.sokoban_env import SokobanEnv


class Capped(Exception):
    pass


def _alarm(*_):
    raise Capped()


signal.signal(signal.SIGALRM, _alarm)


def one_level(dim, boxes, seed, cap_s):
    # SokobanEnv.reset: generate_room, retried on RuntimeError/RuntimeWarning.
    random.seed(seed)
    np.random.seed(seed)
    steps = int(1.7 * (dim[0] + dim[1]))
    t = time.perf_counter()
    calls = 0
    signal.setitimer(signal.ITIMER_REAL, cap_s)
    try:
        while True:
            calls += 1
            try:
                fixed, state, _ = generate_room(dim=tuple(dim), num_steps=steps, num_boxes=boxes)
                break
            except (RuntimeError, RuntimeWarning):
                continue
    except Capped:
        return cap_s, calls, None
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
    return time.perf_counter() - t, calls, [np.asarray(fixed).astype(int).tolist(), np.asarray(state).astype(int).tolist()]


GRID_LOOKUP = {0: " # ", 1: " _ ", 2: " O ", 3: " √ ", 4: " X ", 5: " P ", 6: " S "}  # RAGEN's config


def ragen_text_step(env, action):
    # ragen/env/sokoban/env.py SokobanEnv.step with the default config (no shaping).
    previous_pos = env.player_position
    _, reward, done, _ = SokobanEnv.step(env, action)  # renders an RGB frame (discarded)
    success = env.boxes_on_target == env.num_boxes
    room = np.where((env.room_state == 5) & (env.room_fixed == 2), 6, env.room_state)
    obs = "\n".join("".join(GRID_LOOKUP.get(cell, "?") for cell in row) for row in room.tolist())
    effective = not np.array_equal(previous_pos, env.player_position)
    info = {"action_is_effective": effective, "action_is_valid": True, "success": success}
    return obs, reward, done, info


def logic_step(env, action):
    env.num_env_steps += 1
    env._push(action)
    env._calc_reward()
    return env._check_if_done()


first_level = {}
envs = {}


def step_env(name, dim, boxes):
    # One level of the generation rounds, installed as SokobanEnv.reset would (a 10x10 reset
    # costs seconds); when an episode ends it is restored, so no reset is timed or paid.
    if name not in envs:
        level = first_level.get(name)
        env = SokobanEnv(dim_room=tuple(dim), num_boxes=boxes, max_steps=10**9, reset=level is None)
        if level is not None:
            env.room_fixed = np.array(level[0])
            env.room_state = np.array(level[1])
        envs[name] = (env, env.room_state.copy(), np.argwhere(env.room_state == 5)[0])
    return envs[name]


def steps(name, dim, boxes, n, seed, warmup):
    env, start_state, start_player = step_env(name, dim, boxes)

    def restore():
        env.room_state = start_state.copy()
        env.player_position = start_player.copy()
        env.num_env_steps, env.reward_last, env.boxes_on_target = 0, 0, 0

    acts = np.random.default_rng(seed).integers(1, 5, size=n).tolist()  # RAGEN's actions 1-4
    result = {}
    for label, fn in (
        ("gym_sokoban_step", lambda a: SokobanEnv.step(env, a)[2]),
        ("ragen_text_step", lambda a: ragen_text_step(env, a)[2]),
        ("game_logic_only", lambda a: logic_step(env, a)),
    ):
        seq = acts if label != "game_logic_only" else acts * 20
        restore()
        for a in acts[:warmup]:  # untimed, as before each of our cases
            if fn(a):
                restore()
        restore()
        spent = 0.0
        for a in seq:
            t = time.perf_counter()
            done = fn(a)
            spent += time.perf_counter() - t
            if done:
                restore()
        result[label] = {"steps": len(seq), "seconds": spent}
    return result


print(json.dumps({"ready": True}), flush=True)
for line in sys.stdin:
    cmd = json.loads(line)
    if cmd["op"] == "generate":
        times, calls, levels = [], [], []
        for seed in cmd["seeds"]:
            dt, c, level = one_level(cmd["dim"], cmd["boxes"], seed, cmd["cap_s"])
            times.append(dt)
            calls.append(c)
            levels.append(level)
            if level is not None:
                first_level.setdefault(cmd["name"], level)
        print(json.dumps({"times_s": times, "generate_room_calls": calls, "levels": levels}), flush=True)
    elif cmd["op"] == "steps":
        print(json.dumps(steps(cmd["name"], cmd["dim"], cmd["boxes"], cmd["n"], cmd["seed"], cmd["warmup"])), flush=True)
"""


class Peer:
    """gym-sokoban in its own venv, one process for the whole run, driven one command per line."""

    def __init__(self, python: Path):
        self._stderr = tempfile.TemporaryFile(mode="w+")
        self.proc = subprocess.Popen(
            [str(python), "-c", PEER_SCRIPT],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            text=True,
        )
        self._reply()

    def _reply(self) -> dict:
        for line in self.proc.stdout:
            if line.startswith("{"):
                return json.loads(line)
        self._stderr.seek(0)
        raise RuntimeError(
            f"gym-sokoban's process ended (exit code {self.proc.wait()}):\n{self._stderr.read()[-4000:]}"
        )

    def ask(self, **cmd) -> dict:
        self.proc.stdin.write(json.dumps(cmd) + "\n")
        self.proc.stdin.flush()
        return self._reply()

    def close(self) -> None:
        try:
            self.proc.stdin.close()
        except OSError:  # it already ended
            pass
        self.proc.wait(timeout=60)
        self._stderr.close()


def ensure_peer_venv() -> Path:
    """Create ``benchmarks/.peer-venv`` with gym-sokoban 0.0.6 once; return its python."""
    python = PEER_VENV / "bin" / "python"
    stamp = PEER_VENV / ".installed"
    wanted = " ".join(PEER_PACKAGES)
    if python.exists() and stamp.exists() and stamp.read_text() == wanted:
        return python
    print(f"creating {PEER_VENV} with {wanted} ...", flush=True)
    subprocess.run([sys.executable, "-m", "venv", "--clear", str(PEER_VENV)], check=True)
    subprocess.run([str(python), "-m", "pip", "install", "--quiet", *PEER_PACKAGES], check=True)
    stamp.write_text(wanted)
    return python


def _stats(times_s: list[float]) -> dict:
    a = np.asarray(times_s, dtype=float)
    return {
        "n": int(a.size),
        "median_ms": float(np.median(a) * 1e3),
        "p90_ms": float(np.percentile(a, 90) * 1e3),
        "mean_ms": float(a.mean() * 1e3),
        "max_ms": float(a.max() * 1e3),
        "levels_per_s": float(a.size / a.sum()),
    }


def peer_level_text(fixed: list[list[int]], state: list[list[int]]) -> str:
    """gym-sokoban's (room_fixed, room_state) as Boxoban text."""
    rows = []
    for frow, srow in zip(fixed, state):
        line = []
        for f, s in zip(frow, srow):
            target = f == 2
            if f == 0:
                line.append("#")
            elif s in (3, 4):
                line.append("*" if target else "$")
            elif s == 5:
                line.append("+" if target else "@")
            else:
                line.append("." if target else " ")
        rows.append("".join(line))
    return "\n".join(rows)


def check_peer_levels(levels: list, budget: int) -> dict:
    """Solve the peer's levels with our solver: solvable, shortest plans, trivial ones."""
    from agentgym_turn.sokoban import board_for, parse_level, solve
    from agentgym_turn.sokoban.board import mask_of

    optimal, unsolvable, unknown, bad = [], 0, 0, 0
    for fixed, state in levels:
        try:
            level = parse_level(peer_level_text(fixed, state))
        except ValueError:
            bad += 1
            continue
        r = solve(board_for(level), mask_of(level.boxes), level.player, max_expansions=budget)
        if r.unsolvable:
            unsolvable += 1
        elif r.optimal:
            optimal.append(r.length)
        else:
            unknown += 1
    o = np.asarray(optimal)
    return {
        "levels": len(levels),
        "unreadable": bad,
        "unsolvable": unsolvable,
        "not_decided_within_budget": unknown,
        "solver_budget": budget,
        "optimal_median": float(np.median(o)) if o.size else None,
        "solved_in_at_most_2_moves": int((o <= 2).sum()) if o.size else 0,
        "already_solved": int((o == 0).sum()) if o.size else 0,
    }


class OursGeneration:
    """``generate_level`` for one registered variant, certified and plan-only, in batches of seeds."""

    def __init__(self, env_id: str):
        import gymnasium as gym

        import agentgym_turn  # noqa: F401
        from agentgym_turn.sokoban import board_for, generate_level, replay
        from agentgym_turn.sokoban.board import mask_of

        self._generate, self._board_for, self._replay, self._mask_of = generate_level, board_for, replay, mask_of
        self.dim, self.boxes = VARIANTS[env_id]
        kwargs = gym.spec(env_id).kwargs
        self.cap = kwargs.get("max_actions_per_episode", 10)
        self.budgets = {"certified": kwargs.get("solver_budget", 20_000), "plan_only": 0}
        self.times = {label: [] for label in self.budgets}
        self.certified = {label: 0 for label in self.budgets}
        self.lengths = {label: [] for label in self.budgets}

    def batch(self, seeds: range) -> list[float]:
        """Time both labels on ``seeds``; return the certified times of this batch."""
        out = []
        for label, solver_budget in self.budgets.items():
            for seed in seeds:
                rng = np.random.default_rng(seed)
                t = time.perf_counter()
                gen = self._generate(rng, self.dim, self.boxes, max_moves=self.cap, solver_budget=solver_budget)
                dt = time.perf_counter() - t
                board = self._board_for(gen.level)
                assert (
                    self._replay(board, self._mask_of(gen.level.boxes), gen.level.player, gen.solution)[0]
                    == board.target_mask
                )
                self.times[label].append(dt)
                self.certified[label] += gen.certified
                self.lengths[label].append(gen.optimal_moves)
                if label == "certified":
                    out.append(dt)
        return out

    def results(self) -> dict:
        return {
            label: {
                **_stats(self.times[label]),
                "solver_budget": self.budgets[label],
                "plans_replayed": len(self.times[label]),
                "certified_optimal": self.certified[label],
                "plan_length_median": float(np.median(self.lengths[label])),
            }
            for label in self.budgets
        }


class OursSteps:
    """``gymnasium.make(id).step(response)`` for every variant, style and moves a turn; the envs
    live across batches."""

    NAMES = ("Up", "Down", "Left", "Right")

    def __init__(self):
        import gymnasium as gym

        import agentgym_turn  # noqa: F401

        self.cases = {}
        for env_id in VARIANTS:
            for style in ("full", "compact"):
                env = gym.make(env_id, prompt_style=style)
                per_turn = env.unwrapped.max_actions_per_turn
                rng = np.random.default_rng(0)
                for label, k in (("1_move", 1), (f"{per_turn}_moves", per_turn)):
                    responses = [
                        "<answer>" + " || ".join(self.NAMES[m] for m in rng.integers(0, 4, size=k)) + "</answer>"
                        for _ in range(512)
                    ]
                    if label != "1_move":
                        env = gym.make(env_id, prompt_style=style)
                    env.reset(seed=0)
                    self.cases[f"{env_id}/{style}/{label}"] = {
                        "env": env,
                        "responses": responses,
                        "i": 0,
                        "seed": 0,
                        "turns": 0,
                        "seconds": 0.0,
                        "moves": 0,
                    }

    def batch(self, n: int) -> dict:
        """``n`` turns of every case, each after :data:`STEP_WARMUP` untimed ones; return this batch's rates."""
        out = {}
        for key, case in self.cases.items():
            env, responses = case["env"], case["responses"]
            spent, moves = 0.0, 0
            for k in range(STEP_WARMUP + n):
                if k == STEP_WARMUP:
                    spent, moves = 0.0, 0
                response = responses[case["i"] % 512]
                case["i"] += 1
                t = time.perf_counter()
                _, _, terminated, truncated, info = env.step(response)
                spent += time.perf_counter() - t
                moves += len(info["executed_moves"])
                if terminated or truncated:
                    case["seed"] += 1
                    env.reset(seed=case["seed"])
            case["turns"] += n
            case["seconds"] += spent
            case["moves"] += moves
            out[key] = {"turn_steps_per_s": n / spent, "moves_per_s": moves / spent}
        return out

    def results(self) -> dict:
        out = {}
        for key, case in self.cases.items():
            out[key] = {
                "turns": case["turns"],
                "seconds": case["seconds"],
                "turn_steps_per_s": case["turns"] / case["seconds"],
                "moves_per_s": case["moves"] / case["seconds"],
            }
        for case in self.cases.values():
            case["env"].close()
        return out


def _median_interval(values: list[float]) -> tuple[float, float, float]:
    """A distribution-free interval for the median: the order statistics (k, n + 1 - k) with the
    largest k whose coverage, from the binomial(n, 1/2), is still at least 95%; returns
    (low, high, coverage)."""
    from math import comb

    x, n = sorted(values), len(values)
    k, coverage = 1, 1 - 2 * 0.5**n
    while k + 1 <= n // 2:
        c = 1 - 2 * sum(comb(n, i) for i in range(k + 1)) / 2**n
        if c < 0.95:
            break
        k, coverage = k + 1, c
    return x[k - 1], x[n - k], coverage


def _spread(per_round: list[float], pooled: float) -> dict:
    """Median, min and max of per-round ratios, an interval for their median, and the ratio over
    all samples pooled."""
    low, high, coverage = _median_interval(per_round)
    return {
        "median": statistics.median(per_round),
        "min": min(per_round),
        "max": max(per_round),
        "median_interval": [low, high],
        "median_interval_coverage": coverage,
        "rounds": len(per_round),
        "pooled": pooled,
    }


def interleaved_generation(peer: Peer, plan: dict) -> tuple[dict, dict, dict, dict]:
    """Level generation in alternating rounds, per size: a batch of the peer's samples and a batch
    of ours (the order swapped every other round), until the peer's time budget or its sample
    count runs out. Returns the peer's stats, ours, the ratios and the per-round numbers."""
    peer_gen, ours_gen, ratios, rounds_out = {}, {}, {}, {}
    for name, (dim, boxes, peer_per_round, ours_per_round, max_peer, budget_s, cap_s) in plan.items():
        env_id = PEER_NAMES[name]
        ours = OursGeneration(env_id)
        times, calls, levels, capped, rounds = [], [], [], 0, []
        peer_spent, peer_seed, our_seed = 0.0, 0, 0
        while len(times) < max_peer and peer_spent < budget_s:
            seeds = list(range(peer_seed, peer_seed + min(peer_per_round, max_peer - len(times))))
            peer_seed = seeds[-1] + 1
            ours_first = len(rounds) % 2 == 1

            def run_ours():
                nonlocal our_seed
                batch = ours.batch(range(our_seed, our_seed + ours_per_round))
                our_seed += ours_per_round
                return batch

            ours_times = run_ours() if ours_first else None
            t0 = time.perf_counter()
            raw = peer.ask(op="generate", name=name, dim=dim, boxes=boxes, seeds=seeds, cap_s=cap_s)
            peer_spent += time.perf_counter() - t0
            if not ours_first:
                ours_times = run_ours()
            times += raw["times_s"]
            calls += raw["generate_room_calls"]
            capped += sum(level is None for level in raw["levels"])
            levels += [level for level in raw["levels"] if level is not None]
            row = {
                "peer_n": len(seeds),
                "peer_median_ms": float(np.median(raw["times_s"]) * 1e3),
                "ours_n": len(ours_times),
                "ours_median_ms": float(np.median(ours_times) * 1e3),
                "order": "ours, peer" if ours_first else "peer, ours",
                "load_average": os.getloadavg()[0],
            }
            row["ratio"] = row["peer_median_ms"] / row["ours_median_ms"]
            rounds.append(row)
            print(
                f"  {name} round {len(rounds)}: peer {row['peer_median_ms']:.1f} ms (n {len(seeds)}), "
                f"ours {row['ours_median_ms']:.2f} ms, {row['ratio']:.1f}x (load {row['load_average']:.1f})",
                flush=True,
            )
        peer_gen[name] = {
            **_stats(times),
            "capped_samples": capped,
            "cap_s": cap_s,
            "time_budget_s": budget_s,
            "generate_room_calls_median": float(np.median(calls)),
            "quality": check_peer_levels(levels, 20_000 if name != "10x10/4" else 5_000),
        }
        for label, stats in ours.results().items():
            ours_gen[f"{env_id}/{label}"] = stats
        pooled = peer_gen[name]["median_ms"] / ours_gen[f"{env_id}/certified"]["median_ms"]
        ratios[f"generation_median_speedup/{env_id}"] = _spread([r["ratio"] for r in rounds], pooled)
        rounds_out[name] = rounds
    return peer_gen, ours_gen, ratios, rounds_out


def interleaved_steps(peer: Peer, rounds: int, peer_steps: dict, our_turns: int) -> tuple[dict, dict, dict, list]:
    """Steps in ``rounds`` alternating rounds: the peer's batch (6x6 and 10x10, every label) and a
    batch of ours (every case), the order swapped every other round. Returns the peer's totals,
    ours, the ratios against RAGEN's 6x6 text step and the per-round numbers."""
    ours = OursSteps()
    totals = {name: {} for name in peer_steps}
    rows = []
    for r in range(rounds):
        ours_first = r % 2 == 1
        mine = ours.batch(our_turns) if ours_first else None
        theirs = {
            name: peer.ask(op="steps", name=name, dim=dim, boxes=boxes, n=n, seed=r, warmup=STEP_WARMUP)
            for name, (dim, boxes, n) in peer_steps.items()
        }
        if not ours_first:
            mine = ours.batch(our_turns)
        for name, labels in theirs.items():
            for label, v in labels.items():
                acc = totals[name].setdefault(label, {"steps": 0, "seconds": 0.0})
                acc["steps"] += v["steps"]
                acc["seconds"] += v["seconds"]
        ragen = theirs["6x6/1"]["ragen_text_step"]["steps"] / theirs["6x6/1"]["ragen_text_step"]["seconds"]
        row = {
            "ragen_text_step_per_s": ragen,
            "order": "ours, peer" if ours_first else "peer, ours",
            "load_average": os.getloadavg()[0],
            "ratios": {},
        }
        for style in ("full", "compact"):
            one = mine[f"TurnSokoban-v0/{style}/1_move"]["turn_steps_per_s"]
            five = mine[f"TurnSokoban-v0/{style}/5_moves"]["moves_per_s"]
            row[f"ours_{style}_1_move_turn_steps_per_s"] = one
            row[f"ours_{style}_5_moves_moves_per_s"] = five
            row["ratios"][f"text_turn_steps_vs_ragen/TurnSokoban-v0/{style}/1_move"] = one / ragen
            row["ratios"][f"moves_vs_ragen/TurnSokoban-v0/{style}/5_moves"] = five / ragen
        rows.append(row)
        print(
            f"  steps round {r + 1}/{rounds}: RAGEN {ragen:.0f}/s, ours {row['ours_full_1_move_turn_steps_per_s']:.0f}/s, "
            f"{row['ratios']['text_turn_steps_vs_ragen/TurnSokoban-v0/full/1_move']:.1f}x "
            f"(load {row['load_average']:.1f})",
            flush=True,
        )
    peer_out = {
        name: {label: {**v, "steps_per_s": v["steps"] / v["seconds"]} for label, v in labels.items()}
        for name, labels in totals.items()
    }
    ours_out = ours.results()
    ragen_pooled = peer_out["6x6/1"]["ragen_text_step"]["steps_per_s"]
    ratios = {}
    for key in rows[0]["ratios"]:
        case = key.split("/", 1)[1]
        rate = ours_out[case]["turn_steps_per_s" if key.startswith("text_turn") else "moves_per_s"]
        ratios[key] = _spread([row["ratios"][key] for row in rows], rate / ragen_pooled)
    return peer_out, ours_out, ratios, rows


def measure_solver(n_seeds: int) -> dict:
    """Certification of ``TurnSokoban-10x10-v0``'s levels, the work bound on a 10-box level, parser worst cases."""
    import gymnasium as gym
    from gymnasium.utils import seeding

    import agentgym_turn  # noqa: F401
    from agentgym_turn.sokoban import TurnSokobanEnv, generate_level
    from agentgym_turn.sokoban.ragen import parse_ragen_response

    out: dict = {}
    kwargs = gym.spec("TurnSokoban-10x10-v0").kwargs
    budget = kwargs["solver_budget"]
    expansions, times, certified, lengths, gaps = [], [], 0, {}, []
    for seed in range(n_seeds):
        # The level seed exactly as TurnSokobanEnv.reset(seed=seed) draws it.
        rng, _ = seeding.np_random(seed)
        level_seed = int(rng.integers(0, 2**63 - 1))
        t = time.perf_counter()
        gen = generate_level(
            np.random.default_rng(level_seed),
            kwargs["dim"],
            kwargs["num_boxes"],
            max_moves=kwargs["max_moves"],
            solver_budget=budget,
        )
        times.append(time.perf_counter() - t)
        expansions.append(gen.expansions)
        certified += gen.certified
        if not gen.certified:
            gaps.append({"seed": seed, "plan": gen.optimal_moves, "lower_bound": gen.lower_bound})
        if seed in (2, 3, 52, 356):
            lengths[str(seed)] = {"moves": gen.optimal_moves, "certified": gen.certified, "expansions": gen.expansions}
    e = np.asarray(expansions)
    out["TurnSokoban-10x10-v0"] = {
        "seeds": n_seeds,
        "solver_budget": budget,
        "certified_optimal": certified,
        "not_certified": gaps,
        "certified_within_5000_expansions": int(((e <= 5000) & (e > 0)).sum() + (e == 0).sum()),
        "expansions_median": float(np.median(e)),
        "expansions_p99": float(np.percentile(e, 99)),
        "expansions_max": int(e.max()),
        "generation": _stats(times),
        "examples": lengths,
    }
    print(f"  10x10: {certified}/{n_seeds} certified, max {e.max()} expansions", flush=True)

    # A user level with 10 boxes: the work per level is bounded by solver_budget.
    level = generate_level(np.random.default_rng(1), (12, 12), 10, solver_budget=0).level

    ten = {}
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "ten.txt"
        path.write_text("; 0\n" + level.to_text() + "\n")
        for solver_budget in (2_000, 20_000):
            t = time.perf_counter()
            env = TurnSokobanEnv(levels=path, solver_budget=solver_budget, max_actions_per_episode=None)
            made = time.perf_counter() - t
            _, info = env.reset(seed=0)
            ten[str(solver_budget)] = {
                "make_s": made,
                "certified": info["optimal_certified"],
                "plan_moves": info["solution_moves"],
            }
    out["ten_box_level_load"] = ten
    print(f"  10-box level: {ten}", flush=True)

    # Parser worst cases (65,536 characters each), one step each.
    worst = {
        "think_x9362": "<think>" * 9362,
        "close_think_x8191": "<think>" + "</think>" * 8191,
        "close_think_space_x7281": "<think>" + "</think> " * 7281 + "<answer>Up",
        "answer_spaces": "<answer>" + " " * 65_000 + "Up</answer>",
    }
    parse = {}
    for style in ("full", "ragen"):
        env = gym.make("TurnSokoban-v0", prompt_style=style)
        for name, text in worst.items():
            env.reset(seed=0)
            t = time.process_time()
            env.step(text[:65_536])
            parse[f"{style}/{name}"] = time.process_time() - t
    for name, text in worst.items():
        t = time.process_time()
        parse_ragen_response(text[:65_536])
        parse[f"parse_ragen_response/{name}"] = time.process_time() - t
    out["worst_case_step_cpu_s"] = parse
    print(f"  parser worst cases (CPU s): max {max(parse.values()):.4f}", flush=True)
    return out


#: The generation rows of the docs table: (results key of the peer, our env id, the label).
_GENERATION_ROWS = (
    ("6x6/1", "TurnSokoban-v0", "6x6, 1 box"),
    ("8x8/2", "TurnSokoban-8x8-v0", "8x8, 2 boxes"),
    ("10x10/4", "TurnSokoban-10x10-v0", "10x10, 4 boxes"),
)


def _num(x: float) -> str:
    """Milliseconds and rates as the docs print them: 2 decimals under 10, 1 under 100, else whole with commas."""
    return f"{x:.2f}" if x < 10 else f"{x:.1f}" if x < 100 else f"{x:,.0f}"


def _times(x: float) -> str:
    return f"{x:.1f}x" if x < 10 else f"{x:,.0f}x"


def _ratio_cell(r: dict, unit: str = "") -> str:
    """``3.3x (3.0-4.2x; 2.8-5.0x, 10 rounds)``: the median of the rounds, its 95% interval and the min-max."""
    low, high = r["median_interval"]
    return (
        f"{_times(r['median'])}{unit} ({_times(low)[:-1]}-{_times(high)}; {_times(r['min'])[:-1]}-{_times(r['max'])}, "
        f"{r['rounds']} rounds)"
    )


def markdown(results: dict) -> str:
    """The two tables of docs/benchmarks.md's TurnSokoban section (level generation, then steps) from saved results."""
    peer, ours, ratios = results["peer"], results["ours"], results["ratios"]
    lines = [
        "| level | gym-sokoban 0.0.6 | ours, certified | speed-up: median of rounds (95% interval; min-max) | pooled "
        "| ours, plan only (no optimality proof) |",
        "|---|---|---|---|---|---|",
    ]
    for key, env_id, label in _GENERATION_ROWS:
        p, c, plan = (
            peer["generation"][key],
            ours["generation"][f"{env_id}/certified"],
            ours["generation"][f"{env_id}/plan_only"],
        )
        r = ratios[f"generation_median_speedup/{env_id}"]
        lines.append(
            f"| {label} | {_num(p['median_ms'])} ms ({_num(p['p90_ms'])}), n = {p['n']} | {_num(c['median_ms'])} ms "
            f"({_num(c['p90_ms'])}), {c['certified_optimal']} / {c['n']} proven optimal | **{_ratio_cell(r)}** "
            f"| {_times(r['pooled'])} | {_num(plan['median_ms'])} ms |"
        )
    steps = peer["steps"]["6x6/1"]
    lines += [
        "",
        "| | turn-steps/s | moves/s | vs RAGEN's text step: median of rounds (95% interval; min-max) | pooled |",
        "|---|---|---|---|---|",
        f"| gym-sokoban `SokobanEnv.step`, 6x6 | | {steps['gym_sokoban_step']['steps_per_s']:,.0f} | | |",
        f"| RAGEN text step (reproduced), 6x6 | | {steps['ragen_text_step']['steps_per_s']:,.0f} | 1x | |",
        f"| gym-sokoban game logic only (`_push`, `_calc_reward`, `_check_if_done`) | | "
        f"{steps['game_logic_only']['steps_per_s']:,.0f} | | |",
    ]
    for key, row in ours["steps"].items():
        env_id, style, label = key.split("/")
        if env_id != "TurnSokoban-v0":
            continue
        one = label == "1_move"
        r = ratios[f"{'text_turn_steps' if one else 'moves'}_vs_ragen/{key}"]
        cell = _ratio_cell(r, "" if one else " moves").replace(f", {r['rounds']} rounds", "")
        what = f"{'full prompt' if one and style == 'full' else style}, {'1 move' if one else label.split('_')[0] + ' moves'} a turn"
        lines.append(
            f"| `{env_id}`, {what} | {row['turn_steps_per_s']:,.0f} | {row['moves_per_s']:,.0f} | "
            f"{'**' + cell + '**' if one and style == 'full' else cell} | {_times(r['pooled'])} |"
        )
    for env_id in ("TurnSokoban-8x8-v0", "TurnSokoban-10x10-v0"):
        rows = [(k.split("/")[2], v) for k, v in ours["steps"].items() if k.startswith(f"{env_id}/full/")]
        counts = " / ".join(label.split("_")[0] for label, _ in rows)
        turns = " / ".join(f"{v['turn_steps_per_s']:,.0f}" for _, v in rows)
        moves = " / ".join(f"{v['moves_per_s']:,.0f}" for _, v in rows)
        lines.append(f"| `{env_id}`, full, {counts} moves a turn | {turns} | {moves} | | |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--quick", action="store_true", help="fewer samples and a 60 s budget for gym-sokoban's 10x10 levels"
    )
    parser.add_argument(
        "--solver-only",
        action="store_true",
        help="only the solver measurements (no peer); updates the 'solver' entry of the results",
    )
    parser.add_argument(
        "--no-solver",
        action="store_true",
        help="skip the solver measurements; the 'solver' entry of the previous results is kept",
    )
    parser.add_argument("--rounds", type=int, help="rounds of the step comparison (default 10, 5 with --quick)")
    parser.add_argument(
        "--out", type=Path, default=RESULTS, help="results JSON (default benchmarks/results/sokoban.json)"
    )
    parser.add_argument(
        "--markdown", action="store_true", help="only print the docs tables of the saved results (--out)"
    )
    args = parser.parse_args(argv)
    if args.markdown:
        common.print_table(args.out, markdown)
        return 0
    quick = args.quick
    previous = common.read_json(args.out, {})
    if args.solver_only:
        previous["solver"] = {
            "script": "benchmarks/sokoban.py --solver-only",
            "when": time.strftime("%Y-%m-%d %H:%M:%S"),
            "load_average_before": os.getloadavg(),
            **measure_solver(1000),
        }
        previous["solver"]["load_average_after"] = os.getloadavg()
        common.write_json(args.out, previous)
        print(f"wrote {common.shown(args.out)}")
        return 0

    peer_python = ensure_peer_venv()
    generation_plan = {
        # name: (dim, boxes, peer samples a round, ours a round, peer samples at most, peer time budget s, cap per sample s)
        "6x6/1": [[6, 6], 1, 20 if quick else 30, 20 if quick else 30, 100 if quick else 300, 30, 60],
        "8x8/2": [[8, 8], 2, 10 if quick else 20, 20 if quick else 30, 50 if quick else 200, 30 if quick else 60, 60],
        "10x10/4": [
            [10, 10],
            4,
            1,
            10 if quick else 15,
            8 if quick else 40,
            60 if quick else 360,
            60 if quick else 120,
        ],
    }
    step_rounds = args.rounds or (5 if quick else 10)
    # name: (dim, boxes, peer steps of each label a round); ours: turns of each case a round
    peer_steps = {
        "6x6/1": [[6, 6], 1, (1000 if quick else 3000) // step_rounds],
        "10x10/4": [[10, 10], 4, (500 if quick else 1500) // step_rounds],
    }
    our_turns = (2000 if quick else 10000) // step_rounds

    load_before = os.getloadavg()
    t0 = time.time()
    print("gym-sokoban 0.0.6 (own venv, one process) and ours, in alternating rounds ...", flush=True)
    peer = Peer(peer_python)
    try:
        peer_gen, ours_gen, ratios, gen_rounds = interleaved_generation(peer, generation_plan)
        peer_steps_out, ours_steps, step_ratios, step_rows = interleaved_steps(peer, step_rounds, peer_steps, our_turns)
    finally:
        peer.close()
    ratios.update(step_ratios)
    wall = time.time() - t0
    load_after = os.getloadavg()

    if args.no_solver:
        solver = previous.get("solver", {})
    else:
        solver = {
            "script": "benchmarks/sokoban.py" + (" --quick" if quick else ""),
            **measure_solver(200 if quick else 1000),
        }
    result = {
        "solver": solver,
        "script": "benchmarks/sokoban.py" + (" --quick" if quick else "") + (" --no-solver" if args.no_solver else ""),
        "when": time.strftime("%Y-%m-%d %H:%M:%S"),
        "machine": common.machine(load_average_before=load_before, load_average_after=load_after),
        "method": "peer and ours alternate in rounds (order swapped every other round); each ratio is the median of "
        "per-round ratios with min/max over rounds and an order-statistic interval for the median "
        "(coverage >= 95% where the number of rounds allows); 'pooled' is the ratio over all samples; "
        f"each timed batch of steps follows {STEP_WARMUP} untimed steps of the same case, on both sides",
        "wall_s": wall,
        "peer": {"packages": PEER_PACKAGES, "generation": peer_gen, "steps": peer_steps_out},
        "ours": {"generation": ours_gen, "steps": ours_steps},
        "ratios": ratios,
        "rounds": {"generation": gen_rounds, "steps": step_rows},
    }
    common.write_json(args.out, result)
    print(json.dumps({"ratios": ratios}, indent=1))
    print(f"wrote {common.shown(args.out)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
