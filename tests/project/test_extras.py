"""The optional extras: the base install plays every env without them, a feature whose extra is missing
fails at ``gymnasium.make`` with one line naming it, and pyproject, the docs and the measured sizes agree.

A missing package is simulated with ``sys.modules[name] = None`` (its import then raises ImportError),
so these tests run in the full test install too.
"""

import json
import re
import subprocess
import sys
import types

import gymnasium as gym
import numpy as np
import pytest

import agentgym_turn  # noqa: F401  (registers the ids)
from agentgym_turn import bm25
from agentgym_turn.bm25 import BM25Index
from agentgym_turn.extras import EXTRAS, MissingExtraError, require
from agentgym_turn.cli import main
from support.paths import ROOT

INSTALL_SIZE = ROOT / "benchmarks" / "results" / "install_size.json"
BROWSER_LINE = (
    "TurnWebShopBrowser-v0 needs the 'browser' extra: pip install 'agentgym-turn[browser]' "
    "(and Chromium + chromedriver: apt-get install chromium chromium-driver)"
)
#: What the base install must not pull in (each belongs to an extra).
HEAVY_OPTIONAL = ("numba", "llvmlite", "pyarrow", "selenium", "sentence_transformers", "spacy", "torch", "transformers")


def _pyproject() -> dict:
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))


def test_browser_env__without_selenium_fails_at_make_with_one_line(monkeypatch):
    monkeypatch.setitem(sys.modules, "selenium", None)
    with pytest.raises(MissingExtraError) as raised:
        gym.make("TurnWebShopBrowser-v0")
    message = str(raised.value)
    assert message.startswith(BROWSER_LINE) and "\n" not in message
    assert isinstance(raised.value, ImportError) and raised.value.extra == "browser"


def test_cli_play__a_missing_extra_is_one_line_and_status_2(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "selenium", None)
    assert main(["play", "TurnWebShopBrowser-v0"]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.count("\n") == 1
    assert captured.err.startswith(f"agentgym-turn play: {BROWSER_LINE}")


def test_parquet_questions__without_pyarrow_fail_at_make_naming_the_extra(monkeypatch, tmp_path):
    path = tmp_path / "test.parquet"
    path.write_bytes(b"PAR1 not read: the extra is checked first")
    monkeypatch.setitem(sys.modules, "pyarrow", None)
    with pytest.raises(
        MissingExtraError,
        match=r"^the parquet question file test\.parquet needs the 'parquet' extra: "
        r"pip install 'agentgym-turn\[parquet\]'; 'pyarrow' cannot be imported\.$",
    ):
        gym.make("TurnSearchQA-v0", dataset_path=str(path), retriever_url="http://127.0.0.1:9")


def test_numba_backend__asked_for_without_numba_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "numba", None)
    with pytest.raises(
        MissingExtraError,
        match=r"backend='numba' needs the 'fast-search' extra: "
        r"pip install 'agentgym-turn\[fast-search\]', or use backend='auto'",
    ):
        BM25Index.build(["red shoes", "blue shirt"], backend="numba")


def test_auto_backend__without_numba_warns_once_and_scores_as_numpy(monkeypatch):
    texts = [f"item {i} colour {c}" for i, c in enumerate(["red", "blue", "green"] * 10)]
    want = BM25Index.build(texts, backend="numpy").search(["red item 4"], 5)
    monkeypatch.setattr(bm25, "NUMBA_MIN_DOCS", 10)  # a "large" corpus, without building 50,000 documents
    monkeypatch.setitem(sys.modules, "numba", None)
    with pytest.warns(RuntimeWarning, match=r"runs on numpy: numba is not installed.*agentgym-turn\[fast-search\]"):
        index = BM25Index.build(texts)
    assert index.backend == "numpy"
    got = index.search(["red item 4"], 5)
    assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1])


def test_require__is_silent_when_the_extra_imports(monkeypatch):
    monkeypatch.setitem(sys.modules, "selenium", types.ModuleType("selenium"))
    assert require("browser", "TurnWebShopBrowser-v0") is None


def test_base_install__plays_sokoban_webshop_and_searchqa_without_any_optional_package():
    hide = "; ".join(f"sys.modules[{m!r}] = None" for m in HEAVY_OPTIONAL)
    code = (
        f"import sys; {hide}\n"
        "import gymnasium as gym, agentgym_turn\n"
        "for env_id in ('TurnSokoban-v0', 'TurnWebShop-v0', 'TurnSearchQA-v0'):\n"
        "    env = gym.make(env_id); env.reset(seed=0); done = False\n"
        "    while not done:\n"
        "        _, _, terminated, truncated, info = env.step(env.unwrapped.expert_action()); done = terminated or truncated\n"
        "    assert info['success'], env_id\n"
        "print('ok')\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().endswith("ok")


def test_extras__match_pyproject_and_the_base_dependencies_hold_none_of_them():
    project = _pyproject()["project"]
    assert set(project["optional-dependencies"]) == set(EXTRAS)
    base = {re.split(r"[<>=!~;\[ ]", dep, maxsplit=1)[0].lower() for dep in project["dependencies"]}
    assert not base & {
        "numba",
        "llvmlite",
        "pyarrow",
        "selenium",
        "sentence-transformers",
        "spacy",
        "torch",
        "transformers",
    }
    assert any(dep.startswith("build") for dep in project["optional-dependencies"]["dev"])


def test_makefile__installs_every_extra_the_tests_need():
    makefile = (ROOT / "Makefile").read_text()
    line = next(ln for ln in makefile.splitlines() if "pip install" in ln and "-e " in ln)
    assert '-e ".[$(EXTRAS)]"' in line
    installed = set(re.search(r"^EXTRAS\s*:=\s*(\S+)$", makefile, re.M).group(1).split(","))
    assert {"train", "browser", "parquet", "fast-search", "spacy", "gguf", "dev"} <= installed
    assert "python -m agentgym_turn.extras" in makefile and "python -m reference_trainer.models --check" in makefile


def test_docs_install_section__names_every_extra_and_quotes_the_measured_sizes():
    page = (ROOT / "docs" / "index.md").read_text(encoding="utf-8")
    section = page.split("## Install", 1)[1].split("\n## ", 1)[0]
    for extra in EXTRAS:
        assert f"| `{extra}` |" in section, f"docs/index.md's install table lacks the extra {extra!r}"
    measured = json.loads(INSTALL_SIZE.read_text())
    assert f"{measured['base']['venv_mib']:.1f} MiB" in section
    for extra, row in measured["extras"].items():
        assert f"+{row['adds_mib']:.1f} MiB" in section, f"docs/index.md does not quote {extra}'s measured size"


def test_recorded_base_install__is_under_150_mib_and_holds_no_optional_package():
    measured = json.loads(INSTALL_SIZE.read_text())
    assert measured["base"]["venv_mib"] < 150
    names = {name.lower().replace("-", "_") for name in measured["base"]["packages"]}
    assert not names & set(HEAVY_OPTIONAL)
    checks = measured["base_checks"]
    assert all(run["success"] for run in checks["plays"].values())
    assert checks["browser_make_error"].startswith(f"MissingExtraError: {BROWSER_LINE}")
    assert set(checks["listed_ids"]) == set(agentgym_turn.registration.all_env_ids())
