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
import stat
import threading
from pathlib import Path
from typing import Any

__all__ = ["ModelFileError", "JSON_FILES", "TEMPLATE_SECONDS", "check_json_files", "check_regular_file", "check_template_renders"]

class ModelFileError(ValueError):
    """A file of a model directory that cannot be loaded safely; the message names the file and what to do."""


#: The JSON files transformers reads from a model directory.
JSON_FILES = ("config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json")
#: Seconds a chat template gets to render a two-turn conversation (a real one takes milliseconds).
TEMPLATE_SECONDS = 10.0


def check_regular_file(file: str | os.PathLike) -> None:
    """``ValueError`` unless ``file`` (links followed) is a regular file: a device or a fifo never ends."""
    try:
        mode = os.stat(file).st_mode
    except OSError as e:
        raise ModelFileError(f"{file}: cannot be read ({e.strerror}).") from None
    if not stat.S_ISREG(mode):
        raise ModelFileError(f"{file}: not a regular file (a device, a fifo or a folder); a checkpoint's files are plain files.")


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
            raise ModelFileError(f"{file}: not valid JSON ({str(e)[:120]}); replace it with the model's own file.") from None


def check_template_renders(tokenizer: Any, source: str | os.PathLike, seconds: float | None = None) -> None:
    """Render a short conversation with ``tokenizer``'s chat template in a helper thread; ``ValueError`` naming the
    template's file when it takes over ``seconds`` (default :data:`TEMPLATE_SECONDS`; the thread cannot be stopped: it runs on, as a daemon, until the
    process ends) or fails."""
    if not getattr(tokenizer, "chat_template", None):
        return
    messages = [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello"}, {"role": "user", "content": "Go"}]
    seconds = TEMPLATE_SECONDS if seconds is None else seconds
    outcome: dict[str, Any] = {}

    def render() -> None:
        try:
            outcome["text"] = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        except Exception as e:  # a template that raises: reported below, with its file
            outcome["error"] = e

    worker = threading.Thread(target=render, name="chat-template-check", daemon=True)
    worker.start()
    worker.join(seconds)
    where = Path(source) / ("chat_template.jinja" if (Path(source) / "chat_template.jinja").exists() else "tokenizer_config.json")
    if worker.is_alive():
        raise ModelFileError(f"{where}: its chat template did not render a three-message conversation within {seconds:g} s; "
                         "a real template takes milliseconds. Use the model's own template.")
    if "error" in outcome:
        err = outcome["error"]
        raise ModelFileError(f"{where}: its chat template fails on a three-message conversation ({type(err).__name__}: {str(err)[:200]}).")
