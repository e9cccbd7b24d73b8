"""Served-env churn, loopback only: clients that play, drop, go silent and leave half-open requests, while the
server's memory is sampled; what ``validate --soak`` and ``benchmarks/soak.py`` run.

A server is a process (:class:`ServedProcess`, started from a command that prints its URL) or a port. ``C`` client
threads, for ``D`` seconds, each draw one scenario at a time (seeded) and play it:

* env server: a whole episode over ``/ws`` (reset, a few steps, a clean close); a session dropped mid-episode (the
  socket closed with no close frame); a session left silent past the idle timeout; a half-open request (part of a
  request head, then nothing, until the server's header deadline closes it); a stateless ``POST /reset``;
* WebShop site: a session opened with ``POST /sessions`` and a few pages, then abandoned (sessions expire); a request
  whose body stops halfway before the client vanishes.

Reported per server: sessions opened, the memory slope per 1,000 sessions after warm-up (a least-squares line over
the samples after the first third of the run), sessions still live after the clients stop and the idle timeout
passes, client-side failures a healthy server would not cause (a 5xx other than a capacity refusal, a reset
connection, a timeout) and tracebacks in the server's log. A session the server closed because the client thread
itself went quiet past the idle timeout (starved of CPU on a loaded machine) is what a healthy server does: counted
apart, as ``clients_idled``.
"""

from __future__ import annotations

import http.client
import json
import random
import re
import socket
import subprocess
import threading
import time
from typing import Any, Callable

#: Seconds a silent session lives on either server during the soak (short, so that abandoned sessions churn).
IDLE_TIMEOUT_S = 4.0
#: Half-open connections and silent sessions a client holds at most at once.
HELD_AT_MOST = 4
_URL = re.compile(r"http://127\.0\.0\.1:(\d+)")


def rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


class ServedProcess:
    """A server process: its port, its log (drained by a thread; tracebacks counted) and its memory."""

    @classmethod
    def at(cls, port: int) -> "ServedProcess":
        """A server someone else runs, on this machine's ``port``: no memory samples, no log."""
        served = cls.__new__(cls)
        served.proc, served.port, served.tracebacks, served.log_tail = None, int(port), 0, []
        return served

    def __init__(self, cmd: list[str]):
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.port, self.tracebacks, self.log_tail = 0, 0, []
        deadline = time.monotonic() + 120
        while not self.port:
            line = self.proc.stdout.readline()
            if not line and (self.proc.poll() is not None or time.monotonic() > deadline):
                raise RuntimeError(f"{' '.join(cmd[:6])} did not start: {''.join(self.log_tail)[-500:]}")
            self.log_tail = (self.log_tail + [line])[-20:]
            m = _URL.search(line)
            if m:
                self.port = int(m.group(1))
        threading.Thread(target=self._drain, daemon=True).start()

    def _drain(self) -> None:
        for line in self.proc.stdout:
            if line.startswith("Traceback"):
                self.tracebacks += 1
            self.log_tail = (self.log_tail + [line])[-20:]

    def health(self) -> dict[str, Any]:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
        try:
            conn.request("GET", "/health")
            return json.loads(conn.getresponse().read())
        finally:
            conn.close()

    def stop(self) -> None:
        if self.proc is None:
            return
        self.proc.terminate()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=30)


