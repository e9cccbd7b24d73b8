"""`import agentgym_turn` is light: it registers ids and loads no heavy library."""

import json
import subprocess
import sys

HEAVY = ["torch", "transformers", "bm25s", "numba", "pyarrow", "flask", "selenium", "matplotlib", "bs4", "spacy"]


def test_import_is_light_and_registers_ids():
    code = (
        "import sys, json, gymnasium as gym, agentgym_turn;"
        f"print(json.dumps({{'heavy': [m for m in {HEAVY!r} if m in sys.modules],"
        "'ids': agentgym_turn.env_ids(), 'registered': [i for i in agentgym_turn.env_ids() if i in gym.registry]}))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    result = json.loads(out.strip().splitlines()[-1])
    assert result["heavy"] == []
    assert result["registered"] == result["ids"]


def test_import_works_without_torch():
    # Hide torch from the import system and import the suite in a fresh interpreter.
    code = (
        "import sys; sys.modules['torch'] = None; sys.modules['transformers'] = None;"
        "import agentgym_turn, agentgym_turn.testing, agentgym_turn.core; print('ok')"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip().endswith("ok")


def test_import_and_registration_work_without_any_optional_extra():
    # The base install has no numba, pyarrow, selenium or sentence-transformers; every id still registers.
    hidden = ["numba", "llvmlite", "pyarrow", "selenium", "sentence_transformers", "spacy", "torch", "transformers"]
    code = (
        f"import sys; [sys.modules.__setitem__(m, None) for m in {hidden!r}];"
        "import json, gymnasium as gym, agentgym_turn, agentgym_turn.cli;"
        "ids = agentgym_turn.registration.all_env_ids();"
        "print(json.dumps({'ids': ids, 'registered': [i for i in ids if i in gym.registry]}))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    result = json.loads(out.strip().splitlines()[-1])
    assert result["registered"] == result["ids"] and "TurnWebShopBrowser-v0" in result["ids"]
