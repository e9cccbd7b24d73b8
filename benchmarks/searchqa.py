"""TurnSearchQA speed: BM25 retrieval at 10k / 100k / 1M passages (in-process and over HTTP), env steps/s.

For each corpus size, a generated world is scaled to about that many passages and indexed with
the shared BM25 index (numba backend from 50k passages, warmed up before timing). Queries are
the ones agents send: half entity names / titles (the oracle's first queries), half whole
questions. Each query is timed alone (one query per call, as the env sends them), giving p50 /
p95 latency and sequential queries per second; a 256-query batch gives batched throughput.
The same index is then served by ``agentgym-turn serve retriever`` in a separate process and
queried over HTTP with one keep-alive connection. In the same run, the raw bm25s call
(tokenise + retrieve, no wrapper) is timed on the same queries, so the wrapper's overhead is a
ratio, and the target (p50 under 20 ms at 1M passages) is reported as a ratio too.

Two more measurements: the first search after building a larger world's retriever against the
later ones, in fresh processes, with and without the warm-up that ``gym.make`` now does (numba
compiles its kernels at first use); and one env step on each worst-case response for the
parsers (65,536 characters: the reported ``"<answer>option" + " " * 65506 + "!</answer>"`` and
the tag floods), in both protocols, plain and multiple choice.

    python benchmarks/searchqa.py                        # 10k, 100k, 1M (about 10 minutes)
    python benchmarks/searchqa.py --sizes 10000 --queries 200 --out s.json   # a quick run
    python benchmarks/searchqa.py --only first_query parsers            # update two sections
"""

from __future__ import annotations

import argparse
import json
import importlib.util
import os
import re
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import bm25s
import numpy as np

from agentgym_turn.bm25 import B, K1, NUMBA_MIN_DOCS, BM25Index, tokenize_many
from agentgym_turn.searchqa.corpus import render_corpus
from agentgym_turn.searchqa.generator.questions import generate_questions
from agentgym_turn.searchqa.generator.world import WorldConfig, generate_world
from agentgym_turn.searchqa.retrieval import BM25Retriever, HTTPRetriever

try:  # python -m benchmarks.searchqa, or imported by the tests
    from benchmarks import common
except ModuleNotFoundError:  # python benchmarks/searchqa.py: this folder comes first on the import path
    import common

#: Passages of the default world (``WorldConfig()``), used to pick the scale for a target size.
TARGET_P50_MS_AT_1M = 20.0  # the bar
MEASURED_BM25S_P50_MS_AT_1M = 1.2  # measured earlier for the project: bm25s numba backend, 1M passages


def percentiles(times_s: list[float]) -> dict[str, float]:
    ms = np.asarray(times_s) * 1000.0
    return {
        "p50_ms": round(float(np.percentile(ms, 50)), 3),
        "p95_ms": round(float(np.percentile(ms, 95)), 3),
        "p99_ms": round(float(np.percentile(ms, 99)), 3),
        "mean_ms": round(float(ms.mean()), 3),
        "queries_per_s": round(len(ms) / (ms.sum() / 1000.0), 1),
    }


def time_each(fn, queries: list[str]) -> list[float]:
    out = []
    for q in queries:
        t = time.perf_counter()
        fn(q)
        out.append(time.perf_counter() - t)
    return out


def make_queries(world, rendered, n: int) -> list[str]:
    qs = generate_questions(world, rendered, count=max(n, 50))
    names = [q.hops[0].queries[0] for q in qs]
    texts = [q.question for q in qs]
    mixed = [x for pair in zip(names, texts) for x in pair]
    return mixed[:n]


def start_server(corpus_path: Path, index_dir: Path) -> tuple[subprocess.Popen, str, float]:
    t = time.perf_counter()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "agentgym_turn.cli",
            "serve",
            "retriever",
            "--corpus",
            str(corpus_path),
            "--index-dir",
            str(index_dir),
            "--port",
            "0",
        ],
        stderr=subprocess.PIPE,
        text=True,
        cwd=common.ROOT,
    )
    assert proc.stderr is not None
    for line in proc.stderr:
        m = re.search(r"at (http://127\.0\.0\.1:\d+/retrieve)", line)
        if m:
            return proc, m.group(1), time.perf_counter() - t
    raise RuntimeError("the retrieval server did not start")


