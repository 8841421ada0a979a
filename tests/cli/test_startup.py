"""Issue 22 item 7: a small ``dpcount count`` imports only what its mechanism needs.

The default count (``--mechanism auto``, no δ: a tree with integer noise) ranks
every mechanism by its exact MSE without importing the factorizations' scipy
modules, pandas or the certificates; benchmarks/bench_cli.py times it.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import dpcount

SRC = str(Path(dpcount.__file__).resolve().parents[1])

#: modules a default count must not import (each costs 0.2-1 s on the development machine)
HEAVY = (
    "scipy.signal",
    "scipy.optimize",
    "scipy.special",
    "scipy.fft",
    "scipy.stats",
    "pandas",
    "dpcount.analysis.certificates",
    "dpcount.counting.factorization.blt",
    "dpcount.counting.factorization.toeplitz",
)


def _heavy_after_count(tmp_path: Path, *flags: str) -> str:
    """Run ``count`` of a 100-row file of whole numbers with ``flags`` in a fresh
    interpreter; its stdout ends with the heavy modules it imported and the status."""
    data = tmp_path / "x.csv"
    data.write_text("x\n" + "".join(f"{i % 3}\n" for i in range(100)))
    code = (
        "import sys\nfrom dpcount.cli import main\n"
        f"status = main(['count', {str(data)!r}, '--epsilon', '1', *{list(flags)!r}, "
        f"'--output', {str(tmp_path / 'out.csv')!r}])\n"
        f"heavy = sorted(m for m in {HEAVY!r} if m in sys.modules)\n"
        "print('HEAVY', heavy, status)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        env={**os.environ, "PYTHONPATH": SRC},
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert (tmp_path / "out.csv").read_text().count("\n") == 101  # header + 100 steps
    return done.stdout + done.stderr


def test_default_count_imports_no_heavy_module(tmp_path: Path) -> None:
    """Parse and run ``count`` of a 100-row file in a fresh interpreter, then list the
    heavy modules it imported; a factorization imported on the way (e.g. by the
    registry or by ``auto``'s ranking) fails it. Checked failing on the code before
    the registry named its classes (it imported scipy.signal through counting.blt)."""
    assert "HEAVY [] 0" in _heavy_after_count(tmp_path)


def test_delta_count_imports_no_heavy_module(tmp_path: Path) -> None:
    """``count --delta 1e-6`` of 100 rows: ``auto`` ranks the Laplace rows alone when
    the Gaussian floor (analysis/_floor.py) rules the Gaussian rows out, so neither the
    optimized factorizations (scipy.optimize) nor the analytic Gaussian calibration
    (scipy.special) is imported, and the summary is plan's (checked failing before the
    floor: auto imported scipy.optimize, scipy.special and the certificates)."""
    out = _heavy_after_count(tmp_path, "--delta", "1e-6")
    assert "HEAVY [] 0" in out, out
    assert "ranked first by exact MSE by dpcount plan" in out
    assert "noise=discrete-laplace" in out


def test_gaussian_first_count_imports_no_scipy(tmp_path: Path) -> None:
    """``count --delta 1e-4`` of 100 rows, where plan's first row is a Gaussian one (the
    dense optimum): ``auto`` proves that from bounds (analysis/recommend.py) and keeps
    its integer choice without building a Gaussian row, so no scipy module, no
    certificates and no optimized Toeplitz are imported (only the BLT's closed forms,
    for the upper bound); checked failing before (it imported scipy.special,
    scipy.fft, scipy.optimize and the certificates, 8.6x ``import numpy``)."""
    out = _heavy_after_count(tmp_path, "--delta", "1e-4")
    assert "HEAVY ['dpcount.counting.factorization.blt'] 0" in out, out
    assert "dpcount plan ranks a mechanism with gaussian noise first" in out
    assert "noise=discrete-laplace" in out
