"""agentgym-turn eval against a real OpenAI-compatible server: llama-cpp-python's, serving the SmolLM2 GGUF.

The same tasks are scored through ``--endpoint`` (llama.cpp's quantized kernels) and ``--model`` (the de-quantized
float model in transformers): the task sets are equal, the scores are printed side by side, not required equal.
Killing the server mid-run ends the rest of the run's episodes as ``infra_error``; ``--resume`` finishes it.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

pytest.importorskip("llama_cpp", reason="the gguf extra (make test installs it)")

from agentgym_turn.recording import replay  # noqa: E402
from support.real_model import NAME  # noqa: E402

pytestmark = pytest.mark.slow

# Small enough for CI: 3 tasks of RAGEN's protocol cut to 2 turns of 12 new tokens (the protocol's own: 5 turns of 400).
COMMON = [
    "TurnSokoban-v0",
    "--protocol",
    "ragen-sokoban",
    "--episodes",
    "3",
    "--max-new-tokens",
    "12",
    "--env-kwargs",
    '{"max_episode_steps": 2}',
    "--quiet",
]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LlamaServer:
    """``python -m llama_cpp.server`` on 127.0.0.1 with the named model's GGUF; stopped by :meth:`stop`."""

    def __init__(self, port: int):
        from reference_trainer.models import gguf_file

        self.port = port
        self.url = f"http://127.0.0.1:{port}"
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "llama_cpp.server",
                "--model",
                str(gguf_file(NAME)),
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
                "--n_ctx",
                "2048",
                "--n_threads",
                "2",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for _ in range(600):  # bounded: 60 s
            if self.proc.poll() is not None:
                raise RuntimeError("llama_cpp.server exited at start")
            try:
                with urllib.request.urlopen(self.url + "/v1/models", timeout=1) as r:
                    if r.status == 200:
                        return
            except OSError:
                time.sleep(0.1)
        self.stop()
        raise RuntimeError("llama_cpp.server did not answer within 60 s")

    def stop(self, kill: bool = False) -> None:
        if self.proc.poll() is None:
            self.proc.kill() if kill else self.proc.terminate()
            self.proc.wait(timeout=30)


def _cli(*args: str, check: bool = True, **kw) -> subprocess.CompletedProcess:
    run = subprocess.run(
        [sys.executable, "-m", "agentgym_turn", *args], capture_output=True, text=True, timeout=900, **kw
    )
    if check and run.returncode != 0:
        raise AssertionError(f"agentgym-turn {' '.join(args)} failed ({run.returncode}):\n{run.stderr[-3000:]}")
    return run


def _card(out: Path) -> dict:
    return json.loads((out / "card.json").read_text())


@pytest.fixture(scope="module")
def server():
    s = LlamaServer(_free_port())
    yield s
    s.stop()


def test_endpoint_and_local_model_score_the_same_tasks(server, tmp_path):
    from support.real_model import smollm2_dir

    smollm2_dir()  # the conversion, once, outside the timed CLI runs
    _cli("eval", *COMMON, "--endpoint", server.url, "--out", str(tmp_path / "endpoint"), "--no-floors")
    _cli("eval", *COMMON, "--model", NAME, "--out", str(tmp_path / "local"))
    endpoint, local = _card(tmp_path / "endpoint"), _card(tmp_path / "local")
    for card in (endpoint, local):
        assert card["scored"] == 3 and card["infra_errors"] == 0
        assert card["sampling"] == {"mode": "greedy", "temperature": 0.0, "top_p": 1.0, "max_new_tokens": 12}
        assert card["completion_tokens"] > 0 and 1 <= card["turns"] <= 2
    assert local["floors"]["expert"]["same_tasks"] and local["floors"]["random"]["same_tasks"]
    assert endpoint["floors"] == {}
    assert endpoint["model"]["kind"] == "endpoint" and local["model"]["kind"] == "local"
    assert local["model"]["name"] == NAME and len(local["model"]["weights_sha256"]) == 64
    assert endpoint["task_set_sha256"] == local["task_set_sha256"]
    assert endpoint["protocol_digest"] == local["protocol_digest"]
    print(
        f"\nsame 3 tasks: endpoint (llama.cpp Q4_1) success {endpoint['success']['mean']:.2f} score {endpoint['score']['mean']:.3f} "
        f"invalid {endpoint['invalid_format_rate']:.2f}; local (float32) success {local['success']['mean']:.2f} "
        f"score {local['score']['mean']:.3f} invalid {local['invalid_format_rate']:.2f}"
    )
    assert "0 of 3 episodes differ" in _cli("replay", str(tmp_path / "endpoint" / "records.jsonl")).stdout
    assert replay(tmp_path / "local" / "records.jsonl").ok
    records = (tmp_path / "endpoint" / "records.jsonl").read_text().splitlines()
    edited = json.loads(records[0])
    edited["rewards"][0] = edited["rewards"][0] + 0.5
    (tmp_path / "edited.jsonl").write_text(json.dumps(edited) + "\n")
    failed = _cli("replay", str(tmp_path / "edited.jsonl"), check=False)
    assert failed.returncode == 1 and "reward recorded" in failed.stdout


def test_a_server_killed_mid_run_gives_infra_errors_and_resume_finishes(tmp_path):
    port = _free_port()
    first = LlamaServer(port)
    out = tmp_path / "run"
    args = [
        "eval",
        *COMMON,
        "--batch-size",
        "1",
        "--concurrency",
        "1",
        "--retries",
        "1",
        "--endpoint",
        first.url,
        "--out",
        str(out),
        "--no-floors",
    ]
    run = subprocess.Popen(
        [sys.executable, "-m", "agentgym_turn", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        for _ in range(3000):  # bounded: 300 s for the first episode to be written
            if (out / "records.jsonl").is_file() and (out / "records.jsonl").read_text().count("\n") >= 1:
                break
            time.sleep(0.1)
        first.stop(kill=True)
        _, err = run.communicate(timeout=600)
    finally:
        first.stop(kill=True)
        if run.poll() is None:
            run.kill()
    assert run.returncode == 0, err[-2000:]
    cut = _card(out)
    assert cut["infra_errors"] >= 1 and cut["scored"] >= 1 and cut["scored"] + cut["infra_errors"] == 3
    again = LlamaServer(port)
    try:
        _cli(*[a if a != "--no-floors" else "--resume" for a in args])
    finally:
        again.stop()
    done = _card(out)
    assert done["infra_errors"] == 0 and done["scored"] == 3
    assert replay(out / "records.jsonl").ok
