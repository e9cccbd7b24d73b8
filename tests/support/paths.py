"""Where the suite's files are: the tests folder, the repository root, the recorded fixtures."""

from pathlib import Path

#: ``tests/`` (on ``sys.path``: ``support`` is imported from here).
TESTS = Path(__file__).resolve().parent.parent
#: The repository root: ``pyproject.toml``, ``docs/``, ``examples/``, ``benchmarks/``.
ROOT = TESTS.parent
#: ``tests/data``: the recorded fixtures (their comparison modes: ``tests/support/recorded.py``).
DATA = TESTS / "data"
