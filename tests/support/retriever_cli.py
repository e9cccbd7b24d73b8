"""Start ``agentgym-turn serve retriever`` as a real process for CLI tests, on a small corpus file."""

import json
import re
import subprocess
import sys
from pathlib import Path


def write_corpus(path: Path, n: int = 5) -> Path:
    """A wiki-18 style jsonl of ``n`` passages; passage ``i`` alone holds the word ``word{i}``."""
    path.write_text(
        "".join(json.dumps({"id": str(i), "contents": f'"Doc {i}"\nword{i} shared text'}) + "\n" for i in range(n))
    )
    return path


def start_retriever(corpus: Path, *args: str) -> tuple[subprocess.Popen, str]:
    """The server process (on a free port, with ``args``) and its ``/retrieve`` URL, read from its banner.
    The caller stops the process."""
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "agentgym_turn.cli",
            "serve",
            "retriever",
            "--corpus",
            str(corpus),
            "--port",
            "0",
            *args,
        ],
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stderr is not None
    for line in proc.stderr:
        m = re.search(r"at (http://127\.0\.0\.1:\d+/retrieve)", line)
        if m:
            return proc, m.group(1)
    proc.kill()
    raise AssertionError(f"the retriever exited without a banner (exit status {proc.wait()})")
