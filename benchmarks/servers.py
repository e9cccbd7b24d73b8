"""Load on the project's servers, loopback only, bounded in clients and time.

Retriever: ``C`` concurrent clients, each opening a new connection for every request (as
Search-R1's ``requests.post`` client does), for ``D`` seconds against ``RetrievalServer`` over the
generated TurnSearchQA corpus. Reported: requests/s, p50/p99 latency, HTTP errors, connection
resets/refusals (must be zero), and the server's thread count before and after.

    python benchmarks/servers.py                  # 200 clients, 30 s (the bar)
    python benchmarks/servers.py --clients 50 --seconds 5

WebShop site: ``S`` concurrent sessions (one client thread each, plain ``http.client``), each
playing an expert episode over HTTP (``TurnWebShop-v0``'s oracle on an in-process env with the same
goal picks each action; the client performs it as a browser would), for ``R`` rounds, against
``agentgym-turn serve webshop`` run as a separate process. Reported: requests/s and p50/p99 latency,
errors, pages that show another session's goal (must be zero), episodes whose score differs from
the in-process env's (must be zero), and the server's RSS after each round once its sessions
expired (flat means no leak).

    python benchmarks/servers.py --only site --site-sessions 200 --site-rounds 5

Results go to ``benchmarks/results/servers.json``.
"""

from __future__ import annotations

import argparse
import http.client
import json
import statistics
import sys
import threading
import time
from pathlib import Path

try:  # python -m benchmarks.servers, or imported by the tests
    from benchmarks import common
except ModuleNotFoundError:  # python benchmarks/servers.py: this folder comes first on the import path
    import common

RESULTS = common.RESULTS / "servers.json"


def _load_retriever(clients: int, seconds: float) -> dict:
    from agentgym_turn.searchqa.server import RetrievalServer
    from agentgym_turn.searchqa.source import generated_source, local_retriever

    source = generated_source()
    retriever = local_retriever(source.key, source.corpus, "bm25")
    questions = [q for q in source.corpus.contents[:500]]
    latencies: list[float] = []
    errors: list[str] = []
    lock = threading.Lock()
    stop_at = [0.0]

    def client(k: int) -> None:
        i = k
        while time.monotonic() < stop_at[0]:
            query = questions[i % len(questions)][:60]
            i += clients
            body = json.dumps({"queries": [query], "topk": 3, "return_scores": True})
            t0 = time.perf_counter()
            try:
                conn = http.client.HTTPConnection(server.host, server.port, timeout=30)
                conn.request(
                    "POST", "/retrieve", body=body, headers={"Content-Type": "application/json", "Connection": "close"}
                )
                resp = conn.getresponse()
                payload = resp.read()
                conn.close()
                ok = resp.status == 200 and len(json.loads(payload)["result"]) == 1
                with lock:
                    if ok:
                        latencies.append(time.perf_counter() - t0)
                    else:
                        errors.append(f"HTTP {resp.status}")
            except OSError as err:
                with lock:
                    errors.append(type(err).__name__)

    with RetrievalServer(retriever) as server:
        threads_before = threading.active_count()
        stop_at[0] = time.monotonic() + seconds
        started = time.monotonic()
        workers = [threading.Thread(target=client, args=(k,), daemon=True) for k in range(clients)]
        for w in workers:
            w.start()
        for w in workers:
            w.join(timeout=seconds + 60)
        elapsed = time.monotonic() - started
    latencies.sort()
    kinds: dict[str, int] = {}
    for e in errors:
        kinds[e] = kinds.get(e, 0) + 1
    return {
        "clients": clients,
        "seconds": round(elapsed, 2),
        "requests_ok": len(latencies),
        "requests_per_s": round(len(latencies) / elapsed, 1),
        "p50_ms": round(1000 * statistics.median(latencies), 2) if latencies else None,
        "p99_ms": round(1000 * latencies[int(0.99 * (len(latencies) - 1))], 2) if latencies else None,
        "errors": len(errors),
        "error_kinds": kinds,
        "server_threads_at_start": threads_before,
        "corpus_passages": len(source.corpus),
    }


def _rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return round(int(line.split()[1]) / 1024, 1)
    return float("nan")


