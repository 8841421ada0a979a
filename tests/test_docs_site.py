"""The documentation site builds with warnings as errors (``mkdocs build --strict``).

Slow (the executed pages run their commands: about a minute) and needs the ``docs``
extra; skipped without it. Every code
block of the pages it renders runs in tests/test_docs.py.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_mkdocs_build_strict(tmp_path: Path) -> None:
    pytest.importorskip("mkdocs")
    pytest.importorskip("mkdocstrings")
    pytest.importorskip("material")
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(tmp_path / "site")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=1200,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    api = (tmp_path / "site" / "api" / "index.html").read_text(encoding="utf-8")
    assert "private_counts" in api and "isotonic_pav" in api  # generated from docstrings
    # looked at rendered: Sphinx roles and reST tables showed as literal text
    for literal in (":func:", ":class:", ":meth:", "====="):
        assert literal not in api, literal
    # the executed pages (mkdocs_hooks.EXECUTED): outputs under the blocks and the
    # figures their own commands drew in this build
    site = tmp_path / "site"
    home = (site / "index.html").read_text(encoding="utf-8")
    assert 'src="rainy-days.png"' in home and (site / "rainy-days.png").stat().st_size > 10_000
    assert "pip install" in home and "Continual counting" in home
    tutorial = (site / "tutorials" / "dashboard" / "index.html").read_text(encoding="utf-8")
    assert tutorial.count('class="output-label"') >= 5
    assert "t,date,private_count,std" in tutorial  # the head of the release, as printed
    assert (site / "tutorials" / "check.png").stat().st_size > 10_000
    css = (site / "stylesheets" / "extra.css").read_text(encoding="utf-8")
    assert "white-space: pre-wrap" in css  # long code lines wrap


def test_the_hook_renders_sphinx_roles_as_code() -> None:
    import importlib.util

    spec = importlib.util.spec_from_file_location("mkdocs_hooks", ROOT / "mkdocs_hooks.py")
    assert spec is not None and spec.loader is not None
    hooks = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hooks)
    html = "see :func:<code>~dpcount.frame.private_counts</code> and :class:<code>Budget</code>"
    assert hooks.on_page_content(html) == "see <code>private_counts</code> and <code>Budget</code>"


def test_every_page_is_in_the_site_navigation() -> None:
    """A page left out of mkdocs.yml's nav is a page no reader finds."""
    nav = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    pages = sorted(p.relative_to(ROOT / "docs").as_posix() for p in (ROOT / "docs").rglob("*.md"))
    missing = [p for p in pages if f": {p}" not in nav]
    assert not missing, missing
