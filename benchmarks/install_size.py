"""Disk size of a fresh venv holding the wheel and no extra, and what each light extra adds.

    .venv/bin/python benchmarks/install_size.py              # a few minutes; pip must reach PyPI
    .venv/bin/python benchmarks/install_size.py --no-extras  # the base install only

Builds the wheel (``pip wheel --no-deps``), makes a fresh venv with this Python (``python -m venv``,
so pip and setuptools as venv puts them), installs the wheel with no extra, and measures there:

* the whole venv and its site-packages in MiB of disk, what ``du -sm`` prints (the whole venv is
  the honest number: it is what a user's disk loses);
* each installed distribution (the files of its ``RECORD``, compiled ``.pyc`` included);
* that every id of ``agentgym_turn.env_ids()`` plays one expert episode (seed 0) to success, that
  the heavy optional packages are absent, that ``agentgym-turn list`` names every id, and that
  ``gymnasium.make("TurnWebShopBrowser-v0")`` fails with one line naming the ``browser`` extra.

Then it installs the extras ``parquet``, ``fast-search``, ``browser`` and ``spacy`` one after another into the
same venv and records what each adds. ``train``, ``dense`` and ``trl`` are not measured: they need
torch, whose CPU build the Makefile installs pinned (a bare ``pip install`` may pull a multi-GB
CUDA build). Results: ``benchmarks/results/install_size.json``; ``docs/index.md`` quotes them.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

try:  # python -m benchmarks.install_size, or imported by the tests
    from benchmarks import common
except ModuleNotFoundError:  # python benchmarks/install_size.py: this folder comes first on the import path
    import common

RESULTS = common.RESULTS / "install_size.json"
#: The extras measured on top of the base install, in this order (each adds no torch).
LIGHT_EXTRAS = ("parquet", "fast-search", "browser", "spacy")
MIB = 1 << 20

#: Run by the fresh venv's Python: every distribution's size on disk, from its RECORD.
_SIZES = r"""
import importlib.metadata as md, json, os
out, seen = {}, set()
for dist in md.distributions():
    total = 0
    for f in dist.files or ():
        try:
            st = os.lstat(dist.locate_file(f))
        except OSError:
            continue
        if (st.st_dev, st.st_ino) not in seen:
            seen.add((st.st_dev, st.st_ino))
            total += st.st_blocks * 512
    out[dist.metadata["Name"]] = {"version": dist.version, "bytes": total}
print(json.dumps(out))
"""

#: Run by the fresh venv's Python: what the base install plays, and what it refuses in one line.
_PLAYS = r"""
import importlib.util, json, gymnasium as gym, agentgym_turn
plays = {}
for env_id in agentgym_turn.env_ids():
    env = gym.make(env_id)
    obs, info = env.reset(seed=0)
    turns, done = 0, False
    while not done:
        obs, reward, terminated, truncated, info = env.step(env.unwrapped.expert_action())
        turns, done = turns + 1, terminated or truncated
    plays[env_id] = {"success": bool(info["success"]), "score": float(info["score"]), "turns": turns}
    env.close()
try:
    gym.make("TurnWebShopBrowser-v0")
    browser = None
except Exception as err:
    browser = f"{type(err).__name__}: {err}"
absent = {m: importlib.util.find_spec(m) is None for m in ("numba", "llvmlite", "pyarrow", "selenium", "spacy", "scipy", "torch")}
print(json.dumps({"plays": plays, "browser_make_error": browser, "absent": absent}))
"""


def disk_bytes(path: Path) -> int:
    """Bytes of disk under ``path`` as ``du`` counts them (allocated blocks, each inode once)."""
    total, seen = 0, set()
    for folder, dirs, files in os.walk(path):
        for name in dirs + files:
            st = os.lstat(os.path.join(folder, name))
            if (st.st_dev, st.st_ino) not in seen:
                seen.add((st.st_dev, st.st_ino))
                total += st.st_blocks * 512
    return total + os.lstat(path).st_blocks * 512


def _run(cmd: list[str], **kwargs: Any) -> str:
    return subprocess.run(cmd, check=True, capture_output=True, text=True, **kwargs).stdout


def build_wheel(out_dir: Path) -> Path:
    """The project's wheel, built from this checkout into ``out_dir``."""
    _run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--wheel-dir", str(out_dir), str(common.ROOT)])
    (wheel,) = out_dir.glob("agentgym_turn-*.whl")
    return wheel


