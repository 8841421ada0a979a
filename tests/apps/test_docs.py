"""The apps' documentation cannot rot: docstring examples and docs/apps.md are executed."""

from __future__ import annotations

import doctest
import importlib
import re
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[2] / "docs" / "apps.md"
MODULES = ["histogram", "average", "graphs", "strings", "local"]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name: str) -> None:
    module = importlib.import_module(f"dpcount.apps.{name}")
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0


def python_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", DOC.read_text(encoding="utf-8"), flags=re.S)


def test_docs_have_an_example_per_app() -> None:
    text = "\n".join(python_blocks())
    apps = ["ContinualHistogram", "RunningAverage", "SyntheticGraph", "GraphStatistic"]
    apps += ["SubstringCounter", "EpisodeCounter", "local_median", "local_risk_minimization"]
    for name in apps:
        assert name in text, name


@pytest.mark.parametrize("index", range(len(python_blocks())))
def test_docs_examples_run(index: int, capsys: pytest.CaptureFixture[str]) -> None:
    block = python_blocks()[index]
    assert "print(" in block or "assert " in block  # every example shows or checks something
    exec(compile(block, f"{DOC.name}[{index}]", "exec"), {})
    if "print(" in block:
        assert capsys.readouterr().out.strip()


def test_readme_apps_example_runs(capsys: pytest.CaptureFixture[str]) -> None:
    readme = (DOC.parents[1] / "README.md").read_text(encoding="utf-8")
    start = readme.index("## Applications")
    section = readme[start : readme.index("\n## ", start + 1)]
    (block,) = re.findall(r"```python\n(.*?)```", section, flags=re.S)
    exec(compile(block, "README.md[apps]", "exec"), {})
    assert "TopItem(" in capsys.readouterr().out
