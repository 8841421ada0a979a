"""The docs' first commands work in an EMPTY folder (issue 22, item 2).

The home page and the dashboard tutorial are what a new user types first. Every
``bash`` and ``python`` block of each page runs here, in order, in a fresh empty
folder (one per page, as a reader's session), with the installed ``dpcount`` entry
point: no staged sample, no file from the test harness. ``pip install`` lines are
what the reader runs before; they are not re-run here.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FIRST_PAGES = ["docs/index.md", "docs/tutorials/dashboard.md"]
FENCE = re.compile(r"^```(bash|python)\n(.*?)^```\n", re.S | re.M)
SRC = str(ROOT / "src")


def _run(lang: str, code: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    code = "\n".join(line for line in code.splitlines() if "pip install" not in line)
    env = {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
        "PYTHONPATH": SRC,
        "MPLBACKEND": "Agg",
    }
    cmd = ["bash", "-euo", "pipefail", "-c", code] if lang == "bash" else [sys.executable, "-"]
    return subprocess.run(
        cmd,
        cwd=cwd,
        env=env,
        input=None if lang == "bash" else code,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


@pytest.mark.slow
@pytest.mark.parametrize("page", FIRST_PAGES)
def test_first_commands_run_in_an_empty_folder(page: str, tmp_path: Path) -> None:
    if shutil.which("dpcount", path=str(Path(sys.executable).parent)) is None:
        pytest.skip("the dpcount entry point is not installed next to this Python")
    pytest.importorskip("matplotlib")  # the pages draw their figure (dpcount[plot])
    pytest.importorskip("pandas")  # the tutorial's Python block (dpcount[frame])
    folder = tmp_path / "empty"
    folder.mkdir()
    blocks = FENCE.findall((ROOT / page).read_text(encoding="utf-8"))
    assert blocks, f"{page} has no commands"
    first = next(code for _, code in blocks if "pip install" not in code)
    assert "dpcount sample" in first, "the first command block must fetch the sample data"
    for lang, code in blocks:
        done = _run(lang, code, folder)
        assert done.returncode == 0, f"{page}: {code}\nstderr:\n{done.stderr[-3000:]}"
    # the figures the pages show were written by their own commands
    for image in re.findall(r"!\[[^\]]*\]\(([^)]+\.png)\)", (ROOT / page).read_text()):
        assert (folder / image).stat().st_size > 10_000, image
