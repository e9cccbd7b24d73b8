"""A static HTML page of recorded episodes (:mod:`agentgym_turn.recording`), for people to read.

:func:`write_view` writes one self-contained page: no script, no network, every text escaped. Each
episode is a ``<section>`` with a header (env id, seed, success, score, return) and a table with one row
per turn: the observation the agent read and the action it gave, side by side, then the reward, its
components and the exit status; a last row shows the final observation. Observations the record did not
store are shown as ``(not recorded; hash ...)``.

:func:`headless_chromium` opens a page in headless Chromium (the ``browser`` extra), for screenshots and
for the tests that read the page as a browser renders it.
"""

from __future__ import annotations

import contextlib
import html
import os
from pathlib import Path
from typing import IO, Any, Iterator

from .recording import read_records

__all__ = ["write_view", "render_view", "headless_chromium"]

_STYLE = """
body { font-family: system-ui, sans-serif; margin: 1.5em; color: #1d1d1d; background: #fafafa; }
h1 { font-size: 1.3em; }
section { background: #fff; border: 1px solid #ccc; border-radius: 6px; margin: 0 0 1.5em; padding: 0.8em 1em; }
section h2 { font-size: 1.05em; margin: 0 0 0.5em; }
dl.header { display: flex; flex-wrap: wrap; gap: 0.3em 1.4em; margin: 0 0 0.8em; }
dl.header dt { font-weight: 600; } dl.header dd { margin: 0 0 0 0.3em; }
dl.header div { display: flex; }
table { border-collapse: collapse; width: 100%; table-layout: fixed; }
th, td { border: 1px solid #ddd; padding: 0.35em 0.5em; vertical-align: top; text-align: left; }
th { background: #f0f0f0; }
col.turn { width: 3.5em; } col.obs { width: 44%; } col.action { width: 24%; } col.status { width: 7.5em; }
pre { margin: 0; white-space: pre-wrap; overflow-wrap: anywhere; font-size: 0.82em; font-family: ui-monospace, monospace; }
.missing { color: #777; font-style: italic; }
.ok { color: #1a7f37; } .fail { color: #b42318; }
td.num { font-variant-numeric: tabular-nums; }
ul.components { margin: 0.2em 0 0; padding-left: 1.1em; font-size: 0.82em; color: #444; }
"""


def _e(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _number(value: Any) -> str:
    return f"{value:+.4g}" if isinstance(value, (int, float)) and not isinstance(value, bool) else _e(value)


def _observation_cell(record: dict[str, Any], turn: int) -> str:
    observations = record.get("observations")
    if observations is not None and turn < len(observations):
        return f"<pre>{_e(observations[turn])}</pre>"
    hashes = record.get("observation_hashes") or []
    digest = hashes[turn] if turn < len(hashes) else "unknown"
    return f'<span class="missing">(not recorded; hash {_e(digest)})</span>'


def _components(components: dict[str, Any] | None) -> str:
    if not components:
        return ""
    parts = "".join(f"<li>{_e(name)}: {_number(value)}</li>" for name, value in components.items() if value)
    return f'<ul class="components">{parts}</ul>' if parts else ""


def _section(index: int, record: dict[str, Any]) -> str:
    actions = record.get("actions") or []
    rewards = record.get("rewards") or []
    components = record.get("reward_components") or [None] * len(actions)
    statuses = record.get("exit_statuses") or [None] * len(actions)
    success = record.get("success")
    fields = [
        ("env", _e(record.get("env_id"))),
        ("seed", _e(record.get("seed"))),
        ("success", f'<span class="{"ok" if success else "fail"}">{_e(success)}</span>'),
        ("score", _number(record.get("score"))),
        ("return", _number(sum(float(r) for r in rewards))),
        ("turns", _e(len(actions))),
        (
            "ended",
            "terminated" if record.get("terminated") else "truncated" if record.get("truncated") else "not ended",
        ),
    ]
    if record.get("env_kwargs"):
        fields.insert(1, ("kwargs", _e(record["env_kwargs"])))
    if record.get("options"):
        fields.insert(2, ("options", _e(record["options"])))
    header = "".join(f"<div><dt>{name}</dt><dd>{value}</dd></div>" for name, value in fields)
    rows = []
    for i, action in enumerate(actions):
        reward = rewards[i] if i < len(rewards) else None
        status = statuses[i] if i < len(statuses) else None
        rows.append(
            f'<tr class="turn"><td class="num">{i + 1}</td><td>{_observation_cell(record, i)}</td>'
            f'<td><pre>{_e(action)}</pre></td><td class="num">{_number(reward)}'
            f"{_components(components[i] if i < len(components) else None)}</td><td>{_e(status or '')}</td></tr>"
        )
    rows.append(
        f'<tr class="final"><td class="num">end</td><td>{_observation_cell(record, len(actions))}</td>'
        f'<td class="missing">(final observation)</td><td></td><td></td></tr>'
    )
    return (
        f'<section id="episode-{index}" class="episode"><h2>Episode {index}: {_e(record.get("env_id"))}, seed {_e(record.get("seed"))}</h2>'
        f'<dl class="header">{header}</dl>'
        '<table><colgroup><col class="turn"><col class="obs"><col class="action"><col class="reward"><col class="status"></colgroup>'
        "<thead><tr><th>turn</th><th>observation</th><th>action</th><th>reward</th><th>exit status</th></tr></thead>"
        f"<tbody>{''.join(rows)}</tbody></table></section>"
    )


def render_view(records: list[dict[str, Any]], title: str = "Recorded episodes") -> str:
    """The HTML page of ``records`` (as :func:`~agentgym_turn.recording.read_records` yields them)."""
    sections = "\n".join(_section(i, r) for i, r in enumerate(records))
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{_e(title)}</title><style>{_STYLE}</style></head>\n"
        f"<body><h1>{_e(title)} ({len(records)} episodes)</h1>\n{sections}\n</body></html>\n"
    )


def write_view(path_jsonl: str | os.PathLike | IO[str], out_html: str | os.PathLike) -> Path:
    """Write the page of every episode in the record file ``path_jsonl`` to ``out_html``; return its path."""
    records = list(read_records(path_jsonl))
    name = (
        os.fspath(path_jsonl) if isinstance(path_jsonl, (str, os.PathLike)) else getattr(path_jsonl, "name", "episodes")
    )
    out = Path(out_html)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(render_view(records, title=f"Recorded episodes: {Path(str(name)).name}"), encoding="utf-8")
    return out


@contextlib.contextmanager
def headless_chromium(window_size: tuple[int, int] = (1200, 900)) -> Iterator[Any]:
    """A Selenium driver of headless Chromium (found as ``TurnWebShopBrowser-v0`` finds it; never downloads),
    quit on exit. Needs the ``browser`` extra and Chromium with chromedriver."""
    from .extras import require

    require("browser", "opening recorded episodes in headless Chromium")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    from .extras import find_chromium

    chromium, chromedriver = find_chromium()
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for arg in (
        "--headless=new",
        "--no-sandbox",
        "--disable-dev-shm-usage",
        "--disable-gpu",
        "--no-first-run",
        "--disable-extensions",
        "--disable-background-networking",
        "--hide-scrollbars",
        f"--window-size={window_size[0]},{window_size[1]}",
    ):
        options.add_argument(arg)
    driver = webdriver.Chrome(service=Service(executable_path=chromedriver), options=options)
    try:
        yield driver
    finally:
        driver.quit()