def bench_size(target: int, n_queries: int, base_passages: int, workdir: Path, http: bool) -> dict:
    scale = target / base_passages
    t = time.perf_counter()
    world = generate_world(WorldConfig.scaled(scale, seed=0))
    rendered = render_corpus(world)
    corpus = rendered.corpus
    gen_s = time.perf_counter() - t
    queries = make_queries(world, rendered, n_queries)
    print(f"[{len(corpus):,} passages] generated in {gen_s:.1f}s; indexing ...", file=sys.stderr, flush=True)

    t = time.perf_counter()
    # BM25Index.build's default analyzer and length norm, keeping the bm25s object: "raw_bm25s" times it without our wrapper
    backend = "numba" if len(corpus) >= NUMBA_MIN_DOCS and importlib.util.find_spec("numba") else "numpy"
    raw = bm25s.BM25(k1=K1, b=B, method="lucene", backend=backend)
    raw.index(tokenize_many(corpus.contents), show_progress=False)
    index = BM25Index(raw, len(corpus))
    build_s = time.perf_counter() - t
    t = time.perf_counter()
    index.warmup()
    warmup_s = time.perf_counter() - t
    retriever = BM25Retriever(corpus, index)
    for q in queries[:20]:  # warm caches and code paths
        retriever.retrieve([q], 3)

    in_process = percentiles(time_each(lambda q: retriever.retrieve([q], 3), queries))
    kwargs = {"n_threads": 1} if index.backend == "numba" else {}
    raw_stats = percentiles(
        time_each(lambda q: raw.retrieve(tokenize_many([q]), k=3, show_progress=False, **kwargs), queries)
    )
    batch = queries[:256]
    t = time.perf_counter()
    retriever.retrieve(batch, 3)
    batch_qps = len(batch) / (time.perf_counter() - t)
    result = {
        "passages": len(corpus),
        "world_scale": round(scale, 4),
        "generate_s": round(gen_s, 2),
        "index_build_s": round(build_s, 2),
        "backend": index.backend,
        "warmup_s": round(warmup_s, 2),
        "queries": len(queries),
        "in_process": in_process,
        "in_process_batch256_queries_per_s": round(batch_qps, 1),
        "raw_bm25s": raw_stats,
        "wrapper_overhead_ratio_p50": round(in_process["p50_ms"] / raw_stats["p50_ms"], 3),
    }
    if http:
        index_dir = workdir / f"index_{len(corpus)}"
        corpus_path = workdir / f"corpus_{len(corpus)}.jsonl"
        retriever.save(index_dir)  # with the corpus fingerprint the server checks
        corpus.to_jsonl(corpus_path)
        proc, url, start_s = start_server(corpus_path, index_dir)
        try:
            client = HTTPRetriever(url)
            for q in queries[:20]:
                client.retrieve([q], 3)
            same = all(
                [h.document.id for h in client.retrieve([q], 3)[0]]
                == [h.document.id for h in retriever.retrieve([q], 3)[0]]
                for q in queries[:50]
            )
            over_http = percentiles(time_each(lambda q: client.retrieve([q], 3), queries))
            t = time.perf_counter()
            client.retrieve(batch, 3)
            http_batch_qps = len(batch) / (time.perf_counter() - t)
            client.close()
        finally:
            proc.terminate()
            proc.wait(timeout=60)
        result["http"] = over_http
        result["http_batch256_queries_per_s"] = round(http_batch_qps, 1)
        result["http_same_results_as_in_process"] = same
        result["server_start_s"] = round(start_s, 2)
        result["http_overhead_ms_p50"] = round(over_http["p50_ms"] - in_process["p50_ms"], 3)
    if len(corpus) >= 900_000:
        result["target_p50_ms"] = TARGET_P50_MS_AT_1M
        result["target_over_p50"] = round(TARGET_P50_MS_AT_1M / in_process["p50_ms"], 1)
        result["measured_md_bm25s_p50_ms"] = MEASURED_BM25S_P50_MS_AT_1M
    print(json.dumps(result), file=sys.stderr, flush=True)
    return result


