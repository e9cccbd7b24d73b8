"""What the benchmark scripts share: where results go, the machine a number was measured on, and
writing a results file.

The scripts run from the repository root with the package installed in the venv (editable):
``python benchmarks/NAME.py ...`` or ``python -m benchmarks.NAME ...``. Each imports this module as
``benchmarks.common`` when ``benchmarks`` is importable (``-m``, the tests) and as ``common``
otherwise (``python benchmarks/NAME.py`` puts this folder first on the import path).
"""

from __future__ import annotations

import importlib.util
import json
import os
import platform
import sys
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from types import ModuleType
from typing import Any

#: The repository root.
ROOT = Path(__file__).resolve().parent.parent
#: The benchmark scripts' folder.
BENCHMARKS = ROOT / "benchmarks"
#: Where the scripts write their results by default (one JSON per script, some with a PNG).
RESULTS = BENCHMARKS / "results"
#: Distributions whose versions every machine record names (``None`` where one is not installed).
VERSIONS = ("numpy", "torch", "transformers")


def installed_version(distribution: str) -> str | None:
    """The installed version of ``distribution``, or ``None``; read from its metadata, so nothing is imported."""
    try:
        return version(distribution)
    except PackageNotFoundError:
        return None


def machine(**extra: Any) -> dict[str, Any]:
    """The machine and software a measurement ran on, then ``extra`` (what a script adds: threads, load averages...).

    Keys: ``python``, ``platform``, ``machine`` (the architecture), ``processor``, ``cpus``, and the version
    of each of :data:`VERSIONS`.
    """
    record: dict[str, Any] = {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "machine": platform.machine(),
        "processor": platform.processor(),
        "cpus": os.cpu_count(),
    }
    record.update({name: installed_version(name) for name in VERSIONS})
    record.update(extra)
    return record


def load_average() -> float:
    """The 1-minute load average now, to 2 decimals (others' jobs on a shared machine show here)."""
    return round(os.getloadavg()[0], 2)


def read_json(path: str | Path, default: Any = None) -> Any:
    """The JSON in ``path``, or ``default`` when there is no such file (a script updating its previous results)."""
    path = Path(path)
    return json.loads(path.read_text(encoding="utf-8")) if path.exists() else default


def write_json(path: str | Path, data: Any, *, indent: int | None = 1, **dumps: Any) -> Path:
    """Write ``data`` to ``path`` as JSON with a final newline, creating its folder; ``dumps`` go to :func:`json.dumps`."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=indent, **dumps) + "\n", encoding="utf-8")
    return path


def print_table(path: str | Path, markdown: Any) -> Any:
    """Print ``markdown(results)`` for the results saved in ``path`` (a script's ``--markdown``: the docs table,
    nothing measured) and return the results."""
    results = read_json(path)
    if results is None:
        raise SystemExit(f"{path} does not exist: run the benchmark first.")
    print(markdown(results))
    return results


def shown(path: str | Path) -> str:
    """``path`` relative to the repository root when it lies inside it (for "wrote ..." lines)."""
    path = Path(path).resolve()
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def import_package(folder: str | Path) -> ModuleType:
    """The package in ``folder``, imported under the folder's name without touching the import path.

    For what a script runs against that is not installed: a peer's checkout (WebShop's ``web_agent_site``),
    or this repository's ``agentgym_turn`` from a side venv. Its own absolute imports resolve through the
    registered package; a package already imported under that name is returned as it is.
    """
    folder = Path(folder).resolve()
    if folder.name in sys.modules:
        return sys.modules[folder.name]
    init = folder / "__init__.py"
    if not init.exists():  # a namespace package: its folder is its search path
        module = ModuleType(folder.name)
        module.__path__ = [str(folder)]
        sys.modules[folder.name] = module
        return module
    spec = importlib.util.spec_from_file_location(folder.name, init, submodule_search_locations=[str(folder)])
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[folder.name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[folder.name]
        raise
    return module


def run_and_report(args: Any, run: Any, markdown: Any) -> int:
    """A script's ``main`` after parsing: with ``args.markdown``, print the table of the saved ``args.out``; otherwise
    ``run(args)``, save it to ``args.out`` and print its table. Returns the exit status (0)."""
    if getattr(args, "markdown", False):
        print(markdown(read_json(args.out)))
        return 0
    result = run(args)
    write_json(args.out, result)
    print(markdown(result))
    return 0