def _load_site(sessions: int, rounds: int, idle_timeout: float = 30.0) -> dict:
    import re
    import subprocess
    from urllib.parse import quote, urlencode

    from agentgym_turn.webshop.env import TurnWebShopEnv
    from agentgym_turn.webshop.text import html_to_text

    cmd = [
        sys.executable,
        "-m",
        "agentgym_turn.webshop.server",
        "--port",
        "0",
        "--goal-split",
        "all",
        "--max-sessions",
        str(2 * sessions),
        "--idle-timeout",
        str(idle_timeout),
    ]
    proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stderr.readline()
        m = re.search(r"http://([\d.]+):(\d+)/", line)
        if m is None:
            raise RuntimeError(f"the site did not start: {line!r}")
        host, port = m.group(1), int(m.group(2))
        threading.Thread(target=proc.stderr.read, daemon=True).start()  # drain the log
        latencies: list[float] = []
        errors: list[str] = []
        leaks: list[str] = []
        wrong_scores: list[int] = []
        lock = threading.Lock()
        rss = {"after_start_mb": _rss_mb(proc.pid), "after_each_round_expired_mb": [], "open_sessions_after_expiry": []}

        reconnects = [0]

        def call(conn, method, path, body=None, headers=None):
            t0 = time.perf_counter()
            try:
                conn.request(method, path, body=body, headers=headers or {})
                resp = conn.getresponse()
            except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError):
                # the server closed this keep-alive connection while it was idle (keep_alive, 5 s) before reading
                # the request: reconnect and send it again, as browsers and urllib3 do
                with lock:
                    reconnects[0] += 1
                conn.close()
                t0 = time.perf_counter()
                conn.request(method, path, body=body, headers=headers or {})
                resp = conn.getresponse()
            data = resp.read()
            with lock:
                latencies.append(time.perf_counter() - t0)
            return resp.status, resp, data

        def episode(goal: int) -> None:
            env = TurnWebShopEnv(goal_split="all", list_actions=False)
            env.reset(options={"goal_index": goal})
            instruction = env.goal.instruction_text
            conn = http.client.HTTPConnection(host, port, timeout=60)
            try:
                status, _, data = call(
                    conn, "POST", "/sessions", json.dumps({"goal_index": goal}), {"Content-Type": "application/json"}
                )
                if status != 201:
                    raise RuntimeError(f"HTTP {status} creating a session")
                sid = json.loads(data)["session"]
                for _ in range(15):
                    action = env.expert_action()
                    if action.startswith("search["):
                        form = urlencode({"search_query": action[7:-1]})
                        status, _, _ = call(
                            conn,
                            "POST",
                            f"/s/{sid}/search",
                            form,
                            {"Content-Type": "application/x-www-form-urlencoded"},
                        )
                    else:
                        status, _, _ = call(conn, "POST", f"/s/{sid}/click?name={quote(action[6:-1], safe='')}")
                    if status != 303:
                        raise RuntimeError(f"HTTP {status} on {action[:40]}")
                    _, reward, terminated, _, info = env.step(action)
                    status, _, page = call(conn, "GET", f"/s/{sid}")
                    if status != 200:
                        raise RuntimeError(f"HTTP {status} reading the page")
                    text = html_to_text(page.decode("utf-8"), "text")
                    if not terminated and instruction not in text:
                        with lock:
                            leaks.append(sid)
                    if terminated:
                        break
                status, _, data = call(conn, "GET", f"/s/{sid}/state")
                if status != 200:
                    raise RuntimeError(f"HTTP {status} reading the state")
                if json.loads(data)["score"] != info["score"]:
                    with lock:
                        wrong_scores.append(goal)
            except (OSError, RuntimeError, ValueError) as err:
                with lock:
                    errors.append(f"{type(err).__name__}: {err}"[:120])
            finally:
                conn.close()

        started = time.monotonic()
        busy = 0.0
        for r in range(rounds):
            t0 = time.monotonic()
            workers = [threading.Thread(target=episode, args=(r * sessions + k,), daemon=True) for k in range(sessions)]
            for w in workers:
                w.start()
            for w in workers:
                w.join(timeout=600)
            busy += time.monotonic() - t0
            time.sleep(idle_timeout + 1.0)  # every session of the round is idle past its timeout now
            conn = http.client.HTTPConnection(host, port, timeout=60)
            conn.request("GET", "/health")  # counting the sessions sweeps the expired ones
            rss["open_sessions_after_expiry"].append(json.loads(conn.getresponse().read())["sessions"])
            conn.close()
            rss["after_each_round_expired_mb"].append(_rss_mb(proc.pid))
        latencies.sort()
        return {
            "sessions_per_round": sessions,
            "rounds": rounds,
            "episodes": sessions * rounds,
            "seconds_under_load": round(busy, 2),
            "requests": len(latencies),
            "requests_per_s": round(len(latencies) / busy, 1) if busy else None,
            "p50_ms": round(1000 * statistics.median(latencies), 2) if latencies else None,
            "p99_ms": round(1000 * latencies[int(0.99 * (len(latencies) - 1))], 2) if latencies else None,
            "errors": len(errors),
            "error_examples": errors[:5],
            "reconnects_after_idle_keep_alive_close": reconnects[0],
            "pages_with_another_sessions_goal": len(leaks),
            "scores_differing_from_in_process": len(wrong_scores),
            "idle_timeout_s": idle_timeout,
            "server_rss": rss,
            "machine": common.machine(
                load_average_1min_at_end=common.load_average(),
                note="client threads in this process, the site in its own process, on the same machine",
            ),
            "wall_seconds": round(time.monotonic() - started, 2),
        }
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--clients", type=int, default=200, help="concurrent retriever clients (default 200)")
    parser.add_argument("--seconds", type=float, default=30.0, help="duration of the retriever run (default 30)")
    parser.add_argument(
        "--site-sessions", type=int, default=200, help="concurrent WebShop sessions per round (default 200)"
    )
    parser.add_argument(
        "--site-rounds", type=int, default=5, help="rounds of sessions, to see memory once they expire (default 5)"
    )
    parser.add_argument(
        "--site-idle-timeout",
        type=float,
        default=30.0,
        help="the site's --idle-timeout (default 30 s: above the slowest gap between one session's requests under load)",
    )
    parser.add_argument("--only", choices=("retriever", "site"), help="run one server's load only")
    parser.add_argument(
        "--out",
        type=Path,
        default=RESULTS,
        help="results JSON, updated in place (default benchmarks/results/servers.json)",
    )
    args = parser.parse_args(argv)
    result: dict = {}
    if args.only != "site":
        result["machine"] = common.machine(load_average_1min_at_end=common.load_average())
        result["retriever_connection_per_request"] = _load_retriever(args.clients, args.seconds)
    if args.only != "retriever":
        result["webshop_site_sessions"] = _load_site(args.site_sessions, args.site_rounds, args.site_idle_timeout)
    previous = common.read_json(args.out, {})
    previous.update(result)
    common.write_json(args.out, previous, indent=2)
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