def bench_env(episodes: int, workdir: Path, http: bool) -> dict:
    import gymnasium as gym

    import agentgym_turn  # noqa: F401
    from agentgym_turn.searchqa.source import generated_source

    def run(env) -> tuple[float, int]:
        steps = 0
        t = time.perf_counter()
        for i in range(episodes):
            env.reset(options={"question_index": i % len(env.unwrapped.questions)})
            while True:
                _, _, terminated, truncated, _ = env.step(env.unwrapped.expert_action())
                steps += 1
                if terminated or truncated:
                    break
        return time.perf_counter() - t, steps

    t = time.perf_counter()
    env = gym.make("TurnSearchQA-v0", split="test")
    make_s = time.perf_counter() - t
    run(env)  # warm
    elapsed, steps = run(env)
    out = {
        "passages": len(generated_source().corpus),
        "episodes": episodes,
        "steps": steps,
        "first_make_s": round(make_s, 2),
        "steps_per_s_in_process": round(steps / elapsed, 1),
        "episodes_per_s_in_process": round(episodes / elapsed, 1),
    }
    if http:
        proc = subprocess.Popen(
            [sys.executable, "-m", "agentgym_turn.cli", "serve", "retriever", "--generated", "--port", "0"],
            stderr=subprocess.PIPE,
            text=True,
            cwd=common.ROOT,
        )
        try:
            url = None
            assert proc.stderr is not None
            for line in proc.stderr:
                m = re.search(r"at (http://127\.0\.0\.1:\d+/retrieve)", line)
                if m:
                    url = m.group(1)
                    break
            remote = gym.make("TurnSearchQA-v0", split="test", retriever_url=url)
            run(remote)
            elapsed, steps = run(remote)
        finally:
            proc.terminate()
            proc.wait(timeout=60)
        out["steps_per_s_http"] = round(steps / elapsed, 1)
        out["steps_http"] = steps  # the same expert episodes: equal to "steps" when the retriever answers the same
    return out


FIRST_QUERY_CODE = """
import json, statistics, sys, time
from agentgym_turn.searchqa.retrieval import BM25Retriever
from agentgym_turn.searchqa.source import generated_source
scale, warm = float(sys.argv[1]), sys.argv[2] == "1"
t = time.perf_counter(); source = generated_source(0, scale); gen = time.perf_counter() - t
t = time.perf_counter(); r = BM25Retriever.build(source.corpus, warmup=warm, show_progress=False); build = time.perf_counter() - t
qs = [q.question for q in source.questions[:60]]
times = []
for q in qs:
    t = time.perf_counter(); r.retrieve([q], 3); times.append(time.perf_counter() - t)
print(json.dumps({"passages": len(source.corpus), "backend": r.index.backend, "warmup_at_build": warm,
                  "generate_s": round(gen, 2), "build_s": round(build, 2), "first_query_ms": round(times[0] * 1000, 2),
                  "later_query_p50_ms": round(statistics.median(times[1:]) * 1000, 3)}))
"""


def bench_first_query(scale: float) -> dict:
    """First vs later search time in fresh processes, building the retriever with and without warm-up."""
    out = {}
    for warm in (False, True):
        proc = subprocess.run(
            [sys.executable, "-c", FIRST_QUERY_CODE, str(scale), "1" if warm else "0"],
            capture_output=True,
            text=True,
            cwd=common.ROOT,
            check=True,
        )
        row = json.loads(proc.stdout.strip().splitlines()[-1])
        row["first_over_later"] = round(row["first_query_ms"] / max(row["later_query_p50_ms"], 1e-3), 1)
        out["with_warmup" if warm else "without_warmup"] = row
        print(json.dumps(row), file=sys.stderr, flush=True)
    return out


