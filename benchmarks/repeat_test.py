"""Run one test many times in a row under CPU load, and count how often it passes: a flaky test shows here.

    python benchmarks/repeat_test.py                       # the server-copy test, 20 times, 2 busy processes
    python benchmarks/repeat_test.py --times 50 --load 4 TEST_NODE_ID ...

Each repetition is a fresh ``pytest`` process (the suite's own settings), so no state carries over; while they run,
``--load`` processes spin on the CPU (a loaded CI machine), started before the first and stopped after the last.
Results: ``benchmarks/results/repeat_test.json`` (per run: passed, seconds, the load average).
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import subprocess
import sys
import time
from pathlib import Path

try:
    from benchmarks import common
except ImportError:  # run as a script: this folder is first on the path
    import common

#: The test that lived on as a copy after its parent was killed (a SIGTERM handler raising inside a weakref callback).
DEFAULT_TESTS = (
    "tests/agentgym_turn/test_serving_processes.py::test_processes__copies_exit_when_the_server_is_killed_outright",
)


def _spin(stop) -> None:
    """Keep one core busy until ``stop`` is set."""
    x = 0
    while not stop.is_set():
        for _ in range(100_000):
            x += 1


def run(args: argparse.Namespace) -> dict:
    stop = mp.Event()
    spinners = [mp.Process(target=_spin, args=(stop,), daemon=True) for _ in range(args.load)]
    for p in spinners:
        p.start()
    runs = []
    try:
        for k in range(args.times):
            t0 = time.perf_counter()
            proc = subprocess.run(
                [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args.tests],
                cwd=common.ROOT,
                capture_output=True,
                text=True,
                timeout=args.timeout,
            )
            runs.append(
                {
                    "passed": proc.returncode == 0,
                    "seconds": round(time.perf_counter() - t0, 2),
                    "load": common.load_average(),
                    "tail": "" if proc.returncode == 0 else proc.stdout[-2000:],
                }
            )
            print(
                f"{k + 1}/{args.times}: {'passed' if proc.returncode == 0 else 'FAILED'} ({runs[-1]['seconds']} s, "
                f"load {runs[-1]['load']})",
                flush=True,
            )
    finally:
        stop.set()
        for p in spinners:
            p.join(5)
    passed = sum(r["passed"] for r in runs)
    return {
        "tests": list(args.tests),
        "times": args.times,
        "load_processes": args.load,
        "passed": passed,
        "all_passed": passed == args.times,
        "machine": common.machine(),
        "runs": runs,
    }


def markdown(result: dict) -> str:
    seconds = sorted(r["seconds"] for r in result["runs"])
    loads = [r["load"] for r in result["runs"]]
    return (
        f"| tests | runs | passed | busy processes beside | load average | seconds per run (median) |\n|---|---|---|---|---|---|\n"
        f"| {', '.join(t.split('::')[-1] for t in result['tests'])} | {result['times']} | {result['passed']} | "
        f"{result['load_processes']} | {min(loads):.1f}-{max(loads):.1f} | {seconds[len(seconds) // 2]:.1f} |"
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "tests", nargs="*", default=list(DEFAULT_TESTS), help="pytest node ids (default: the server-copy test)"
    )
    ap.add_argument("--times", type=int, default=20, help="repetitions, each a fresh pytest process (default 20)")
    ap.add_argument("--load", type=int, default=2, help="busy processes beside the runs (default 2: both cores of CI)")
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds one repetition may take")
    ap.add_argument("--out", type=Path, default=common.RESULTS / "repeat_test.json")
    ap.add_argument("--markdown", action="store_true", help="only print the table of the saved results")
    args = ap.parse_args(argv)
    if args.times < 1 or args.load < 0:
        ap.error("--times must be >= 1 and --load >= 0")
    code = common.run_and_report(args, run, markdown)
    return code if getattr(args, "markdown", False) or common.read_json(args.out)["all_passed"] else 1


if __name__ == "__main__":
    sys.exit(main())
