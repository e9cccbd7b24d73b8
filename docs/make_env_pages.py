"""Write the env pages' reference sections from the env classes' docstrings: ``python docs/make_env_pages.py``.

An env's docstring (Gymnasium's sections) is the one home of its info keys and its arguments; each page shows
those sections as written there, between markers, and adds what only a page holds (measurements, peers,
examples) around them. ``tests/docs/test_env_pages.py`` checks that every page shows its docstring as it is now.
"""

from __future__ import annotations

import importlib
import inspect
import re
import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parent
#: Each page and the env class whose docstring its reference sections come from.
PAGES = {
    "envs/sokoban.md": "agentgym_turn.sokoban.env:TurnSokobanEnv",
    "envs/webshop.md": "agentgym_turn.webshop.env:TurnWebShopEnv",
    "envs/searchqa.md": "agentgym_turn.searchqa.env:TurnSearchQAEnv",
}
#: The docstring sections each page shows as written there.
SECTIONS = ("Information", "Arguments")
START = "<!-- from the docstring of {target}: python docs/make_env_pages.py -->"
END = "<!-- end of docstring -->"


def docstring_sections(target: str) -> dict[str, str]:
    """``{section title: body}`` of the class docstring of ``target`` (``"module:Class"``), split at its ``## `` headings."""
    module, name = target.split(":")
    doc = inspect.cleandoc(getattr(importlib.import_module(module), name).__doc__ or "")
    parts = re.split(r"^## (.+)$", doc, flags=re.M)
    return {title.strip(): body.strip("\n") for title, body in zip(parts[1::2], parts[2::2])}


def markdown(body: str) -> str:
    """A docstring section as page Markdown: Sphinx cross-references (``:mod:`~x.y```) become code spans."""
    return re.sub(r":(?:mod|func|class|data|meth|attr|exc):`~?([^`]+)`", r"`\1`", body)


def render(text: str, target: str) -> str:
    """``text`` (a page) with each of :data:`SECTIONS` filled from ``target``'s docstring; a page section without markers
    gets them right under its heading (the page's own text for that section then follows the generated block)."""
    sections = docstring_sections(target)
    start = START.format(target=target)
    for title in SECTIONS:
        if title not in sections:
            raise ValueError(f"{target}'s docstring has no '## {title}' section")
        block = f"{start}\n\n{markdown(sections[title])}\n\n{END}"
        heading = re.search(rf"^## {re.escape(title)}\n", text, flags=re.M)
        if heading is None:
            raise ValueError(f"the page for {target} has no '## {title}' section")
        rest = text[heading.end() :]
        stop = re.search(r"^## ", rest, flags=re.M)
        body = rest[: stop.start()] if stop else rest
        if start in body:
            body = re.sub(re.escape(start) + ".*?" + re.escape(END), lambda _: block, body, count=1, flags=re.S)
        else:
            body = f"\n{block}\n" + body
        text = text[: heading.end()] + body + (rest[stop.start() :] if stop else "")
    return text


def write() -> list[Path]:
    written = []
    for page, target in PAGES.items():
        path = DOCS / page
        path.write_text(render(path.read_text(encoding="utf-8"), target), encoding="utf-8")
        written.append(path)
    return written


if __name__ == "__main__":
    sys.exit(print(*write(), sep="\n"))