#: Worst-case responses for the parsers (65,536 characters each, the action length limit).
WORST_CASES = {
    "mcq_option_spaces": "<answer>option" + " " * 65506 + "!</answer>",
    "mcq_answer_colons": "<answer>answer" + " :" * 32756 + "</answer>",
    "open_search_tags": "<search>" * 8192,
    "open_answer_tags": "<answer>" * 8190 + "</search>",
    "many_answers": "<answer>a</answer>" * 3640,
    "angle_brackets": "<" * 65536,
    "think_tags": "<think>" * 9362,
    "spaced_tags": "< " * 32764 + "answer>",
}


def bench_parsers(repeats: int) -> dict:
    """Seconds of one env step on each worst-case response (best of ``repeats``), per env and protocol."""
    from agentgym_turn.searchqa.env import TurnSearchQAEnv, TurnSearchQAMCQEnv

    out: dict = {}
    for name, cls, protocol in (
        ("plain_search_r1", TurnSearchQAEnv, "search_r1"),
        ("mcq_search_r1", TurnSearchQAMCQEnv, "search_r1"),
        ("plain_strict", TurnSearchQAEnv, "strict"),
        ("mcq_strict", TurnSearchQAMCQEnv, "strict"),
    ):
        env = cls(split="test", protocol=protocol)
        row = {}
        for case, response in WORST_CASES.items():
            best = float("inf")
            for _ in range(repeats):
                env.reset(seed=0)
                t = time.perf_counter()
                env.step(response)
                best = min(best, time.perf_counter() - t)
            row[case] = round(best, 5)
        out[name] = row
    out["max_step_s"] = max(v for row in out.values() for v in row.values())
    out["response_chars"] = sorted({len(r) for r in WORST_CASES.values()})
    return out


SECTIONS = ("retrieval", "env", "first_query", "parsers")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument(
        "--sizes", type=int, nargs="+", default=[10_000, 100_000, 1_000_000], help="target corpus sizes (passages)"
    )
    p.add_argument("--queries", type=int, default=1000, help="timed queries per size")
    p.add_argument("--episodes", type=int, default=300, help="env episodes for steps/s")
    p.add_argument("--no-http", action="store_true", help="skip the HTTP measurements")
    p.add_argument(
        "--first-query-scale",
        type=float,
        default=10.0,
        help="world scale for the first-query measurement (10: about 60k passages, numba backend)",
    )
    p.add_argument("--parser-repeats", type=int, default=3, help="timed steps per worst-case response")
    p.add_argument("--out", default=str(common.RESULTS / "searchqa.json"))
    p.add_argument(
        "--only",
        nargs="+",
        choices=SECTIONS,
        default=None,
        help="run only these sections and update them in an existing --out file (the rest is kept)",
    )
    args = p.parse_args(argv)
    sections = set(args.only or SECTIONS)

    out = Path(args.out)
    results = common.read_json(out, {"benchmark": "searchqa"}) if args.only else {"benchmark": "searchqa"}
    machine = common.machine(load_avg_at_start=[round(x, 2) for x in os.getloadavg()])
    if args.only:
        results.setdefault("machine_by_section", {}).update({name: machine for name in sections})
    else:
        results["machine"] = machine
    with tempfile.TemporaryDirectory(prefix="searchqa_bench_") as tmp:
        if "retrieval" in sections:
            base = len(render_corpus(generate_world(WorldConfig())).corpus)
            results["retrieval"] = [
                bench_size(size, args.queries, base, Path(tmp), not args.no_http) for size in args.sizes
            ]
        if "env" in sections:
            results["env"] = bench_env(args.episodes, Path(tmp), not args.no_http)
    if "first_query" in sections:
        results["first_query"] = bench_first_query(args.first_query_scale)
    if "parsers" in sections:
        results["parsers_worst_case_step_s"] = bench_parsers(args.parser_repeats)
    machine["load_avg_at_end"] = [round(x, 2) for x in os.getloadavg()]
    machine["peak_rss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    common.write_json(out, results, indent=2)
    print(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
