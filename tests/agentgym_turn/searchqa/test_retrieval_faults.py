"""TurnSearchQA-v0 over an HTTP retriever: a retriever that is down, silent, failing or off-protocol ends the
episode with ``exit_status="infra_error"`` (``reward_valid`` False, truncated, reward 0.0) instead of raising,
and the env plays normally again once a retriever answers.

Every process and server a test starts is stopped by it; every wait is bounded by a timeout, none is measured.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import gymnasium as gym
import pytest

import agentgym_turn  # noqa: F401
from agentgym_turn.core.contract import InfraError
from agentgym_turn.searchqa.retrieval import HTTPRetriever, RetrieverError
from support.retriever_cli import start_retriever, write_corpus

SEARCH = "<search> word1 </search>"


def assert_infra_error_turn(result: tuple, url: str) -> None:
    observation, reward, terminated, truncated, info = result
    assert info["exit_status"] == "infra_error" and info["reward_valid"] is False
    assert reward == 0.0 and truncated is True and terminated is False
    assert set(info["reward_components"].values()) <= {0.0}
    assert url in observation and "reset()" in observation


def stop(proc) -> None:
    if proc.poll() is None:
        proc.kill()
    proc.wait(timeout=60)
    if proc.stderr is not None:
        proc.stderr.close()


def test_a_retriever_killed_mid_episode_ends_it_with_infra_error_and_a_new_retriever_plays_again(tmp_path):
    corpus = write_corpus(tmp_path / "corpus.jsonl")
    proc, url = start_retriever(corpus)
    env = gym.make("TurnSearchQA-v0", retriever_url=url)
    try:
        env.reset(seed=0)
        for _ in range(2):
            *_, info = env.step(SEARCH)
            assert info["exit_status"] == "ok" and info["retrieved_ids"] == ["1"]
        stop(proc)
        assert_infra_error_turn(env.step(SEARCH), url)
        # the episode is over: a further step is the finished-episode turn, not another call to the retriever
        *_, info = env.step(SEARCH)
        assert info["exit_status"] == "invalid_action"
        port = url.rsplit(":", 1)[1].split("/")[0]
        proc, again = start_retriever(corpus, "--port", port)  # the last --port wins: the same URL as before
        assert again == url
        _, info = env.reset(seed=0)
        assert info["exit_status"] == "ok" and info["turn"] == 0
        *_, info = env.step(SEARCH)
        assert info["exit_status"] == "ok" and info["reward_valid"] is True and info["retrieved_ids"] == ["1"]
    finally:
        env.close()
        stop(proc)


class _Stub(BaseHTTPRequestHandler):
    """A retriever gone wrong, as its server's ``mode`` says: ``slow`` (answers after the test ends), ``5xx``,
    ``not_json``, ``malformed`` (JSON outside the protocol), ``drop`` (closes without an answer)."""

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        mode = self.server.mode  # type: ignore[attr-defined]
        if mode == "slow":
            self.server.release.wait(timeout=60)  # type: ignore[attr-defined]
        if mode == "drop":
            self.close_connection = True
            return
        status, body = {
            "slow": (200, b'{"result": [[]]}'),
            "5xx": (503, b'{"detail": "index reloading"}'),
            "not_json": (200, b"<html>proxy error</html>"),
            "malformed": (200, json.dumps({"result": [[{"nothing": 1}]]}).encode()),
        }[mode]
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def stub():
    """Start a stub retriever in ``mode``; stopped (and a slow answer released) at the end of the test."""
    started: list[tuple[ThreadingHTTPServer, threading.Thread]] = []

    def start(mode: str) -> str:
        httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Stub)
        httpd.daemon_threads = True
        httpd.mode, httpd.release = mode, threading.Event()  # type: ignore[attr-defined]
        thread = threading.Thread(target=httpd.serve_forever, daemon=True)
        thread.start()
        started.append((httpd, thread))
        return f"http://127.0.0.1:{httpd.server_address[1]}/retrieve"

    yield start
    for httpd, thread in started:
        httpd.release.set()  # type: ignore[attr-defined]
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=60)


@pytest.mark.parametrize(
    "mode, cause",
    [
        ("slow", "did not answer within"),
        ("5xx", "HTTP 503"),
        ("not_json", "not JSON"),
        ("malformed", "malformed answer"),
        ("drop", "cannot reach"),
    ],
)
def test_a_retriever_that_times_out_fails_or_answers_off_protocol_ends_the_episode_with_infra_error(stub, mode, cause):
    url = stub(mode)
    # the registered kwargs build a client with a 30 s timeout; a retriever object sets a short one
    env = gym.make("TurnSearchQA-v0", retriever=HTTPRetriever(url, timeout=0.5, retries=1))
    try:
        env.reset(seed=0)
        result = env.step(SEARCH)
        assert_infra_error_turn(result, url)
        assert cause in result[0]
    finally:
        env.close()


def test_the_retrieval_client_raises_an_infra_error_that_names_the_url_and_the_cause(stub):
    url = stub("slow")
    with pytest.raises(RetrieverError) as err:
        HTTPRetriever(url, timeout=0.3, retries=5).retrieve(["x"], 3)
    assert isinstance(err.value, InfraError) and isinstance(err.value, ConnectionError)
    assert url in str(err.value) and "did not answer within 0.3 s" in str(err.value)
