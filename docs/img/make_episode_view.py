"""Make ``docs/img/episode_view.png``: the page ``agentgym-turn view`` writes, as headless Chromium shows it.

Two ``TurnSokoban-v0`` episodes (seeds 0 and 1) played by the expert are recorded with
:func:`agentgym_turn.recording.record_episodes`, written as a page with :func:`agentgym_turn.view.write_view`
and photographed whole (the window is as tall as the page). Run from anywhere::

    python docs/img/make_episode_view.py

Needs the ``browser`` extra and Chromium with chromedriver.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from agentgym_turn.recording import record_episodes
from agentgym_turn.view import headless_chromium, write_view

HERE = Path(__file__).resolve().parent
WIDTH = 1000


def episode_view(out: Path = HERE / "episode_view.png") -> Path:
    """Record, render and photograph the two episodes; return the PNG's path."""
    with tempfile.TemporaryDirectory() as tmp:
        record = Path(tmp) / "sokoban.jsonl"
        record_episodes("TurnSokoban-v0", 2, record, policy="expert", seed=0)
        page = write_view(record, Path(tmp) / "sokoban.html")
        with headless_chromium(window_size=(WIDTH, 800)) as driver:
            driver.get(page.resolve().as_uri())
            height = int(driver.execute_script("return document.documentElement.scrollHeight"))
            driver.set_window_size(WIDTH, height)
            driver.get(page.resolve().as_uri())
            if not driver.save_screenshot(str(out)):
                raise RuntimeError(f"Chromium could not write {out}.")
    return out


if __name__ == "__main__":
    print(f"wrote {episode_view()}", file=sys.stderr)
    sys.exit(0)
