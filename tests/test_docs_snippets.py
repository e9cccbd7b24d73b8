"""Every code block in README.md and docs/ runs, or says in the page why it does not.

The convention, for everyone who writes docs:

* A fenced block tagged ``python`` (or ``py``) runs. All Python blocks of one page run in order
  in one fresh interpreter and share one namespace, so a later block may use what an earlier one
  defined. Tracebacks name the page and its line (``File "docs/envs/sokoban.md", line 215``).
* A block tagged ``bash`` (or ``sh``/``shell``) runs with ``bash -euo pipefail``, with this
  interpreter's ``bin/`` first on ``PATH`` (so ``python`` and ``agentgym-turn`` are the project's).
* Both run in an empty temporary directory: a block must not rely on files of the checkout.
* A block that must not run here (it trains for minutes, needs a GPU, a checkpoint or data the
  reader downloads) has the HTML comment ``<!-- no-run: REASON -->`` on the nearest non-blank
  line above its fence. The reason is required, and readers of the Markdown see it.
* Blocks tagged ``text``, ``math``, ``json`` or ``html``, or untagged, are displayed, never run
  (example output, formulas, file formats). Any other tag fails this test until it is added to
  one of the sets below, so a new kind of block cannot slip through unrun.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]

PYTHON = {"python", "py"}
SHELL = {"bash", "sh", "shell"}
DISPLAY = {"", "text", "math", "json", "html"}

_FENCE = re.compile(r"^(?P<indent> *)```(?P<lang>[\w+-]*)[^\n`]*$")
_NO_RUN = re.compile(r"^\s*<!--\s*no-run:(?P<reason>.*?)-->\s*$")
#: Hang guard per page or shell block (not a timing assertion: runnable blocks take seconds). An
#: unmarked block that trains or serves stops here with a message asking for a no-run marker.
_GUARD_S = 300


@dataclass(frozen=True)
class Block:
    page: Path
    line: int  # 1-based line of the first line of code (the one after the fence)
    lang: str
    code: str
    no_run: str | None  # the reason given by a no-run marker, "" for a marker without one

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


def blocks_of(page: Path) -> list[Block]:
    """The fenced blocks of a Markdown page, with the no-run marker above each (if any)."""
    lines = page.read_text(encoding="utf-8").splitlines()
    found, i = [], 0
    while i < len(lines):
        m = _FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        indent = len(m["indent"])
        end = i + 1
        while end < len(lines) and not re.match(r"^ *```\s*$", lines[end]):
            end += 1
        code = "\n".join(line[indent:] if line[:indent].isspace() else line for line in lines[i + 1 : end])
        above = i - 1
        while above >= 0 and not lines[above].strip():
            above -= 1
        marker = _NO_RUN.match(lines[above]) if above >= 0 else None
        found.append(Block(page, i + 2, m["lang"].lower(), code + "\n", marker["reason"].strip() if marker else None))
        i = end + 1
    return found


ALL_BLOCKS = [block for page in PAGES for block in blocks_of(page)]
PYTHON_PAGES = sorted({b.page for b in ALL_BLOCKS if b.lang in PYTHON and b.no_run is None})
SHELL_BLOCKS = [b for b in ALL_BLOCKS if b.lang in SHELL and b.no_run is None]

# Runs the Python blocks of one page in order in one namespace; each block is compiled with the
# page as its file name and padded so that line numbers in tracebacks are the page's own.
# The namespace is the real __main__'s, as in a user's script, so classes a page defines pickle.
_RUNNER = """
import sys
for _page, _line, _code in _BLOCKS:
    print(f"--- {_page}:{_line}", flush=True)
    exec(compile("\\n" * (_line - 1) + _code, _page, "exec"), sys.modules["__main__"].__dict__)