def measure(venv: Path) -> dict[str, Any]:
    """Sizes of ``venv``: whole, site-packages, and per distribution (MiB, largest first)."""
    python = venv / "bin" / "python"
    site = Path(_run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"]).strip())
    dists = json.loads(_run([str(python), "-c", _SIZES]))
    packages = {
        name: {"version": d["version"], "mib": round(d["bytes"] / MIB, 1)}
        for name, d in sorted(dists.items(), key=lambda kv: -kv[1]["bytes"])
    }
    return {
        "venv_mib": round(disk_bytes(venv) / MIB, 1),
        "site_packages_mib": round(disk_bytes(site) / MIB, 1),
        "packages": packages,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--wheel", type=Path, help="measure this wheel instead of building one from the checkout")
    parser.add_argument("--no-extras", action="store_true", help="measure the base install only")
    parser.add_argument("--out", type=Path, default=RESULTS, help="where to write the JSON results")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="install_size_") as tmp:
        tmp = Path(tmp)
        wheel = args.wheel.resolve() if args.wheel else build_wheel(tmp / "dist")
        venv = tmp / "venv"
        _run([sys.executable, "-m", "venv", str(venv)])
        pip = [str(venv / "bin" / "python"), "-m", "pip", "--disable-pip-version-check"]
        empty = measure(venv)  # pip and setuptools as venv installs them
        _run([*pip, "install", "--quiet", str(wheel)])
        base = measure(venv)
        print(
            f"base install: {base['venv_mib']} MiB of venv, {base['site_packages_mib']} MiB of site-packages",
            flush=True,
        )
        checks = json.loads(_run([str(venv / "bin" / "python"), "-c", _PLAYS], cwd=tmp).strip().splitlines()[-1])
        listed = _run([str(venv / "bin" / "agentgym-turn"), "list"], cwd=tmp).splitlines()[1:]
        checks["listed_ids"] = [line.split()[0] for line in listed if line.strip()]
        extras: dict[str, Any] = {}
        before = base
        for extra in () if args.no_extras else LIGHT_EXTRAS:
            _run([*pip, "install", "--quiet", f"{wheel}[{extra}]"])
            after = measure(venv)
            added = {name: p for name, p in after["packages"].items() if name not in before["packages"]}
            extras[extra] = {"adds_mib": round(after["venv_mib"] - before["venv_mib"], 1), "packages": added}
            print(f"extra {extra}: +{extras[extra]['adds_mib']} MiB ({', '.join(added)})", flush=True)
            before = after
        pip_version = _run([*pip, "--version"]).split()[1]
    payload = {
        "what": "disk used (MiB, as du -sm counts) by a fresh venv of this Python holding the wheel with no extra, "
        "per installed distribution (its RECORD's files), and what each light extra adds installed on top, in order; "
        "plus what that base install plays (one expert episode per env_ids() id, seed 0)",
        "wheel": wheel.name,
        **common.machine(pip=pip_version),
        "empty_venv_mib": empty["venv_mib"],
        "base": base,
        "base_checks": checks,
        "extras": extras,
        "not_measured": {
            "train": "torch (CPU build pinned by the Makefile), transformers, tokenizers, matplotlib",
            "dense": "sentence-transformers (needs torch)",
            "trl": "trl, transformers (need torch)",
        },
    }
    common.write_json(args.out, payload, indent=2, ensure_ascii=True)
    print(f"wrote {common.shown(args.out)}")
    failed = [env_id for env_id, r in checks["plays"].items() if not r["success"]]
    print(
        f"expert episodes: {len(checks['plays']) - len(failed)}/{len(checks['plays'])} solved; "
        f"TurnWebShopBrowser-v0: {checks['browser_make_error']}"
    )
    return 1 if failed or not checks["browser_make_error"] else 0


if __name__ == "__main__":
    sys.exit(main())
