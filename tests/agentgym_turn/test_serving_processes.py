"""``AppServer.serve_forever(processes=N)`` and ``agentgym-turn serve retriever --processes N``: N processes share
one listening socket, all of them answer, and the copies never outlive the server."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
import urllib.request
from pathlib import Path

import pytest

from agentgym_turn.serving import AppServer
from support.retriever_cli import start_retriever, write_corpus

pytestmark = pytest.mark.skipif(
    not Path("/proc/self/task").is_dir() or sys.platform != "linux", reason="needs Linux /proc"
)

PID_APP = textwrap.dedent("""
    import os, sys
    from starlette.applications import Starlette
    from starlette.responses import JSONResponse
    from starlette.routing import Route
    from agentgym_turn.serving import AppServer

    async def pid(request):
        return JSONResponse({"pid": os.getpid()})

    server = AppServer(Starlette(routes=[Route("/", pid)]))
    print(server.base_url, flush=True)
    server.serve_forever(int(sys.argv[1]))
""")


def children(pid: int) -> list[int]:
    """Live child processes of ``pid`` (from /proc)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid and fields[0] != "Z":
            found.append(int(stat.parent.name))
    return found


def gone(pids: list[int], within_s: float = 30.0) -> bool:
    """Whether every pid has exited (or is a zombie) within ``within_s`` seconds."""
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        alive = []
        for p in pids:
            try:
                state = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()[0]
            except OSError:
                continue
            if state != "Z":
                alive.append(p)
        if not alive:
            return True
        time.sleep(0.05)
    return False


def start_pid_server(processes: int) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen([sys.executable, "-c", PID_APP, str(processes)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    return proc, proc.stdout.readline().strip()


def wait_for_children(pid: int, count: int) -> list[int]:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        kids = children(pid)
        if len(kids) >= count:
            return kids
        time.sleep(0.05)
    return children(pid)


def test_processes__every_copy_answers_on_the_one_port_and_sigterm_stops_them_all():
    proc, url = start_pid_server(3)
    try:
        copies = wait_for_children(proc.pid, 2)
        assert len(copies) == 2
        seen = set()
        for _ in range(600):  # a fresh connection each time: the kernel hands it to whichever copy accepts first
            with urllib.request.urlopen(url + "/", timeout=30) as response:
                seen.add(json.load(response)["pid"])
            if len(seen) == 3:
                break
        assert seen <= {proc.pid, *copies} and len(seen) >= 2
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
        assert gone(copies)
    finally:
        proc.kill()
        proc.wait()


def test_processes__copies_exit_when_the_server_is_killed_outright():
    proc, url = start_pid_server(2)
    try:
        copies = wait_for_children(proc.pid, 1)
        assert len(copies) == 1
        proc.kill()  # no clean-up runs in the parent: the copy goes by the parent-death signal
        proc.wait()
        assert gone(copies)
    finally:
        proc.kill()
        proc.wait()


def test_processes__a_copy_does_not_keep_the_parents_handler_that_raises_on_sigterm():
    """The parent's SIGTERM handler raises SystemExit, which Python swallows when the signal lands in a weakref
    callback (the copy then lived on); each copy serves with the default action, which ends it wherever it lands."""
    import multiprocessing
    import os
    import signal
    from types import SimpleNamespace

    from agentgym_turn import serving

    reader, writer = multiprocessing.Pipe(duplex=False)

    class Served:  # what _serve_copy needs of an AppServer; _run reports the handler uvicorn would start from
        _server = SimpleNamespace(config=None)

        def _run(self):
            writer.send(signal.getsignal(signal.SIGTERM) == signal.SIG_DFL)

    previous = signal.signal(signal.SIGTERM, serving._exit_on_signal)  # as serve_forever sets it before forking
    try:
        copy = multiprocessing.get_context("fork").Process(target=serving._serve_copy, args=(Served(), os.getpid()))
        copy.start()
        copy.join(60)
    finally:
        signal.signal(signal.SIGTERM, previous)
    assert reader.poll(5) and reader.recv() is True


@pytest.mark.parametrize("bad", [0, -1, True, 1.5])
def test_processes__must_be_a_positive_integer(bad):
    async def app(scope, receive, send):  # never served
        raise AssertionError

    server = AppServer(app)
    try:
        with pytest.raises(ValueError, match="processes"):
            server.serve_forever(bad)
    finally:
        server.stop()


def test_cli__serve_retriever_with_two_processes(tmp_path):
    proc, url = start_retriever(write_corpus(tmp_path / "corpus.jsonl"), "--processes", "2")
    try:
        copies = wait_for_children(proc.pid, 1)
        assert len(copies) == 1
        for i in range(20):
            request = urllib.request.Request(
                url,
                data=json.dumps({"queries": [f"word{i % 5}"], "topk": 1}).encode(),
                headers={"Content-Type": "application/json"},
            )
            with urllib.request.urlopen(request, timeout=30) as response:
                assert json.load(response)["result"][0][0]["id"] == str(i % 5)
        proc.send_signal(signal.SIGINT)  # Ctrl-C
        assert proc.wait(timeout=30) == 0
        assert gone(copies)
    finally:
        proc.kill()
        proc.wait()


def test_cli__serve_retriever_refuses_zero_processes(tmp_path):
    corpus = write_corpus(tmp_path / "corpus.jsonl", 1)
    done = subprocess.run(
        [sys.executable, "-m", "agentgym_turn.cli", "serve", "retriever", "--corpus", str(corpus), "--processes", "0"],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ},
    )
    assert done.returncode == 2 and "--processes must be at least 1" in done.stderr


def test_processes__outside_the_main_thread_fail_before_any_copy_starts():
    import threading

    async def app(scope, receive, send):  # never served
        raise AssertionError

    server, errors = AppServer(app), []

    def serve():
        try:
            server.serve_forever(2)
        except ValueError as err:  # signal handlers belong to the main thread
            errors.append(err)

    try:
        thread = threading.Thread(target=serve)
        thread.start()
        thread.join(timeout=30)
        import multiprocessing

        assert len(errors) == 1
        assert not [c for c in multiprocessing.active_children() if c.name.startswith("agentgym-server")]
    finally:
        server.stop()
