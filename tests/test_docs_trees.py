"""The example in docs/trees.md runs and prints the numbers its comments state."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[1] / "docs" / "trees.md"


def test_trees_doc_example(capsys: pytest.CaptureFixture[str]) -> None:
    (block,) = re.findall(r"```python\n(.*?)```", DOC.read_text(encoding="utf-8"), flags=re.S)
    exec(compile(block, "docs/trees.md", "exec"), {})
    height_line, mse_line = capsys.readouterr().out.strip().splitlines()
    assert height_line.split() == ["4", "4.0"]
    tree_mse, binary_mse = (float(v) for v in mse_line.split())
    assert (round(tree_mse, 1), round(binary_mse, 1)) == (472.5, 2532.8)