class Tally:
    """Counts shared by the client threads."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.sessions = {"env": 0, "site": 0}
        self.scenarios: dict[str, int] = {}
        self.errors: dict[str, list[str]] = {"env": [], "site": []}
        self.idled = {"env": 0, "site": 0}  # sessions the server closed because the client itself went quiet

    def done(self, server: str, scenario: str, opened: int = 1) -> None:
        with self.lock:
            self.sessions[server] += opened
            self.scenarios[scenario] = self.scenarios.get(scenario, 0) + 1

    def error(self, server: str, what: str) -> None:
        with self.lock:
            self.errors[server].append(what[:160])


# ---------------------------------------------------------------------------- env server scenarios
class ClientIdled(Exception):
    """The client itself was quiet past the idle timeout (a thread starved of CPU) and the server rightly closed its
    session: counted apart from errors, since a healthy server does exactly this."""


def ws_connect(port: int) -> Any:
    from websockets.sync.client import connect

    ws = connect(f"ws://127.0.0.1:{port}/ws", open_timeout=10, close_timeout=2, proxy=None, legacy=True)
    ws.soak_last_frame = time.monotonic()  # when this client last heard from the server
    return ws


def frame(ws: Any, kind: str, data: dict[str, Any]) -> dict[str, Any]:
    quiet = time.monotonic() - getattr(ws, "soak_last_frame", time.monotonic())
    try:
        ws.send(json.dumps({"type": kind, "data": data}))
        frame = json.loads(ws.recv(timeout=30))
    except Exception as err:
        if quiet > IDLE_TIMEOUT_S and "idle" in str(err):
            raise ClientIdled(f"quiet {quiet:.1f} s > {IDLE_TIMEOUT_S:g} s: {err}") from err
        raise
    ws.soak_last_frame = time.monotonic()
    if frame.get("type") == "error" and frame.get("data", {}).get("code") != "CAPACITY_REACHED":
        message = frame["data"].get("message", "")
        if quiet > IDLE_TIMEOUT_S and "idle" in message:
            raise ClientIdled(f"quiet {quiet:.1f} s > {IDLE_TIMEOUT_S:g} s: {message[:80]}")
        raise RuntimeError(f"error frame {frame['data'].get('code')}: {message[:80]}")
    return frame


def _env_episode(port: int, rng: random.Random, held: list) -> int:
    with ws_connect(port) as ws:
        frame(ws, "reset", {"seed": rng.randrange(10**6)})
        for _ in range(rng.randint(1, 4)):
            frame(
                ws,
                "step",
                {"message": rng.choice(["<answer>Up</answer>", "<answer>Left || Down</answer>", "nonsense"])},
            )
    return 1


def _env_dropped(port: int, rng: random.Random, held: list) -> int:
    ws = ws_connect(port)
    frame(ws, "reset", {"seed": rng.randrange(10**6)})
    ws.socket.shutdown(socket.SHUT_RDWR)  # gone without a close frame, mid-episode
    ws.socket.close()
    return 1


def _env_silent(port: int, rng: random.Random, held: list) -> int:
    ws = ws_connect(port)
    frame(ws, "reset", {"seed": rng.randrange(10**6)})
    held.append(ws)  # never spoken to again: the idle timeout must end it
    return 1


def _half_open(port: int, rng: random.Random, held: list) -> int:
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    sock.sendall(b"POST /reset HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n")  # and nothing more
    held.append(sock)
    return 0


def _stateless_reset(port: int, rng: random.Random, held: list) -> int:
    status, _ = _http(
        port, "POST", "/reset", json.dumps({"seed": rng.randrange(10**6)}), {"Content-Type": "application/json"}
    )
    if status not in (200, 503):
        raise RuntimeError(f"POST /reset answered {status}")
    return 1


# ---------------------------------------------------------------------------- site scenarios
def _http(
    port: int, method: str, path: str, body: str | None = None, headers: dict[str, str] | None = None
) -> tuple[int, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        conn.request(method, path, body=body, headers=headers or {})
        answer = conn.getresponse()
        return answer.status, answer.read()
    finally:
        conn.close()


def _site_session(port: int, rng: random.Random, held: list) -> int:
    status, data = _http(
        port, "POST", "/sessions", json.dumps({"seed": rng.randrange(10**6)}), {"Content-Type": "application/json"}
    )
    if status == 503:
        return 0
    if status != 201:
        raise RuntimeError(f"POST /sessions answered {status}")
    sid = json.loads(data)["session"]
    for path, body in [("/search", "search_query=" + rng.choice(["red shoes", "laptop bag", "tea"])), ("", None)][
        : rng.randint(1, 2)
    ]:
        method = "POST" if body else "GET"
        headers = {"Content-Type": "application/x-www-form-urlencoded"} if body else {}
        status, _ = _http(port, method, f"/s/{sid}{path}", body, headers)
        if status not in (200, 303):
            raise RuntimeError(f"{method} /s/.../{path.strip('/')} answered {status}")
    return 1  # abandoned: the idle timeout must end it


def _site_cut_body(port: int, rng: random.Random, held: list) -> int:
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    sock.sendall(
        b'POST /sessions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 40\r\n\r\n{"seed": '
    )
    sock.close()
    return 0


SCENARIOS: dict[str, tuple[str, float, Callable[[int, random.Random, list], int]]] = {
    "env episode": ("env", 0.35, _env_episode),
    "env dropped": ("env", 0.15, _env_dropped),
    "env silent": ("env", 0.05, _env_silent),
    "env half-open": ("env", 0.05, _half_open),
    "env stateless reset": ("env", 0.1, _stateless_reset),
    "site session": ("site", 0.25, _site_session),
    "site cut body": ("site", 0.05, _site_cut_body),
}


def _client(
    index: int,
    deadline: float,
    ports: dict[str, int],
    tally: Tally,
    seed: int,
    scenarios: dict[str, tuple[str, float, Callable[[int, random.Random, list], int]]],
) -> None:
    rng = random.Random(seed * 1000 + index)
    names = list(scenarios)
    weights = [scenarios[n][1] for n in names]
    held: list = []
    try:
        while time.monotonic() < deadline:
            name = rng.choices(names, weights)[0]
            server, _, play = scenarios[name]
            if name in ("env silent", "env half-open") and len(held) >= HELD_AT_MOST:
                continue
            try:
                tally.done(server, name, play(ports[server], rng, held))
            except ClientIdled:
                with tally.lock:
                    tally.idled[server] += 1
            except Exception as err:  # anything a healthy server would not cause
                tally.error(server, f"{name}: {type(err).__name__}: {err}")
            while len(held) > HELD_AT_MOST:  # the oldest held connection is let go (the server may have closed it)
                _let_go(held.pop(0))
    finally:
        for item in held:
            _let_go(item)


def _let_go(item: Any) -> None:
    try:
        item.close()
    except Exception:
        pass


def slope_per_1000(samples: list[tuple[float, int, float]], start: float) -> float | None:
    """Least-squares MB per 1,000 sessions over the samples taken after ``start`` seconds."""
    points = [(n, mb) for t, n, mb in samples if t >= start]
    if len(points) < 3 or points[-1][0] == points[0][0]:
        return None
    mean_n = sum(n for n, _ in points) / len(points)
    mean_mb = sum(mb for _, mb in points) / len(points)
    var = sum((n - mean_n) ** 2 for n, _ in points)
    return 1000 * sum((n - mean_n) * (mb - mean_mb) for n, mb in points) / var if var else None


def soak(
    servers: dict[str, "ServedProcess"],
    seconds: float,
    clients: int,
    seed: int = 0,
    *,
    scenarios: dict[str, tuple[str, float, Callable[[int, random.Random, list], int]]] | None = None,
    idle_timeout: float = IDLE_TIMEOUT_S,
) -> dict[str, Any]:
    """Churn ``servers`` (``{name: ServedProcess}``, the names :data:`SCENARIOS` play against) for ``seconds`` with
    ``clients`` threads, wait out ``idle_timeout`` twice, and report per server (the module docstring). The servers
    are the caller's to stop."""
    scenarios = {k: v for k, v in (scenarios or SCENARIOS).items() if v[0] in servers}
    ports = {name: s.port for name, s in servers.items()}
    tally = Tally()
    started = time.monotonic()
    deadline = started + seconds
    threads = [
        threading.Thread(target=_client, args=(i, deadline, ports, tally, seed, scenarios), daemon=True)
        for i in range(clients)
    ]
    for t in threads:
        t.start()
    samples: dict[str, list[tuple[float, int, float]]] = {name: [] for name in servers}
    while any(t.is_alive() for t in threads):
        now = time.monotonic() - started
        with tally.lock:
            counts = dict(tally.sessions)
        for name, served in servers.items():
            samples[name].append(
                (now, counts[name], rss_mb(served.proc.pid) if served.proc is not None else float("nan"))
            )
        time.sleep(min(5.0, max(0.5, seconds / 20)))
    for t in threads:
        t.join(timeout=60)
    time.sleep(idle_timeout * 2 + 2)  # every abandoned session idles out (checked twice per timeout)
    report: dict[str, Any] = {}
    for name, served in servers.items():
        health = served.health()
        rss = [mb for _, _, mb in samples[name]]
        report[name] = {
            "sessions": tally.sessions[name],
            "rss_start_mb": round(rss[0], 1),
            "rss_end_mb": round(rss[-1], 1),
            "rss_peak_mb": round(max(rss), 1),
            "slope_mb_per_1000_sessions": (
                None if (s := slope_per_1000(samples[name], seconds / 3)) is None else round(s, 3)
            ),
            "live_sessions_after_drain": int(health.get("sessions", -1)),
            "client_errors": len(tally.errors[name]),
            "error_examples": tally.errors[name][:5],
            "clients_idled": tally.idled[name],
            "server_tracebacks": served.tracebacks,
            "samples": [[round(t, 1), n, round(mb, 1)] for t, n, mb in samples[name]],
        }
    return {
        "seconds": seconds,
        "clients": clients,
        "seed": seed,
        "idle_timeout_s": idle_timeout,
        "scenarios": dict(sorted(tally.scenarios.items())),
        "servers": report,
    }
