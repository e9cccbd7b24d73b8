"""Rollout turns/s against the number of envs, per env and stepping mode, and the trainer's step time.

    .venv/bin/python benchmarks/scaling.py            # every env and count, then the trainer part
    .venv/bin/python benchmarks/scaling.py --quick    # counts 1, 8, 32 only
    .venv/bin/python benchmarks/scaling.py --only rollout

Rollout part. The policy is an instant stub (a fixed response, no model), so the numbers are the
env side of :func:`reference_trainer.rollout.collect`: resets, steps, and the tokenisation of every
observation (as in training: by the worker thread that stepped the env in mode ``threads``, else in
one batch call in the main process). For each env and mode, ``n`` envs
play chunks of ``n`` episodes until at least ``--min-turns`` turns are done (after one warm-up
chunk); turns/s = turns / wall time. Envs:

* ``sleep10ms``: ``TurnSokoban-v0`` whose every step also waits 10 ms (an env waiting on I/O).
* ``searchqa_http``: ``TurnSearchQA-v0`` with ``retriever_url`` pointing at our retrieval server
  (BM25 over the generated corpus) in another process on this machine: the server's CPU is this
  machine's CPU, so it scales with cores, not with waiting.
* ``searchqa_http_10ms``: the same server answering each request 10 ms later (a retriever on
  another machine or a GPU encoder: the client waits); its per-request CPU (about 0.9 ms of user and
  kernel time: uvicorn, Starlette, the thread hop, BM25, JSON, sockets) still runs on this machine's cores.
* ``searchqa_http_10ms_2proc``: the same, the server run by two processes
  (``agentgym-turn serve retriever --processes 2``), so its CPU is no longer one core's.
* ``searchqa_http_30ms``: the same, 30 ms later (a dense retriever behind a network hop): how the
  speed-up grows when the wait, not the co-located server's CPU, dominates a step.
* ``sokoban``: ``TurnSokoban-v0`` in process (CPU-bound: level generation at reset).
* ``searchqa``: ``TurnSearchQA-v0`` with its in-process BM25 retriever (CPU-bound).

Modes: ``list`` (one env after another: the baseline at 1 env), ``threads`` (I/O-bound envs),
``processes`` (one worker process per env: CPU-bound envs; its ceiling is the machine's cores).
Each row has two rates: ``env_turns_per_s`` (the env batch alone: ``reset``/``step`` of the
active envs, the stepping machinery itself) and ``rollout_turns_per_s`` (through ``collect``, which
also tokenises every observation and assembles the conversations); each ``*_speedup`` is that rate at
``n`` envs over the same rate at 1 env in the same mode.

Trainer part: ``benchmarks/scaling_trainer.py``'s ``measure(world_sizes)`` when that file exists
(trainer step time at world size 1 and 2 on CPU, gloo).

Results: ``benchmarks/results/scaling.json`` and ``scaling.png``. The machine is noted as shared
when its load average is above its core count at the start.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import gymnasium as gym
import torch

try:  # python -m benchmarks.scaling, or imported by the tests
    from benchmarks import common, scaling_trainer
except ModuleNotFoundError:  # python benchmarks/scaling.py: this folder comes first on the import path
    import common
    import scaling_trainer

COUNTS = (1, 2, 4, 8, 16, 32)
SLEEPY_ID = "ScalingSleepySokoban-v0"
STEP_DELAY_S = 0.010

#: Written into the results with every run: what to keep in mind when reading them.
NOTES = [
    "searchqa_http rows were measured after the servers' TCP_NODELAY fix (commit 22275fc): before it a keep-alive /retrieve "
    "request took 44-56 ms (Nagle holding the response for the client's delayed ACK) and 1 env did 25 env turns/s.",
    "rollout_* rates include the tokenisation of every observation: since commit 'rollout: tokenise observations where "
    "the env was stepped' it runs in the env's worker thread (mode threads) or in one batch call, not one call per "
    "observation in the main thread (before: sleep10ms 4.77x, searchqa_http_10ms 3.73x through collect at 8 envs).",
    "searchqa_http_* rows share this machine's 2 cores with the retrieval server. Per /retrieve request at 8 envs, "
    "measured quiet with psutil (user + kernel): 0.85-0.97 ms of server CPU since the server runs on httptools and uvloop "
    "with a plain thread pool for retrieval (1.7-1.9 ms before, on h11, asyncio and anyio's thread hop), 0.6 ms of client "
    "CPU, and about 0.6 ms to tokenise the observation (collect only). A round's 8 requests reach the retriever spread "
    "over about 6 ms (median 5.8 ms over 56 rounds, timestamped in the retriever; the client threads' sends under the "
    "GIL and the server's one event loop are both serial): that, not the retriever's wait, bounds the 10 ms row (halving the server's CPU left it at 5.0x env batch, 4.3x collect); the "
    "10ms_2proc row serves from two processes; the 30 ms row shows the speed-up when the wait dominates.",
    "CPU-bound rows (sokoban, searchqa) cannot speed up beyond the machine's cores (and beyond the idle share of them: see "
    "machine.load_average_*); a local retriever server's BM25 runs on those same cores, so it scales with cores, not waiting.",
]
#: How each ``searchqa_http*`` env's retrieval server runs: (seconds it answers late, processes serving it, as
#: ``agentgym-turn serve retriever --processes``).
RETRIEVER = {
    "searchqa_http": (0.0, 1),
    "searchqa_http_10ms": (0.010, 1),
    "searchqa_http_10ms_2proc": (0.010, 2),
    "searchqa_http_30ms": (0.030, 1),
}
#: Sokoban tasks of the I/O-bound case repeat over this many seeds, generated before timing (its reset is then a cache hit).
SLEEPY_SEEDS = 64
#: name -> (env id, make kwargs besides the retriever, stub response, modes, seed cycle (0: every task new))
ENVS: dict[str, tuple[str, dict[str, Any], str, tuple[str, ...], int]] = {
    "sleep10ms": (SLEEPY_ID, {}, "<answer>Up</answer>", ("threads",), SLEEPY_SEEDS),
    "searchqa_http": ("TurnSearchQA-v0", {}, "<search>capital city river</search>", ("threads",), 0),
    "searchqa_http_10ms": ("TurnSearchQA-v0", {}, "<search>capital city river</search>", ("threads",), 0),
    "searchqa_http_10ms_2proc": ("TurnSearchQA-v0", {}, "<search>capital city river</search>", ("threads",), 0),
    "searchqa_http_30ms": ("TurnSearchQA-v0", {}, "<search>capital city river</search>", ("threads",), 0),
    "sokoban": ("TurnSokoban-v0", {}, "<answer>Up</answer>", ("processes", "threads"), 0),
    "searchqa": ("TurnSearchQA-v0", {}, "<search>capital city river</search>", ("processes",), 0),
}


class SleepOnStep(gym.Wrapper):
    """Waits ``delay_s`` seconds in every ``step`` (an env whose step waits on I/O)."""

    def __init__(self, env: gym.Env, delay_s: float):
        super().__init__(env)
        self.delay_s = delay_s

    def step(self, action: Any) -> Any:
        time.sleep(self.delay_s)
        return self.env.step(action)


def make_sleepy_sokoban(**kwargs: Any) -> gym.Env:
    """``TurnSokoban-v0`` whose steps wait :data:`STEP_DELAY_S` more."""
    return SleepOnStep(gym.make("TurnSokoban-v0", **kwargs), STEP_DELAY_S)


class DelayedRetriever:
    """A retriever that answers ``delay_s`` seconds late (network or encoder latency of a remote one)."""

    def __init__(self, inner: Any, delay_s: float):
        self.inner, self.delay_s = inner, delay_s
        self.corpus = getattr(inner, "corpus", None)

    def retrieve(self, queries: Any, topk: int) -> Any:
        time.sleep(self.delay_s)
        return self.inner.retrieve(queries, topk)


class StubPolicy:
    """An instant policy: the same response every turn, no model."""

    def __init__(self, fmt: Any, text: str):
        self.ids = fmt.encode_content(text) + [fmt.assistant_suffix[0]]

    def generate(self, prompts: list, **_: Any) -> tuple[list[list[int]], list[list[float]]]:
        return [list(self.ids) for _ in prompts], [[0.0] * len(self.ids) for _ in prompts]


def serve_retriever(delay_s: float, processes: int = 1) -> int:
    """Run the retrieval server over the generated corpus (``delay_s`` late per request) until killed."""
    from agentgym_turn.searchqa.retrieval import BM25Retriever
    from agentgym_turn.searchqa.server import RetrievalServer
    from agentgym_turn.searchqa.source import generated_source

    retriever = BM25Retriever(generated_source().corpus)
    server = RetrievalServer(DelayedRetriever(retriever, delay_s) if delay_s else retriever)
    print(f"serving at {server.url}", flush=True)  # the socket listens already: requests wait in its backlog
    server.serve_forever(processes)
    return 0


class RetrieverProcess:
    """:func:`serve_retriever` in a child process; ``url`` once it listens."""

    def __init__(self, delay_s: float, processes: int = 1):
        self.proc = subprocess.Popen(
            [sys.executable, __file__, "--serve-retriever", str(delay_s), "--serve-processes", str(processes)],
            stdout=subprocess.PIPE,
            text=True,
            cwd=common.ROOT,
        )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line.startswith("serving at "):
            self.close()
            raise RuntimeError(f"benchmarks/scaling.py: the retriever process did not start (said {line!r}).")
        self.url = line.split("serving at ", 1)[1].strip()

    def close(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=60)


def chat_format(env_ids: list[str]) -> Any:
    """A ChatFormat whose byte-level BPE tokenizer is trained on a few episodes of ``env_ids``."""
    from reference_trainer.tiny import env_corpus, train_tokenizer
    from agentgym_turn.tokens import ChatFormat

    texts = [t for env_id in env_ids for t in env_corpus(env_id, 8)]
    return ChatFormat(train_tokenizer(texts, 512))


def _seeds(first: int, n: int, cycle: int) -> list[int]:
    """``n`` task seeds from ``first``; with ``cycle`` they repeat modulo it (levels already generated and cached)."""
    return [(first + i) % cycle if cycle else first + i for i in range(n)]


def rollout_rate(
    fmt: Any,
    env_id: str,
    n: int,
    mode: str,
    text: str,
    env_kwargs: dict[str, Any],
    min_turns: int,
    cycle: int = 0,
    first_seed: int = 0,
) -> dict[str, Any]:
    """Turns/s of ``n`` envs in ``mode`` playing chunks of ``n`` episodes with the stub policy.

    ``rollout_turns_per_s``: through :func:`~reference_trainer.rollout.collect` (tokenising every
    observation in this process); ``env_turns_per_s``: the env batch alone (``reset``, then
    ``step`` of every active env with the stub's text until all are done). Task seeds start at
    ``first_seed``: give every measurement its own range, or this process's level cache (shared by
    threads) would serve tasks an earlier measurement generated.
    """
    from agentgym_turn.pools import make as make_envs
    from reference_trainer.rollout import collect

    envs = make_envs(env_id, n, mode, **env_kwargs)
    policy = StubPolicy(fmt, text)
    seed = first_seed

    def rollout_chunk() -> int:
        nonlocal seed
        episodes = collect(
            policy,
            fmt,
            envs,
            _seeds(seed, n, cycle),
            generator=torch.Generator(),
            max_new_tokens=32,
            max_context_tokens=100_000,
        )
        seed += n
        return sum(e.num_turns for e in episodes)

    def env_chunk() -> int:
        nonlocal seed
        envs.reset(_seeds(seed, n, cycle))
        seed += n
        active, turns = list(range(n)), 0
        while active:
            results = envs.step({i: text for i in active})
            turns += len(active)
            active = [i for i in active if not (results[i][2] or results[i][3])]
        return turns

    def rate(chunk: Any) -> tuple[int, float]:
        turns, chunks, start = 0, 0, time.perf_counter()
        while turns < min_turns or chunks < 2:
            turns += chunk()
            chunks += 1
        return turns, time.perf_counter() - start

    try:
        rollout_chunk()  # warm-up: first resets, per-process caches, connections
        turns, elapsed = rate(rollout_chunk)
        env_turns, env_elapsed = rate(env_chunk)
    finally:
        envs.close()
    return {
        "envs": n,
        "mode": mode,
        "turns": turns,
        "seconds": round(elapsed, 3),
        "rollout_turns_per_s": round(turns / elapsed, 1),
        "env_turns": env_turns,
        "env_seconds": round(env_elapsed, 3),
        "env_turns_per_s": round(env_turns / env_elapsed, 1),
    }


def measure_rollout(counts: tuple[int, ...], min_turns: int, only_envs: list[str] | None) -> dict[str, Any]:
    gym.register(id=SLEEPY_ID, entry_point=make_sleepy_sokoban, max_episode_steps=None)
    import agentgym_turn  # noqa: F401  (registers the suite)

    fmt = chat_format(["TurnSokoban-v0", "TurnSearchQA-v0"])
    out: dict[str, Any] = {}
    servers: dict[str, RetrieverProcess] = {}
    try:
        for name, (env_id, kwargs, text, modes, cycle) in ENVS.items():
            if only_envs and name not in only_envs:
                continue
            kwargs = dict(kwargs)
            if name.startswith("searchqa_http"):
                servers[name] = RetrieverProcess(*RETRIEVER[name])
                kwargs["retriever_url"] = servers[name].url
            if cycle:  # generate the levels once (threads share this process's level cache)
                warm = gym.make(env_id)
                for s in range(cycle):
                    warm.reset(seed=s)
                warm.close()
            runs = [("list", 1)] + [(mode, n) for mode in modes for n in counts]
            rows = []
            for k, (mode, n) in enumerate(runs):
                rows.append(
                    rollout_rate(fmt, env_id, n, mode, text, kwargs, min_turns, cycle, first_seed=k * 1_000_000)
                )
                print(name, rows[-1], flush=True)
            for row in rows:
                base = next(r for r in rows if r["mode"] == row["mode"] and r["envs"] == 1)
                row["rollout_speedup"] = round(row["rollout_turns_per_s"] / base["rollout_turns_per_s"], 2)
                row["env_speedup"] = round(row["env_turns_per_s"] / base["env_turns_per_s"], 2)
            out[name] = {
                "env_id": env_id
                if name != "sleep10ms"
                else f"TurnSokoban-v0 + {STEP_DELAY_S * 1000:.0f} ms sleep per step",
                "response": text,
                "task_seeds": f"cycling over {cycle} (levels cached)" if cycle else "all new",
                "rows": rows,
            }
            if name in servers:
                servers.pop(name).close()
    finally:
        for server in servers.values():
            server.close()
    return out


def summarize(rollout: dict[str, Any]) -> dict[str, Any]:
    """Per env and mode: the speed-ups at 8 envs (the yardstick) and the best one with its env count."""
    out: dict[str, Any] = {}
    for name, entry in rollout.items():
        for mode in sorted({r["mode"] for r in entry["rows"] if r["mode"] != "list"}):
            rows = [r for r in entry["rows"] if r["mode"] == mode]
            at8 = next((r for r in rows if r["envs"] == 8), None)
            best = max(rows, key=lambda r: r["env_speedup"])
            out[f"{name} ({mode})"] = {
                "env_speedup_at_8": at8 and at8["env_speedup"],
                "rollout_speedup_at_8": at8 and at8["rollout_speedup"],
                "best_env_speedup": best["env_speedup"],
                "best_at_envs": best["envs"],
            }
    return out


def plot(result: dict[str, Any], path: Path) -> None:
    """Speed-up against env count: the env batch alone (left) and whole rollouts with the stub policy (right)."""
    from reference_trainer.plots import pyplot

    plt = pyplot()

    rollout = result.get("rollout", {})
    counts = sorted({r["envs"] for e in rollout.values() for r in e["rows"]})
    fig, axes = plt.subplots(1, 2, figsize=(12, 5), sharey=True)
    for ax, key, title in (
        (axes[0], "env_speedup", "env batch alone"),
        (axes[1], "rollout_speedup", "rollout (collect, tokenising)"),
    ):
        for name, entry in rollout.items():
            for mode in sorted({r["mode"] for r in entry["rows"] if r["mode"] != "list"}):
                rows = sorted((r for r in entry["rows"] if r["mode"] == mode), key=lambda r: r["envs"])
                ax.plot([r["envs"] for r in rows], [r[key] for r in rows], marker="o", label=f"{name} ({mode})")
        if counts:
            ax.plot(counts, counts, "k:", label="ideal")
            ax.axhline(
                result["machine"]["cpus"], color="grey", ls="--", lw=1, label=f"{result['machine']['cpus']} cores"
            )
        ax.set_xscale("log", base=2)
        ax.set_yscale("log", base=2)
        ax.set_xlabel("envs stepped together")
        ax.set_title(title)
        ax.grid(True, which="both", alpha=0.3)
    axes[0].set_ylabel("turns/s relative to 1 env (same mode)")
    axes[1].legend(fontsize=8)
    shared = " (shared machine)" if result["machine"]["shared"] else ""
    fig.suptitle(f"Parallel env stepping with an instant stub policy{shared}")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="env counts 1, 8, 32 only")
    parser.add_argument(
        "--only", choices=("rollout", "trainer"), help="run one part only (the other keeps its stored result)"
    )
    parser.add_argument("--envs", nargs="*", choices=sorted(ENVS), help="rollout part: these envs only")
    parser.add_argument(
        "--min-turns", type=int, default=200, help="turns timed per measurement (after a warm-up chunk)"
    )
    parser.add_argument("--out", type=Path, default=common.RESULTS / "scaling.json")
    parser.add_argument("--serve-retriever", type=float, metavar="DELAY_S", help=argparse.SUPPRESS)
    parser.add_argument("--serve-processes", type=int, default=1, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve_retriever is not None:
        return serve_retriever(args.serve_retriever, args.serve_processes)
    torch.set_num_threads(1)
    load = os.getloadavg()[0]
    cpus = os.cpu_count() or 1
    previous = common.read_json(args.out, {})
    result: dict[str, Any] = {
        "machine": common.machine(load_average_at_start=round(load, 2), shared=load > cpus / 2),
        "notes": NOTES,
        "method": "instant stub policy (fixed response, no model); turns/s over chunks of n episodes after one warm-up chunk; "
        "*_speedup = turns/s at n envs / turns/s at 1 env in the same mode; env_* = env batch alone, rollout_* = collect()",
    }
    counts = (1, 8, 32) if args.quick else COUNTS
    if args.only != "trainer":
        result["rollout"] = measure_rollout(counts, args.min_turns, args.envs)
        if args.envs and "rollout" in previous:  # keep the envs not re-measured
            result["rollout"] = {**previous["rollout"], **result["rollout"]}
    elif "rollout" in previous:
        result["rollout"] = previous["rollout"]
    if args.only != "rollout":
        try:
            result["trainer"] = scaling_trainer.measure([1, 2])
        except Exception as exc:  # keep the rollout part; say how to redo this one
            print(f"scaling_trainer.measure failed: {type(exc).__name__}: {exc}", file=sys.stderr)
            result["trainer"] = {
                "error": f"{type(exc).__name__}: {exc}",
                "rerun": "python benchmarks/scaling.py --only trainer (or benchmarks/scaling_trainer.py)",
            }
    elif "trainer" in previous:
        result["trainer"] = previous["trainer"]
    if "rollout" in result:
        result["summary"] = summarize(result["rollout"])
    result["machine"]["load_average_at_end"] = round(os.getloadavg()[0], 2)
    result["machine"]["shared"] = max(load, os.getloadavg()[0]) > cpus / 2  # others' jobs held part of the cores
    common.write_json(args.out, result)
    plot(result, args.out.with_suffix(".png"))
    print(f"wrote {args.out} and {args.out.with_suffix('.png')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
