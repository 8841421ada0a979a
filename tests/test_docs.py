"""Every code block of README.md and docs/ runs, in page order, in an EMPTY folder.

One test per page (:func:`test_page_runs_in_an_empty_folder`): the page's ``bash``
and ``python`` blocks run top to bottom in a fresh empty folder, as a reader types
them in one session. Every file a block reads was written by ``dpcount sample`` or
by an earlier block of the same page: nothing is staged by the test.

* ``python`` blocks run in one namespace per page (in this process; a page is one
  interpreter session), with warnings shown, not raised, as a reader sees them.
* ``bash`` blocks run as written. A block made only of plain ``dpcount ARGS``
  commands (no pipe, redirection or ``&&``) runs through ``dpcount.cli.main`` in
  this process (the same code as the entry point, without an interpreter start per
  command); any other block runs in ``bash -euo pipefail`` with this Python's
  ``dpcount`` and ``python`` first on ``PATH``. Either way it must exit 0.
* What is NOT run, each visible in the page and checked here:

  - a ``pip install`` line (the reader's setup; the test runs with the extras
    installed): it must install dpcount or one of its extras only;
  - a block right under ``<!-- not run: REASON -->`` (an HTML comment, invisible in
    the rendered page, so the prose around the block must say why): only the blocks
    of :data:`NOT_RUN`, each with the test that checks it instead;
  - a full-size ``dpcount reproduce`` (hours) runs at ``--quick`` sizes: the same
    code path, smaller horizons;
  - a block right under ``<!-- needs: MODULE -->`` runs only when MODULE imports
    (PyTorch, which no extra installs); the page then ends in a skip that names it.

* ``text`` blocks (file formats, usage synopses, outputs) are not code; every block
  must say which of the three it is.

Only the pages of :data:`QUICK` (well under a second each) run in the quick suite;
the others (CLI runs in subprocesses, reproductions, training loops, the keyed and
flights runs) run with ``-m slow``, which CI runs too. A command a page repeats (a
full-size reproduction next to its ``--quick`` line) runs once.
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import os
import re
import shlex
import subprocess
import sys
import warnings
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
FENCE = re.compile(
    r"(?:^<!-- (not run|needs): (.+?) -->\n)?^```([A-Za-z]*)\n(.*?)^```", re.S | re.M
)
LANGUAGES = {"python", "bash", "text"}
#: a reproduction at full size (neither --quick nor --list)
FULL_REPRODUCTION = re.compile(r"dpcount reproduce (?!.*--(quick|list))")
#: a plain CLI call that runs in this process: no shell syntax at all
PLAIN = re.compile(r"^dpcount [^|<>;&$`()*?]*$")

#: (page, first line of the block) -> the test that checks the block instead
NOT_RUN = {
    ("README.md", 'python3 -m venv .venv-demo && . .venv-demo/bin/activate && pip install ".[plot]"'
     " && dpcount demo"): "test_readme_setup_is_what_ci_runs",
}  # fmt: skip

#: the pages cheap enough for the quick suite (measured: well under a second each);
#: every other page (CLI runs, reproductions, training loops, keyed and flights runs)
#: runs with ``-m slow``, which CI runs too
QUICK = {
    "docs/api.md",
    "docs/references.md",
    "docs/safe-noise.md",
    "docs/trees.md",
    "docs/tutorials/dp-ftrl.md",
    "docs/tutorials/reproducing.md",
}


@dataclass(frozen=True)
class Block:
    lang: str
    code: str
    line: int  # of the opening fence
    directive: str | None = None  # "not run" or "needs"
    argument: str = ""

    @property
    def first_line(self) -> str:
        return self.code.splitlines()[0] if self.code else ""


def blocks(page: Path) -> list[Block]:
    """Every fenced block of ``page``, with the directive right above it, if any."""
    text = page.read_text(encoding="utf-8")
    found = []
    for m in FENCE.finditer(text):
        fence = m.start(3) - 3
        found.append(
            Block(m.group(3), m.group(4), text.count("\n", 0, fence) + 1, m.group(1), m.group(2))
        )
    return found


def _name(page: Path) -> str:
    return page.relative_to(ROOT).as_posix()


def _commands(code: str) -> list[str]:
    """The block's commands: continuation lines joined, comments and blank lines out."""
    joined = code.replace("\\\n", " ")
    return [c.strip() for c in joined.splitlines() if c.strip() and not c.startswith("#")]


