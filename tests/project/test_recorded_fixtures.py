"""Every recorded-number fixture has a tolerance or a cross-machine-exact mode, and the exact ones hold.

The declarations live in ``tests/support/recorded.py``. Here: they cover every file under ``tests/data``
and every test that reads one; a tolerance is used by its readers, not only declared; and the
fixtures declared exact replay unchanged with numpy's SIMD dispatch and ATen's vector kernels
turned off (what another CPU would run), so "exact" is a checked claim.
"""

from __future__ import annotations

import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from support.paths import TESTS
from support import recorded
from support.recorded import CrossMachineExact, Tolerance


def _modules_naming(file_name: str) -> set[str]:
    return {
        p.relative_to(TESTS).as_posix()
        for p in TESTS.rglob("*.py")
        if p.name != "recorded.py" and file_name in p.read_text(encoding="utf-8")
    }


def test_every_file_under_tests_data_is_declared_and_every_declaration_exists():
    on_disk = {p.name for p in recorded.DATA.iterdir() if p.is_file()}
    assert on_disk == set(recorded.FIXTURES), (
        sorted(on_disk - set(recorded.FIXTURES)),
        sorted(set(recorded.FIXTURES) - on_disk),
    )
    assert set(recorded.READERS) == set(recorded.FIXTURES)


@pytest.mark.parametrize("name", sorted(recorded.FIXTURES))
def test_every_reader_of_a_fixture_is_declared_with_its_mode(name):
    readers = set(recorded.READERS[name])
    assert readers and all((TESTS / r).is_file() for r in readers)
    assert _modules_naming(name) - {Path(__file__).resolve().relative_to(TESTS).as_posix()} == readers, (
        "a test reads this fixture without a declared mode"
    )
    declared = recorded.mode(name)
    assert declared.why.strip()
    if isinstance(declared, Tolerance):  # the tolerance is what the readers compare with
        assert declared.rel >= 0 and declared.abs >= 0 and (declared.rel > 0 or declared.abs > 0)
        for reader in readers:
            assert f'recorded.mode("{name}")' in (TESTS / reader).read_text(encoding="utf-8"), reader


def test_every_band_names_a_learning_test():
    assert recorded.BANDS and all(
        (TESTS / m).is_file() and Path(m).name.endswith("_learning.py") for m in recorded.BANDS
    )
    assert {p.relative_to(TESTS).as_posix() for p in TESTS.rglob("test_*_learning.py")} == set(recorded.BANDS)


def test_tolerance__relative_plus_absolute_per_metric_family():
    t = Tolerance(1e-3, 1e-4, "x", overrides={"*clipfrac*": Tolerance(0.0, 0.03, "y")})
    assert t.close(1000.0, 1000.9) and not t.close(1000.0, 1001.2)  # 1e-3 * 1000 + 1e-4
    assert t.close(0.0, 9e-5) and not t.close(0.0, 2e-4)
    assert t.close(math.nan, math.nan) and not t.close(math.nan, 0.0)
    assert t.for_name("train/vf_clipfrac").abs == 0.03 and t.for_name("train/pg_loss") is t


def _simd_off_env() -> dict[str, str]:
    """numpy's dispatched SIMD targets found on this CPU turned off, and ATen's baseline kernels."""
    try:
        from numpy._core._multiarray_umath import __cpu_dispatch__, __cpu_features__
    except ImportError:  # numpy 1.x
        from numpy.core._multiarray_umath import __cpu_dispatch__, __cpu_features__
    found = [f for f in __cpu_dispatch__ if __cpu_features__.get(f)]
    return {**os.environ, "NPY_DISABLE_CPU_FEATURES": " ".join(found), "ATEN_CPU_CAPABILITY": "default"}


@pytest.mark.timeout(900)
def test_exact_fixtures_replay_unchanged_without_simd_dispatch():
    """Another CPU runs other kernels; here the same tests run with the vector paths off, and must still pass."""
    readers = sorted(
        {r for name, m in recorded.FIXTURES.items() if isinstance(m, CrossMachineExact) for r in recorded.READERS[name]}
    )
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-x", *(str(TESTS / r) for r in readers)],
        cwd=TESTS.parent,
        env=_simd_off_env(),
        capture_output=True,
        text=True,
        timeout=840,
    )
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
