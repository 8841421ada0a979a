"""mkdocs hooks: executed pages, and Sphinx cross-reference roles rendered as code.

* Executed pages (:data:`EXECUTED`): when the site is built, every ``bash`` and
  ``python`` block of the page runs, in order, in one empty scratch folder (a page is
  one session, as a reader would type it), with the ``dpcount`` of the Python running
  the build. Each block's output (stdout, then stderr; at most :data:`MAX_LINES`
  lines) is shown under it, and every PNG the page's commands write is published next
  to the page, so ``![...](check.png)`` shows the figure of this very build. A block
  that fails stops the build: the pages cannot drift from what the code does.
* The docstrings use Sphinx roles (``:func:`~dpcount.frame.private_counts```), which
  mkdocstrings' Markdown leaves as the literal text ``:func:`` before the code span.
  This keeps the code span and drops the role; a leading ``~`` keeps the last dotted
  component only, as Sphinx shows it.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

#: pages whose blocks run at build time, their output shown under each block
EXECUTED = ("index.md", "tutorials/dashboard.md")
#: lines of output shown under a block (the rest is summarized in one line): enough
#: for `dpcount plan`'s table, legend and recommendation (looked at in Chromium)
MAX_LINES = 32
FENCE = re.compile(r"^```(bash|python)\n(.*?)^```\n", re.S | re.M)

_ROLE = re.compile(r":(?:func|class|meth|mod|data|attr|exc|obj|const):<code>(~?)([^<]*)</code>")

#: page -> the output of each of its executed blocks, in order
_OUTPUTS: dict[str, list[str]] = {}
_SCRATCH: list[tempfile.TemporaryDirectory[str]] = []


def _run_block(lang: str, code: str, cwd: Path, page: str) -> str:
    env = {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        "MPLBACKEND": "Agg",
        # the width of a code block of the site (looked at in Chromium at 1280 px: a
        # wider table wrapped line by line in the browser)
        "COLUMNS": "70",
    }
    cmd = ["bash", "-euo", "pipefail", "-c", code] if lang == "bash" else [sys.executable, "-"]
    done = subprocess.run(
        cmd,
        cwd=cwd,
        env=env,
        input=None if lang == "bash" else code,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(
            f"{page}: a {lang} block failed (status {done.returncode}):\n{code}\n{done.stderr}"
        )
    lines = (done.stdout + done.stderr).rstrip("\n").splitlines()
    if len(lines) > MAX_LINES:
        hidden = len(lines) - MAX_LINES
        lines = [*lines[:MAX_LINES], f"... ({hidden} more lines)"]
    return "\n".join(lines)


def _commands_of(code: str) -> str:
    """A block as a reader types it: ``pip install`` lines are not run at build time
    (the build runs with dpcount installed)."""
    return "\n".join(line for line in code.splitlines() if "pip install" not in line)


def on_files(files: Any, config: Any, **kwargs: Any) -> Any:
    """Run the executed pages' blocks and publish the figures they write."""
    from mkdocs.structure.files import File

    for page in EXECUTED:
        source = Path(config["docs_dir"]) / page
        scratch = tempfile.TemporaryDirectory(prefix="dpcount-docs-")
        _SCRATCH.append(scratch)  # kept until the build ends: the figures are copied late
        cwd = Path(scratch.name)
        outputs = []
        for match in FENCE.finditer(source.read_text(encoding="utf-8")):
            lang, code = match.group(1), _commands_of(match.group(2))
            outputs.append(_run_block(lang, code, cwd, page) if code.strip() else "")
        _OUTPUTS[page] = outputs
        folder = Path(page).parent.as_posix()
        for png in sorted(cwd.glob("*.png")):
            name = png.name if folder == "." else f"{folder}/{png.name}"
            files.append(File.generated(config, name, abs_src_path=str(png)))
    return files


def on_page_markdown(markdown: str, page: Any, **kwargs: Any) -> str:
    """Each executed block is followed by its output (a ``text`` block)."""
    outputs = _OUTPUTS.get(page.file.src_uri)
    if not outputs:
        return markdown
    pieces, last = [], 0
    for match, output in zip(FENCE.finditer(markdown), outputs, strict=True):
        pieces.append(markdown[last : match.end()])
        if output:
            pieces.append(f'\n<div class="output-label">output</div>\n\n```text\n{output}\n```\n')
        last = match.end()
    pieces.append(markdown[last:])
    return "".join(pieces)


def _code(match: re.Match[str]) -> str:
    tilde, target = match.groups()
    return f"<code>{target.rsplit('.', 1)[-1] if tilde else target}</code>"


def on_page_content(html: str, **kwargs: Any) -> str:
    return _ROLE.sub(_code, html)


def on_post_build(config: Any, **kwargs: Any) -> None:
    for scratch in _SCRATCH:
        scratch.cleanup()
    _SCRATCH.clear()
