"""EndpointPlayer: a fault outside the model (down, slow, 5xx, 429, malformed JSON) is retried, then an infra_error."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import gymnasium as gym
import pytest

import agentgym_turn  # noqa: F401
from agentgym_turn.chat import ChatView
from agentgym_turn.evaluation import EndpointPlayer
from agentgym_turn.evaluation.players import chat_completions_url

GOOD = {
    "choices": [{"message": {"role": "assistant", "content": "<answer>Up</answer>"}}],
    "usage": {"prompt_tokens": 12, "completion_tokens": 7},
}


class _QuietServer(ThreadingHTTPServer):
    """Handler threads that outlive a client (a slow reply to a client that timed out) end without printing to
    stderr, where a later test's captured output would read it."""

    daemon_threads = True

    def handle_error(self, request, client_address):
        pass


class _Stub:
    """A chat-completions server on 127.0.0.1 that answers from a script: one behaviour per request, then the last."""

    def __init__(self, script):
        self.script, self.requests = list(script), []
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                stub.requests.append((self.path, body, self.headers.get("Authorization")))
                kind = stub.script.pop(0) if len(stub.script) > 1 else stub.script[0]
                if kind == "slow":
                    threading.Event().wait(1.5)
                    kind = "ok"
                status, payload = {
                    "ok": (200, json.dumps(GOOD)),
                    "500": (500, "boom"),
                    "429": (429, "slow down"),
                    "bad": (200, "{not json"),
                    "shape": (200, json.dumps({"choices": []})),
                }[kind]
                self.send_response(status)
                if status == 429:
                    self.send_header("Retry-After", "0")
                self.send_header("Content-Type", "application/json")
                self.end_headers()
                self.wfile.write(payload.encode())

        self.server = _QuietServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()


def _chat():
    chat = ChatView(gym.make("TurnSokoban-v0"))
    chat.reset(seed=0)
    return chat


def _ask(url, **kwargs):
    player = EndpointPlayer(url, backoff_s=0.01, **kwargs)
    try:
        return player.respond([_chat()], temperature=0.0, top_p=1.0, max_new_tokens=8, seeds=[3])[0]
    finally:
        player.close()


def test_endpoint__sends_the_chat_and_reads_the_reply(monkeypatch):
    monkeypatch.setenv("MY_KEY", "sekret")
    with _Stub(["ok"]) as stub:
        reply = _ask(stub.url + "/v1", api_key_env="MY_KEY")
    assert (reply.status, reply.text, reply.completion_tokens, reply.prompt_tokens) == (
        "ok",
        "<answer>Up</answer>",
        7,
        12,
    )
    path, body, auth = stub.requests[0]
    assert path == "/v1/chat/completions" and auth == "Bearer sekret"
    assert body["messages"][0]["role"] == "system" and body["messages"][-1]["role"] == "user"
    assert (body["temperature"], body["max_tokens"], body["seed"]) == (0.0, 8, 3)


@pytest.mark.parametrize("fault", ["500", "429", "bad", "shape"])
def test_endpoint__a_fault_is_retried_then_succeeds(fault):
    with _Stub([fault, fault, "ok"]) as stub:
        reply = _ask(stub.url, retries=2)
    assert reply.status == "ok" and len(stub.requests) == 3


@pytest.mark.parametrize("fault", ["500", "429", "bad", "shape", "slow"])
def test_endpoint__a_fault_that_persists_is_an_infra_error(fault):
    with _Stub([fault]) as stub:
        reply = _ask(stub.url, retries=1, timeout_s=0.5)
    assert reply.status == "infra_error" and "after 2 tries" in reply.error
    assert len(stub.requests) == 2


def test_endpoint__a_server_that_is_down_is_an_infra_error():
    with _Stub(["ok"]) as stub:
        url = stub.url
    reply = _ask(url, retries=1)
    assert reply.status == "infra_error" and "unreachable" in reply.error


def test_chat_completions_url__accepts_root_v1_and_full_path():
    want = "http://h:1/v1/chat/completions"
    assert {chat_completions_url(u) for u in ("http://h:1", "http://h:1/", "http://h:1/v1", want)} == {want}


def test_endpoint__refuses_an_unset_key_variable(monkeypatch):
    monkeypatch.delenv("NOPE_KEY", raising=False)
    with pytest.raises(ValueError, match="NOPE_KEY"):
        EndpointPlayer("http://127.0.0.1:9", api_key_env="NOPE_KEY")