def _runnable(cmd: str) -> str:
    """The command as the test runs it: no ``pip install`` step; a full-size
    reproduction at --quick sizes."""
    if cmd.startswith("pip install"):
        return ""
    if FULL_REPRODUCTION.search(cmd):
        return cmd.split("#", 1)[0].rstrip() + " --quick"
    return cmd


def _env() -> dict[str, str]:
    return {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
        "PYTHONPATH": os.pathsep.join(p for p in sys.path if p and Path(p).is_dir()),
        "MPLBACKEND": "Agg",
        "COLUMNS": "80",
    }


def _run_cli(argv: list[str]) -> tuple[int, str]:
    from dpcount.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = main(argv)
    return status, out.getvalue() + err.getvalue()


def _run_bash(block: Block, where: Path, done: set[str]) -> str:
    """Run the block's commands (but those ``done`` already, on this page)."""
    commands = [_runnable(c) for c in _commands(block.code)]
    commands = [c for c in commands if c and c not in done]
    done.update(commands)
    if commands and all(PLAIN.match(c.split(" #", 1)[0].strip()) for c in commands):
        shown = []
        for cmd in commands:
            status, text = _run_cli(shlex.split(cmd, comments=True)[1:])
            assert status == 0, f"`{cmd}` exited {status}:\n{text[-3000:]}"
            shown.append(text)
        return "".join(shown)
    script = "\n".join(commands)
    done = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", script],
        cwd=where,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert done.returncode == 0, (
        f"{script}\nexited {done.returncode}\nstdout:\n{done.stdout[-2000:]}\n"
        f"stderr:\n{done.stderr[-3000:]}"
    )
    return done.stdout + done.stderr


def run_page(page: Path, where: Path) -> tuple[str, list[str]]:
    """Run the page's blocks in order in ``where``: (what they printed, what was not
    run because a ``needs:`` module is missing)."""
    namespace: dict[str, object] = {"__name__": "__docs__"}
    printed, missing, done = io.StringIO(), [], set[str]()
    for block in blocks(page):
        if block.lang == "text" or block.directive == "not run":
            continue
        if block.directive == "needs" and importlib.util.find_spec(block.argument) is None:
            missing.append(f"{_name(page)}:{block.line} (needs {block.argument})")
            continue
        if block.lang == "bash":
            printed.write(_run_bash(block, where, done))
            continue
        source = "\n" * block.line + block.code  # tracebacks point at the page's lines
        with warnings.catch_warnings(), contextlib.redirect_stdout(printed):
            warnings.simplefilter("default")
            exec(compile(source, str(page), "exec"), namespace)
    return printed.getvalue(), missing


def _page_param(page: Path) -> object:
    marks = [] if _name(page) in QUICK else [pytest.mark.slow]
    return pytest.param(page, id=_name(page), marks=marks)


#: what a page prints that the prose states (beyond running at all)
def _expect(page: str, out: str) -> None:
    lines = out.splitlines()
    if page == "docs/trees.md":
        assert "4 4.0" in lines, out
        tree_mse, binary_mse = (float(v) for v in lines[1].split())
        assert (round(tree_mse, 1), round(binary_mse, 1)) == (472.5, 2532.8)  # as stated
    if page == "docs/keyed.md":
        assert lines.count("False") == 0 and lines.count("True") == 13 + 4, out
        assert "['_run.json', 'part-000000000000.parquet']" in lines, out
        assert "1 1 3.0" in lines, out  # unit u's third key dropped; v's weight 5 cut to 2
    if page == "docs/ranges.md":
        assert re.search(r"\(epsilon=1, delta=[0-9.e-]+\)-DP and rho=0\.0\d+-zCDP", out), out
    if page == "docs/tutorials/flights.md":
        assert "27004 flights to 94 destinations" in out
        assert "[(1, 10), (11, 20), (21, 31)]" in out
        assert "events (exact, not private):" in out and "late flights moved to day 11" in out
        assert re.search(r"^key +(\w{3} +){4}\w{3}$", out, re.M), out  # the table's header
        shown = next(b.code for b in blocks(ROOT / page) if b.code.startswith("key "))
        days = re.compile(r"^(2013-01-\d\d) +(\d+|-)( +(\d+|-)){4}$", re.M)
        # the example's shape (its numbers are one run's: the secret is drawn afresh)
        assert len(days.findall(shown)) == 6 and len(days.findall(out)) >= 5, out
        assert re.search(r"^\d+ destinations withheld", out, re.M), out
        assert (Path.cwd() / "flights-top.png").stat().st_size > 10_000  # the figure
        assert (ROOT / "docs" / "figures" / "flights-top.png").is_file()  # as the page shows
    if page == "docs/tutorials/training.md":
        accuracies = [float(a) for a in re.findall(r"accuracy:? (0\.\d+)", out)]
        assert len(accuracies) >= 4 and min(accuracies) > 0.5, out  # far above chance (0.1)


