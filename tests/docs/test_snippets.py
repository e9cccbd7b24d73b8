"""Every code block in README.md and docs/ runs, or says in the page why it does not.

The convention, for everyone who writes docs:

* A fenced block tagged ``python`` (or ``py``) runs, and runs alone: in a fresh interpreter,
  as a reader who copies just that block would run it. A block that goes on from the one above
  (uses its names) has the HTML comment ``<!-- continues -->`` on the nearest non-blank line
  above its fence; it runs after the blocks it continues, in their interpreter and namespace.
  So a page's blocks run as chains: each unmarked block starts one, each marked block joins the
  chain above it. Tracebacks name the page and its line (``File "docs/envs/sokoban.md", line 215``).
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

from support.paths import ROOT

PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]

PYTHON = {"python", "py"}
SHELL = {"bash", "sh", "shell"}
DISPLAY = {"", "text", "math", "json", "html"}

_FENCE = re.compile(r"^(?P<indent> *)```(?P<lang>[\w+-]*)[^\n`]*$")
_NO_RUN = re.compile(r"^\s*<!--\s*no-run:(?P<reason>.*?)-->\s*$")
_CONTINUES = re.compile(r"^\s*<!--\s*continues\s*-->\s*$")
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
    continues: bool = False  # marked as going on from the runnable block above

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
        continues = bool(above >= 0 and _CONTINUES.match(lines[above]))
        found.append(
            Block(page, i + 2, m["lang"].lower(), code + "\n", marker["reason"].strip() if marker else None, continues)
        )
        i = end + 1
    return found


def chains_of(blocks: list[Block]) -> list[list[Block]]:
    """The runnable Python blocks of one page grouped into chains: an unmarked block starts one,
    a ``continues`` block joins the one above (a ``continues`` block with no chain above starts
    an empty-headed chain, which the test reports)."""
    chains: list[list[Block]] = []
    for b in blocks:
        if b.lang not in PYTHON or b.no_run is not None:
            continue
        if b.continues and chains:
            chains[-1].append(b)
        else:
            chains.append([b])
    return chains


ALL_BLOCKS = [block for page in PAGES for block in blocks_of(page)]
PYTHON_PAGES = sorted({b.page for b in ALL_BLOCKS if b.lang in PYTHON and b.no_run is None})
PYTHON_CHAINS = [chain for page in PAGES for chain in chains_of([b for b in ALL_BLOCKS if b.page == page])]
SHELL_BLOCKS = [b for b in ALL_BLOCKS if b.lang in SHELL and b.no_run is None]

# Runs the Python blocks of one chain in order in one namespace; each block is compiled with the
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
        command,
        cwd=cwd,
        env=_environment(),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        stdout, stderr = proc.communicate(timeout=_GUARD_S)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        pytest.fail(f"{what} still ran after {_GUARD_S} s: if it trains or serves, mark it <!-- no-run: REASON -->")
    tail = (stdout[-2000:] + "\n" + stderr[-6000:]).strip()
    assert proc.returncode == 0, (
        f"{what} failed (exit {proc.returncode}); fix it or mark it <!-- no-run: REASON -->:\n{tail}"
    )


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


def test_every_continues_marker_follows_a_runnable_block():
    """A chain's head is a block a reader can run alone; a page cannot open with a continuation."""
    orphans = [chain[0].where for chain in PYTHON_CHAINS if chain[0].continues]
    assert not orphans, f"these blocks say they continue, but no runnable Python block is above them: {orphans}"
    misplaced = [b.where for b in ALL_BLOCKS if b.continues and (b.lang not in PYTHON or b.no_run is not None)]
    assert not misplaced, f"<!-- continues --> marks runnable Python blocks only: {misplaced}"


@pytest.mark.parametrize("chain", PYTHON_CHAINS, ids=lambda c: c[0].where)
def test_python_block_runs_alone_with_the_blocks_that_continue_it(chain, tmp_path):
    blocks = [(str(b.page.relative_to(ROOT)), b.line, b.code) for b in chain]
    script = tmp_path / "run_blocks.py"
    script.write_text(f"_BLOCKS = {blocks!r}\n{_RUNNER}", encoding="utf-8")
    what = f"the Python block at {chain[0].where}" + (
        f" and its {len(chain) - 1} continuation(s)" if len(chain) > 1 else ""
    )
    _run(
        [sys.executable, str(script)],
        tmp_path,
        what + " (a block that needs the one above is marked <!-- continues -->)",
    )


@pytest.mark.parametrize("block", SHELL_BLOCKS, ids=lambda b: b.where)
def test_shell_block_runs(block, tmp_path):
    _run(["bash", "-euo", "pipefail", "-c", block.code], tmp_path, f"the shell block at {block.where}")


def test_block_parser_reads_markers_languages_and_lines(tmp_path):
    page = tmp_path / "page.md"
    page.write_text(
        "# t\n\n```python\nx = 1\n```\n\n<!-- no-run: trains for an hour -->\n\n```bash\nmake demo\n```\n"
        "<!-- no-run: -->\n```sh\nexit 1\n```\n  ```text\n  shown\n  ```\n<!-- continues -->\n```python\ny = x\n```\n"
        "```python\nz = 2\n```\n",
        encoding="utf-8",
    )
    blocks = blocks_of(page)
    assert [(b.line, b.lang, b.code, b.no_run, b.continues) for b in blocks] == [
        (4, "python", "x = 1\n", None, False),
        (10, "bash", "make demo\n", "trains for an hour", False),
        (14, "sh", "exit 1\n", "", False),
        (17, "text", "shown\n", None, False),
        (21, "python", "y = x\n", None, True),
        (24, "python", "z = 2\n", None, False),
    ]
    assert [[b.line for b in chain] for chain in chains_of(blocks)] == [[4, 21], [24]]


def test_a_block_that_needs_the_one_above_fails_alone_and_runs_as_a_continuation(tmp_path):
    """The check itself: the same two blocks, unmarked and marked."""

    def run(marker: str) -> int:
        page = tmp_path / "p.md"
        page.write_text(f"```python\nx = 1\n```\n{marker}\n```python\nassert x == 1\n```\n", encoding="utf-8")
        chains = chains_of(blocks_of(page))
        codes = []
        for chain in chains:
            script = tmp_path / "run.py"
            script.write_text(
                f"_BLOCKS = {[(str(page), b.line, b.code) for b in chain]!r}\n{_RUNNER}", encoding="utf-8"
            )
            codes.append(subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True).returncode)
        return max(codes)

    assert run("") != 0 and run("<!-- continues -->") == 0


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


@pytest.mark.parametrize(
    "name",
    [
        "learning.png",
        "learning_sokoban.png",
        "learning_sokoban_presets_seedsplit.png",
        "learning_sokoban_2layers.png",
        "learning_sokoban_ablation.png",
        "learning_sokoban_control.png",
        "learning_sokoban_stress.png",
        "learning_webshop.png",
        "learning_webshop_presets_earlier.png",
        "learning_searchqa.png",
        "learning_searchqa_control.png",
        "learning_searchqa_presets_earlier.png",
    ],
)
def test_the_learning_curves_in_the_docs_are_the_benchmarks_latest(name):
    shown = ROOT / "docs" / "img" / name
    measured = ROOT / "benchmarks" / "results" / name
    assert shown.read_bytes() == measured.read_bytes(), (
        f"docs/img/{name} differs from benchmarks/results/{name}: "
        "run `python docs/img/make_figures.py` to copy the new curves into the docs"
    )
