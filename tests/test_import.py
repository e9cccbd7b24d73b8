"""`import agentgym_turn` is light: it registers ids and loads no heavy library."""

import json
import subprocess
import sys

HEAVY = ["torch", "transformers", "bm25s", "numba", "flask", "selenium", "matplotlib", "bs4"]


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
