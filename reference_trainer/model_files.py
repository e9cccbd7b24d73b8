"""The files of a model directory, checked before transformers or torch reads them.

A checkpoint may come from anywhere (a download, a colleague, a crafted test), and transformers meets a bad file
with a bare ``RecursionError``, torch's advice to unpickle anyway, or a chat template that renders forever. These
checks turn each into one line naming the file: JSON that does not parse, a weights pickle of Python objects,
a path that is not a regular file (a link to ``/dev/zero``), and a chat template that does not render a short
conversation within a time bound.
"""

from __future__ import annotations

import json
import os
import select
import signal
import stat
import threading
from pathlib import Path
from typing import Any


class ModelFileError(ValueError):
    """A file of a model directory that cannot be loaded safely; the message names the file and what to do."""


#: The JSON files transformers reads from a model directory.
JSON_FILES = (
    "config.json",
    "generation_config.json",
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
)
#: Seconds a chat template gets to render a two-turn conversation (a real one takes milliseconds).
TEMPLATE_SECONDS = 10.0


def check_regular_file(file: str | os.PathLike) -> None:
    """``ValueError`` unless ``file`` (links followed) is a regular file: a device or a fifo never ends."""
    try:
        mode = os.stat(file).st_mode
    except OSError as e:
        raise ModelFileError(f"{file}: cannot be read ({e.strerror}).") from None
    if not stat.S_ISREG(mode):
        raise ModelFileError(
            f"{file}: not a regular file (a device, a fifo or a folder); a checkpoint's files are plain files."
        )


def check_json_files(path: str | os.PathLike) -> None:
    """Parse each of :data:`JSON_FILES` in ``path`` that exists; ``ValueError`` naming the first that does not."""
    for name in JSON_FILES:
        file = Path(path) / name
        if not file.exists():
            continue
        check_regular_file(file)
        try:
            json.loads(file.read_text(encoding="utf-8"))
        except RecursionError:
            raise ModelFileError(f"{file}: JSON nested too deeply to read; not a file transformers wrote.") from None
        except (ValueError, UnicodeDecodeError) as e:
            raise ModelFileError(
                f"{file}: not valid JSON ({str(e)[:120]}); replace it with the model's own file."
            ) from None


def check_template_renders(tokenizer: Any, source: str | os.PathLike, seconds: float | None = None) -> None:
    """Render a short conversation with ``tokenizer``'s chat template; ``ValueError`` naming the template's file when
    it takes over ``seconds`` (default :data:`TEMPLATE_SECONDS`) or fails. Where the OS forks, the render runs in a
    forked copy of this process that is killed at the bound, so a template that loops (and fills memory) stops
    with it; elsewhere a daemon thread renders, and one that never ends runs on until the process does."""
    if not getattr(tokenizer, "chat_template", None):
        return
    seconds = TEMPLATE_SECONDS if seconds is None else seconds
    outcome = _render_forked(tokenizer, seconds) if hasattr(os, "fork") else _render_in_thread(tokenizer, seconds)
    where = Path(source) / (
        "chat_template.jinja" if (Path(source) / "chat_template.jinja").exists() else "tokenizer_config.json"
    )
    if outcome is None:
        raise ModelFileError(
            f"{where}: its chat template did not render a three-message conversation within {seconds:g} s; "
            "a real template takes milliseconds. Use the model's own template."
        )
    if outcome:
        raise ModelFileError(f"{where}: its chat template fails on a three-message conversation ({outcome[:240]}).")


_MESSAGES = [
    {"role": "user", "content": "Hi"},
    {"role": "assistant", "content": "Hello"},
    {"role": "user", "content": "Go"},
]


def _render(tokenizer: Any) -> str:
    """``""`` when the template renders, else the error as ``Type: message``."""
    try:
        tokenizer.apply_chat_template(_MESSAGES, tokenize=False, add_generation_prompt=True)
        return ""
    except Exception as e:  # a template that raises: reported by the caller, with its file
        return f"{type(e).__name__}: {str(e)[:200]}" or "error"


def _render_forked(tokenizer: Any, seconds: float) -> str | None:
    """Render in a forked child that writes its outcome to a pipe; ``None`` (and the child killed) past ``seconds``."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: render, report, leave without running the parent's exit handlers
        code = 0
        try:
            os.close(read_end)
            os.write(write_end, (_render(tokenizer) or "ok").encode("utf-8", "replace")[:1024])
        except BaseException:
            code = 1
        finally:
            os._exit(code)
    os.close(write_end)
    try:
        ready, _, _ = select.select([read_end], [], [], seconds)
        data = os.read(read_end, 1024).decode("utf-8", "replace") if ready else None
    finally:
        os.close(read_end)
        if not ready:
            os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    if data is None:
        return None
    return "" if data == "ok" else (data or "the render process died")


def _render_in_thread(tokenizer: Any, seconds: float) -> str | None:
    outcome: list[str] = []
    worker = threading.Thread(
        target=lambda: outcome.append(_render(tokenizer)), name="chat-template-check", daemon=True
    )
    worker.start()
    worker.join(seconds)
    return None if worker.is_alive() else outcome[0]