"""


def _environment() -> dict[str, str]:
    env = dict(os.environ)
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
    env["MPLBACKEND"] = "Agg"
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    return env


def _run(command: list[str], cwd: Path, what: str) -> None:
    """Run ``command``; fail with its output if it exits non-zero or outlives the hang guard."""
    # A session of its own, so a server or trainer a block started dies with it on the guard.
    proc = subprocess.Popen(
        command, cwd=cwd, env=_environment(), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True, start_new_session=True,
    )
    try:
        stdout, stderr = proc.communicate(timeout=_GUARD_S)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        pytest.fail(f"{what} still ran after {_GUARD_S} s: if it trains or serves, mark it <!-- no-run: REASON -->")
    tail = (stdout[-2000:] + "\n" + stderr[-6000:]).strip()
    assert proc.returncode == 0, f"{what} failed (exit {proc.returncode}); fix it or mark it <!-- no-run: REASON -->:\n{tail}"


def test_every_block_has_a_language_this_test_knows():
    unknown = [f"{b.where} ```{b.lang}" for b in ALL_BLOCKS if b.lang not in PYTHON | SHELL | DISPLAY]
    assert not unknown, f"tag these blocks python/bash (run) or text (display): {unknown}"


def test_every_no_run_marker_gives_a_reason():
    bare = [b.where for b in ALL_BLOCKS if b.no_run == ""]
    assert not bare, f"write why after 'no-run:' in these markers: {bare}"


def test_the_pages_have_runnable_blocks():
    # The parser and the markers must leave something to run: the headline example at least.
    assert ROOT / "README.md" in PYTHON_PAGES and ROOT / "docs" / "index.md" in PYTHON_PAGES
    assert len(SHELL_BLOCKS) >= 1


@pytest.mark.parametrize("page", PYTHON_PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_python_blocks_of_the_page_run(page, tmp_path):
    blocks = [(str(b.page.relative_to(ROOT)), b.line, b.code) for b in ALL_BLOCKS if b.page == page and b.lang in PYTHON and b.no_run is None]
    script = tmp_path / "run_blocks.py"
    script.write_text(f"_BLOCKS = {blocks!r}\n{_RUNNER}", encoding="utf-8")
    _run([sys.executable, str(script)], tmp_path, f"the Python blocks of {page.relative_to(ROOT)}")


@pytest.mark.parametrize("block", SHELL_BLOCKS, ids=lambda b: b.where)
def test_shell_block_runs(block, tmp_path):
    _run(["bash", "-euo", "pipefail", "-c", block.code], tmp_path, f"the shell block at {block.where}")


def test_block_parser_reads_markers_languages_and_lines(tmp_path):
    page = tmp_path / "page.md"
    page.write_text(
        "# t\n\n```python\nx = 1\n```\n\n<!-- no-run: trains for an hour -->\n\n```bash\nmake demo\n```\n"
        "<!-- no-run: -->\n```sh\nexit 1\n```\n  ```text\n  shown\n  ```\n",
        encoding="utf-8",
    )
    blocks = blocks_of(page)
    assert [(b.line, b.lang, b.code, b.no_run) for b in blocks] == [
        (4, "python", "x = 1\n", None),
        (10, "bash", "make demo\n", "trains for an hour"),
        (14, "sh", "exit 1\n", ""),
        (17, "text", "shown\n", None),
    ]


_IMAGE = re.compile(r"!\[[^\]]*\]\((?P<src>[^)\s]+)[^)]*\)|<img [^>]*src=\"(?P<html>[^\"]+)\"")


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_picture_a_page_shows_exists(page):
    text = page.read_text(encoding="utf-8")
    sources = [m["src"] or m["html"] for m in _IMAGE.finditer(text)]
    missing = [s for s in sources if "://" not in s and not (page.parent / s).is_file()]
    assert not missing, f"{page.relative_to(ROOT)} shows pictures that do not exist: {missing}"


def test_the_docs_show_the_learning_curves_and_an_env():
    index = (ROOT / "docs" / "index.md").read_text(encoding="utf-8")
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    for text in (index, readme):
        assert "img/learning_sokoban.png" in text and "img/sokoban_episode.png" in text


@pytest.mark.parametrize("name", ["learning.png", "learning_sokoban.png", "learning_sokoban_2layers.png", "learning_webshop.png",
                                  "learning_searchqa.png"])
def test_the_learning_curves_in_the_docs_are_the_benchmarks_latest(name):
    shown = ROOT / "docs" / "img" / name
    measured = ROOT / "benchmarks" / "results" / name
    assert shown.read_bytes() == measured.read_bytes(), (
        f"docs/img/{name} differs from benchmarks/results/{name}: "
        "run `python docs/img/make_figures.py` to copy the new curves into the docs"
    )