@pytest.mark.parametrize("page", [_page_param(p) for p in PAGES])
def test_page_runs_in_an_empty_folder(
    page: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # MPLBACKEND=Agg (below): figures go to files
    for name, value in _env().items():
        if name != "PATH":
            monkeypatch.setenv(name, value)
    out, missing = run_page(page, tmp_path)
    _expect(_name(page), out)
    # the figures a page shows from its own folder were written by its own blocks
    for image in re.findall(r"!\[[^\]]*\]\(([^)/]+\.png)\)", page.read_text(encoding="utf-8")):
        assert (tmp_path / image).stat().st_size > 10_000, image
    if missing:
        pytest.skip("every block ran but " + "; ".join(missing))


def test_every_block_names_its_language() -> None:
    bad = [
        f"{_name(page)}:{b.line}: ```{b.lang}"
        for page in PAGES
        for b in blocks(page)
        if b.lang not in LANGUAGES
    ]
    assert not bad, "fenced blocks must be python, bash or text:\n" + "\n".join(bad)


def test_what_is_not_run_is_declared() -> None:
    """The blocks the page test does not run are exactly :data:`NOT_RUN`; a ``needs:``
    names a module; a ``pip install`` line installs dpcount or one of its extras."""
    not_run = {
        (_name(page), b.first_line): b.argument
        for page in PAGES
        for b in blocks(page)
        if b.directive == "not run"
    }
    assert set(not_run) == set(NOT_RUN), not_run
    assert all(reason.strip() for reason in not_run.values())
    for page in PAGES:
        for b in blocks(page):
            if b.directive == "needs":
                assert re.fullmatch(r"[a-z_][a-z0-9_.]*", b.argument), b
            for cmd in _commands(b.code) if b.lang == "bash" else []:
                if "pip install" in cmd and b.directive != "not run":
                    cmd = cmd.split(" #", 1)[0].strip()
                    assert re.fullmatch(r"pip install ([\"']?)(dpcount|\.)(\[[a-z,]+\])?\1", cmd)


def test_readme_setup_is_what_ci_runs() -> None:
    """The README's two setup lines: each makes its own venv (each works alone on a
    fresh machine), and the second's test command is what .ci/run runs."""
    first = blocks(ROOT / "README.md")[0]
    assert first.lang == "bash" and first.directive == "not run"
    demo, test = _commands(first.code)
    venvs = [
        re.match(r"python3 -m venv (\S+) && \. (\S+)/bin/activate && ", c) for c in (demo, test)
    ]
    assert all(v is not None and v.group(1) == v.group(2) for v in venvs), (demo, test)
    assert venvs[0] is not None and venvs[1] is not None
    assert venvs[0].group(1) != venvs[1].group(1), "the two setup lines share one venv"
    assert demo.endswith('pip install ".[plot]" && dpcount demo')
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert 'pip install -e ".[test]"' in test and 'pip install --quiet -e ".[test]"' in ci
    test_command = test.split("&& ")[-1]
    assert test_command in ci, f"README test command {test_command!r} is not what .ci/run runs"


def test_changelog_heads_with_the_package_version() -> None:
    """_version.py and the CHANGELOG's newest section name one version."""
    import dpcount

    changelog = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    newest = re.search(r"^## (\S+)", changelog, flags=re.MULTILINE)
    assert newest is not None, "CHANGELOG.md has no '## VERSION' section"
    assert newest.group(1) == dpcount.__version__
