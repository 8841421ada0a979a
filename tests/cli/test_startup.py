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


def test_default_count_imports_no_heavy_module(tmp_path: Path) -> None:
    """Parse and run ``count`` of a 100-row file in a fresh interpreter, then list the
    heavy modules it imported; a factorization imported on the way (e.g. by the
    registry or by ``auto``'s ranking) fails it. Checked failing on the code before
    the registry named its classes (it imported scipy.signal through counting.blt)."""
    data = tmp_path / "x.csv"
    data.write_text("x\n" + "".join(f"{i % 3}\n" for i in range(100)))
    code = (
        "import sys\nfrom dpcount.cli import main\n"
        f"status = main(['count', {str(data)!r}, '--epsilon', '1', "
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
    assert "HEAVY [] 0" in done.stdout, done.stdout + done.stderr
    assert (tmp_path / "out.csv").read_text().count("\n") == 101  # header + 100 steps
